package node

import (
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

func (NopObserver) Committed(partition.ID, uint64, failover.State)    {}
func (NopObserver) Proposed(partition.ID, failover.Proposal)          {}
func (NopObserver) Promoted(partition.ID, failover.Epoch)             {}
func (NopObserver) Truncated(partition.ID, uint64)                    {}
func (NopObserver) ActionFailed(partition.ID, failover.Action, error) {}
func (NopObserver) RegisterRefused(partition.ID, OpKind, error)       {}
