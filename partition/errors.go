package partition

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Every error this package returns wraps one of them
// (directly or through a typed error's Is/Unwrap); branch with errors.Is.
var (
	// ErrStaleEpoch: the request or message carries an epoch below the
	// replica's. See RedirectError for the current epoch and write region.
	ErrStaleEpoch = errors.New("partition: stale epoch")
	// ErrNotWriteRegion: a client write (or strong read) reached a replica
	// that is not the write region of the epoch. See RedirectError.
	ErrNotWriteRegion = errors.New("partition: not the write region")
	// ErrReplicaBehind: the request carries an epoch above the replica's;
	// the replica has not learned the newer epoch yet. See RedirectError.
	ErrReplicaBehind = errors.New("partition: replica behind the request's epoch")
	// ErrUnknownOutcome: a write was assigned an LSN (and persisted) but the
	// replica lost the write region (fenced, deposed, or the commit timed
	// out) before it committed. It may or may not survive; read to learn.
	ErrUnknownOutcome = errors.New("partition: write outcome unknown")
	// ErrStalenessBound: bounded staleness: the write was held back because
	// accepting it would exceed the configured lag (K ops or T time), and
	// the lag did not shrink within the hold time. The write was not applied.
	ErrStalenessBound = errors.New("partition: staleness bound would be exceeded")
	// ErrTooLarge: an op, key or value exceeds its configured bound.
	ErrTooLarge = errors.New("partition: too large")
	// ErrBackpressure: the partition's bound on pending writes is reached.
	ErrBackpressure = errors.New("partition: too many pending writes")
	// ErrLeaseExpired: a strong read reached the write region while its
	// lease is not held; no other region can be ruled out as write region.
	ErrLeaseExpired = errors.New("partition: write-region lease expired")
	// ErrNotReady: the replica cannot serve the read yet (recovering, a
	// snapshot is being installed, or the read barrier after a restart or a
	// promotion is not applied yet). Retryable.
	ErrNotReady = errors.New("partition: replica not ready")
	// ErrSessionUnavailable: the replica has not applied the session token's
	// position (or holds a different op there). Retry at another replica.
	ErrSessionUnavailable = errors.New("partition: session token not available at this replica")
	// ErrNotFresh: a bounded-staleness read reached a follower that cannot
	// prove it is within the bound (no recent grant from the write region).
	ErrNotFresh = errors.New("partition: replica not within the staleness bound")
	// ErrUnknownPartition: the partition is not hosted here.
	ErrUnknownPartition = errors.New("partition: unknown partition")
	// ErrExists: Create of a partition that is already hosted.
	ErrExists = errors.New("partition: partition exists")
	// ErrBadRequest: a malformed request or control operation.
	ErrBadRequest = errors.New("partition: bad request")
	// ErrNeedSnapshot: the replica cannot continue from its log (a
	// truncation below what it can undo, or its log no longer overlaps the
	// write region's); it waits for a snapshot.
	ErrNeedSnapshot = errors.New("partition: replica needs a snapshot")
	// ErrBehind: Promote asked a replica to start after an LSN it does not have.
	ErrBehind = errors.New("partition: replica lacks the LSN to start after")
	// ErrInvalidConfig: a configuration field is invalid; the message names it.
	ErrInvalidConfig = errors.New("partition: invalid config")
	// ErrCorrupt: stored or received bytes do not decode, or stored state
	// contradicts itself. Stores never reset on it; an operator must act.
	ErrCorrupt = errors.New("partition: corrupt data")
	// ErrStoreClosed: a Store used after Close.
	ErrStoreClosed = errors.New("partition: store closed")
	// ErrInvariant: the core detected a broken invariant (a bug or a
	// misbehaving peer); drivers treat it as fatal.
	ErrInvariant = errors.New("partition: invariant violated")
)

// RedirectReason says why a request was redirected.
type RedirectReason uint8

// Redirect reasons.
const (
	// ReasonStaleEpoch: the request's epoch is below the replica's.
	ReasonStaleEpoch RedirectReason = iota + 1
	// ReasonNotWriteRegion: the replica is a follower in the request's epoch.
	ReasonNotWriteRegion
	// ReasonPaused: the replica is the write region but fenced at its own
	// epoch (graceful failover in progress); retry shortly, likely elsewhere.
	ReasonPaused
	// ReasonReplicaBehind: the request's epoch is above the replica's.
	ReasonReplicaBehind
)

func (r RedirectReason) String() string {
	switch r {
	case ReasonStaleEpoch:
		return "stale epoch"
	case ReasonNotWriteRegion:
		return "not the write region"
	case ReasonPaused:
		return "write region paused"
	case ReasonReplicaBehind:
		return "replica behind"
	default:
		return fmt.Sprintf("RedirectReason(%d)", uint8(r))
	}
}

// RedirectError is the redirect a routing client acts on (compare Cosmos
// DB's 403.3 "write forbidden"): the request was not applied, and Epoch and
// WriteRegion are the replica's current knowledge of where writes go
// (WriteRegion is empty when unknown). errors.Is matches ErrStaleEpoch,
// ErrNotWriteRegion or ErrReplicaBehind by Reason (ReasonPaused matches
// ErrNotWriteRegion).
type RedirectError struct {
	Partition   ID
	Epoch       Epoch
	WriteRegion Region
	Reason      RedirectReason
	// RequestEpoch is the epoch the request carried.
	RequestEpoch Epoch
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("partition %d: %s (request epoch %d, current epoch %d, write region %q)",
		e.Partition, e.Reason, e.RequestEpoch, e.Epoch, e.WriteRegion)
}

// RedirectTo is where the request should go instead: the partition, and
// the epoch and write region as this replica knows them. With it the
// error satisfies the routing client's Redirect interface
// (txtdns/routing), so a client hands the error to the router as is; this
// package does not import the router.
func (e *RedirectError) RedirectTo() (partition uint32, epoch uint64, writeRegion string) {
	return uint32(e.Partition), uint64(e.Epoch), string(e.WriteRegion)
}

// Is maps the reason to its sentinel.
func (e *RedirectError) Is(target error) bool {
	switch e.Reason {
	case ReasonStaleEpoch:
		return target == ErrStaleEpoch
	case ReasonNotWriteRegion, ReasonPaused:
		return target == ErrNotWriteRegion
	case ReasonReplicaBehind:
		return target == ErrReplicaBehind
	}
	return false
}

// StalenessError carries the numbers behind ErrStalenessBound.
type StalenessError struct {
	Partition ID
	LagOps    uint64        // ops the slowest bounded replica is behind
	LagTime   time.Duration // age of its oldest unreplicated op
	MaxOps    uint64
	MaxTime   time.Duration
	Held      time.Duration // how long the write was held
}

func (e *StalenessError) Error() string {
	return fmt.Sprintf("partition %d: write held %v and rejected: replication lag %d ops / %v exceeds bound %d ops / %v: %v",
		e.Partition, e.Held, e.LagOps, e.LagTime, e.MaxOps, e.MaxTime, ErrStalenessBound)
}

// Unwrap lets errors.Is(err, ErrStalenessBound) match.
func (e *StalenessError) Unwrap() error { return ErrStalenessBound }

func configErr(field string, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// UnknownOutcomeError reports a write that was assigned Token but lost its
// write region (or timed out) before it committed: it may or may not
// survive. Epoch and WriteRegion are the replica's current knowledge.
type UnknownOutcomeError struct {
	Partition   ID
	Token       Token
	Epoch       Epoch
	WriteRegion Region
}

func (e *UnknownOutcomeError) Error() string {
	return fmt.Sprintf("partition %d: write %v: %v (epoch now %d, write region %q)",
		e.Partition, e.Token, ErrUnknownOutcome, e.Epoch, e.WriteRegion)
}

// Unwrap lets errors.Is(err, ErrUnknownOutcome) match.
func (e *UnknownOutcomeError) Unwrap() error { return ErrUnknownOutcome }

func backpressureErr(p ID, pending, max int) error {
	return fmt.Errorf("partition %d: %d writes pending, bound %d: %w", p, pending, max, ErrBackpressure)
}
