package quorum

import "fmt"

// SafeTransition reports whether proposers may run `from` and `to`
// concurrently, and whether a rescan (an identity change of every key, run
// under `from` once every proposer uses `from`) is needed before `to`'s
// prepare quorums may be used.
//
// concurrentOK: both configs are valid and mixed proposers are safe together:
// a value a `from` proposer commits is seen by every `to` prepare quorum and
// vice versa (Intersects(to.Prepare, from.Accept) and
// Intersects(from.Prepare, to.Accept)).
//
// needsRescan: `to`'s prepare quorums do not Cover `from`'s. A transition only
// knows that `from` is safe, i.e. that the latest value of every key was
// accepted by some quorum that every `from` prepare quorum meets; it may have
// been committed by an older configuration whose accept quorum is weaker than
// from.Accept (a change that needed no rescan leaves such values behind). The
// weakest such quorum is (|P|-tp+1)-of-P for P = from.Prepare, and `to` sees
// it only if every `to` prepare quorum contains a `from` prepare quorum. After
// a rescan under `from` every latest value sits in a from.Accept quorum, which
// concurrentOK already checks. needsRescan is meaningful only when
// concurrentOK is true: an unsafe pair stays unsafe after any rescan.
func SafeTransition(from, to Config) (concurrentOK bool, needsRescan bool) {
	concurrentOK = Intersects(from.Prepare, from.Accept) &&
		Intersects(to.Prepare, to.Accept) &&
		Intersects(from.Prepare, to.Accept) &&
		Intersects(to.Prepare, from.Accept)
	return concurrentOK, !Covers(to.Prepare, from.Prepare)
}

// history is what a planner knows about where the latest accepted value of a
// key may live while it walks a sequence of configurations.
//
// At the start of a plan nothing is known except that the current config is
// safe, so any accept set whose quorums meet every current prepare quorum may
// hold a latest value (base). Each step adds its accept set (proposers on it
// commit values there). A rescan under a config rewrites every key through
// that config's accept quorums, which carry a higher ballot than anything
// older, so everything before it is forgotten.
type history struct {
	base    Set   // valid while hasBase: the prepare set of the plan's start
	hasBase bool  // false after the first rescan
	accepts []Set // accept sets used since the plan start or the last rescan
}

func newHistory(cur Config) history {
	return history{base: cur.Prepare, hasBase: true, accepts: []Set{cur.Accept}}
}

// advance checks the move from `from` (every proposer is on it) to `to`, with
// proposers on both during the move, and records it. It returns whether a
// rescan under `from` must complete first, and why.
func (h *history) advance(from, to Config) (rescan bool, why string, err error) {
	if err := to.Validate(); err != nil {
		return false, "", fmt.Errorf("quorum: moving from %v to %v: %w: %w", from, to, ErrUnsafeTransition, err)
	}
	if err := disjointError("old Prepare", from.Prepare, "new Accept", to.Accept); err != nil {
		return false, "", fmt.Errorf("quorum: moving from %v to %v: %w: %w", from, to, ErrUnsafeTransition, err)
	}
	if err := disjointError("new Prepare", to.Prepare, "old Accept", from.Accept); err != nil {
		return false, "", fmt.Errorf("quorum: moving from %v to %v: %w: %w", from, to, ErrUnsafeTransition, err)
	}
	why = h.missed(to.Prepare)
	if why != "" {
		// Rescan under `from`: afterwards only from.Accept (and whatever the
		// new config commits) can hold a latest value, and
		// Intersects(to.Prepare, from.Accept) was checked above.
		rescan = true
		h.hasBase = false
		h.accepts = append(h.accepts[:0], from.Accept)
	}
	if !containsSet(h.accepts, to.Accept) {
		h.accepts = append(h.accepts, to.Accept)
	}
	return rescan, why, nil
}

// missed explains how a prepare quorum of p could miss a latest value under
// the current history, or returns "" if it cannot.
func (h *history) missed(p Set) string {
	if h.hasBase && !Covers(p, h.base) {
		weakest := Set{Members: h.base.Members, Threshold: len(h.base.Members) - h.base.Threshold + 1}
		return fmt.Sprintf("prepare %v may miss a value accepted by only %v, which earlier prepare %v was guaranteed to see",
			p, weakest, h.base)
	}
	for _, a := range h.accepts {
		if !Intersects(p, a) {
			return fmt.Sprintf("prepare %v may miss a value accepted by %v", p, a)
		}
	}
	return ""
}

func containsSet(sets []Set, s Set) bool {
	for _, x := range sets {
		if x.Equal(s) {
			return true
		}
	}
	return false
}
