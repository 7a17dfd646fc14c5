package clusterspec

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/partition"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nodesOf are the node ids of a placement, in Regions order.
func nodesOf(pl node.Placement) []uint16 {
	out := make([]uint16, len(pl.Replicas))
	for i, rn := range pl.Replicas {
		out[i] = uint16(rn.Node)
	}
	return out
}

// TestPlacementGolden pins the weight function: every deployed cluster's
// replicas sit where it put them.
func TestPlacementGolden(t *testing.T) {
	// splitmix64's output for state 1<<16|1, as an independent
	// implementation (Python) computes it.
	assert.Equal(t, uint64(0x5f4c1dac282d656f), weight(1, 1))
	s := validSpec()
	got := make([][]uint16, 0, 8)
	for p := partition.ID(1); p <= 8; p++ {
		got = append(got, nodesOf(s.Placement(p)))
	}
	assert.Equal(t, [][]uint16{{2, 5, 7}, {2, 3, 6}, {2, 4, 7}, {2, 3, 6}, {1, 4, 6}, {2, 5, 6}, {2, 4, 7}, {2, 4, 7}}, got)
}

func TestPlacementShape(t *testing.T) {
	s := validSpec()
	pl := s.Placement(17)
	assert.Equal(t, partition.ID(17), pl.ID)
	require.Len(t, pl.Replicas, len(s.Regions))
	for i, rn := range pl.Replicas {
		assert.Equal(t, s.Regions[i], string(rn.Region), "replicas in Regions order")
		n, ok := s.Node(uint16(rn.Node))
		require.True(t, ok)
		assert.Equal(t, n.Region, string(rn.Region), "a replica on a node of its region")
	}
}

// TestPlacementDeterministic: the same spec, with its nodes in any order,
// places every partition alike; Placements and Placement agree.
func TestPlacementDeterministic(t *testing.T) {
	s := gridSpec(500, 3, 4, 5)
	all := s.Placements()
	require.Len(t, all, 500)
	shuffled := s.Clone()
	rand.New(rand.NewPCG(5, 6)).Shuffle(len(shuffled.Nodes), func(i, j int) {
		shuffled.Nodes[i], shuffled.Nodes[j] = shuffled.Nodes[j], shuffled.Nodes[i]
	})
	for i, pl := range all {
		require.Equal(t, partition.ID(i+1), pl.ID)
		require.Equal(t, s.Placement(pl.ID), pl)
		require.Equal(t, pl, shuffled.Placement(pl.ID))
	}
	assert.Equal(t, all, shuffled.Placements())
}

// TestPlacementBruteForce: against a reference that sorts every node of
// the region by weight and takes the first, for random specs.
func TestPlacementBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for range 50 {
		s := randomSpec(r)
		for range 40 {
			p := partition.ID(1 + r.IntN(MaxPartitions))
			pl := s.Placement(p)
			for i, region := range s.Regions {
				nodes := s.RegionNodes(region)
				slices.SortFunc(nodes, func(a, b Node) int {
					wa, wb := weight(p, a.ID), weight(p, b.ID)
					switch {
					case wa > wb:
						return -1
					case wa < wb:
						return 1
					}
					t.Fatalf("tie between nodes %d and %d for partition %d", a.ID, b.ID, p)
					return 0
				})
				require.Equal(t, failover.NodeID(nodes[0].ID), pl.Replicas[i].Node)
			}
		}
	}
}

// TestPlacementSpread: each node of a region of k gets about 1/k of the
// partitions.
func TestPlacementSpread(t *testing.T) {
	const n = 20000
	tests := []struct {
		name string
		per  []int
	}{
		{"2 nodes", []int{2, 1}},
		{"3 nodes", []int{3, 1}},
		{"7 nodes", []int{7, 2}},
		{"16 nodes", []int{16, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := gridSpec(n, tt.per...)
			count := map[failover.NodeID]int{}
			for _, pl := range s.Placements() {
				for _, rn := range pl.Replicas {
					count[rn.Node]++
				}
			}
			for _, nd := range s.Nodes {
				k := tt.per[slices.Index(s.Regions, nd.Region)]
				want := float64(n) / float64(k)
				// Binomial: 5 standard deviations, at least 3%.
				tol := max(5*sqrt(want*(1-1/float64(k))), 0.03*want)
				assert.InDelta(t, want, float64(count[failover.NodeID(nd.ID)]), tol, "node %d of %d in %s", nd.ID, k, nd.Region)
			}
		})
	}
}

func sqrt(x float64) float64 {
	z := x
	for range 50 {
		z = (z + x/z) / 2
	}
	return z
}

// TestPlacementMinimalMovement: adding a node to a region moves only the
// partitions it wins (about 1/(k+1) of them), and only in its region;
// removing a node moves only its partitions.
func TestPlacementMinimalMovement(t *testing.T) {
	const n = 12000
	for _, k := range []int{1, 2, 4, 9} {
		before := gridSpec(n, k, 3)
		after := before.Clone()
		added := testNode(1000, "r1")
		after.Nodes = append(after.Nodes, added)
		require.NoError(t, after.Validate())

		a, b := before.Placements(), after.Placements()
		moved := 0
		for i := range a {
			for ri := range a[i].Replicas {
				was, is := a[i].Replicas[ri].Node, b[i].Replicas[ri].Node
				if was == is {
					continue
				}
				require.Equal(t, 0, ri, "a move outside the region the node joined")
				require.Equal(t, failover.NodeID(added.ID), is, "a partition moved to a node other than the new one")
				moved++
			}
		}
		want := float64(n) / float64(k+1)
		assert.InDelta(t, want, float64(moved), max(5*sqrt(want), 0.03*want), "k=%d", k)

		// Removing it again moves exactly what it had back.
		back := after.Clone()
		back.Nodes = slices.DeleteFunc(back.Nodes, func(nd Node) bool { return nd.ID == added.ID })
		assert.Equal(t, a, back.Placements())
	}

	// Removing an original node: only its partitions move.
	before := gridSpec(n, 4, 2)
	gone := before.Nodes[1].ID
	after := before.Clone()
	after.Nodes = slices.Delete(after.Nodes, 1, 2)
	a, b := before.Placements(), after.Placements()
	for i := range a {
		for ri := range a[i].Replicas {
			if was := a[i].Replicas[ri].Node; was != failover.NodeID(gone) {
				require.Equal(t, was, b[i].Replicas[ri].Node, "partition %d moved off live node %d", i+1, was)
			} else {
				require.NotEqual(t, was, b[i].Replicas[ri].Node)
			}
		}
	}
}

// TestHosted: a node hosts exactly the partitions that place a replica on
// it, in order; an unknown node none.
func TestHosted(t *testing.T) {
	s := gridSpec(300, 2, 3)
	all := s.Placements()
	total := 0
	for _, nd := range s.Nodes {
		var want []node.Placement
		for _, pl := range all {
			if slices.ContainsFunc(pl.Replicas, func(rn failover.RegionNode) bool { return rn.Node == failover.NodeID(nd.ID) }) {
				want = append(want, pl)
			}
		}
		got := s.Hosted(nd.ID)
		assert.Equal(t, want, got, "node %d", nd.ID)
		total += len(got)
	}
	assert.Equal(t, 300*len(s.Regions), total, "every replica on exactly one node")
	assert.Nil(t, s.Hosted(999))
}

// TestPlacementsShareArrays: equal replica lists share one array.
func TestPlacementsShareArrays(t *testing.T) {
	s := gridSpec(1000, 2, 2)
	all := s.Placements()
	distinct := map[*failover.RegionNode]bool{}
	for _, pl := range all {
		distinct[&pl.Replicas[0]] = true
	}
	assert.Len(t, distinct, 4, "2x2 nodes give 4 replica lists")
}

// BenchmarkHosted: what an agent computes at start (100k partitions, 3
// regions of 3 nodes).
func BenchmarkHosted(b *testing.B) {
	s := gridSpec(100000, 3, 3, 3)
	for b.Loop() {
		_ = s.Hosted(1)
	}
}

func BenchmarkPlacements(b *testing.B) {
	s := gridSpec(100000, 3, 3, 3)
	for b.Loop() {
		_ = s.Placements()
	}
}
