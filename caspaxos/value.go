package caspaxos

import (
	"bytes"
	"fmt"
)

// Value is the content of a register. Version counts the committed changes
// that modified it: 0 means the register was never written (or was erased),
// and every modifying change adds exactly one. Clients compare-and-set
// against a Version, never against the bytes.
type Value struct {
	Version   uint64
	Data      []byte
	Tombstone bool
}

// Exists reports whether the register holds live data.
func (v Value) Exists() bool { return v.Version > 0 && !v.Tombstone }

// Next returns the value that replaces v with data.
func (v Value) Next(data []byte) Value {
	return Value{Version: v.Version + 1, Data: data}
}

// Equal reports whether two values are identical.
func (v Value) Equal(o Value) bool {
	return v.Version == o.Version && v.Tombstone == o.Tombstone && bytes.Equal(v.Data, o.Data)
}

func (v Value) String() string {
	if v.Tombstone {
		return fmt.Sprintf("v%d<tombstone>", v.Version)
	}
	return fmt.Sprintf("v%d(%d bytes)", v.Version, len(v.Data))
}

// Change is a CASPaxos change function: it maps the current value to the
// next one. Apply must be deterministic and must not keep cur.Data: the
// proposer may run it more than once, for each attempt. An error leaves the
// register unchanged (the proposer still commits the identity so that the
// value it reports is a committed one) and is returned to the caller.
type Change interface {
	Apply(cur Value) (Value, error)
	// Mutates reports whether the change may modify the register; reads
	// return false so they never report an unknown outcome.
	Mutates() bool
}

// ChangeFunc adapts a function to Change; it is assumed to mutate.
type ChangeFunc func(cur Value) (Value, error)

// Apply calls f.
func (f ChangeFunc) Apply(cur Value) (Value, error) { return f(cur) }

// Mutates reports true.
func (f ChangeFunc) Mutates() bool { return true }

type readChange struct{}

func (readChange) Apply(cur Value) (Value, error) { return cur, nil }
func (readChange) Mutates() bool                  { return false }

// Read is the identity change: committing it makes the value it returns a
// linearizable read.
func Read() Change { return readChange{} }

type casChange struct {
	expected uint64
	data     []byte
}

func (c casChange) Apply(cur Value) (Value, error) {
	if cur.Version != c.expected || (cur.Tombstone && c.expected != 0) {
		return cur, &VersionMismatchError{Expected: c.expected, Current: cur}
	}
	return Value{Version: cur.Version + 1, Data: c.data}, nil
}
func (casChange) Mutates() bool { return true }

// CAS writes data if the register is at version expected. Expected 0 means
// "absent"; a tombstoned register counts as absent too.
func CAS(expected uint64, data []byte) Change { return casChange{expected: expected, data: data} }

type initChange struct{ data []byte }

func (c initChange) Apply(cur Value) (Value, error) {
	if cur.Exists() {
		return cur, fmt.Errorf("%w: at version %d", ErrExists, cur.Version)
	}
	return Value{Version: cur.Version + 1, Data: c.data}, nil
}
func (initChange) Mutates() bool { return true }

// InitIfAbsent writes data only if the register has no live value.
func InitIfAbsent(data []byte) Change { return initChange{data: data} }

type deleteChange struct{ expected uint64 }

func (c deleteChange) Apply(cur Value) (Value, error) {
	if !cur.Exists() {
		return cur, nil // idempotent
	}
	if c.expected != 0 && cur.Version != c.expected {
		return cur, &VersionMismatchError{Expected: c.expected, Current: cur}
	}
	return Value{Version: cur.Version + 1, Tombstone: true}, nil
}
func (deleteChange) Mutates() bool { return true }

// Delete replaces the value with a tombstone (the first step of deleting a
// register; GC erases it from the acceptors later). Expected 0 deletes
// unconditionally. Deleting an absent register succeeds.
func Delete(expected uint64) Change { return deleteChange{expected: expected} }

// checkChange verifies that a change function kept the version discipline.
func checkChange(cur, next Value) error {
	if next.Version == cur.Version {
		if !next.Equal(cur) {
			return fmt.Errorf("%w: value changed without a new version %d", ErrBadChange, cur.Version)
		}
		return nil
	}
	if next.Version != cur.Version+1 {
		return fmt.Errorf("%w: version %d after %d", ErrBadChange, next.Version, cur.Version)
	}
	return nil
}
