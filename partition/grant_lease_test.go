package partition

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGrantLength: the write region echoes a follower's probe with a grant
// of T cut to what remains of its lease, and with none while the lease has
// lapsed, is not validated for its epoch, or the write region is paused
// (its switchover may already have installed a successor).
func TestGrantLength(t *testing.T) {
	const T = time.Second
	lvl := Level{Consistency: BoundedStaleness, StalenessOps: 5, StalenessTime: T, StalenessHold: 200 * time.Millisecond}
	tests := []struct {
		name  string
		setup func(s *solo)
		grant time.Duration // 0: no grant
	}{
		{"lease far ahead: T", func(s *solo) { require.NoError(t, s.h.SetLease(1, s.now+time.Hour)) }, T},
		{"lease ends before T: what remains", func(s *solo) { require.NoError(t, s.h.SetLease(1, s.now+300*time.Millisecond)) }, 300 * time.Millisecond},
		{"lease lapsed", func(s *solo) { require.NoError(t, s.h.SetLease(1, s.now)) }, 0},
		{"lease validated for the run and epoch", func(s *solo) {
			require.NoError(t, s.h.SetLease(1, s.now+time.Hour))
			s.h.SetLeaseGen(4)
			require.NoError(t, s.h.ValidateLease(1, 4, 1))
		}, T},
		{"new lease run not validated", func(s *solo) {
			require.NoError(t, s.h.SetLease(1, s.now+time.Hour))
			s.h.SetLeaseGen(4)
			require.NoError(t, s.h.ValidateLease(1, 3, 1))
		}, 0},
		{"paused for a switchover", func(s *solo) {
			require.NoError(t, s.h.SetLease(1, s.now+time.Hour))
			require.NoError(t, s.h.Fence(s.now, 1, 1, "a", 0))
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSolo(t, "a", nil)
			require.NoError(t, s.h.Create(0, 1, Spec{Level: lvl, Quorum: testQuorum("a"), Epoch: 1}, 0))
			s.flush()
			s.now = 10 * time.Second
			tt.setup(s)
			s.flush()
			s.drainSent()
			s.step(Message{Type: MsgAppendResp, Partition: 1, Epoch: 1, From: "b", Success: true,
				ProbeBoot: 7, Probe: 3 * time.Second, WantGrant: true})
			s.flush()
			var echoes []Message
			for _, m := range s.drainSent() {
				if m.Type == MsgAppend && m.To == "b" && m.EchoBoot != 0 {
					echoes = append(echoes, m)
				}
			}
			if tt.grant == 0 {
				require.Empty(t, echoes, "a grant without a lease to back it")
				return
			}
			require.Len(t, echoes, 1)
			require.Equal(t, 3*time.Second, echoes[0].Echo)
			require.Equal(t, tt.grant, echoes[0].Grant)
		})
	}
}
