package quorum

import (
	"fmt"
	"math/bits"
)

// This file is the reference the package is tested against: quorums are
// enumerated explicitly as bitmasks (bit i-1 stands for ID i) and every
// question is answered by looking at all of them. It is slow and obviously
// correct; the package's closed forms must agree with it.

// bfSet is a threshold set over IDs 1..8.
type bfSet struct {
	mask uint8 // members
	t    int   // threshold
}

func (b bfSet) size() int { return bits.OnesCount8(b.mask) }

func (b bfSet) valid() bool { return b.mask != 0 && b.t >= 1 && b.t <= b.size() }

// toSet converts to the package type (members ascending).
func (b bfSet) toSet() Set {
	var ids []ID
	for i := range 8 {
		if b.mask&(1<<i) != 0 {
			ids = append(ids, ID(i+1))
		}
	}
	return Set{Members: ids, Threshold: b.t}
}

func fromSet(s Set) bfSet {
	var m uint8
	for _, id := range s.Members {
		m |= 1 << (id - 1)
	}
	return bfSet{mask: m, t: s.Threshold}
}

func maskOf(ids ...ID) uint8 {
	var m uint8
	for _, id := range ids {
		m |= 1 << (id - 1)
	}
	return m
}

func (b bfSet) String() string { return b.toSet().String() }

// bfConfig is a Config in bitmask form.
type bfConfig struct{ p, a bfSet }

func fromConfig(c Config) bfConfig { return bfConfig{p: fromSet(c.Prepare), a: fromSet(c.Accept)} }

// bruteForce holds the quorum lists of every set over a small universe and
// memoises the expensive "unknown history" question.
type bruteForce struct {
	universe int
	quorums  map[bfSet][]uint8
	sets     []bfSet // every valid set over the universe
	seesAll  map[[2]bfSet]bool
}

func newBruteForce(universe int) *bruteForce {
	bf := &bruteForce{universe: universe, quorums: map[bfSet][]uint8{}, seesAll: map[[2]bfSet]bool{}}
	for mask := 1; mask < 1<<universe; mask++ {
		for t := 1; t <= bits.OnesCount8(uint8(mask)); t++ {
			bf.sets = append(bf.sets, bfSet{mask: uint8(mask), t: t})
		}
	}
	return bf
}

// quorumsOf lists every subset of s.mask with at least s.t members. A
// threshold below 1 makes the empty set a quorum; above the size, none exist.
func (bf *bruteForce) quorumsOf(s bfSet) []uint8 {
	if q, ok := bf.quorums[s]; ok {
		return q
	}
	var out []uint8
	for sub := 0; sub < 256; sub++ {
		q := uint8(sub)
		if q&^s.mask == 0 && bits.OnesCount8(q) >= s.t {
			out = append(out, q)
		}
	}
	bf.quorums[s] = out
	return out
}

// intersects: every quorum of a meets every quorum of b (vacuously true when
// a side has no quorum).
func (bf *bruteForce) intersects(a, b bfSet) bool {
	qb := bf.quorumsOf(b)
	for _, x := range bf.quorumsOf(a) {
		for _, y := range qb {
			if x&y == 0 {
				return false
			}
		}
	}
	return true
}

// covers: every quorum of strong contains some quorum of weak.
func (bf *bruteForce) covers(strong, weak bfSet) bool {
	qw := bf.quorumsOf(weak)
	for _, s := range bf.quorumsOf(strong) {
		found := false
		for _, w := range qw {
			if w&^s == 0 {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// seesAllSeenBy: every accept set over the universe whose quorums all meet
// every quorum of old also has all its quorums met by every quorum of new.
// This is the definition of "no rescan needed" when nothing is known about
// the past except that old was a safe prepare set.
func (bf *bruteForce) seesAllSeenBy(old, new bfSet) bool {
	key := [2]bfSet{old, new}
	if v, ok := bf.seesAll[key]; ok {
		return v
	}
	v := true
	for _, w := range bf.sets {
		if bf.intersects(old, w) && !bf.intersects(new, w) {
			v = false
			break
		}
	}
	bf.seesAll[key] = v
	return v
}

// bfStep is a plan step in bitmask form.
type bfStep struct {
	cfg    bfConfig
	rescan bool
}

func fromSteps(steps []Step) []bfStep {
	out := make([]bfStep, len(steps))
	for i, s := range steps {
		out[i] = bfStep{cfg: fromConfig(s.Config), rescan: s.RescanBefore}
	}
	return out
}

// checkPlan is the reference safety checker for a membership change plan.
// Proposers move one step at a time; during a move they run the previous and
// the next config side by side. A value may be the latest value of a key if
// it was committed by an accept quorum of any config used since the last
// rescan or, before any rescan, by any accept set whose quorums meet every
// prepare quorum of the starting config (all that is known about the past).
// A rescan runs under the previous config, after all proposers use it.
func (bf *bruteForce) checkPlan(cur bfConfig, steps []bfStep) error {
	if !cur.p.valid() || !cur.a.valid() || !bf.intersects(cur.p, cur.a) {
		return fmt.Errorf("start %v/%v is not safe", cur.p, cur.a)
	}
	base, baseLive := cur.p, true
	hist := []bfSet{cur.a}
	prev := cur
	for i, st := range steps {
		c := st.cfg
		switch {
		case !c.p.valid() || !c.a.valid():
			return fmt.Errorf("step %d: invalid set", i)
		case !bf.intersects(c.p, c.a):
			return fmt.Errorf("step %d: prepare %v misses accept %v", i, c.p, c.a)
		case !bf.intersects(prev.p, c.a):
			return fmt.Errorf("step %d: old prepare %v misses new accept %v (mixed proposers)", i, prev.p, c.a)
		case !bf.intersects(c.p, prev.a):
			return fmt.Errorf("step %d: new prepare %v misses old accept %v (mixed proposers)", i, c.p, prev.a)
		}
		if st.rescan {
			baseLive = false
			hist = []bfSet{prev.a}
		}
		for _, w := range hist {
			if !bf.intersects(c.p, w) {
				return fmt.Errorf("step %d: prepare %v misses a value accepted by %v", i, c.p, w)
			}
		}
		if baseLive && !bf.seesAllSeenBy(base, c.p) {
			return fmt.Errorf("step %d: prepare %v may miss a value committed before the plan (start prepare %v)", i, c.p, base)
		}
		hist = append(hist, c.a)
		prev = c
	}
	return nil
}
