package clusterspec

import (
	"slices"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
)

// weight is the rendezvous weight of node id for partition p: splitmix64's
// finalizer over (p, id) packed into one word. The packing is injective
// (ids are 16 bits), and the finalizer is a bijection, so no two nodes
// ever tie for a partition. The function is part of the format: changing
// it would move nearly every replica of every cluster, so a golden test
// pins it.
func weight(p partition.ID, id uint16) uint64 {
	z := uint64(p)<<16 | uint64(id)
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// regionIDs are the ids of the nodes of each region, in Regions order.
func (s Spec) regionIDs() [][]uint16 {
	ids := make([][]uint16, len(s.Regions))
	for _, n := range s.Nodes {
		for i, r := range s.Regions {
			if n.Region == r {
				ids[i] = append(ids[i], n.ID)
				break
			}
		}
	}
	return ids
}

// pick is the node of ids with the highest weight for p (0 if none).
func pick(p partition.ID, ids []uint16) uint16 {
	var best uint16
	var bw uint64
	for _, id := range ids {
		if w := weight(p, id); best == 0 || w > bw {
			best, bw = id, w
		}
	}
	return best
}

// Placement is where partition p's replicas live: one per region, in
// Regions order, on the node of that region with the highest rendezvous
// weight for p. It depends on the recorded Nodes alone, never on who is
// alive: a dead node's replicas stay where they are, to be failed over
// from, not re-created elsewhere behind the failover manager's back; and
// adding a node to a region of k moves only the ~1/(k+1) of that region's
// replicas the new node wins.
func (s Spec) Placement(p partition.ID) node.Placement {
	return s.placement(p, s.regionIDs(), nil)
}

func (s Spec) placement(p partition.ID, ids [][]uint16, in *interner) node.Placement {
	var reps []failover.RegionNode
	if in != nil {
		reps = in.scratch[:0]
	}
	for i, r := range s.Regions {
		reps = append(reps, failover.RegionNode{Region: quorum.Region(r), Node: failover.NodeID(pick(p, ids[i]))})
	}
	if in != nil {
		in.scratch = reps
		reps = in.intern(reps)
	}
	return node.Placement{ID: p, Replicas: reps}
}

// Placements are the placements of partitions 1..Partitions. Equal
// replica lists share one array (read-only), as the node expects: at
// 100k partitions a copy each would cost megabytes a node. The cost is
// Partitions times the node count in weights.
func (s Spec) Placements() []node.Placement {
	ids := s.regionIDs()
	in := newInterner()
	out := make([]node.Placement, 0, max(s.Partitions, 0))
	for p := 1; p <= s.Partitions; p++ {
		out = append(out, s.placement(partition.ID(p), ids, in))
	}
	return out
}

// Hosted are the placements, in partition order, of the partitions with
// a replica on node id (none for an unknown node). Replica lists may
// share arrays, as in Placements.
func (s Spec) Hosted(id uint16) []node.Placement {
	self, ok := s.Node(id)
	if !ok {
		return nil
	}
	ri := slices.Index(s.Regions, self.Region)
	if ri < 0 {
		return nil
	}
	ids := s.regionIDs()
	in := newInterner()
	var out []node.Placement
	for p := 1; p <= s.Partitions; p++ {
		// Its own region first: most partitions are not hosted here, and
		// only this region's weights tell.
		if pick(partition.ID(p), ids[ri]) == id {
			out = append(out, s.placement(partition.ID(p), ids, in))
		}
	}
	return out
}

// interner shares equal replica lists.
type interner struct {
	m       map[string][]failover.RegionNode
	key     []byte
	scratch []failover.RegionNode
}

func newInterner() *interner { return &interner{m: make(map[string][]failover.RegionNode)} }

// intern returns the shared list equal to reps (keyed by its node ids:
// the regions are the same for every partition of a spec), copying reps
// only when it is new, so that reps may be a scratch buffer.
func (in *interner) intern(reps []failover.RegionNode) []failover.RegionNode {
	in.key = in.key[:0]
	for _, rn := range reps {
		in.key = append(in.key, byte(rn.Node>>8), byte(rn.Node))
	}
	if shared, ok := in.m[string(in.key)]; ok {
		return shared
	}
	own := slices.Clip(slices.Clone(reps))
	in.m[string(in.key)] = own
	return own
}
