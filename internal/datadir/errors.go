package datadir

import (
	"errors"
	"fmt"
)

// Sentinel errors; the typed errors below match them with errors.Is.
var (
	// ErrLocked: another agent holds the data directory's lock.
	ErrLocked = errors.New("datadir: data directory in use")
	// ErrIdentity: the directory belongs to another node.
	ErrIdentity = errors.New("datadir: data directory belongs to another node")
	// ErrCorrupt: the identity file (or the directory's contents) cannot be
	// trusted; nothing was modified.
	ErrCorrupt = errors.New("datadir: corrupt data directory")
	// ErrInvalid: an argument to Open or OpenStores is unusable; the error
	// names it.
	ErrInvalid = errors.New("datadir: invalid argument")
	// ErrBootExhausted: the boot counter reached MaxBoot; the node cannot
	// get a fresh incarnation under its node id.
	ErrBootExhausted = errors.New("datadir: boot counter exhausted")
	// ErrClosed: the Dir was closed.
	ErrClosed = errors.New("datadir: closed")
)

// LockedError: another process holds the lock on the data directory.
type LockedError struct {
	// Path is the data directory.
	Path string
	// HolderPID is the pid the holder wrote into the lock file, 0 when it
	// could not be read (the holder may be between locking and writing).
	HolderPID int
}

func (e *LockedError) Error() string {
	if e.HolderPID <= 0 {
		return fmt.Sprintf("data directory %s is in use by another fmnode agent (pid unknown)", e.Path)
	}
	return fmt.Sprintf("data directory %s is in use by another fmnode agent (pid %d)", e.Path, e.HolderPID)
}

// Unwrap makes errors.Is(err, ErrLocked) hold.
func (e *LockedError) Unwrap() error { return ErrLocked }

// IdentityMismatchError: the identity stored in the directory differs from
// the one the agent was configured with. The agent must refuse to start:
// adopting the directory would make it another node's acceptor.
type IdentityMismatchError struct {
	// Path is the identity file.
	Path string
	// Field is the first field that differs: "cluster", "node id", "name"
	// or "region".
	Field string
	// Stored is the directory's value, Want the configured one.
	Stored, Want string
}

func (e *IdentityMismatchError) Error() string {
	return fmt.Sprintf("identity file %s has %s %s but this agent is configured with %s %s: the data directory belongs to another node, the agent refuses to start and left it unmodified (point the agent at its own directory, or fix its configuration)",
		e.Path, e.Field, e.Stored, e.Field, e.Want)
}

// Unwrap makes errors.Is(err, ErrIdentity) hold.
func (e *IdentityMismatchError) Unwrap() error { return ErrIdentity }

// CorruptError: the identity file is damaged (torn, truncated, bad
// checksum, unknown version) or the directory is inconsistent. The file
// was neither reset nor rewritten.
type CorruptError struct {
	// Path is the damaged file.
	Path string
	// Reason says what is wrong with it.
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("identity file %s is damaged: %s; the agent refuses to start and left the file unmodified (do not delete it: its boot counter keeps this node's proposer ids fresh; if it cannot be recovered, replace the node under a new node id with a fresh data directory)",
		e.Path, e.Reason)
}

// Unwrap makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
