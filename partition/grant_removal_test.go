package partition_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/partitiontest"
	"github.com/fmnode/fmnode/quorum"
)

// A follower learns that it left the write quorum (or the replica set) only
// by a message of the write region, and the change usually happens because
// it cannot be reached: until its freshness grant ends it keeps serving
// bounded-staleness reads. Here c holds a grant of a, is cut off from the
// write region, and is then dropped by a quorum change; the write region
// must go on counting c's lag against K until c's grant has surely ended,
// whatever the change: a shrink of the write quorum, a removal from the
// replica set (at once or after a shrink), or a graceful promotion whose
// quorum leaves c out. It then writes again: the cost is a hold of at most
// T plus the drift margin.
func TestGrantOutlivesRemoval(t *testing.T) {
	lvl, window := grantTestLevel()
	ab := []partition.Region{"a", "b"}
	shrunk := quorum.WriteQuorum{Replicas: partition.SampleRegions, WriteRegion: "a", Members: ab, MinDurability: 1}
	removed := quorum.WriteQuorum{Replicas: ab, WriteRegion: "a", Members: ab, MinDurability: 1}
	setQuorum := func(wq quorum.WriteQuorum) func(t *testing.T, c *partitiontest.Cluster) {
		return func(t *testing.T, c *partitiontest.Cluster) {
			require.NoError(t, c.Control("a", func(now time.Duration, h *partition.Host) error { return h.SetWriteQuorum(now, 7, wq, 0) }))
		}
	}
	tests := []struct {
		name string
		// change drops c; the write region is then writer at epoch.
		change func(t *testing.T, c *partitiontest.Cluster)
		writer partition.Region
		epoch  partition.Epoch
	}{
		{"write quorum shrinks without c", setQuorum(shrunk), "a", 1},
		{"c leaves the replica set", setQuorum(removed), "a", 1},
		{"write quorum shrinks, then c leaves the replica set", func(t *testing.T, c *partitiontest.Cluster) {
			setQuorum(shrunk)(t, c)
			c.RunFor(100 * time.Millisecond)
			setQuorum(removed)(t, c)
		}, "a", 1},
		{"c leaves the replica set and rejoins it", func(t *testing.T, c *partitiontest.Cluster) {
			setQuorum(removed)(t, c)
			c.RunFor(100 * time.Millisecond)
			setQuorum(shrunk)(t, c)
		}, "a", 1},
		{"graceful promotion to a quorum without c", func(t *testing.T, c *partitiontest.Cluster) {
			require.NoError(t, c.Control("a", func(now time.Duration, h *partition.Host) error { return h.Fence(now, 7, 1, "a", 0) }))
			c.RunFor(50 * time.Millisecond)
			after := progressOf(t, c, "b", 7).LastLSN
			require.NoError(t, c.Control("a", func(now time.Duration, h *partition.Host) error { return h.Fence(now, 7, 2, "b", 0) }))
			require.NoError(t, c.Control("b", func(now time.Duration, h *partition.Host) error {
				return h.PromoteGraceful(now, 7, 2, after, quorum.WriteQuorum{Replicas: ab, WriteRegion: "b", Members: ab, MinDurability: 1}, 0)
			}))
		}, "b", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := grantedCluster(t, lvl, "c")
			// c's region fails as far as the others can tell: it hears
			// nothing more, and they nothing of it.
			for _, x := range ab {
				c.Cut(x, "c")
				c.Cut("c", x)
			}
			changedAt := c.Now()
			after := progressOf(t, c, tt.writer, 7).LastLSN
			tt.change(t, c)

			acked, held, servedAfter := writeReadBounded(t, c, tt.writer, "c", tt.epoch, changedAt, changedAt+window+time.Second, lvl.StalenessOps)
			require.Positive(t, servedAfter, "c serves reads on its grant after the change")
			require.Positive(t, held, "%s holds writes for c", tt.writer)
			require.Greater(t, uint64(acked), uint64(after)+lvl.StalenessOps, "%s writes again once c's grant has surely ended", tt.writer)
		})
	}
}
