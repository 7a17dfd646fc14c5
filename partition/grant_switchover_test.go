package partition_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/partitiontest"
)

// A graceful switchover pauses the write region a and promotes the target
// b as soon as b holds every LSN a assigned; unlike a takeover it does not
// wait out a's lease, so freshness grants a issued just before the pause
// still run when b starts writing. A follower c holding one, outside b's
// commit rule and cut off from b, must not serve bounded-staleness reads
// more than K ops behind b's acknowledged writes: b counts every follower
// as one that may hold a grant of a until any such grant has ended, unless
// the follower answered b (adopting epoch 2 dropped its grants). A
// takeover, which waits for a's lease (and so for a's grants), pays
// nothing.
func TestGrantOutlivesGracefulSwitchover(t *testing.T) {
	lvl, window := grantTestLevel()
	tests := []struct {
		name     string
		graceful bool
		// cutBefore and cutAfter: regions that stop hearing b (and b them)
		// before the promotion, and 100ms after it (when they answered b).
		cutBefore, cutAfter []partition.Region
		wait                time.Duration // from the pause to the promotion
		// wantServed: c serves bounded reads after the promotion (on
		// a's grant); wantHeld: some of b's writes are held and rejected
		// (ErrStalenessBound) because of c.
		wantServed, wantHeld bool
	}{
		{"switchover, follower cut off from the successor", true, []partition.Region{"c"}, nil, 0, true, true},
		// c adopts epoch 2 (dropping a's grant) and answers b at once;
		// from then on its lag does not hold b's writes.
		{"switchover, follower answers the successor", true, nil, nil, 0, false, false},
		{"switchover, follower answers the successor, then is cut off", true, nil, []partition.Region{"c"}, 0, false, false},
		// a led epoch 1 from its start: it holds no grant.
		{"switchover, old write region cut off from the successor", true, []partition.Region{"a"}, nil, 0, false, false},
		{"takeover after the grants ran out", false, []partition.Region{"c"}, nil, window, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := grantedCluster(t, lvl, "c")

			// a pauses; b holds every LSN and becomes the write region of
			// epoch 2, alone in its commit rule.
			require.NoError(t, c.Control("a", func(now time.Duration, h *partition.Host) error { return h.Fence(now, 7, 1, "a", 0) }))
			c.RunFor(50 * time.Millisecond)
			cut := func(regions []partition.Region) {
				for _, x := range regions {
					c.Cut("b", x)
					c.Cut(x, "b")
				}
			}
			cut(tt.cutBefore)
			c.RunFor(tt.wait)
			after := progressOf(t, c, "b", 7).LastLSN
			require.NoError(t, c.Control("a", func(now time.Duration, h *partition.Host) error { return h.Fence(now, 7, 2, "b", 0) }))
			var promotedAt time.Duration
			require.NoError(t, c.Control("b", func(now time.Duration, h *partition.Host) error {
				promotedAt = now
				promote := h.Promote
				if tt.graceful {
					promote = h.PromoteGraceful
				}
				return promote(now, 7, 2, after, partition.SampleQuorum("b", "b"), 0)
			}))

			if tt.cutAfter != nil {
				c.RunFor(100 * time.Millisecond)
				cut(tt.cutAfter)
			}

			// Clients write at b and read at c, in turn.
			acked, held, servedAfter := writeReadBounded(t, c, "b", "c", 2, promotedAt, promotedAt+window+time.Second, lvl.StalenessOps)
			require.Equal(t, tt.wantServed, servedAfter > 0, "reads served at c after the promotion: %d", servedAfter)
			require.Equal(t, tt.wantHeld, held > 0, "writes held and rejected: %d", held)
			require.Greater(t, uint64(acked), uint64(after)+lvl.StalenessOps, "b must write again once c's grant has surely ended")
		})
	}
}

// A follower that learns a newer epoch (here by the failover's fence, with
// the new write region out of reach) drops every grant of the older one at
// once: the old write region's promise no longer covers the partition.
func TestNewerEpochDropsFreshnessGrant(t *testing.T) {
	lvl, _ := grantTestLevel()
	tests := []struct {
		name  string
		learn func(t *testing.T, c *partitiontest.Cluster)
	}{
		{"fenced at the new epoch", func(t *testing.T, c *partitiontest.Cluster) {
			require.NoError(t, c.Control("c", func(now time.Duration, h *partition.Host) error { return h.Fence(now, 7, 2, "b", 0) }))
		}},
		{"a message of the new write region", func(t *testing.T, c *partitiontest.Cluster) {
			// c hears b (b does not hear c).
			c.Heal()
			c.Cut("c", "b")
			require.NoError(t, c.Control("a", func(now time.Duration, h *partition.Host) error { return h.Fence(now, 7, 2, "b", 0) }))
			after := progressOf(t, c, "b", 7).LastLSN
			require.NoError(t, c.Control("b", func(now time.Duration, h *partition.Host) error {
				return h.PromoteGraceful(now, 7, 2, after, partition.SampleQuorum("b"), 0)
			}))
			c.RunFor(50 * time.Millisecond)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := grantedCluster(t, lvl, "c")
			c.Cut("b", "c")
			c.Cut("c", "b")
			require.NoError(t, c.Control("a", func(now time.Duration, h *partition.Host) error { return h.Fence(now, 7, 1, "a", 0) }))
			tt.learn(t, c)
			require.Equal(t, partition.Epoch(2), progressOf(t, c, "c", 7).Epoch)
			rep := mustRead(t, c, "c", partition.ReadRequest{Partition: 7, Ref: 100, Key: []byte("k"), Consistency: partition.BoundedStaleness})
			require.ErrorIs(t, rep.Err, partition.ErrNotFresh)
		})
	}
}

// The previous write region is spared the inherited-grant hold only if it
// surely led its epoch (the promoted replica heard it as write region
// there): having taken an epoch, it holds no grant of an older one. Here b
// is the target of a switchover that committed as b was cut off from
// every region, so b never took epoch 2 and still serves bounded reads on
// a's grant; c, fenced at epoch 2 by the failover (which names b), takes
// over at epoch 3 right away (a takeover right after a switchover
// promotes gracefully). c must count b's lag until a's grant has ended.
func TestTakeoverAfterUnfinishedSwitchover(t *testing.T) {
	lvl, window := grantTestLevel()
	c := grantedCluster(t, lvl, "b")
	require.NoError(t, c.Control("a", func(now time.Duration, h *partition.Host) error { return h.Fence(now, 7, 1, "a", 0) }))
	c.RunFor(50 * time.Millisecond)
	c.Isolate("b")
	for _, x := range []partition.Region{"a", "c"} {
		require.NoError(t, c.Control(x, func(now time.Duration, h *partition.Host) error { return h.Fence(now, 7, 2, "b", 0) }))
	}
	after := progressOf(t, c, "c", 7).LastLSN
	var promotedAt time.Duration
	require.NoError(t, c.Control("c", func(now time.Duration, h *partition.Host) error {
		promotedAt = now
		return h.PromoteGraceful(now, 7, 3, after, partition.SampleQuorum("c", "c"), 0)
	}))

	acked, held, servedAfter := writeReadBounded(t, c, "c", "b", 3, promotedAt, promotedAt+window+time.Second, lvl.StalenessOps)
	require.Positive(t, servedAfter, "b serves reads on a's grant after the takeover")
	require.Positive(t, held, "c holds writes for b")
	require.Greater(t, uint64(acked), uint64(after)+lvl.StalenessOps, "c writes again once a's grant has surely ended")
}
