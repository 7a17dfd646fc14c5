package failover

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/guard"
)

// Every guard Decide passes through is in Decision.Guards (the Manager
// counts them), and only those: a decision that is not held or filtered
// reports none.
func TestDecideReportsItsGuards(t *testing.T) {
	cfg := DefaultConfig()
	outside := func() State { // west shrunk out of the write quorum
		s := newTestState(t, Strong)
		wq, err := s.WriteQuorum.Shrink("west")
		require.NoError(t, err)
		s.WriteQuorum = wq
		return s
	}
	cases := []struct {
		name  string
		state func() State
		ev    Evidence
		want  []guard.Name
	}{
		{"steady", func() State { return newTestState(t, Strong) },
			healthy(time.Minute, "east", map[Region]LSN{"east": 5}), nil},
		{"failover to a member", func() State { return newTestState(t, Strong) },
			failed(healthy(time.Minute, "west", map[Region]LSN{"west": 5, "north": 5})), nil},
		{"write-quorum filter", outside,
			withDown(failed(healthy(time.Minute, "west", map[Region]LSN{"west": 99})), "north"),
			[]guard.Name{guard.CandidateNotInWriteQuorum, guard.NoCandidate}},
		{"paused", func() State { s := newTestState(t, Strong); s.Paused = true; return s },
			failed(healthy(time.Minute, "west", map[Region]LSN{"west": 5})), []guard.Name{guard.HoldPaused}},
		{"hysteresis", func() State {
			s := newTestState(t, Strong)
			s.HoldOffUntil, s.Failovers = 2*time.Hour, []time.Duration{50 * time.Minute, 55 * time.Minute}
			return s
		}, failed(healthy(time.Hour, "west", map[Region]LSN{"west": 5})), []guard.Name{guard.HoldHysteresis}},
		{"minimum durability on a takeover", func() State {
			s := newTestState(t, Strong)
			s.WriteQuorum.MinDurability = 2
			return s
		}, withDown(failed(healthy(time.Minute, "west", map[Region]LSN{"west": 5})), "north"),
			[]guard.Name{guard.CandidateBelowMinDurability, guard.NoCandidate}},
		{"minimum durability on a shrink", func() State {
			s := newTestState(t, Strong)
			s.WriteQuorum.MinDurability = 3
			return s
		}, withDown(healthy(time.Minute, "east", map[Region]LSN{"east": 5}), "north"), []guard.Name{guard.ShrinkMinDurability}},
		{"stale state", func() State { return newTestState(t, Strong) }, func() Evidence {
			ev := failed(healthy(time.Minute, "west", map[Region]LSN{"west": 5, "north": 5}))
			ev.Replicas[1].Epoch = 7 // west reports an epoch the state has not seen
			ev.Replicas[2].Live = false
			return ev
		}(), []guard.Name{guard.CandidateStaleState, guard.NoCandidate}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(cfg, c.state(), c.ev)
			var got []guard.Name
			for n := guard.Name(1); n < guard.NumNames; n++ {
				if d.Guards.Has(n) {
					got = append(got, n)
				}
			}
			assert.Equal(t, c.want, got, "guards of %q (%s)", d.Suppressed, d.Reasons)
		})
	}
}

// The drift margin counts when it is what holds a suspicion back: a node
// silent for longer than the lease, not yet lease + drift.
func TestLivenessCountsTheDriftMargin(t *testing.T) {
	cfg := DefaultConfig()
	nodes := []Node{{ID: 1, Region: "east"}, {ID: 2, Region: "west"}, {ID: 3, Region: "north"}}
	l, err := NewLiveness(cfg, 1, nodes)
	require.NoError(t, err)
	var c guard.Counts
	l.SetGuards(&c)
	l.refresh(cfg.LeaseDuration - time.Millisecond)
	assert.Zero(t, c[guard.TakeoverDriftMargin], "within the lease: nothing to hold back")
	l.refresh(cfg.LeaseDuration + cfg.MaxClockDrift/2)
	assert.Equal(t, uint64(2), c[guard.TakeoverDriftMargin], "both peers are silent past the lease, within the margin")
	assert.Empty(t, l.suspects)
	l.refresh(cfg.TakeoverDelay() + time.Millisecond)
	assert.Equal(t, uint64(2), c[guard.TakeoverDriftMargin], "past the margin: suspected, not held")
	assert.Len(t, l.suspects, 2)
}
