package quorum

import (
	"errors"
	"math/bits"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMajority(t *testing.T) {
	tests := []struct {
		name string
		ids  []ID
		want Set
	}{
		{"one", []ID{7}, Set{Members: []ID{7}, Threshold: 1}},
		{"two", []ID{2, 1}, Set{Members: []ID{1, 2}, Threshold: 2}},
		{"three unsorted", []ID{3, 1, 2}, Set{Members: []ID{1, 2, 3}, Threshold: 2}},
		{"four", []ID{1, 2, 3, 4}, Set{Members: []ID{1, 2, 3, 4}, Threshold: 3}},
		{"duplicates dropped before counting", []ID{5, 5, 1, 1, 3}, Set{Members: []ID{1, 3, 5}, Threshold: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Majority(tt.ids...)
			assert.Equal(t, tt.want, got)
			assert.NoError(t, got.Validate())
		})
	}
	t.Run("empty is invalid", func(t *testing.T) {
		assert.ErrorIs(t, Majority().Validate(), ErrEmptySet)
	})
	t.Run("does not alias the caller", func(t *testing.T) {
		ids := []ID{1, 2, 3}
		s := Majority(ids...)
		ids[0] = 99
		assert.Equal(t, []ID{1, 2, 3}, s.Members)
	})
}

func TestNewSet(t *testing.T) {
	tests := []struct {
		name      string
		threshold int
		ids       []ID
		want      Set
		wantErr   error
	}{
		{"ok", 2, []ID{3, 1, 2}, Set{Members: []ID{1, 2, 3}, Threshold: 2}, nil},
		{"dedup", 1, []ID{4, 4}, Set{Members: []ID{4}, Threshold: 1}, nil},
		{"all", 3, []ID{1, 2, 3}, Set{Members: []ID{1, 2, 3}, Threshold: 3}, nil},
		{"empty", 1, nil, Set{}, ErrEmptySet},
		{"zero threshold", 0, []ID{1}, Set{}, ErrThresholdRange},
		{"threshold above size after dedup", 2, []ID{1, 1}, Set{}, ErrThresholdRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewSet(tt.threshold, tt.ids...)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestSetValidate(t *testing.T) {
	tests := []struct {
		name    string
		set     Set
		wantErr error
		wantMsg string
	}{
		{"valid", Set{Members: []ID{1, 2, 3}, Threshold: 2}, nil, ""},
		{"empty", Set{Threshold: 1}, ErrEmptySet, "quorum: Set.Members is empty"},
		{"duplicate", Set{Members: []ID{1, 2, 2}, Threshold: 2}, ErrDuplicateMember, "quorum: Set.Members has 2 twice"},
		{"unsorted", Set{Members: []ID{3, 1}, Threshold: 1}, ErrUnsortedMembers, "quorum: Set.Members not ascending: 3 before 1"},
		{"threshold zero", Set{Members: []ID{1}, Threshold: 0}, ErrThresholdRange, "quorum: Set.Threshold 0 is below 1"},
		{"threshold negative", Set{Members: []ID{1}, Threshold: -1}, ErrThresholdRange, "quorum: Set.Threshold -1 is below 1"},
		{"threshold too big", Set{Members: []ID{1, 2, 3}, Threshold: 4}, ErrThresholdRange, "quorum: Set.Threshold 4 exceeds 3 members"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.set.Validate()
			if tt.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			assert.Contains(t, err.Error(), tt.wantMsg)
		})
	}
}

func TestSetMethods(t *testing.T) {
	s := Set{Members: []ID{2, 4, 9}, Threshold: 2}
	t.Run("Contains", func(t *testing.T) {
		for _, id := range []ID{2, 4, 9} {
			assert.True(t, s.Contains(id), "id %d", id)
		}
		for _, id := range []ID{0, 1, 3, 10} {
			assert.False(t, s.Contains(id), "id %d", id)
		}
	})
	t.Run("String", func(t *testing.T) {
		assert.Equal(t, "2-of-{2,4,9}", s.String())
		assert.Equal(t, "0-of-{}", Set{}.String())
	})
	t.Run("Normalize", func(t *testing.T) {
		in := Set{Members: []ID{9, 2, 9, 4}, Threshold: 2}
		assert.Equal(t, s, in.Normalize())
		assert.Equal(t, []ID{9, 2, 9, 4}, in.Members, "input untouched")
	})
	t.Run("Equal", func(t *testing.T) {
		assert.True(t, s.Equal(Set{Members: []ID{2, 4, 9}, Threshold: 2}))
		assert.False(t, s.Equal(Set{Members: []ID{2, 4, 9}, Threshold: 3}))
		assert.False(t, s.Equal(Set{Members: []ID{2, 4}, Threshold: 2}))
	})
}

// TestIsQuorumCanReachExhaustive compares IsQuorum and CanReach with explicit
// quorum enumeration for every set over seven acceptors, every threshold
// (including the invalid 0 and size+1) and every vote pattern.
func TestIsQuorumCanReachExhaustive(t *testing.T) {
	const universe = 7
	bf := newBruteForce(universe)
	for mask := 1; mask < 1<<universe; mask++ {
		for th := 0; th <= bits.OnesCount8(uint8(mask))+1; th++ {
			b := bfSet{mask: uint8(mask), t: th}
			s := b.toSet()
			quorums := bf.quorumsOf(b)
			for votes := 0; votes < 1<<universe; votes++ {
				voteMask := uint8(votes)
				wantQuorum, wantReach := false, false
				if th >= 1 { // a threshold below 1 never counts as a quorum
					for _, q := range quorums {
						if q&^voteMask == 0 {
							wantQuorum = true
						}
						if q&voteMask == 0 {
							wantReach = true
						}
					}
				}
				inVotes := func(id ID) bool { return voteMask&(1<<(id-1)) != 0 }
				if s.IsQuorum(inVotes) != wantQuorum {
					t.Fatalf("%v IsQuorum(%07b) = %v, want %v", s, voteMask, !wantQuorum, wantQuorum)
				}
				// For CanReach the mask is the set of rejecting members.
				if s.CanReach(inVotes) != wantReach {
					t.Fatalf("%v CanReach(rejected %07b) = %v, want %v", s, voteMask, !wantReach, wantReach)
				}
			}
		}
	}
}

func TestIsQuorumCallsEachMemberAtMostOnce(t *testing.T) {
	s := Majority(1, 2, 3, 4, 5)
	calls := map[ID]int{}
	assert.True(t, s.IsQuorum(func(id ID) bool { calls[id]++; return true }))
	assert.Equal(t, map[ID]int{1: 1, 2: 1, 3: 1}, calls, "stops once the answer is known")

	calls = map[ID]int{}
	assert.False(t, s.IsQuorum(func(id ID) bool { calls[id]++; return false }))
	assert.Equal(t, map[ID]int{1: 1, 2: 1, 3: 1}, calls, "stops once a quorum is impossible")

	calls = map[ID]int{}
	assert.False(t, s.CanReach(func(id ID) bool { calls[id]++; return true }))
	assert.Equal(t, map[ID]int{1: 1, 2: 1, 3: 1}, calls)
}

func TestIsQuorumCanReachDoNotAllocate(t *testing.T) {
	s := Majority(1, 2, 3, 4, 5)
	votes := [6]bool{false, true, false, true, true, false}
	vote := func(id ID) bool { return votes[id] }
	var sink bool
	assert.Zero(t, testing.AllocsPerRun(100, func() { sink = s.IsQuorum(vote) }))
	assert.Zero(t, testing.AllocsPerRun(100, func() { sink = s.CanReach(vote) }))
	assert.Zero(t, testing.AllocsPerRun(100, func() { sink = Intersects(s, s) }))
	assert.Zero(t, testing.AllocsPerRun(100, func() { sink = Covers(s, s) }))
	_ = sink
}

func TestSentinelsAreDistinct(t *testing.T) {
	all := []error{
		ErrEmptySet, ErrDuplicateMember, ErrUnsortedMembers, ErrThresholdRange, ErrNoIntersection,
		ErrAlreadyMember, ErrNotMember, ErrLastMember, ErrMembersDiffer, ErrUnsafeTransition,
		ErrNoReplicas, ErrEmptyRegion, ErrNotReplica, ErrWriteRegion, ErrMinDurabilityRange,
		ErrBelowMinDurability, ErrWriteRegionDown, ErrMemberDown, ErrNotCaughtUp,
	}
	for i, a := range all {
		for j, b := range all {
			assert.Equal(t, i == j, errors.Is(a, b), "%v vs %v", a, b)
		}
	}
}
