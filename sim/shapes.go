package sim

import "math/rand/v2"

// Partition shapes, after Jepsen's nemeses. Each returns the directed links
// to cut among nodes (indices into the world); a shape needs at least two
// nodes, and the ones built on majorities at least three.

func cutBetween(n int, a, b []int32, both bool) CutSet {
	s := make(CutSet, 0, len(a)*len(b)*2)
	for _, x := range a {
		for _, y := range b {
			s = append(s, x*int32(n)+y)
			if both {
				s = append(s, y*int32(n)+x)
			}
		}
	}
	return s
}

func without(nodes []int32, drop func(int32) bool) []int32 {
	out := make([]int32, 0, len(nodes))
	for _, x := range nodes {
		if !drop(x) {
			out = append(out, x)
		}
	}
	return out
}

func shuffled(r *rand.Rand, nodes []int32) []int32 {
	out := append([]int32(nil), nodes...)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// isolateNode cuts one node off from every other, both ways.
func isolateNode(n int, nodes []int32, x int32) CutSet {
	return cutBetween(n, []int32{x}, without(nodes, func(y int32) bool { return y == x }), true)
}

// isolateRegion cuts the nodes of one region off from the rest.
func isolateRegion(n int, nodes []int32, inRegion func(int32) bool) CutSet {
	return cutBetween(n, without(nodes, func(y int32) bool { return !inRegion(y) }), without(nodes, inRegion), true)
}

// majorityMinority splits nodes at random into a majority and a minority.
func majorityMinority(r *rand.Rand, n int, nodes []int32) CutSet {
	s := shuffled(r, nodes)
	k := len(s)/2 + 1
	return cutBetween(n, s[:k], s[k:], true)
}

// ring arranges nodes on a random ring where each sees only the nodes
// within distance d, with 2d+1 the smallest majority: every node sees a
// majority, and no two see the same one. Overlapping majorities are the
// classic trap for protocols that assume one majority side.
func ring(r *rand.Rand, n int, nodes []int32) CutSet {
	s := shuffled(r, nodes)
	m := len(s)
	d := (m/2 + 1) / 2 // sees 2d+1 >= m/2+1 nodes including itself
	if 2*d+1 < m/2+1 {
		d++
	}
	var cs CutSet
	for i := 0; i < m; i++ {
		for j := 0; j < m; j++ {
			dist := i - j
			if dist < 0 {
				dist = -dist
			}
			if m-dist < dist {
				dist = m - dist
			}
			if dist > d {
				cs = append(cs, s[i]*int32(n)+s[j])
			}
		}
	}
	return cs
}

// bridge splits nodes into two halves that cannot talk, except through one
// bridge node that sees both: two overlapping majorities sharing one node.
func bridge(r *rand.Rand, n int, nodes []int32) CutSet {
	s := shuffled(r, nodes)
	b := s[0]
	rest := s[1:]
	h := len(rest) / 2
	_ = b
	return cutBetween(n, rest[:h], rest[h:], true)
}

// oneWay cuts a random group (one node or one region) in one direction
// only: its messages out are lost while messages in still arrive (or the
// reverse). Asymmetric failures fool failure detectors that assume a
// silent peer cannot hear them.
func oneWay(r *rand.Rand, n int, nodes []int32, group []int32) CutSet {
	in := make(map[int32]bool, len(group))
	for _, x := range group {
		in[x] = true
	}
	rest := without(nodes, func(y int32) bool { return in[y] })
	if r.IntN(2) == 0 {
		return cutBetween(n, group, rest, false)
	}
	return cutBetween(n, rest, group, false)
}
