package sim

// Links is the fault state of the network between nodes: which directed
// links are cut, how much slower each region is, and the per-message
// probabilities of loss, duplication and reordering. The nemesis writes
// it; every Network reads it when it sends and when it delivers.
//
// Cuts are counted, not flagged: overlapping partitions (a ring while a
// node is isolated) each add their cuts and each heal removes exactly its
// own, so healing one fault never heals another.
type Links struct {
	n           int
	cut         []uint16 // cut[from*n+to] > 0: messages from -> to are dropped
	regionSpike []float64
	// Loss, Duplicate and Reorder are per-message probabilities.
	Loss, Duplicate, Reorder float64
}

func newLinks(nodes, regions int) *Links {
	l := &Links{n: nodes, cut: make([]uint16, nodes*nodes), regionSpike: make([]float64, regions)}
	for i := range l.regionSpike {
		l.regionSpike[i] = 1
	}
	return l
}

// Cut reports whether messages from -> to are dropped now.
func (l *Links) Cut(from, to int32) bool { return l.cut[int(from)*l.n+int(to)] > 0 }

// CutSet is a set of directed links, as indices from*n+to.
type CutSet []int32

// Apply adds (delta=+1) or removes (delta=-1) every cut of s.
func (l *Links) Apply(s CutSet, delta int) {
	for _, i := range s {
		c := int(l.cut[i]) + delta
		if c < 0 {
			c = 0 // a heal without its fault: ignore rather than wrap
		}
		l.cut[i] = uint16(c)
	}
}

// HealAll removes every cut, spike and message fault.
func (l *Links) HealAll() {
	clear(l.cut)
	for i := range l.regionSpike {
		l.regionSpike[i] = 1
	}
	l.Loss, l.Duplicate, l.Reorder = 0, 0, 0
}

// AnyCut reports whether any link is cut.
func (l *Links) AnyCut() bool {
	for _, c := range l.cut {
		if c > 0 {
			return true
		}
	}
	return false
}

// SetSpike sets region r's latency multiplier (1 = normal).
func (l *Links) SetSpike(r int, factor float64) {
	if factor < 1 {
		factor = 1
	}
	l.regionSpike[r] = factor
}

// spike returns the latency multiplier of a link between regions a and b.
func (l *Links) spike(a, b int) float64 {
	return max(l.regionSpike[a], l.regionSpike[b])
}
