package node

import (
	"errors"
	"fmt"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
)

// An operator's pause or resume of one partition is a register write the
// node proposes for it. The node follows that write to its end and tells
// the caller how it ended: committed, already so, or not applied with the
// reason. A write that conflicts (another value was written first) or
// fails (the proposer gave up: its value may or may not have been
// accepted) is tried again against the register's newer value: a later
// CAS either commits or finds the value that won, which may be this
// request's own; only after maxRequestTries writes does the caller hear
// that the request was not applied. Before this, a lost write was
// dropped silently: the admin API had answered at the proposal, and the
// operator believed a pause (or resume) that the register never held.

// maxRequestTries bounds the register writes of one operator request.
const maxRequestTries = 3

// ErrNotApplied: the operator's request did not reach the register (its
// writes conflicted or failed maxRequestTries times, or the manager
// refused to try again). The register is as it was, unless the last
// failed write is recovered later by another proposer: the error says
// which.
var ErrNotApplied = errors.New("node: operator request not applied")

// RequestOutcome is how an operator's request on a partition ended.
type RequestOutcome struct {
	// Version is the register version that holds the request (0 when Err
	// is set).
	Version uint64
	// Already: nothing was written; the register value this node knows
	// (Version) already said so.
	Already bool
	// Tries is the number of register writes made.
	Tries int
	// Err wraps ErrNotApplied when the request did not take effect.
	Err error
}

// RequestDone receives a request's outcome, once, on the node's loop
// (the driver's goroutine that steps the node). It is not called when
// the node stops first (a crash): the caller's connection is lost then.
type RequestDone func(RequestOutcome)

// opRequest is an operator request whose register write is in flight.
type opRequest struct {
	paused bool
	reason string
	tries  int
	done   RequestDone
}

// SetPaused proposes pausing (or resuming) automatic failover of
// partition id, refused when the partition is not hosted here or the
// manager refuses (a proposal in flight, a full window). When it returns
// nil, done (may be nil) hears how the request ended: at once when the
// register already says so, else when its write commits or is given up.
func (n *Node) SetPaused(now time.Duration, id partition.ID, paused bool, reason string, done RequestDone) error {
	n.now = now
	p, err := n.hosted(id, "pause of")
	if err != nil {
		return err
	}
	if _, busy := n.reqs[id]; busy {
		return fmt.Errorf("node %d: pause of partition %d: an operator request on it is in flight: %w", n.cfg.ID, id, failover.ErrRefused)
	}
	n.fed = true
	if s, ver, ok := n.mgr.State(p.name); ok && s.Paused == paused {
		if done != nil {
			done(RequestOutcome{Version: ver, Already: true})
		}
		return nil
	}
	if err := n.mgr.SetPaused(now, p.name, paused, reason); err != nil {
		return err
	}
	if done == nil {
		done = func(RequestOutcome) {}
	}
	n.reqs[id] = &opRequest{paused: paused, reason: reason, tries: 1, done: done}
	return nil
}

// requestCASDone follows an operator request's register write: called
// after the outcome of a CAS of partition p has been fed to the manager
// (and, for a conflict, the value that won).
func (n *Node) requestCASDone(p *part, prop failover.Proposal, out CASOutcome, cause error) {
	r := n.reqs[p.id]
	if r == nil || (prop.Kind != failover.DecidePause && prop.Kind != failover.DecideResume) || prop.Next.Paused != r.paused {
		return
	}
	end := func(o RequestOutcome) {
		delete(n.reqs, p.id)
		o.Tries = r.tries
		r.done(o)
	}
	s, ver, ok := n.mgr.State(p.name)
	switch {
	case out == CASCommitted:
		end(RequestOutcome{Version: ver})
		return
	case ok && s.Paused == r.paused:
		// The value that won holds the request: another operator's, or
		// this request's own failed write recovered by the proposer.
		end(RequestOutcome{Version: ver})
		return
	}
	what := out.String()
	if cause != nil {
		what += ": " + cause.Error()
	}
	if r.tries >= maxRequestTries {
		maybe := "the register is as it was"
		if out == CASFailed {
			maybe = "the last write failed midway, so a later proposer may still recover it: check the partition's pause flag"
		}
		end(RequestOutcome{Err: fmt.Errorf("%w: partition %d's register write was lost %d times (last: %s); %s",
			ErrNotApplied, p.id, r.tries, what, maybe)})
		return
	}
	if err := n.mgr.SetPaused(n.now, p.name, r.paused, r.reason); err != nil {
		end(RequestOutcome{Err: fmt.Errorf("%w: partition %d's register write was lost (%s) and could not be tried again: %w",
			ErrNotApplied, p.id, what, err)})
		return
	}
	r.tries++
	n.fed = true
}
