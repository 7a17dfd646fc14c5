package quorum

// Closed forms over threshold sets. Each answers a question of the form "is
// there a quorum of a and a quorum of b such that ..." without enumerating
// quorums: the adversary's best move is always to spend members the other set
// does not have first, and only then the shared ones. The tests check every
// formula here against brute-force enumeration of all quorums over up to
// seven acceptors.

// Intersects reports whether every quorum of a intersects every quorum of b.
//
// Disjoint quorums exist iff max(0, ta-|A\B|) + max(0, tb-|B\A|) <= |A∩B|:
// each side fills its quorum from its private members first and needs the
// rest from the shared members, which cannot serve both sides. Invalid sets
// never intersect, so a malformed configuration is never judged safe.
func Intersects(a, b Set) bool {
	if !a.valid() || !b.valid() {
		return false
	}
	onlyA, onlyB, both := overlap(a.Members, b.Members)
	return max(0, a.Threshold-onlyA)+max(0, b.Threshold-onlyB) > both
}

// Covers reports whether every quorum of strong contains a quorum of weak.
//
// This is the condition under which strong may replace weak as the prepare
// set without a rescan: a value is safe under weak's prepare quorums exactly
// when its accept quorums meet every weak quorum, and a strong quorum that
// contains a weak quorum inherits that. Conversely, if some strong quorum Q
// holds fewer than weak.Threshold members of weak, the accept set
// "(|W|-tw+1)-of-W" (W = weak.Members) meets every weak quorum yet has a
// quorum inside W\Q, so a value committed there would be missed. Closed form:
// the smallest strong quorum uses all |S\W| outsiders first, so
// ts - |S\W| >= tw. Invalid sets never cover.
func Covers(strong, weak Set) bool {
	if !strong.valid() || !weak.valid() {
		return false
	}
	onlyStrong, _, _ := overlap(strong.Members, weak.Members)
	return strong.Threshold-onlyStrong >= weak.Threshold
}

// DisjointQuorums returns a quorum of a and a quorum of b that share no
// member, each of exactly threshold size, or ok=false if every pair
// intersects (or a set is invalid). It is the witness behind Intersects,
// used to explain refusals.
func DisjointQuorums(a, b Set) (qa, qb []ID, ok bool) {
	if !a.valid() || !b.valid() || Intersects(a, b) {
		return nil, nil, false
	}
	var privA, privB, shared []ID
	i, j := 0, 0
	for i < len(a.Members) || j < len(b.Members) {
		switch {
		case j == len(b.Members) || (i < len(a.Members) && a.Members[i] < b.Members[j]):
			privA = append(privA, a.Members[i])
			i++
		case i == len(a.Members) || b.Members[j] < a.Members[i]:
			privB = append(privB, b.Members[j])
			j++
		default:
			shared = append(shared, a.Members[i])
			i++
			j++
		}
	}
	qa = take(privA, shared, a.Threshold)
	used := max(0, a.Threshold-len(privA))
	qb = take(privB, shared[used:], b.Threshold)
	return sortedUnique(qa), sortedUnique(qb), true
}

// take returns n members, private ones first.
func take(private, shared []ID, n int) []ID {
	out := make([]ID, 0, n)
	for _, id := range private {
		if len(out) == n {
			return out
		}
		out = append(out, id)
	}
	for _, id := range shared {
		if len(out) == n {
			return out
		}
		out = append(out, id)
	}
	return out
}

// overlap counts |A\B|, |B\A| and |A∩B| for sorted, duplicate-free lists by a
// merge walk: no allocation, linear time.
func overlap(a, b []ID) (onlyA, onlyB, both int) {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			onlyA++
			i++
		case b[j] < a[i]:
			onlyB++
			j++
		default:
			both++
			i++
			j++
		}
	}
	return onlyA + len(a) - i, onlyB + len(b) - j, both
}

// valid is Validate without building an error, for hot paths and predicates.
func (s Set) valid() bool {
	if len(s.Members) == 0 || s.Threshold < 1 || s.Threshold > len(s.Members) {
		return false
	}
	for i := 1; i < len(s.Members); i++ {
		if s.Members[i-1] >= s.Members[i] {
			return false
		}
	}
	return true
}
