package caspaxos

import (
	"errors"
	"fmt"
)

// Sentinel errors callers act on. They are wrapped with context; test with errors.Is.
var (
	// ErrBallotOverflow: the ballot counter is exhausted for a key.
	ErrBallotOverflow = errors.New("caspaxos: ballot counter overflow")
	// ErrConflict: an acceptor promised or accepted a greater ballot (a NAK).
	ErrConflict = errors.New("caspaxos: conflicting ballot")
	// ErrTimeout: a phase did not reach its quorum before its deadline.
	ErrTimeout = errors.New("caspaxos: phase timed out")
	// ErrNoQuorum: the proposal gave up after its attempts; no quorum answered.
	ErrNoQuorum = errors.New("caspaxos: no quorum")
	// ErrUnknownOutcome: a mutating change may or may not have been committed
	// (an accept was sent but its quorum was never confirmed). Read to learn.
	ErrUnknownOutcome = errors.New("caspaxos: outcome unknown")
	// ErrExists: InitIfAbsent found a live value.
	ErrExists = errors.New("caspaxos: register exists")
	// ErrVersionMismatch: CAS found another version; see VersionMismatchError.
	ErrVersionMismatch = errors.New("caspaxos: version mismatch")
	// ErrBadChange: a change function broke the version discipline.
	ErrBadChange = errors.New("caspaxos: change function broke version rule")
	// ErrKeyBusy: the key's queue of pending proposals is full.
	ErrKeyBusy = errors.New("caspaxos: too many pending proposals for key")
	// ErrOverloaded: the proposer's bound on keys in flight is reached.
	ErrOverloaded = errors.New("caspaxos: too many proposals in flight")
	// ErrStaleAge: an acceptor fenced this proposer's age (after a GC).
	ErrStaleAge = errors.New("caspaxos: proposer age is stale")
	// ErrInvalidConfig: a configuration field is invalid; the message names it.
	ErrInvalidConfig = errors.New("caspaxos: invalid config")
	// ErrKeyTooLarge / ErrValueTooLarge: bounds on what a register holds.
	ErrKeyTooLarge   = errors.New("caspaxos: key too large")
	ErrValueTooLarge = errors.New("caspaxos: value too large")
	// ErrCorrupt: stored or received bytes do not decode.
	ErrCorrupt = errors.New("caspaxos: corrupt data")
	// ErrStoreClosed: a Store was used after Close.
	ErrStoreClosed = errors.New("caspaxos: store closed")
)

// VersionMismatchError reports the value a failed CAS found. The value is a
// committed one: the proposer commits the identity before reporting.
type VersionMismatchError struct {
	Expected uint64
	Current  Value
}

func (e *VersionMismatchError) Error() string {
	return fmt.Sprintf("caspaxos: version mismatch: expected %d, register at %v", e.Expected, e.Current)
}

// Is makes errors.Is(err, ErrVersionMismatch) hold.
func (e *VersionMismatchError) Is(target error) bool { return target == ErrVersionMismatch }

func configErr(field string, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}
