package node

import (
	"errors"

	"github.com/fmnode/fmnode/partition"
)

// ReplyClass is what a client makes of a data-plane reply: the rule every
// client of a node applies (the simulator's clients and the routing
// client the daemon's data API serves).
type ReplyClass uint8

const (
	// ReplyOK: the request was applied (a write is durable on its write
	// quorum) or the read answered.
	ReplyOK ReplyClass = iota + 1
	// ReplyRedirect: the replica is not the write region of the request's
	// epoch; the error names where to go (a partition.RedirectError).
	ReplyRedirect
	// ReplyRetry: the request certainly was not applied (backpressure, no
	// lease, not ready; any failed read): retry, here or elsewhere.
	ReplyRetry
	// ReplyUnknown: a write whose outcome is unknown; not retried blindly,
	// and reported (Node.ClientError) as evidence of a gray failure.
	ReplyUnknown
	// ReplyConditionFailed: a compare-and-set whose condition did not hold
	// (a partition.ConditionFailedError): certainly not applied, and not
	// to be retried as is; the error carries the key's state.
	ReplyConditionFailed
)

// ClassifyReply classifies a reply to a write (write true) or a read.
func ClassifyReply(r partition.Reply, write bool) ReplyClass {
	var rd *partition.RedirectError
	switch {
	case r.Err == nil:
		return ReplyOK
	case errors.As(r.Err, &rd):
		return ReplyRedirect
	case write && errors.Is(r.Err, partition.ErrConditionFailed):
		return ReplyConditionFailed
	case write && errors.Is(r.Err, partition.ErrUnknownOutcome):
		// Before the retryable causes: a write whose ack was withheld
		// because the lease lapsed is ErrLeaseExpired wrapping an unknown
		// outcome (it was assigned an LSN and is durable: it commits if
		// the lease comes back), and a retry would apply it twice.
		return ReplyUnknown
	case !write || errors.Is(r.Err, partition.ErrBackpressure) || errors.Is(r.Err, partition.ErrLeaseExpired) ||
		errors.Is(r.Err, partition.ErrNotReady):
		return ReplyRetry
	}
	return ReplyUnknown
}
