package quorum

import (
	"errors"
	"math/bits"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIntersectsExhaustive checks Intersects, DisjointQuorums and
// Config.Validate against quorum enumeration for every pair of sets over
// seven acceptors: every member subset of IDs 1..7 and every valid threshold
// for the prepare set and for the accept set (448 x 448 configurations).
func TestIntersectsExhaustive(t *testing.T) {
	bf := newBruteForce(7)
	sets := make([]Set, len(bf.sets))
	for i, b := range bf.sets {
		sets[i] = b.toSet()
	}
	for i, a := range bf.sets {
		for j, b := range bf.sets {
			want := bf.intersects(a, b)
			if got := Intersects(sets[i], sets[j]); got != want {
				t.Fatalf("Intersects(%v, %v) = %v, want %v", a, b, got, want)
			}
			qa, qb, ok := DisjointQuorums(sets[i], sets[j])
			if ok == want {
				t.Fatalf("DisjointQuorums(%v, %v) ok = %v, want %v", a, b, ok, !want)
			}
			if ok {
				ma, mb := maskOf(qa...), maskOf(qb...)
				if ma&mb != 0 || !slices.Contains(bf.quorumsOf(a), ma) || !slices.Contains(bf.quorumsOf(b), mb) ||
					len(qa) != a.t || len(qb) != b.t || !slices.IsSorted(qa) || !slices.IsSorted(qb) {
					t.Fatalf("DisjointQuorums(%v, %v) = %v, %v: not a minimal disjoint pair of quorums", a, b, qa, qb)
				}
			}
			err := Config{Prepare: sets[i], Accept: sets[j]}.Validate()
			if (err == nil) != want {
				t.Fatalf("Config{%v, %v}.Validate() = %v, want ok=%v", a, b, err, want)
			}
			if err != nil && !errors.Is(err, ErrNoIntersection) {
				t.Fatalf("Config{%v, %v}.Validate() = %v, want ErrNoIntersection", a, b, err)
			}
		}
	}
}

// TestInvalidSetsNeverIntersect: malformed sets (thresholds 0 and size+1,
// duplicates, unsorted, empty) are never judged safe, and Validate says why.
func TestInvalidSetsNeverIntersect(t *testing.T) {
	bf := newBruteForce(7)
	good := Majority(1, 2, 3)
	for mask := 1; mask < 1<<7; mask++ {
		n := bits.OnesCount8(uint8(mask))
		for _, th := range []int{0, n + 1} {
			bad := bfSet{mask: uint8(mask), t: th}.toSet()
			require.ErrorIs(t, bad.Validate(), ErrThresholdRange, "%v", bad)
			assert.False(t, Intersects(bad, good), "%v", bad)
			assert.False(t, Intersects(good, bad), "%v", bad)
			assert.False(t, Covers(bad, good), "%v", bad)
			assert.False(t, Covers(good, bad), "%v", bad)
			_, _, ok := DisjointQuorums(bad, good)
			assert.False(t, ok)
			assert.ErrorIs(t, Config{Prepare: bad, Accept: good}.Validate(), ErrThresholdRange)
			assert.ErrorIs(t, Config{Prepare: good, Accept: bad}.Validate(), ErrThresholdRange)
		}
	}
	_ = bf
	for _, bad := range []Set{
		{},
		{Members: []ID{1, 1, 2}, Threshold: 2},
		{Members: []ID{2, 1, 3}, Threshold: 2},
	} {
		assert.False(t, Intersects(bad, good), "%v", bad)
		assert.False(t, Intersects(good, bad), "%v", bad)
		assert.False(t, Covers(bad, good), "%v", bad)
		assert.Error(t, bad.Validate())
	}
}

// TestCoversExhaustive checks the closed form of Covers against enumeration
// for every pair of sets over seven acceptors.
func TestCoversExhaustive(t *testing.T) {
	bf := newBruteForce(7)
	sets := make([]Set, len(bf.sets))
	for i, b := range bf.sets {
		sets[i] = b.toSet()
	}
	for i, s := range bf.sets {
		for j, w := range bf.sets {
			if got, want := Covers(sets[i], sets[j]), bf.covers(s, w); got != want {
				t.Fatalf("Covers(%v, %v) = %v, want %v", s, w, got, want)
			}
		}
	}
}

// TestCoversIsTheNoRescanCondition proves the claim in Covers' comment over
// five acceptors: a new prepare set sees every value that an old prepare set
// was guaranteed to see (whatever accept set committed it) exactly when it
// covers the old one.
func TestCoversIsTheNoRescanCondition(t *testing.T) {
	bf := newBruteForce(5)
	for _, old := range bf.sets {
		for _, nu := range bf.sets {
			assert.Equal(t, bf.seesAllSeenBy(old, nu), Covers(nu.toSet(), old.toSet()), "old %v new %v", old, nu)
		}
	}
}

func TestDisjointQuorumsExample(t *testing.T) {
	qa, qb, ok := DisjointQuorums(Majority(1, 2, 3, 4), Set{Members: []ID{3, 4, 5}, Threshold: 1})
	require.True(t, ok)
	assert.Equal(t, []ID{1, 2, 3}, qa)
	assert.Equal(t, []ID{5}, qb)
}
