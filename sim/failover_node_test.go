package sim

import (
	"testing"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
	"github.com/stretchr/testify/require"
)

// TestFoGroupCommit: Readys that come while an fsync runs share the next
// fsync. Each write below is its own Ready (as each delivered message is);
// with an fsync per Ready the disk queue grew to about one fsync per
// write (hundreds of ms here, seconds in a 2000-partition drill, past the
// partitions' RetransmitTimeout).
func TestFoGroupCommit(t *testing.T) {
	prof, err := failover.Profile("fast")
	require.NoError(t, err)
	spec := foSpec{regions: 3, nodesPerRegion: 1, partitions: 400, profile: prof,
		writeShare: []float64{0.6, 0.25, 0.15}, minDurability: 1, maxHistory: 1 << 20}
	fw, err := newFoWorld(Config{Seed: 1}.withDefaults(), spec)
	require.NoError(t, err)
	require.True(t, fw.initRegisters(time.Minute))
	n := fw.nodes[0]
	n.maxDiskQueue = 0
	writes := 0
	for i := range fw.parts {
		p := &fw.parts[i]
		if p.initial != n.region {
			continue
		}
		n.node.Write(n.local(), &partition.WriteRequest{Partition: p.id, Epoch: 1,
			Ref: partition.ClientRef(i + 1), Key: []byte("k"), Value: []byte("v")})
		n.pump()
		writes++
	}
	require.Greater(t, writes, 100)
	// At most the running fsync and the one queued behind it.
	require.LessOrEqual(t, n.maxDiskQueue, 2*2*time.Millisecond)
	fw.e.run(fw.now() + 5*time.Second)
	require.Empty(t, fw.e.viol.list)
}
