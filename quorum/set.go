package quorum

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ID identifies an acceptor/node. caspaxos declares `type NodeID = quorum.ID`.
type ID uint64

// Set is a group of members and the number of votes from Members that form a
// quorum: every subset of Members with at least Threshold elements is a
// quorum. A threshold family is all CASPaxos needs (majorities and the
// flexible-quorum splits of FPaxos are both threshold families), and it keeps
// every question about quorums answerable in closed form without allocation.
//
// A valid Set has distinct Members in ascending order and
// 1 <= Threshold <= len(Members). Majority and NewSet build valid sets;
// Validate checks sets that arrive from elsewhere (config files, the wire).
type Set struct {
	Members   []ID // distinct, sorted ascending after Normalize/constructors
	Threshold int  // votes needed (1..len(Members))
}

// Majority returns the simple-majority set over ids: threshold len/2+1,
// members sorted and deduplicated. With no ids the result is invalid (empty)
// and Validate reports it.
func Majority(ids ...ID) Set {
	members := sortedUnique(ids)
	return Set{Members: members, Threshold: len(members)/2 + 1}
}

// NewSet returns the set of ids (sorted, duplicates dropped) with the given
// threshold, or an error if the result is not valid.
func NewSet(threshold int, ids ...ID) (Set, error) {
	s := Set{Members: sortedUnique(ids), Threshold: threshold}
	if err := s.Validate(); err != nil {
		return Set{}, err
	}
	return s, nil
}

// Normalize returns a copy with Members sorted and deduplicated; Threshold is
// unchanged (so the copy may still be invalid).
func (s Set) Normalize() Set {
	return Set{Members: sortedUnique(s.Members), Threshold: s.Threshold}
}

// Validate reports the first problem that makes s unusable, naming the field.
func (s Set) Validate() error { return s.validate("Set") }

func (s Set) validate(name string) error {
	if len(s.Members) == 0 {
		return fmt.Errorf("quorum: %s.Members is empty: %w", name, ErrEmptySet)
	}
	for i := 1; i < len(s.Members); i++ {
		prev, cur := s.Members[i-1], s.Members[i]
		if prev == cur {
			return fmt.Errorf("quorum: %s.Members has %d twice: %w", name, cur, ErrDuplicateMember)
		}
		if prev > cur {
			return fmt.Errorf("quorum: %s.Members not ascending: %d before %d: %w", name, prev, cur, ErrUnsortedMembers)
		}
	}
	if s.Threshold < 1 {
		return fmt.Errorf("quorum: %s.Threshold %d is below 1: %w", name, s.Threshold, ErrThresholdRange)
	}
	if s.Threshold > len(s.Members) {
		return fmt.Errorf("quorum: %s.Threshold %d exceeds %d members: %w", name, s.Threshold, len(s.Members), ErrThresholdRange)
	}
	return nil
}

// Contains reports whether id is a member. Sets are small (a handful of
// acceptors), so a linear scan beats a binary search and tolerates unsorted
// input.
func (s Set) Contains(id ID) bool {
	return slices.Contains(s.Members, id)
}

// IsQuorum reports whether at least Threshold members vote. vote is called at
// most once per member, in member order, and not at all once the answer is
// known. A Threshold below 1 never forms a quorum: an invalid set must not
// turn "no votes" into a commit. Hot path: no allocation.
func (s Set) IsQuorum(vote func(ID) bool) bool {
	if s.Threshold < 1 {
		return false
	}
	votes, left := 0, len(s.Members)
	for _, id := range s.Members {
		if votes+left < s.Threshold {
			return false
		}
		left--
		if vote(id) {
			votes++
			if votes >= s.Threshold {
				return true
			}
		}
	}
	return false
}

// CanReach reports whether a quorum is still possible when the members for
// which rejected is true are excluded (they refused or are known down), so a
// proposer can give up early instead of waiting for a timeout. Like IsQuorum
// it stops calling rejected once the answer is known and never allocates.
func (s Set) CanReach(rejected func(ID) bool) bool {
	if s.Threshold < 1 {
		return false
	}
	possible, left := 0, len(s.Members)
	for _, id := range s.Members {
		if possible+left < s.Threshold {
			return false
		}
		left--
		if !rejected(id) {
			possible++
			if possible >= s.Threshold {
				return true
			}
		}
	}
	return false
}

// String renders s as "2-of-{1,2,3}".
func (s Set) String() string {
	return strconv.Itoa(s.Threshold) + "-of-" + formatIDs(s.Members)
}

// Equal reports whether s and o have the same threshold and the same member
// list (element by element; valid sets are canonical, so this is set equality).
func (s Set) Equal(o Set) bool {
	return s.Threshold == o.Threshold && slices.Equal(s.Members, o.Members)
}

func formatIDs(ids []ID) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(uint64(id), 10))
	}
	b.WriteByte('}')
	return b.String()
}

// sortedUnique returns a fresh, sorted, duplicate-free copy of ids (never
// aliasing the caller's slice, so later edits by the caller cannot change a
// Set).
func sortedUnique(ids []ID) []ID {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

// without returns a fresh copy of sorted ids with id removed.
func without(ids []ID, id ID) []ID {
	out := make([]ID, 0, len(ids))
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}

// with returns a fresh sorted copy of sorted ids with id added.
func with(ids []ID, id ID) []ID {
	out := make([]ID, 0, len(ids)+1)
	out = append(out, ids...)
	out = append(out, id)
	slices.Sort(out)
	return slices.Compact(out)
}
