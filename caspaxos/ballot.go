package caspaxos

import (
	"fmt"
	"math"

	"github.com/fmnode/fmnode/quorum"
)

// NodeID identifies a proposer or an acceptor. It is the quorum package's ID
// so that acceptor configurations can be handed over without conversion.
type NodeID = quorum.ID

// Ballot orders proposals: by Counter, then by Proposer. Two proposers never
// share a ballot because the proposer id breaks every tie.
type Ballot struct {
	Counter  uint64
	Proposer NodeID
}

// Compare returns -1, 0 or +1 as b is less than, equal to or greater than o.
func (b Ballot) Compare(o Ballot) int {
	switch {
	case b.Counter < o.Counter:
		return -1
	case b.Counter > o.Counter:
		return 1
	case b.Proposer < o.Proposer:
		return -1
	case b.Proposer > o.Proposer:
		return 1
	}
	return 0
}

// Less reports b < o.
func (b Ballot) Less(o Ballot) bool { return b.Compare(o) < 0 }

// IsZero reports whether b is the zero ballot, which no proposer ever uses.
func (b Ballot) IsZero() bool { return b.Counter == 0 && b.Proposer == 0 }

// Max returns the greater of b and o.
func (b Ballot) Max(o Ballot) Ballot {
	if b.Less(o) {
		return o
	}
	return b
}

func (b Ballot) String() string { return fmt.Sprintf("%d.%d", b.Counter, b.Proposer) }

// NextBallot returns the smallest ballot owned by proposer p that is greater
// than seen. The counter is a uint64: exhausting it would take centuries at any
// realistic rate, but an acceptor can be handed a hostile ballot, so the
// overflow is reported instead of wrapping around to a smaller ballot (which
// would silently break Paxos).
func NextBallot(p NodeID, seen Ballot) (Ballot, error) {
	if seen.Proposer < p {
		// (seen.Counter, p) is already greater than seen.
		if seen.Counter == 0 {
			return Ballot{Counter: 1, Proposer: p}, nil
		}
		return Ballot{Counter: seen.Counter, Proposer: p}, nil
	}
	if seen.Counter == math.MaxUint64 {
		return Ballot{}, fmt.Errorf("%w: after %v", ErrBallotOverflow, seen)
	}
	return Ballot{Counter: seen.Counter + 1, Proposer: p}, nil
}
