package partition_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/partitiontest"
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
	lvl := partition.Level{Consistency: partition.BoundedStaleness, StalenessOps: 20, StalenessTime: 500 * time.Millisecond, StalenessHold: 300 * time.Millisecond}
	hb := partition.DefaultHeartbeatInterval
	tests := []struct {
		name string
		// atEnd runs when a's lease ends.
		atEnd func(t *testing.T, c *partitiontest.Cluster)
	}{
		{"lease lapses", func(*testing.T, *partitiontest.Cluster) {}},
		{"lease regained in a run not yet validated", func(t *testing.T, c *partitiontest.Cluster) {
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
			c := newTestCluster(t, 5, func(cfg *partitiontest.ClusterConfig) { cfg.Host.LeaseGatesWrites = true })
			require.NoError(t, c.Create(7, partition.Spec{Level: lvl, Quorum: partition.SampleQuorum("a"), Epoch: 1}))
			a := c.Host("a")
			a.SetLeaseGen(1)
			require.NoError(t, a.ValidateLease(7, 1, 1))
			c.RunFor(10 * time.Millisecond)
			mustWrite(t, c, "a", 7, 1, 1, "k", "v1")
			c.RunFor(50 * time.Millisecond)
			for _, x := range []partition.Region{"a", "c"} {
				c.Cut("b", x)
				c.Cut(x, "b")
			}

			// A client at c reads every half heartbeat.
			ref := partition.ClientRef(1000)
			issued := map[partition.ClientRef]time.Duration{}
			var served []time.Duration // when each served read was issued
			readUntil := func(until time.Duration) {
				for c.Now() < until {
					ref++
					issued[ref] = c.Now()
					c.Read("c", partition.ReadRequest{Partition: 7, Ref: ref, Key: []byte("k"), Consistency: partition.BoundedStaleness})
					c.RunFor(hb / 2)
					for _, r := range c.Replies() {
						at, ok := issued[r.Reply.Ref]
						if !ok {
							continue
						}
						if r.Reply.Err == nil {
							served = append(served, at)
						} else {
							require.ErrorIs(t, r.Reply.Err, partition.ErrNotFresh)
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
			require.NoError(t, c.Control("b", func(now time.Duration, h *partition.Host) error {
				return h.Promote(now, 7, 2, after, partition.SampleQuorum("b", "b"), 0)
			}))
			var last partition.Token
			for i := 0; i <= int(lvl.StalenessOps); i++ {
				last = mustWrite(t, c, "b", 7, 2, partition.ClientRef(100+i), "k", fmt.Sprintf("v2-%d", i))
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
