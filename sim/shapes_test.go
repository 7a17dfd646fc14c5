package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

// reach returns, per node, the set of nodes it can send to under cuts.
func reach(n int, cs CutSet) [][]bool {
	l := newLinks(n, 1)
	l.Apply(cs, +1)
	out := make([][]bool, n)
	for i := range out {
		out[i] = make([]bool, n)
		for j := range out[i] {
			out[i][j] = !l.Cut(int32(i), int32(j))
		}
	}
	return out
}

func count(row []bool) int {
	c := 0
	for _, b := range row {
		if b {
			c++
		}
	}
	return c
}

func TestPartitionShapes(t *testing.T) {
	nodes := []int32{0, 1, 2, 3, 4}
	n := len(nodes)
	r := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name  string
		cuts  CutSet
		check func(t *testing.T, m [][]bool)
	}{
		{"one node", isolateNode(n, nodes, 2), func(t *testing.T, m [][]bool) {
			assert.Equal(t, 1, count(m[2]), "the node reaches only itself")
			for i := range m {
				assert.Equal(t, i == 2, m[i][2], "node %d to the isolated node", i)
			}
			assert.Equal(t, 4, count(m[0]), "the others still see each other")
		}},
		{"majority/minority", majorityMinority(r, n, nodes), func(t *testing.T, m [][]bool) {
			sizes := map[int]int{}
			for i := range m {
				sizes[count(m[i])]++
			}
			assert.Equal(t, map[int]int{3: 3, 2: 2}, sizes)
		}},
		{"ring of majorities", ring(r, n, nodes), func(t *testing.T, m [][]bool) {
			seen := map[[5]bool]bool{}
			for i := range m {
				assert.Equal(t, 3, count(m[i]), "every node sees a majority")
				var k [5]bool
				copy(k[:], m[i])
				seen[k] = true
			}
			assert.Len(t, seen, 5, "no two nodes see the same majority")
		}},
		{"bridge", bridge(r, n, nodes), func(t *testing.T, m [][]bool) {
			full := 0
			for i := range m {
				if count(m[i]) == n {
					full++
				}
			}
			assert.Equal(t, 1, full, "only the bridge sees everyone")
		}},
		{"one way", oneWay(r, n, nodes, []int32{1}), func(t *testing.T, m [][]bool) {
			out, in := count(m[1]), 0
			for i := range m {
				if m[i][1] {
					in++
				}
			}
			assert.NotEqual(t, out, in, "asymmetric")
			assert.True(t, out == 1 || in == 1)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, reach(n, tt.cuts)) })
	}
}

func TestLinksCountedCuts(t *testing.T) {
	l := newLinks(3, 1)
	a := isolateNode(3, []int32{0, 1, 2}, 0)
	b := cutBetween(3, []int32{0}, []int32{1}, true)
	l.Apply(a, +1)
	l.Apply(b, +1)
	l.Apply(a, -1)
	assert.True(t, l.Cut(0, 1), "healing one fault keeps the other")
	assert.False(t, l.Cut(0, 2))
	l.Apply(b, -1)
	assert.False(t, l.AnyCut())
	l.Apply(b, -1) // a heal without its fault is ignored
	assert.False(t, l.Cut(0, 1))
}
