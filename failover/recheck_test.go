package failover

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recheckPart is the partition the recheck tests drive; east (node 1) is
// its write region.
const recheckPart = "p-000"

// reportEast feeds east's manager a status of its replica with the given
// followers and keeps it as the harness's replica, so that the harness
// reports the same followers after actions.
func (h *mgrHarness) reportEast(lastLSN LSN, followers ...FollowerStatus) {
	st := h.replicas[1][recheckPart]
	st.LastLSN = lastLSN
	st.Followers = append([]FollowerStatus(nil), followers...)
	h.mgrs[1].UpdateReplica(h.now, recheckPart, *st)
}

func caughtUp(r Region, lsn LSN) FollowerStatus {
	return FollowerStatus{Region: r, MatchLSN: lsn, InRule: true, CaughtUp: true, InSync: true}
}

func lagging(r Region, match LSN) FollowerStatus {
	return FollowerStatus{Region: r, MatchLSN: match, InRule: true, InSync: true}
}

// installState writes s into the register at the next version and has
// every manager observe it.
func (h *mgrHarness) installState(s State) {
	e := h.reg[recheckPart]
	e = regEntry{version: e.version + 1, state: s}
	h.reg[recheckPart] = e
	for _, n := range h.nodes {
		h.mgrs[n.ID].ObserveState(h.now, recheckPart, e.version, s)
	}
}

// A write makes the write region's followers lag for a moment and catch
// up again: their CaughtUp flag flips with every write. Decide reads the
// flag only for regions outside the write quorum, and for the switchover
// target through its match LSN: only there may a flip cost an evaluation.
func TestCatchUpFlipsEvaluateOnlyWhereDecideReadsThem(t *testing.T) {
	tests := []struct {
		name string
		// setup changes the register before the flips.
		setup func(h *mgrHarness)
		// flipper is the follower whose flag flips; the other stays
		// caught up.
		flipper, other Region
		wantEval       bool
	}{
		{"write-quorum member, steady phase: no evaluation", nil, "west", "north", false},
		{"region outside the write quorum: evaluated", func(h *mgrHarness) {
			// North's node goes dark and is shrunk out; it stays down,
			// so its flags never make it grow back.
			h.cut[3] = true
			for i := 0; i < 100 && h.reg[recheckPart].state.WriteQuorum.IsMember("north"); i++ {
				h.step(100 * time.Millisecond)
			}
			require.False(t, h.reg[recheckPart].state.WriteQuorum.IsMember("north"), "north shrunk out")
		}, "north", "west", true},
		{"switchover target during a graceful switchover: evaluated", func(h *mgrHarness) {
			s := h.reg[recheckPart].state.Clone()
			s.Phase, s.Target, s.PhaseSince = PhaseSwitchover, "west", h.now
			s.FenceRecorded, s.SwitchoverLSN = true, 1000 // west never reaches it here
			h.installState(s)
		}, "west", "north", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newSteadyHarness(t, FastConfig(), 1)
			if tt.setup != nil {
				tt.setup(h)
			}
			last := LSN(10)
			h.reportEast(last, caughtUp(tt.flipper, last), caughtUp(tt.other, last))
			for i := 0; i < 5; i++ {
				h.step(100 * time.Millisecond)
			}
			east := h.mgrs[1]
			before := east.Stats()
			h.proposed = nil
			for i := 0; i < 20; i++ {
				// A write: the flipper lags, then catches up.
				last++
				h.reportEast(last, lagging(tt.flipper, last-1), caughtUp(tt.other, last))
				h.step(10 * time.Millisecond)
				h.reportEast(last, caughtUp(tt.flipper, last), caughtUp(tt.other, last))
				h.step(10 * time.Millisecond)
			}
			after := east.Stats()
			if tt.wantEval {
				assert.Greater(t, after.Evaluations, before.Evaluations, "flips re-evaluate")
				return
			}
			assert.Equal(t, before.Evaluations, after.Evaluations, "member flips re-evaluate nothing")
			assert.Greater(t, after.Rechecks, before.Rechecks, "the flips were looked at")
			assert.Empty(t, h.proposed, "nothing to write")
			// The flags are kept all the same: the next evaluation sees them.
			ev, ok := east.Evidence(h.now, recheckPart)
			require.True(t, ok)
			west, _ := ev.Replica(tt.flipper)
			assert.True(t, west.CaughtUp)
			assert.Equal(t, last, west.LastLSN)
		})
	}
}

// trackLag arms a timer at since+GrayStall for every follower lagging
// behind the write region. A lag that clears before then needs no
// evaluation when the timer fires; one that persists must still be
// decided at since+GrayStall (the stalled follower is shrunk out).
func TestLagTimerEvaluatesOnlyAStall(t *testing.T) {
	tests := []struct {
		name      string
		clearsAt  time.Duration // after the lag began; 0: never
		wantShink bool
	}{
		{"lag clears within milliseconds: no evaluation at its deadline", 10 * time.Millisecond, false},
		{"lag clears just before GrayStall: no evaluation at its deadline", 2900 * time.Millisecond, false},
		{"lag persists: shrunk out at since+GrayStall", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := FastConfig()
			h := newSteadyHarness(t, cfg, 1)
			east := h.mgrs[1]
			h.reportEast(10, caughtUp("west", 10), caughtUp("north", 10))
			h.step(100 * time.Millisecond)
			before := east.Stats()
			h.proposed = nil
			// West stops at 10 while north keeps up with LSN 11.
			since := h.now
			h.reportEast(11, lagging("west", 10), caughtUp("north", 11))
			const tick = 10 * time.Millisecond
			var shrinkAt time.Duration
			for h.now < since+cfg.GrayStall+time.Second {
				h.step(tick)
				if tt.clearsAt > 0 && h.now == since+tt.clearsAt {
					h.reportEast(11, caughtUp("west", 11), caughtUp("north", 11))
					// Count from here: what the reports cost is the
					// other test's; this one is about the lag timer.
					h.step(tick)
					before = east.Stats()
				}
				for _, p := range h.proposed {
					if p.Kind == DecideShrinkQuorum && shrinkAt == 0 {
						assert.Equal(t, Region("west"), p.Target)
						shrinkAt = h.now
					}
				}
			}
			after := east.Stats()
			if !tt.wantShink {
				assert.Equal(t, before.Evaluations, after.Evaluations, "nothing to evaluate at since+GrayStall")
				assert.Greater(t, after.Rechecks, before.Rechecks, "the lag timer fired and was looked at")
				assert.Empty(t, h.proposed)
				return
			}
			require.NotZero(t, shrinkAt, "west shrunk out")
			assert.GreaterOrEqual(t, shrinkAt, since+cfg.GrayStall, "not before GrayStall")
			assert.LessOrEqual(t, shrinkAt, since+cfg.GrayStall+tick, "when its lag timer fires")
			assert.Greater(t, after.Evaluations, before.Evaluations)
		})
	}
}

// A status report equal to the one before changes nothing: it is counted
// and dropped, with no evaluation; a changed one still goes through.
func TestUnchangedStatusIsDropped(t *testing.T) {
	h := newSteadyHarness(t, FastConfig(), 1)
	m := h.mgrs[1]
	h.reportEast(7, caughtUp("west", 7), lagging("north", 5))
	h.step(10 * time.Millisecond)
	before := m.Stats()
	for i := 0; i < 5; i++ {
		h.reportEast(7, caughtUp("west", 7), lagging("north", 5))
		h.step(10 * time.Millisecond)
	}
	after := m.Stats()
	assert.Equal(t, before.StatusUnchanged+5, after.StatusUnchanged)
	assert.Equal(t, before.Evaluations, after.Evaluations)
	h.reportEast(7, caughtUp("west", 7), lagging("north", 6)) // north's match moved
	assert.Equal(t, after.StatusUnchanged, m.Stats().StatusUnchanged)
}

// Evaluate handles inputs without advancing the liveness view: a status
// report is evaluated at once, while a suspicion that came due waits for
// Tick (which the driver runs at NextDeadline).
func TestEvaluateLeavesTheViewToTick(t *testing.T) {
	h := newSteadyHarness(t, FastConfig(), 1)
	m := h.mgrs[1]
	seq := m.Liveness().ViewSeq()
	later := h.now + 10*FastConfig().TakeoverDelay() // nothing heard from west or north since
	require.LessOrEqual(t, m.NextDeadline(), later)
	before := m.Stats().Evaluations
	st := *h.replicas[1][recheckPart]
	st.LastLSN++
	st.Followers = []FollowerStatus{{Region: "west", MatchLSN: st.LastLSN - 1, InRule: true}, caughtUp("north", st.LastLSN)}
	m.UpdateReplicaAt(later, mustHandle(t, m, recheckPart), st)
	m.Evaluate(later)
	assert.Greater(t, m.Stats().Evaluations, before, "the report was evaluated")
	assert.Equal(t, seq, m.Liveness().ViewSeq(), "Evaluate advanced the view")
	assert.Empty(t, m.Ready().Heartbeats, "Evaluate sent heartbeats")
	m.Tick(later)
	assert.NotEqual(t, seq, m.Liveness().ViewSeq(), "Tick suspects the silent nodes")
}

func mustHandle(t *testing.T, m *Manager, name string) PartitionHandle {
	h, ok := m.Handle(name)
	require.True(t, ok)
	return h
}
