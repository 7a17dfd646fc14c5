package sysreg

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Failures wrap them; test with errors.Is.
var (
	// ErrInvalidConfig: an AcceptorConfig, Config or TransportConfig
	// failed validation; the message names the field.
	ErrInvalidConfig = errors.New("sysreg: invalid config")
	// ErrInvalidArgument: a call's peers or value are unusable; the
	// message names the argument.
	ErrInvalidArgument = errors.New("sysreg: invalid argument")
	// ErrAlreadyInitialized: Init found a value; see *AlreadyInitializedError.
	ErrAlreadyInitialized = errors.New("sysreg: register already initialized")
	// ErrEmpty: Read found no value (the cluster was never initialised).
	ErrEmpty = errors.New("sysreg: register is empty")
	// ErrConflict: CAS found another version; see *ConflictError.
	ErrConflict = errors.New("sysreg: version conflict")
	// ErrNoQuorum: the operation did not reach its quorum; an
	// *UnreachableError names the peers that did not answer.
	ErrNoQuorum = errors.New("sysreg: no quorum")
	// ErrUnknownOutcome: a write may or may not have been committed (its
	// accept was sent but no quorum confirmed it, and nothing seen since
	// rules it out). Read to learn.
	ErrUnknownOutcome = errors.New("sysreg: outcome unknown")
	// ErrAcceptorFailed: the acceptor's store failed an Apply; it serves
	// nothing until the process restarts (its memory is ahead of its disk).
	ErrAcceptorFailed = errors.New("sysreg: acceptor failed")
)

// AlreadyInitializedError is Init's refusal: the register holds Value at
// Version. The value is a committed one.
type AlreadyInitializedError struct {
	Value   []byte
	Version uint64
}

func (e *AlreadyInitializedError) Error() string {
	return fmt.Sprintf("sysreg: register already initialized at version %d (%d bytes)", e.Version, len(e.Value))
}

// Is makes errors.Is(err, ErrAlreadyInitialized) hold.
func (e *AlreadyInitializedError) Is(target error) bool { return target == ErrAlreadyInitialized }

// ConflictError is CAS's refusal: the register was at Current (holding
// Value), not at Expected. Current and Value are committed.
type ConflictError struct {
	Expected uint64
	Current  uint64
	Value    []byte
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("sysreg: version conflict: expected %d, register at %d", e.Expected, e.Current)
}

// Is makes errors.Is(err, ErrConflict) hold.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// UnreachableError reports an operation that gave up because the listed
// peers did not answer its last round. It unwraps to ErrNoQuorum, to
// ErrUnknownOutcome when Unknown is set, and to the proposer's error.
type UnreachableError struct {
	// Peers did not answer, sorted by ID; Reasons[i] says why for Peers[i]
	// (the last transport error, or "no reply").
	Peers   []Peer
	Reasons []string
	// Unknown: a write's accept was sent, so it may have been committed
	// by the acceptors that did answer; Read to learn.
	Unknown bool
	// Err is the proposer's final error.
	Err error
}

func (e *UnreachableError) Error() string {
	var b strings.Builder
	b.WriteString("sysreg: no quorum: ")
	if e.Unknown {
		b.WriteString("outcome unknown: ")
	}
	b.WriteString("no answer from ")
	for i, p := range e.Peers {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "peer %d (%s)", p.ID, p.Addr)
		if i < len(e.Reasons) && e.Reasons[i] != "" {
			fmt.Fprintf(&b, ": %s", e.Reasons[i])
		}
	}
	if e.Err != nil {
		fmt.Fprintf(&b, " [%v]", e.Err)
	}
	return b.String()
}

// Unwrap returns ErrNoQuorum, ErrUnknownOutcome if Unknown, and Err.
func (e *UnreachableError) Unwrap() []error {
	errs := []error{ErrNoQuorum}
	if e.Unknown {
		errs = append(errs, ErrUnknownOutcome)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

func configErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

func argErr(arg, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidArgument, arg, fmt.Sprintf(format, args...))
}
