package quorum

import (
	"fmt"
	"slices"
)

// Step is one configuration in a membership change plan. A plan is executed
// in order: every proposer is moved to Steps[i].Config (while they move,
// proposers run Steps[i-1] and Steps[i] side by side, which the planner has
// checked is safe), and only when all of them run it does Steps[i+1] begin.
// The configuration before Steps[0] is the plan's starting config.
type Step struct {
	Config Config
	// RescanBefore: an identity pass over every key must complete under the
	// previous step's config before any proposer moves to this Config. The
	// pass may start only once every proposer runs the previous config: a
	// lagging proposer on an even older config could otherwise commit a
	// value the pass has already moved past.
	RescanBefore bool
	Why          string // human-readable reason for this step
}

// move is a planned configuration before its rescan flag is derived.
type move struct {
	cfg Config
	why string
}

// PlanGrow plans adding acceptor `add` to the settled config cur (prepare and
// accept sets with the same members) in the paper's order: (1) add it to the
// accept set, so it receives every new value while prepare quorums are those
// that already see everything; (2) add it to the prepare set. Rescans are
// derived by quorum intersection, not by parity. The plan ends in
// MajorityConfig of the grown membership; a non-majority cur is first moved to
// the majority thresholds of its members.
func PlanGrow(cur Config, add ID) ([]Step, error) {
	if err := checkSettled(cur); err != nil {
		return nil, err
	}
	if cur.Prepare.Contains(add) {
		return nil, fmt.Errorf("quorum: PlanGrow: acceptor %d in %v: %w", add, cur, ErrAlreadyMember)
	}
	moves := normalizeMoves(cur)
	moves = append(moves, growMoves(cur.Prepare.Members, add)...)
	return derive(cur, moves)
}

// PlanShrink plans removing acceptor `remove` from the settled config cur, the
// grow order reversed: (1) remove it from the prepare set while it still
// takes part in accepts, (2) remove it from the accept set. The plan ends in
// MajorityConfig of the remaining members.
func PlanShrink(cur Config, remove ID) ([]Step, error) {
	if err := checkSettled(cur); err != nil {
		return nil, err
	}
	if !cur.Prepare.Contains(remove) {
		return nil, fmt.Errorf("quorum: PlanShrink: acceptor %d in %v: %w", remove, cur, ErrNotMember)
	}
	if len(cur.Prepare.Members) == 1 {
		return nil, fmt.Errorf("quorum: PlanShrink: acceptor %d in %v: %w", remove, cur, ErrLastMember)
	}
	moves := normalizeMoves(cur)
	moves = append(moves, shrinkMoves(cur.Prepare.Members, remove)...)
	return derive(cur, moves)
}

// PlanChange plans a sequence of single-acceptor grows and shrinks from the
// settled config cur to MajorityConfig(target...). Additions and removals
// alternate (add the lowest new ID, remove the lowest old ID, ...), so a
// replacement never drops below the current size and never grows by more
// than one. The rescan flags are derived over the whole sequence. An empty
// plan means cur already is the target.
func PlanChange(cur Config, target []ID) ([]Step, error) {
	if err := checkSettled(cur); err != nil {
		return nil, err
	}
	want := sortedUnique(target)
	if len(want) == 0 {
		return nil, fmt.Errorf("quorum: PlanChange: target: %w", ErrEmptySet)
	}
	have := cur.Prepare.Members
	var adds, removes []ID
	for _, id := range want {
		if !slices.Contains(have, id) {
			adds = append(adds, id)
		}
	}
	for _, id := range have {
		if !slices.Contains(want, id) {
			removes = append(removes, id)
		}
	}
	moves := normalizeMoves(cur)
	members := have
	for i := range max(len(adds), len(removes)) {
		if i < len(adds) {
			moves = append(moves, growMoves(members, adds[i])...)
			members = with(members, adds[i])
		}
		if i < len(removes) {
			moves = append(moves, shrinkMoves(members, removes[i])...)
			members = without(members, removes[i])
		}
	}
	return derive(cur, moves)
}

// checkSettled requires a valid config whose two sets have the same members:
// plans start between membership changes, never in the middle of one.
func checkSettled(cur Config) error {
	if err := cur.Validate(); err != nil {
		return err
	}
	if !slices.Equal(cur.Prepare.Members, cur.Accept.Members) {
		return fmt.Errorf("quorum: %v: %w", cur, ErrMembersDiffer)
	}
	return nil
}

// normalizeMoves moves a settled config with any valid thresholds (tp, ta) to
// the majority m of its members, raising before lowering so every
// intermediate config is valid: raising a threshold only shrinks the set of
// quorums, so it keeps every intersection; lowering one is safe once the
// other side is at least a majority.
func normalizeMoves(cur Config) []move {
	members := cur.Prepare.Members
	m := len(members)/2 + 1
	tp, ta := cur.Prepare.Threshold, cur.Accept.Threshold
	cfg := func(p, a int) Config {
		return Config{
			Prepare: Set{Members: slices.Clone(members), Threshold: p},
			Accept:  Set{Members: slices.Clone(members), Threshold: a},
		}
	}
	var out []move
	// A valid config cannot have both thresholds below the majority
	// (tp+ta > n), so at most one raise is needed.
	switch {
	case tp < m:
		out = append(out, move{cfg(m, ta), fmt.Sprintf("raise the prepare threshold from %d to the majority %d", tp, m)})
		tp = m
	case ta < m:
		out = append(out, move{cfg(tp, m), fmt.Sprintf("raise the accept threshold from %d to the majority %d", ta, m)})
		ta = m
	}
	if tp != m || ta != m {
		out = append(out, move{cfg(m, m), fmt.Sprintf("lower the thresholds from prepare %d, accept %d to the majority %d", tp, ta, m)})
	}
	return out
}

// growMoves adds `add` to the majority config of members: accept set first,
// then prepare set.
func growMoves(members []ID, add ID) []move {
	grown := with(members, add)
	mid := Config{Prepare: Majority(members...), Accept: Majority(grown...)}
	final := MajorityConfig(grown...)
	return []move{
		{mid, fmt.Sprintf("add acceptor %d to the accept set (%v); prepare quorums are unchanged, so they still see every value while %d starts receiving writes",
			add, mid.Accept, add)},
		{final, fmt.Sprintf("add acceptor %d to the prepare set (%v)", add, final.Prepare)},
	}
}

// shrinkMoves removes `remove` from the majority config of members: prepare
// set first, then accept set.
func shrinkMoves(members []ID, remove ID) []move {
	shrunk := without(members, remove)
	mid := Config{Prepare: Majority(shrunk...), Accept: Majority(members...)}
	final := MajorityConfig(shrunk...)
	return []move{
		{mid, fmt.Sprintf("remove acceptor %d from the prepare set (%v); it still takes accepts, so proposers on the previous config stay safe",
			remove, mid.Prepare)},
		{final, fmt.Sprintf("remove acceptor %d from the accept set (%v); it may be turned off once every proposer runs this config",
			remove, final.Accept)},
	}
}

// derive walks the moves from cur, checks every transition and sets
// RescanBefore exactly where the history check fails.
func derive(cur Config, moves []move) ([]Step, error) {
	h := newHistory(cur)
	prev := cur
	steps := make([]Step, 0, len(moves))
	for _, mv := range moves {
		rescan, why, err := h.advance(prev, mv.cfg)
		if err != nil {
			return nil, err
		}
		st := Step{Config: mv.cfg, RescanBefore: rescan, Why: mv.why}
		if rescan {
			st.Why += "; rescan under the previous config first: " + why
		}
		steps = append(steps, st)
		prev = mv.cfg
	}
	if len(steps) == 0 {
		return nil, nil
	}
	return steps, nil
}
