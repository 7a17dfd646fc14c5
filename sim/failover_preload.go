package sim

import (
	"fmt"

	"github.com/fmnode/fmnode/partition"
)

// Preloaded data: every partition starts with PreloadBytes of key-value
// pairs, identical on every replica (a bulk load before the clients
// start), so that a full copy of a partition has a size and the re-sync
// figure compares a delta with something real. The pairs sit at LSN 0,
// below every op, and are never written by the clients (they use key "k").
const (
	// DefaultPreloadBytes keeps the CI sweep fast and still makes the
	// clients' changes a small fraction of a partition.
	DefaultPreloadBytes = 8 << 10
	// MaxPreloadBytes bounds one partition's preload.
	MaxPreloadBytes = 16 << 20
	// foPreloadValueBytes is the size of one preloaded value.
	foPreloadValueBytes = 1 << 10
)

// preloadBytes is the preload a run asks for (0: the default).
func preloadBytes(cfg Config) int {
	switch {
	case cfg.PreloadBytes < 0:
		return 0
	case cfg.PreloadBytes == 0:
		return DefaultPreloadBytes
	}
	return cfg.PreloadBytes
}

// preloadKVs builds partition p's preloaded pairs: keys "pre/NNNNNN" and
// values filled from the partition id, about n bytes in all.
func preloadKVs(p partition.ID, n int) []partition.KV {
	var out []partition.KV
	for i, left := 0, n; left > 0; i++ {
		k := []byte(fmt.Sprintf("pre/%06d", i))
		vlen := min(foPreloadValueBytes, max(1, left-len(k)))
		v := make([]byte, vlen)
		for j := range v {
			v[j] = byte('a' + (int(p)+i+j)%26)
		}
		out = append(out, partition.KV{Key: k, Value: v})
		left -= len(k) + vlen
	}
	return out
}

// preload installs the preloaded pairs into every replica's store. It runs
// right after the world is built, before any client write: the same bytes
// land on every replica, as a bulk load would leave them.
func (fw *foWorld) preload(n int) error {
	if n <= 0 {
		return nil
	}
	for i := range fw.parts {
		kvs := preloadKVs(fw.parts[i].id, n)
		for _, rn := range fw.parts[i].replicas {
			st := fw.nodes[rn.Node-1].store
			if err := st.Commit([]partition.Write{{Partition: fw.parts[i].id, Install: kvs}}); err != nil {
				return fmt.Errorf("sim: preload partition %d: %w", fw.parts[i].id, err)
			}
		}
	}
	fw.preloaded = n
	return nil
}

// lineageBytesAfter sums the payload of partition i's ops after LSN from
// in the log of its current write region (what a replica that holds the
// lineage up to from lacks). partial reports that the log no longer holds
// every such op (compacted): the sum is then a lower bound.
func (fw *foWorld) lineageBytesAfter(i int, from partition.LSN) (bytes uint64, partial bool) {
	node, ok := fw.nodeFor(i, fw.reg[i].state.WriteRegion)
	if !ok {
		return 0, true
	}
	st := fw.nodes[node].store
	next := from + 1
	for range 1 << 16 {
		ops, err := st.ReadLog(fw.parts[i].id, next, 1024, 1<<20)
		if err != nil || len(ops) == 0 {
			return bytes, err != nil
		}
		if ops[0].LSN != next {
			partial = true
		}
		for j := range ops {
			bytes += uint64(ops[j].Size())
		}
		next = ops[len(ops)-1].LSN + 1
	}
	return bytes, true
}
