package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func runRegionOutage(t *testing.T, seed uint64, parts int, profile string, outage time.Duration, hook bool) Result {
	t.Helper()
	cfg := Config{Scenario: "region-outage", Seed: seed, Partitions: parts, FailoverProfile: profile, Outage: outage, Duration: 2 * time.Minute, testDoublePromote: hook}
	res, err := Run(cfg)
	require.NoError(t, err)
	return res
}

func TestRegionOutageSmall(t *testing.T) {
	res := runRegionOutage(t, 1, 50, "fast", 2*time.Minute, false)
	t.Logf("%s", res.FailoverReport.Table())
	t.Logf("violations %v lin %s ops %+v sim %.0fs wall %.2fs", res.Violations, res.Linearizable, res.Ops, res.SimSeconds, res.WallSeconds)
	require.Empty(t, res.Violations)
}

func TestRegionOutageDeterministic(t *testing.T) {
	a := runRegionOutage(t, 7, 30, "fast", time.Minute, false)
	b := runRegionOutage(t, 7, 30, "fast", time.Minute, false)
	require.Equal(t, a.TraceHash, b.TraceHash)
	c := runRegionOutage(t, 8, 30, "fast", time.Minute, false)
	require.NotEqual(t, a.TraceHash, c.TraceHash)
}

func TestRegionOutageOneWriterCheckerFires(t *testing.T) {
	res := runRegionOutage(t, 3, 20, "fast", time.Minute, true)
	require.NotEmpty(t, res.Violations)
	require.Contains(t, res.Violations[0], "promoted in two regions")
}

func TestRegionOutageTargets(t *testing.T) {
	tests := []struct {
		name    string
		profile string
		maxP99  float64
	}{
		{"fast", "fast", 3},
		{"paper", "paper", 55},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runRegionOutage(t, 2, 60, tt.profile, 3*time.Minute, false)
			r := res.FailoverReport
			require.Empty(t, res.Violations)
			require.Equal(t, LinOK, res.Linearizable)
			require.Zero(t, r.NotFailedOver)
			require.Positive(t, r.AffectedPartitions)
			require.LessOrEqual(t, r.FailoverCompletion.P99, tt.maxP99)
			require.Equal(t, 1.0, r.FailedOverWithin60s)
			require.Zero(t, r.RPO.Max)
			require.Zero(t, r.SteadyRegisterWritesPerPartHr)
		})
	}
}

// TestRegionOutageSqueezedProposer squeezes the 100k-partition drill's
// load into a small world: each proposer takes at most 64 keys in flight
// while a node has ~200 register creates, failovers and shrinks to make
// at once. The managers' window keeps them under the bound: nothing is
// refused, every partition fails over, everything converges.
func TestRegionOutageSqueezedProposer(t *testing.T) {
	tests := []struct {
		name    string
		profile string
	}{
		{"fast", "fast"},
		{"paper", "paper"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Scenario: "region-outage", Seed: 5, Partitions: 300, FailoverProfile: tt.profile, Outage: 2 * time.Minute,
				Duration: 2 * time.Minute, testProposerMaxInFlight: 64}
			res, err := Run(cfg)
			require.NoError(t, err)
			r := res.FailoverReport
			require.Empty(t, res.Violations)
			require.Zero(t, r.RegisterOpsRefused)
			require.Positive(t, r.AffectedPartitions)
			require.Zero(t, r.NotFailedOver)
			require.Equal(t, 1.0, r.FailedOverWithin60s)
		})
	}
}
