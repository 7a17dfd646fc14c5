package failover

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var regions = []Region{"east", "west", "north"}

func newTestState(t *testing.T, c Consistency) State {
	t.Helper()
	s, err := NewState("p-1", "east", regions, c, 1)
	require.NoError(t, err)
	return s
}

// healthy returns evidence in which every region is live and reported.
func healthy(now time.Duration, proposer Region, lsn map[Region]LSN) Evidence {
	ev := Evidence{Now: now, Proposer: proposer}
	for _, r := range regions {
		x := ReplicaEvidence{Region: r, Live: true, HealthySince: 0}
		if l, ok := lsn[r]; ok {
			x.Reported, x.Epoch, x.LastLSN = true, 1, l
		}
		ev.Replicas = append(ev.Replicas, x)
	}
	return ev
}

func withDown(ev Evidence, down ...Region) Evidence {
	for i := range ev.Replicas {
		for _, d := range down {
			if ev.Replicas[i].Region == d {
				ev.Replicas[i].Live = false
			}
		}
	}
	return ev
}

func failed(ev Evidence) Evidence {
	ev.WriteRegionFailed = true
	ev.FailureWhy = "lease lapsed"
	return withDown(ev, "east")
}

func TestDecideSteadyStateWritesNothing(t *testing.T) {
	cfg := DefaultConfig()
	s := newTestState(t, Strong)
	d := Decide(cfg, s, healthy(time.Minute, "west", map[Region]LSN{"west": 10}))
	assert.Equal(t, DecideNone, d.Kind)
	assert.Nil(t, d.Next)
	assert.Empty(t, d.Suppressed)
}

func TestDecideFailoverPromotesBestMember(t *testing.T) {
	cfg := DefaultConfig()
	s := newTestState(t, Strong)
	// west is second in priority; it decides with its own progress.
	ev := failed(healthy(time.Minute, "west", map[Region]LSN{"west": 40}))
	d := Decide(cfg, s, ev)
	require.Equal(t, DecideFailover, d.Kind)
	require.NotNil(t, d.Next)
	assert.Equal(t, Region("west"), d.Target)
	n := d.Next
	assert.Equal(t, Epoch(2), n.Epoch)
	assert.Equal(t, Region("west"), n.WriteRegion)
	assert.Equal(t, []Region{"north", "west"}, n.WriteQuorum.Members, "the failed write region leaves the quorum")
	assert.Equal(t, LSN(40), n.Table.Current().StartLSN)
	require.Len(t, n.History, 1)
	assert.Equal(t, DecideFailover, n.History[0].Kind)
	assert.Equal(t, Region("west"), n.History[0].Proposer)
	assert.Contains(t, n.History[0].Reason, "lease lapsed")
	require.NoError(t, n.Validate())
	assert.Equal(t, []time.Duration{time.Minute}, n.Failovers)
	assert.Zero(t, n.HoldOffUntil, "the first failover sets no hold-off")
}

func TestDecideFailoverWaitsForCandidateToPromoteItself(t *testing.T) {
	cfg := DefaultConfig()
	s := newTestState(t, Strong)
	// north decides, but west ranks first: west must promote itself.
	d := Decide(cfg, s, failed(healthy(time.Minute, "north", map[Region]LSN{"north": 40})))
	assert.Equal(t, DecideFailover, d.Kind)
	assert.Equal(t, Region("west"), d.Target)
	assert.Nil(t, d.Next)
	// When west is down too, north promotes itself.
	d = Decide(cfg, s, withDown(failed(healthy(time.Minute, "north", map[Region]LSN{"north": 40})), "west"))
	require.NotNil(t, d.Next)
	assert.Equal(t, Region("north"), d.Target)
}

func TestDecideStrongNeverPromotesOutsideWriteQuorum(t *testing.T) {
	cfg := DefaultConfig()
	s := newTestState(t, Strong)
	wq, err := s.WriteQuorum.Shrink("west")
	require.NoError(t, err)
	s.WriteQuorum = wq
	ev := withDown(failed(healthy(time.Minute, "west", map[Region]LSN{"west": 99})), "north")
	d := Decide(cfg, s, ev)
	assert.Equal(t, DecideNone, d.Kind)
	assert.Contains(t, d.Suppressed, "no candidate qualifies")
	assert.Contains(t, d.Suppressed, "west: not in the write quorum")
	assert.Contains(t, d.Suppressed, "north: down")
	// Under eventual consistency the same region may be promoted.
	s.Consistency = Eventual
	d = Decide(cfg, s, ev)
	require.NotNil(t, d.Next)
	assert.Equal(t, Region("west"), d.Target)
}

func TestDecideWeakConsistencyRanksByProgress(t *testing.T) {
	cfg := DefaultConfig()
	s := newTestState(t, Session)
	ev := failed(healthy(time.Minute, "north", map[Region]LSN{"west": 10, "north": 30}))
	d := Decide(cfg, s, ev)
	require.NotNil(t, d.Next)
	assert.Equal(t, Region("north"), d.Target, "the highest progress loses the least")
	assert.Equal(t, uint64(20), d.Candidates[1].LagOps)
}

func TestDecidePoliciesSuppressAutomaticFailover(t *testing.T) {
	cfg := DefaultConfig()
	ev := failed(healthy(time.Hour, "west", map[Region]LSN{"west": 1}))

	s := newTestState(t, Strong)
	s.Paused, s.PauseReason = true, "maintenance window"
	d := Decide(cfg, s, ev)
	assert.Nil(t, d.Next)
	assert.Equal(t, "paused: maintenance window", d.Suppressed)

	s = newTestState(t, Strong)
	gev := ev
	gev.GlobalPause, gev.GlobalPauseReason = true, "upgrade"
	d = Decide(cfg, s, gev)
	assert.Nil(t, d.Next)
	assert.Contains(t, d.Suppressed, "global pause: upgrade")

	s = newTestState(t, Strong)
	s.HoldOffUntil = 2 * time.Hour
	s.Failovers = []time.Duration{50 * time.Minute, 55 * time.Minute}
	d = Decide(cfg, s, ev)
	assert.Nil(t, d.Next)
	assert.Contains(t, d.Suppressed, "hysteresis: 2 failovers")
	assert.Equal(t, 2*time.Hour, d.RetryAt)
}

func TestDecideHysteresisGrowsExponentially(t *testing.T) {
	cfg := DefaultConfig()
	s := newTestState(t, Strong)
	now := time.Hour
	var holds []time.Duration
	for i := 0; i < 4; i++ {
		from, to := s.WriteRegion, Region("west")
		if from == "west" {
			to = "east"
		}
		ev := Evidence{Now: now, Proposer: to, WriteRegionFailed: true, FailureWhy: "flap"}
		for _, r := range regions {
			ev.Replicas = append(ev.Replicas, ReplicaEvidence{Region: r, Live: r != from, Reported: r == to, Epoch: s.Epoch, LastLSN: LSN(i)})
		}
		d := Decide(cfg, s, ev)
		require.NotNil(t, d.Next, "failover %d: %v", i, d.Suppressed)
		s = *d.Next
		// The failed region is back in sync before the next flap.
		s.WriteQuorum.Members = []Region{"east", "north", "west"}
		holds = append(holds, s.HoldOffUntil-now)
		if s.HoldOffUntil > now {
			now = s.HoldOffUntil
		}
		now += time.Second
	}
	assert.Equal(t, []time.Duration{-time.Hour, time.Minute, 2 * time.Minute, 4 * time.Minute}, holds)
}

func TestDecideQuorumShrinkAndGrow(t *testing.T) {
	cfg := DefaultConfig()
	s := newTestState(t, Strong)
	d := Decide(cfg, s, withDown(healthy(time.Minute, "east", map[Region]LSN{"east": 5}), "north"))
	require.Equal(t, DecideShrinkQuorum, d.Kind)
	assert.Equal(t, []Region{"east", "west"}, d.Next.WriteQuorum.Members)
	s = *d.Next

	// Minimum durability 2 refuses a further shrink, with the reason.
	s.WriteQuorum.MinDurability = 2
	d = Decide(cfg, s, withDown(healthy(time.Minute, "east", map[Region]LSN{"east": 5}), "north", "west"))
	assert.Nil(t, d.Next)
	assert.Contains(t, d.Suppressed, "cannot drop failed region west")

	// Growth needs the write region's word that north is in sync.
	ev := healthy(2*time.Minute, "east", map[Region]LSN{"east": 9, "north": 9})
	assert.Equal(t, DecideNone, Decide(cfg, s, ev).Kind)
	// Caught up but outside the commit rule: first join the rule (a local
	// change), never the register.
	ev.Replicas[2].CaughtUp = true // north
	d = Decide(cfg, s, ev)
	require.Equal(t, DecidePrepareGrow, d.Kind)
	assert.Equal(t, Region("north"), d.Target)
	assert.Nil(t, d.Next, "prepare-grow writes nothing to the register")
	ev.Replicas[2].Stalled = "match LSN still"
	assert.Equal(t, DecideNone, Decide(cfg, s, ev).Kind, "a stalled region is not prepared")
	ev.Replicas[2].Stalled = ""
	ev.Replicas[2].InSync = true // in the rule and holding every commit
	d = Decide(cfg, s, ev)
	require.Equal(t, DecideGrowQuorum, d.Kind)
	assert.Equal(t, []Region{"east", "north", "west"}, d.Next.WriteQuorum.Members)
	ev.Proposer = "west"
	assert.Equal(t, DecideNone, Decide(cfg, s, ev).Kind, "only the write region proposes growth")
}

func TestSwitchoverLifecycle(t *testing.T) {
	cfg := DefaultConfig()
	s := newTestState(t, Strong)
	ev := healthy(time.Minute, "east", map[Region]LSN{"east": 50})
	d, err := RequestSwitchover(cfg, s, ev, "west", "planned")
	require.NoError(t, err)
	s = *d.Next
	assert.Equal(t, PhaseSwitchover, s.Phase)
	_, err = RequestSwitchover(cfg, s, ev, "north", "again")
	require.ErrorIs(t, err, ErrRefused)

	// The write region has not fenced yet: wait.
	d = Decide(cfg, s, ev)
	assert.Nil(t, d.Next)
	assert.Contains(t, d.Reasons[0], "waiting for east to fence")

	// Fenced at 50: it records its final LSN.
	ev.Replicas[0].Fenced = true
	d = Decide(cfg, s, ev)
	require.Equal(t, DecideSwitchoverFenced, d.Kind)
	s = *d.Next
	assert.Equal(t, LSN(50), s.SwitchoverLSN)

	// The target is behind: wait; caught up: it completes.
	tev := healthy(time.Minute+time.Second, "west", map[Region]LSN{"west": 49})
	d = Decide(cfg, s, tev)
	assert.Nil(t, d.Next)
	assert.Contains(t, d.Reasons[0], "at 49 of 50")
	tev = healthy(time.Minute+2*time.Second, "west", map[Region]LSN{"west": 50})
	d = Decide(cfg, s, tev)
	require.Equal(t, DecideCompleteSwitchover, d.Kind)
	n := d.Next
	assert.Equal(t, Epoch(2), n.Epoch)
	assert.Equal(t, Region("west"), n.WriteRegion)
	assert.Equal(t, LSN(50), n.Table.Current().StartLSN, "RPO 0: the new epoch starts at the fenced LSN")
	assert.Equal(t, PhaseSteady, n.Phase)
	require.NoError(t, n.Validate())
}

func TestSwitchoverAbortsAfterGracefulTimeout(t *testing.T) {
	cfg := DefaultConfig()
	s := newTestState(t, Strong)
	d, err := RequestSwitchover(cfg, s, healthy(0, "east", nil), "west", "planned")
	require.NoError(t, err)
	s = *d.Next
	d = Decide(cfg, s, healthy(cfg.GracefulTimeout, "north", nil))
	require.Equal(t, DecideAbortSwitchover, d.Kind)
	assert.Equal(t, PhaseSteady, d.Next.Phase)
	assert.Equal(t, Region("east"), d.Next.WriteRegion)
	assert.Equal(t, Epoch(1), d.Next.Epoch, "no fence was recorded: the write region never paused")
	assert.Contains(t, d.Next.History[len(d.Next.History)-1].Reason, "not caught up within 1m0s")

	// With a recorded fence the old write region resumes at a new epoch,
	// after the LSN it was fenced at.
	s.FenceRecorded, s.SwitchoverLSN = true, 70
	d = Decide(cfg, s, healthy(cfg.GracefulTimeout, "north", nil))
	require.Equal(t, DecideAbortSwitchover, d.Kind)
	assert.Equal(t, Epoch(2), d.Next.Epoch)
	assert.Equal(t, Region("east"), d.Next.WriteRegion)
	assert.Equal(t, LSN(70), d.Next.Table.Current().StartLSN)
	require.NoError(t, d.Next.Validate())
}

func TestDecideReopensFencedWriteRegion(t *testing.T) {
	cfg := DefaultConfig()
	s := newTestState(t, Strong)
	ev := healthy(time.Minute, "east", map[Region]LSN{"east": 33})
	ev.Replicas[0].Fenced = true
	d := Decide(cfg, s, ev)
	require.Equal(t, DecideReopen, d.Kind)
	assert.Equal(t, Epoch(2), d.Next.Epoch)
	assert.Equal(t, LSN(33), d.Next.Table.Current().StartLSN)
	ev.Proposer = "west"
	assert.NotEqual(t, DecideReopen, Decide(cfg, s, ev).Kind, "only the fenced region knows its last LSN")
}

func TestFailbackAfterSustainedHealth(t *testing.T) {
	cfg := DefaultConfig()
	s := newTestState(t, Strong)
	d := Decide(cfg, s, failed(healthy(time.Minute, "west", map[Region]LSN{"west": 7})))
	s = *d.Next
	// east returns and rejoins the quorum; it has been healthy for 5 min.
	s.WriteQuorum.Members = []Region{"east", "north", "west"}
	ev := Evidence{Now: 20 * time.Minute, Proposer: "west"}
	for _, r := range regions {
		ev.Replicas = append(ev.Replicas, ReplicaEvidence{Region: r, Live: true, Reported: true, Epoch: 2, LastLSN: 9, HealthySince: 15 * time.Minute})
	}
	d = Decide(cfg, s, ev)
	assert.Nil(t, d.Next)
	assert.Equal(t, 25*time.Minute, d.RetryAt)
	ev.Now = 25 * time.Minute
	d = Decide(cfg, s, ev)
	require.Equal(t, DecideStartSwitchover, d.Kind)
	assert.Equal(t, Region("east"), d.Target)
	cfg.AutoFailback = false
	assert.Equal(t, DecideNone, Decide(cfg, s, ev).Kind)
}

func TestPauseRequest(t *testing.T) {
	cfg := DefaultConfig()
	s := newTestState(t, Strong)
	d, err := RequestPause(cfg, s, healthy(0, "east", nil), true, "db upgrade")
	require.NoError(t, err)
	require.Equal(t, DecidePause, d.Kind)
	assert.True(t, d.Next.Paused)
	// Manual switchover still works while paused.
	_, err = RequestSwitchover(cfg, *d.Next, healthy(0, "east", nil), "west", "manual")
	require.NoError(t, err)
	d, err = RequestPause(cfg, *d.Next, healthy(0, "east", nil), false, "done")
	require.NoError(t, err)
	assert.Equal(t, DecideResume, d.Kind)
	assert.False(t, d.Next.Paused)
}

func TestExplainNamesCandidatesAndPolicy(t *testing.T) {
	cfg := DefaultConfig()
	s := newTestState(t, Strong)
	wq, _ := s.WriteQuorum.Shrink("west")
	s.WriteQuorum = wq
	out := Explain(cfg, s, withDown(failed(healthy(time.Minute, "west", map[Region]LSN{"west": 3})), "north"))
	assert.Contains(t, out, "write region east FAILED: lease lapsed")
	assert.Contains(t, out, "west         eligible=no  priority=1 not in the write quorum")
	assert.Contains(t, out, "BLOCKED by policy: no candidate qualifies")
}

func TestConfigValidation(t *testing.T) {
	require.NoError(t, DefaultConfig().Validate())
	require.NoError(t, FastConfig().Validate())
	c := DefaultConfig()
	c.LeaseDuration = c.HeartbeatInterval + c.MaxClockDrift
	err := c.Validate()
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "LeaseDuration")
	c = DefaultConfig()
	c.HistoryLen = MaxHistory + 1
	assert.ErrorContains(t, c.Validate(), "HistoryLen")
	for _, probe := range []time.Duration{0, c.HeartbeatInterval + 1} {
		c = DefaultConfig()
		c.SuspectProbeInterval = probe
		assert.ErrorContains(t, c.Validate(), "SuspectProbeInterval")
	}
	_, err = Profile("turbo")
	assert.ErrorIs(t, err, ErrInvalidConfig)
	fc, err := Profile("fast")
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, fc.LeaseDuration)
}

func TestConfigValidationGray(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"gray stall within the takeover delay", func(c *Config) { c.GrayStall = c.TakeoverDelay() }, "GrayStall"},
		{"no client error needed", func(c *Config) { c.GrayMinErrors = 0 }, "GrayMinErrors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []Config{DefaultConfig(), FastConfig()} {
				tt.edit(&c)
				err := c.Validate()
				require.ErrorIs(t, err, ErrInvalidConfig)
				assert.ErrorContains(t, err, tt.field)
			}
		})
	}
}

// A stalled follower is shrunk out of the write quorum like a failed one;
// a live, unstalled member is kept.
func TestDecideShrinksStalledFollower(t *testing.T) {
	s, err := NewState("p", "east", []Region{"east", "west", "north"}, Strong, 1)
	require.NoError(t, err)
	ev := Evidence{Now: time.Minute, Proposer: "east", Replicas: []ReplicaEvidence{
		{Region: "east", Live: true, Reported: true, Epoch: 1, LastLSN: 20},
		{Region: "west", Live: true, Reported: true, Epoch: 1, LastLSN: 20, InSync: true},
		{Region: "north", Live: true, Reported: true, Epoch: 1, LastLSN: 5},
	}}
	d := Decide(FastConfig(), s, ev)
	assert.Equal(t, DecideNone, d.Kind, "lagging but not stalled: kept")
	ev.Replicas[2].Stalled = "match LSN 5 still for 3s below 20"
	d = Decide(FastConfig(), s, ev)
	require.Equal(t, DecideShrinkQuorum, d.Kind)
	assert.Equal(t, Region("north"), d.Target)
	assert.Equal(t, []Region{"east", "west"}, d.Next.WriteQuorum.Members)
	assert.Contains(t, d.Next.History[len(d.Next.History)-1].Reason, "stalled")
}

// A region that keeps being shrunk out of the write quorum waits longer
// each time before it grows back: GrowHoldOffBase after a shrink, doubled
// for each further shrink within FlapWindow, capped at GrowHoldOffMax. The
// suppression is reported (no register write) and the hold-off travels in
// the shrink's own register write.
func TestDecideGrowHysteresis(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GrowHoldOffBase, cfg.GrowHoldOffMax, cfg.FlapWindow = time.Minute, 3*time.Minute, time.Hour
	s := newTestState(t, Strong)
	caughtUp := func(now time.Duration) Evidence {
		ev := healthy(now, "east", map[Region]LSN{"east": 9, "north": 9})
		ev.Replicas[2].CaughtUp = true // north
		return ev
	}
	shrink := func(now time.Duration) {
		t.Helper()
		d := Decide(cfg, s, withDown(healthy(now, "east", map[Region]LSN{"east": 5}), "north"))
		require.Equal(t, DecideShrinkQuorum, d.Kind)
		s = *d.Next
	}
	steps := []struct {
		name      string
		at        time.Duration
		shrink    bool
		want      DecisionKind
		growAfter time.Duration // after a shrink
	}{
		{"first shrink holds off base", time.Minute, true, DecideNone, 2 * time.Minute},
		{"held off", 90 * time.Second, false, DecideNone, 0},
		{"hold-off over", 2 * time.Minute, false, DecidePrepareGrow, 0},
		{"second shrink doubles", 3 * time.Minute, true, DecideNone, 5 * time.Minute},
		{"still held", 4 * time.Minute, false, DecideNone, 0},
		{"over again", 5 * time.Minute, false, DecidePrepareGrow, 0},
		{"third shrink capped", 6 * time.Minute, true, DecideNone, 9 * time.Minute},
		{"shrinks outside FlapWindow are forgotten", 2 * time.Hour, true, DecideNone, 2*time.Hour + time.Minute},
	}
	for _, st := range steps {
		if st.shrink {
			if s.WriteQuorum.IsMember("north") {
				shrink(st.at)
			} else {
				// Grow it back first (in sync), then shrink.
				ev := caughtUp(st.at)
				ev.Replicas[2].InSync = true
				ev.Now = 0 // past any hold-off for the grow itself
				if f, ok := s.QuorumFlapOf("north"); ok {
					ev.Now = f.GrowAfter
				}
				d := Decide(cfg, s, ev)
				require.Equal(t, DecideGrowQuorum, d.Kind, st.name)
				s = *d.Next
				shrink(st.at)
			}
			f, ok := s.QuorumFlapOf("north")
			require.True(t, ok)
			assert.Equal(t, st.growAfter, f.GrowAfter, st.name)
			assert.Contains(t, s.History[len(s.History)-1].Reason, "grow held off", st.name)
		}
		d := Decide(cfg, s, caughtUp(st.at))
		assert.Equal(t, st.want, d.Kind, st.name)
		if st.want == DecideNone {
			assert.Nil(t, d.Next, st.name)
			assert.Contains(t, d.Suppressed, "hysteresis: grow of north held off", st.name)
			f, _ := s.QuorumFlapOf("north")
			assert.Equal(t, f.GrowAfter, d.RetryAt, "re-evaluated when the hold-off ends: %s", st.name)
		}
	}
	b, err := Encode(nil, s)
	require.NoError(t, err)
	got, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, s.QuorumFlaps, got.QuorumFlaps, "the hold-off is in the register")
}

// TestDecideSummaryNamesWhyALiveCandidateWasRejected: a live member whose
// promotion would leave the write quorum below the minimum durability is
// refused, and the summary an operator reads says so (it used to list the
// candidate as "live, epoch 1, LSN 40, lag 0" and nothing else).
func TestDecideSummaryNamesWhyALiveCandidateWasRejected(t *testing.T) {
	cfg := DefaultConfig()
	s, err := NewState("p-1", "east", regions, Strong, 2)
	require.NoError(t, err)
	wq, err := s.WriteQuorum.Shrink("west")
	require.NoError(t, err)
	s.WriteQuorum = wq
	d := Decide(cfg, s, failed(healthy(time.Minute, "north", map[Region]LSN{"north": 40, "west": 40})))
	require.Equal(t, DecideNone, d.Kind, d.Reasons)
	assert.Contains(t, d.Suppressed, "no candidate qualifies")
	assert.Contains(t, d.Suppressed, "north: live, epoch 1, LSN 40, lag 0, but rejected:")
}

// TestExplainTimesAreRelative: the node's clock counts from the driver's
// zero (the Unix epoch in the agent), so Explain renders instants relative
// to now; absolute readings came out as "498937h50m42s".
func TestExplainTimesAreRelative(t *testing.T) {
	cfg := DefaultConfig()
	s := newTestState(t, Strong)
	s.History = append(s.History, Transition{Epoch: 2, At: 90 * time.Second, Kind: DecideFailover, From: "east", To: "north", Proposer: "north", Reason: "lease lapsed"})
	out := Explain(cfg, s, healthy(100*time.Second, "east", nil))
	assert.Contains(t, out, "epoch 2 10s ago: failover east->north by north: lease lapsed")
	assert.NotContains(t, out, "1m30s")
}

// A switchover whose write region looks failed while no region qualifies
// for a failover still times out and unfences it. Its own fence stalls
// the write region's commit LSN while clients get errors (gray evidence),
// so observers call it failed; with the target never-promote (a drain)
// and the third region outside the write quorum, Decide answered "no
// candidate qualifies" and never reached the switchover's timeout: the
// partition stayed fenced until the operator lifted never-promote
// (cluster-edge-min-durability seed 3, 10 minutes without a write).
func TestSwitchoverTimesOutWhileItsFencedWriteRegionLooksFailed(t *testing.T) {
	cfg := DefaultConfig()
	s := newTestState(t, Strong)
	d, err := RequestSwitchover(cfg, s, healthy(0, "east", nil), "west", "planned")
	require.NoError(t, err)
	s = *d.Next
	s.FenceRecorded, s.SwitchoverLSN = true, 61
	s.NeverPromote = []Region{"west"}
	wq, err := s.WriteQuorum.Shrink("north")
	require.NoError(t, err)
	s.WriteQuorum = wq
	require.NoError(t, s.Validate())
	gray := func(now time.Duration) Evidence {
		ev := healthy(now, "north", map[Region]LSN{"east": 61, "west": 58, "north": 58})
		ev.WriteRegionFailed, ev.FailureWhy = true, "gray failure of node 1"
		return ev
	}

	d = Decide(cfg, s, gray(cfg.GracefulTimeout/2))
	assert.Equal(t, DecideNone, d.Kind, "before the timeout: no candidate, nothing to write")
	assert.Contains(t, d.Suppressed, "no candidate qualifies")
	assert.Equal(t, cfg.GracefulTimeout, d.RetryAt, "the switchover's timeout is when to look again")

	d = Decide(cfg, s, gray(cfg.GracefulTimeout))
	require.Equal(t, DecideAbortSwitchover, d.Kind, "%v %s", d.Reasons, d.Suppressed)
	assert.Equal(t, PhaseSteady, d.Next.Phase)
	assert.Equal(t, Region("east"), d.Next.WriteRegion)
	assert.Equal(t, Epoch(2), d.Next.Epoch, "unfenced at a new epoch")
	require.NoError(t, d.Next.Validate())
}
