package partition

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A freshness grant lets a follower serve bounded-staleness reads on the
// promise that the write region's last LSN, when it echoed the probe,
// covered every op of the partition. Only the write region's lease makes
// that promise true: once the lease ends (or is regained but not yet
// revalidated for its epoch) another region may take over and write a
// lineage the follower never sees. Here a client at follower c reads all
// along; c is cut off from b (a partial network partition) but still
// hears from the old write region a. a's lease is not renewed; once the
// lease plus a drift bound has passed, b takes over and writes more than K
// ops. From then on c must not serve bounded reads: a grant issued without
// a valid, validated lease, or valid past the lease's end, lets c serve a
// state more than K ops (and, T later, more than T) behind the partition.
func TestFreshnessGrantBoundedByLease(t *testing.T) {
	lvl := Level{Consistency: BoundedStaleness, StalenessOps: 20, StalenessTime: 500 * time.Millisecond, StalenessHold: 300 * time.Millisecond}
	hb := DefaultHeartbeatInterval
	tests := []struct {
		name string
		// atEnd runs when a's lease ends.
		atEnd func(t *testing.T, c *Cluster)
	}{
		{"lease lapses", func(*testing.T, *Cluster) {}},
		{"lease regained in a run not yet validated", func(t *testing.T, c *Cluster) {
			// The node got a lease back (a new run) right away: a
			// takeover decided in the gap may commit now, and until a's
			// manager reasserts the register a is nobody's write region.
			a := c.Host("a")
			require.NoError(t, a.SetLease(7, c.Now()+time.Hour))
			a.SetLeaseGen(2)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCluster(t, 5, func(cfg *ClusterConfig) { cfg.Host.LeaseGatesWrites = true })
			require.NoError(t, c.Create(7, Spec{Level: lvl, Quorum: testQuorum("a"), Epoch: 1}))
			a := c.Host("a")
			a.SetLeaseGen(1)
			require.NoError(t, a.ValidateLease(7, 1, 1))
			c.RunFor(10 * time.Millisecond)
			mustWrite(t, c, "a", 7, 1, 1, "k", "v1")
			c.RunFor(50 * time.Millisecond)
			for _, x := range []Region{"a", "c"} {
				c.Cut("b", x)
				c.Cut(x, "b")
			}

			// A client at c reads every half heartbeat.
			ref := ClientRef(1000)
			issued := map[ClientRef]time.Duration{}
			var served []time.Duration // when each served read was issued
			readUntil := func(until time.Duration) {
				for c.Now() < until {
					ref++
					issued[ref] = c.Now()
					c.Read("c", ReadRequest{Partition: 7, Ref: ref, Key: []byte("k"), Consistency: BoundedStaleness})
					c.RunFor(hb / 2)
					for _, r := range c.Replies() {
						at, ok := issued[r.Reply.Ref]
						if !ok {
							continue
						}
						if r.Reply.Err == nil {
							served = append(served, at)
						} else {
							require.ErrorIs(t, r.Reply.Err, ErrNotFresh)
						}
					}
				}
			}

			end := c.Now() + 2*lvl.StalenessTime/5
			require.NoError(t, a.SetLease(7, end))
			readUntil(end)
			require.NotEmpty(t, served, "c never got a freshness grant under a's lease")
			tt.atEnd(t, c)
			// The takeover: the lease plus a drift bound (10% of T, more
			// than DriftMargin of anything here) later, b becomes write
			// region of epoch 2 with itself the only member (c is
			// unreachable) and writes past the K bound.
			readUntil(end + lvl.StalenessTime/10)
			after := progressOf(t, c, "b", 7).LastLSN
			require.NoError(t, c.Control("b", func(now time.Duration, h *Host) error {
				return h.Promote(now, 7, 2, after, testQuorum("b", "b"), 0)
			}))
			var last Token
			for i := 0; i <= int(lvl.StalenessOps); i++ {
				last = mustWrite(t, c, "b", 7, 2, ClientRef(100+i), "k", fmt.Sprintf("v2-%d", i))
			}
			written := c.Now()
			served = nil
			readUntil(written + 2*lvl.StalenessTime)
			require.Empty(t, served, "c served bounded reads issued at %v, after b (write region of epoch 2) committed %v at %v: more than K %d ops (and from %v on, T %v) behind",
				served, last, written, lvl.StalenessOps, written+lvl.StalenessTime, lvl.StalenessTime)
			require.NoError(t, c.Violation())
		})
	}
}

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
