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
			h := newMgrHarness(t, cfg, 1)
			for i := 0; i < 20; i++ {
				h.step(100 * time.Millisecond)
			}
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
