package quorum

import (
	"fmt"
	"slices"
)

// StepKind says whether a QuorumStep shrinks or grows the write quorum.
type StepKind int

// The zero StepKind is deliberately invalid so an unset step is caught.
const (
	StepShrink StepKind = iota + 1
	StepGrow
)

func (k StepKind) String() string {
	switch k {
	case StepShrink:
		return "shrink"
	case StepGrow:
		return "grow"
	default:
		return fmt.Sprintf("StepKind(%d)", int(k))
	}
}

// QuorumStep is one write-quorum change proposed by WriteQuorum.Steps.
type QuorumStep struct {
	Kind   StepKind
	Region Region
	Why    string
}

// Shrink removes a failed non-write region from Members. It is refused if r
// is not a member (ErrNotMember), if r is the write region (ErrWriteRegion:
// only a promotion can replace it), or if it would leave fewer than
// MinDurability members (*BelowMinDurabilityError).
func (w WriteQuorum) Shrink(r Region) (WriteQuorum, error) {
	if err := w.Validate(); err != nil {
		return WriteQuorum{}, err
	}
	if !w.IsMember(r) {
		return WriteQuorum{}, fmt.Errorf("quorum: cannot shrink %q out of %s: %w", r, formatRegions(w.Members), ErrNotMember)
	}
	if r == w.WriteRegion {
		return WriteQuorum{}, fmt.Errorf("quorum: cannot shrink %q out: %w", r, ErrWriteRegion)
	}
	if left := len(w.Members) - 1; left < w.MinDurability {
		return WriteQuorum{}, &BelowMinDurabilityError{Live: left, Min: w.MinDurability, Shrink: r}
	}
	out := w.clone()
	out.Members = slices.DeleteFunc(out.Members, func(m Region) bool { return m == r })
	return out, nil
}

// Grow adds a caught-up replica region back to Members. It is refused if r is
// not a replica (ErrNotReplica), already a member (ErrAlreadyMember), or not
// caught up (ErrNotCaughtUp): a member that lacks a committed write could be
// promoted and lose it. caughtUp must mean "holds every write committed so
// far and receives every new one synchronously from now on".
func (w WriteQuorum) Grow(r Region, caughtUp bool) (WriteQuorum, error) {
	if err := w.Validate(); err != nil {
		return WriteQuorum{}, err
	}
	if !w.IsReplica(r) {
		return WriteQuorum{}, fmt.Errorf("quorum: cannot grow %q into the write quorum: %w", r, ErrNotReplica)
	}
	if w.IsMember(r) {
		return WriteQuorum{}, fmt.Errorf("quorum: cannot grow %q into the write quorum: %w", r, ErrAlreadyMember)
	}
	if !caughtUp {
		return WriteQuorum{}, fmt.Errorf("quorum: cannot grow %q into the write quorum: %w", r, ErrNotCaughtUp)
	}
	out := w.clone()
	out.Members = append(out.Members, r)
	slices.Sort(out.Members)
	return out, nil
}

// Steps proposes the write-quorum changes allowed now, in the order they must
// be applied: first grows (live, caught-up replicas outside the quorum, in
// region order), then shrinks (down members other than the write region, in
// region order) while MinDurability allows. Growing first lets a returning
// region stand in for a failed one that could not otherwise be removed.
// Applying the steps one by one with Grow and Shrink succeeds. An invalid
// quorum yields no steps; Validate explains why.
func (w WriteQuorum) Steps(live func(Region) bool, caughtUp func(Region) bool) []QuorumStep {
	if w.Validate() != nil {
		return nil
	}
	var steps []QuorumStep
	cur := w
	for _, r := range w.Replicas {
		if cur.IsMember(r) || !live(r) || !caughtUp(r) {
			continue
		}
		next, err := cur.Grow(r, true)
		if err != nil {
			continue
		}
		cur = next
		steps = append(steps, QuorumStep{Kind: StepGrow, Region: r,
			Why: fmt.Sprintf("region %q is live and caught up; grow the write quorum to %d members to restore durability", r, len(cur.Members))})
	}
	for _, m := range w.Members {
		if m == cur.WriteRegion || live(m) {
			continue
		}
		next, err := cur.Shrink(m)
		if err != nil {
			continue
		}
		cur = next
		steps = append(steps, QuorumStep{Kind: StepShrink, Region: m,
			Why: fmt.Sprintf("region %q is down; shrink the write quorum to %d members (MinDurability %d) so writes can commit",
				m, len(cur.Members), cur.MinDurability)})
	}
	return steps
}
