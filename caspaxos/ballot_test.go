package caspaxos

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBallotOrder(t *testing.T) {
	ordered := []Ballot{{}, b(0, 1), b(1, 0), b(1, 1), b(1, 2), b(2, 1), b(math.MaxUint64, 1), b(math.MaxUint64, math.MaxUint64)}
	for i := range ordered {
		for j := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			assert.Equal(t, want, ordered[i].Compare(ordered[j]), "%v vs %v", ordered[i], ordered[j])
			assert.Equal(t, want < 0, ordered[i].Less(ordered[j]))
		}
	}
	assert.True(t, Ballot{}.IsZero())
	assert.False(t, b(0, 1).IsZero())
	assert.Equal(t, b(2, 1), b(1, 9).Max(b(2, 1)))
	assert.Equal(t, "3.7", b(3, 7).String())
}

func TestNextBallotIsSmallestGreaterOwnBallot(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 10000; i++ {
		p := NodeID(rng.IntN(5) + 1)
		seen := b(uint64(rng.IntN(5)), NodeID(rng.IntN(6)))
		got, err := NextBallot(p, seen)
		require.NoError(t, err)
		assert.Equal(t, p, got.Proposer)
		assert.True(t, seen.Less(got), "%v must exceed %v", got, seen)
		assert.NotZero(t, got.Counter)
		// Reference: scan counters upward for the first own ballot above seen.
		for c := uint64(1); c < got.Counter; c++ {
			assert.False(t, seen.Less(b(c, p)), "%v skipped smaller %v", got, b(c, p))
		}
	}
}

func TestNextBallotOverflow(t *testing.T) {
	_, err := NextBallot(1, b(math.MaxUint64, 1))
	require.ErrorIs(t, err, ErrBallotOverflow)
	_, err = NextBallot(1, b(math.MaxUint64, 2))
	require.ErrorIs(t, err, ErrBallotOverflow)
	got, err := NextBallot(3, b(math.MaxUint64, 2))
	require.NoError(t, err, "a greater proposer id still fits in the last counter")
	assert.Equal(t, b(math.MaxUint64, 3), got)
}

func TestProposerReportsBallotOverflow(t *testing.T) {
	c := newCluster(t, 3, 1)
	// An acceptor was handed the last possible ballot of a higher proposer.
	for _, id := range sortedIDs(c.acceptors) {
		require.NoError(t, c.acceptors[id].Step(Message{Type: MsgPrepare, From: 9, To: id, Items: []Item{{Key: "k", Ballot: b(math.MaxUint64, 9)}}}))
		c.acceptors[id].Ready()
	}
	r := c.do(1, "k", Read())
	require.ErrorIs(t, r.Err, ErrBallotOverflow)
}

func TestBallotSortIsTotal(t *testing.T) {
	bs := []Ballot{b(2, 1), b(1, 2), b(1, 1), b(2, 0)}
	sort.Slice(bs, func(i, j int) bool { return bs[i].Less(bs[j]) })
	assert.Equal(t, []Ballot{b(1, 1), b(1, 2), b(2, 0), b(2, 1)}, bs)
}
