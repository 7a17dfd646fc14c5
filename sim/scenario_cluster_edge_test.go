package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each edge script reaches the guard it aims at, seen through what the
// guard leaves behind: the drift margin decides takeovers (they land
// within MaxClockDrift after the deposed lease, never inside it), the
// lease gate withholds acknowledgements and refuses requests, the
// candidate filter passes over a live non-member, the minimum-durability
// floor refuses a shrink, and a write region cut from its followers hands
// writes to its store without acknowledging them after its lease. A run
// past the drift bound must be found unsafe, and then passes. Under the
// drift canary's tag (-tags fmnode_canary_drift) the drift case fails:
// its takeovers overlap the deposed lease.
func TestEdgeScriptsReachTheirGuards(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster seed takes seconds")
	}
	for _, tc := range []struct {
		scenario string
		reached  func(t *testing.T, f *EdgeFigures)
	}{
		{"cluster-edge-drift", func(t *testing.T, f *EdgeFigures) {
			assert.InDelta(t, 0.25, f.DisagreementPerLease, 1e-9, "clocks disagree by MaxClockDrift over a lease")
			assert.Positive(t, f.MarginTakeovers, "takeovers within the drift margin of the deposed lease")
			assert.Zero(t, f.LeaseOverlaps)
			assert.GreaterOrEqual(t, f.MinLeaseGapS, 0.0)
		}},
		{"cluster-edge-drift-beyond", func(t *testing.T, f *EdgeFigures) {
			assert.Greater(t, f.DisagreementPerLease, 0.25, "past MaxClockDrift")
			assert.Positive(t, f.LeaseOverlaps, "the checker finds the deposed lease still running")
		}},
		{"cluster-edge-lease", func(t *testing.T, f *EdgeFigures) {
			assert.Positive(t, f.AcksWithheld, "acknowledgements withheld after the lease lapsed")
			assert.Positive(t, f.LeaseRefusedReads+f.LeaseRefusedWrites, "requests refused without a lease")
		}},
		{"cluster-edge-wq-lag", func(t *testing.T, f *EdgeFigures) {
			assert.Positive(t, f.FailoversPastNonMember, "failovers that passed over a live, lagging non-member")
		}},
		{"cluster-edge-min-durability", func(t *testing.T, f *EdgeFigures) {
			assert.Positive(t, f.ShrinksRefusedAtFloor, "shrinks refused at the minimum durability")
			assert.Positive(t, f.AtFloor, "write quorums at exactly the floor")
		}},
		{"cluster-edge-cut", func(t *testing.T, f *EdgeFigures) {
			assert.Positive(t, f.CutWritesHandedDown, "the cut write region took strong writes")
			assert.Positive(t, f.AcksWithheld+uint64(f.LeaseRefusedWrites), "and refused or withheld them once its lease lapsed")
			assert.Positive(t, f.Takeovers)
			assert.Zero(t, f.LeaseOverlaps)
		}},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			res, err := Run(Config{Scenario: tc.scenario, Seed: 1, Faults: FaultsNone})
			require.NoError(t, err)
			require.False(t, res.Failed(), "%s: %v", res.Replay, res.Violations)
			require.NotNil(t, res.ScenarioFigures)
			require.NotNil(t, res.ScenarioFigures.Cluster)
			f := res.ScenarioFigures.Cluster.Edge
			require.NotNil(t, f)
			assert.Positive(t, f.Cycles)
			tc.reached(t, f)
			if tc.scenario == "cluster-edge-drift-beyond" {
				assert.True(t, res.ExpectedUnsafe)
				assert.True(t, res.UnsafeFound, "expected unsafe and found so")
				assert.NotEmpty(t, res.Violations)
				// The lease-overlap check (every move of a write region)
				// and the script's figure ask the same rule: every
				// overlap the script counted is a violation.
				require.NotNil(t, res.FailoverReport)
				assert.GreaterOrEqual(t, res.FailoverReport.LeaseOverlaps, uint64(f.LeaseOverlaps))
				assert.True(t, slices.ContainsFunc(res.Violations, func(v string) bool { return strings.Contains(v, "lease overlap") }),
					"a lease-overlap violation: %v", res.Violations)
			} else {
				assert.False(t, res.ExpectedUnsafe)
			}
		})
	}
}

// An expected-unsafe run fails when no checker finds it unsafe, and
// passes only when one does, whatever else it reports.
func TestExpectedUnsafeRunPassesOnlyWhenFoundUnsafe(t *testing.T) {
	for _, tc := range []struct {
		name   string
		r      Result
		failed bool
	}{
		{"found", Result{ExpectedUnsafe: true, UnsafeFound: true, Violations: []string{"invariant at 1s: lease overlap"}, Linearizable: LinOK}, false},
		{"not found", Result{ExpectedUnsafe: true, Linearizable: LinOK}, true},
		{"liveness only is not unsafe", Result{ExpectedUnsafe: true, Violations: []string{"liveness at 1s: stuck"}, Linearizable: LinOK}, true},
		{"ordinary run", Result{Violations: []string{"invariant at 1s: x"}, Linearizable: LinOK}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			if r.ExpectedUnsafe {
				r.UnsafeFound = safetyFailure(r)
			}
			assert.Equal(t, tc.failed, r.Failed())
		})
	}
}

// TestTakeoverDuringARestartedNodesUnvalidatedLeaseIsNoOverlap:
// cluster-edge-min-durability seed 2 (with the learn resend, 70a7df6)
// failed over out of west while west's node 0, restarted 2.4 s before,
// held a node lease again; the check compared against that node lease and
// called it a lease overlap. Node 0's replicas could not act on it (the
// restarted node's lease run was not validated at their epoch), so
// nothing served twice: the check now asks the replica's own lease rule.
// Since the clients' polls are held and go to the likely failover target
// (partition/poll.go, session 12) seed 2 no longer meets that edge; seed
// 70 did, and since a switchover target counts only its durable ops
// (session 13) seed 43 does (of seeds 1..150, 43 and 82).
func TestTakeoverDuringARestartedNodesUnvalidatedLeaseIsNoOverlap(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster seed takes seconds")
	}
	res, err := Run(Config{Scenario: "cluster-edge-min-durability", Seed: 43, Faults: FaultsNone})
	require.NoError(t, err)
	require.False(t, res.Failed(), "%v", res.Violations)
	e := res.ScenarioFigures.Cluster.Edge
	require.NotNil(t, e)
	assert.Zero(t, e.LeaseOverlaps)
	assert.Positive(t, e.NotServing, "the takeovers inside node 0's unvalidated lease were seen and let pass")
}
