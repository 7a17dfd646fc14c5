package node

import (
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
)

// Observer sees what a node does, for metrics, logs and the simulator's
// checkers. Its methods are called synchronously from the node's calls and
// must not call back into the node. They see only what the node itself
// knows; a checker that compares nodes does so outside.
type Observer interface {
	// Committed: this node saw a committed register value of a hosted
	// partition (its own CAS or read, or a peer's learn); the same value
	// may be seen again.
	Committed(p partition.ID, version uint64, s failover.State)
	// Proposed: the manager asked for a transition and the node submitted
	// it to its proposer.
	Proposed(p partition.ID, prop failover.Proposal)
	// Promoted: this node's replica became write region of the epoch.
	Promoted(p partition.ID, e failover.Epoch)
	// Truncated: this node's replica set aside false progress into the
	// conflict record (ops is the divergence's false-progress count).
	Truncated(p partition.ID, ops uint64)
	// ActionFailed: the data plane refused an action the register's state
	// asked for (the manager will retry from the next evaluation).
	ActionFailed(p partition.ID, a failover.Action, err error)
	// RegisterRefused: the proposer refused a register operation at
	// submission (its bound on keys in flight, a queue full).
	RegisterRefused(p partition.ID, kind OpKind, err error)
	// CASDone: a transition this node proposed (Proposed) ended: it
	// committed, lost to another value (a conflict), or failed (refused
	// at submission, or the proposer gave up). took is the time from
	// submission to the outcome on the node's clock. Metrics need it: the
	// manager counts outcomes but not by kind, and nothing else knows
	// when a CAS started.
	CASDone(p partition.ID, prop failover.Proposal, outcome CASOutcome, took time.Duration)
}

// CASOutcome is how a proposed transition ended.
type CASOutcome uint8

const (
	// CASCommitted: the transition is the register's new value.
	CASCommitted CASOutcome = iota + 1
	// CASConflict: another value had been written first (version mismatch).
	CASConflict
	// CASFailed: refused at submission, or the proposer gave up (the
	// outcome may be unknown: a later commit or read tells).
	CASFailed
)

func (o CASOutcome) String() string {
	switch o {
	case CASCommitted:
		return "committed"
	case CASConflict:
		return "conflict"
	case CASFailed:
		return "failed"
	}
	return "unknown"
}

// OpKind is the kind of a register operation a node submits.
type OpKind uint8

const (
	// OpCAS is a transition the manager proposed (a create is a CAS from
	// version 0).
	OpCAS OpKind = iota + 1
	// OpRead reads the register back.
	OpRead
)

func (k OpKind) String() string {
	switch k {
	case OpCAS:
		return "cas"
	case OpRead:
		return "read"
	}
	return "unknown"
}

// NopObserver observes nothing.
type NopObserver struct{}

func (NopObserver) Committed(partition.ID, uint64, failover.State)                     {}
func (NopObserver) Proposed(partition.ID, failover.Proposal)                           {}
func (NopObserver) Promoted(partition.ID, failover.Epoch)                              {}
func (NopObserver) Truncated(partition.ID, uint64)                                     {}
func (NopObserver) ActionFailed(partition.ID, failover.Action, error)                  {}
func (NopObserver) RegisterRefused(partition.ID, OpKind, error)                        {}
func (NopObserver) CASDone(partition.ID, failover.Proposal, CASOutcome, time.Duration) {}
