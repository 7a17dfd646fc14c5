package sim

import (
	"fmt"
	"time"
)

// FNV-64a parameters. The trace hash is FNV-64a over a canonical
// little-endian encoding of every observable event; it is computed inline
// (not through hash.Hash64) so that hashing an event allocates nothing.
const (
	fnvOffset64 uint64 = 14695981039346656037
	fnvPrime64  uint64 = 1099511628211
)

// Trace folds every observable event of a run (message deliveries and drops,
// faults, client calls and returns) into one 64-bit hash. Two runs of one
// seed at one commit must end with the same hash; a difference means
// nondeterminism leaked in (map order, wall clock, goroutines), which makes
// failures impossible to replay.
type Trace struct {
	h      uint64
	events uint64
}

// NewTrace returns an empty trace.
func NewTrace() Trace { return Trace{h: fnvOffset64} }

// Sum returns the hash so far.
func (t *Trace) Sum() uint64 { return t.h }

// Events returns the number of events folded in.
func (t *Trace) Events() uint64 { return t.events }

// String renders the hash the way runs print it.
func (t *Trace) String() string { return FormatHash(t.h) }

// FormatHash renders a trace hash as 16 hex digits.
func FormatHash(h uint64) string { return fmt.Sprintf("%016x", h) }

// Begin starts one event: its kind and virtual time.
func (t *Trace) Begin(kind byte, at time.Duration) {
	t.events++
	t.Byte(kind)
	t.U64(uint64(at))
}

// Byte folds one byte.
func (t *Trace) Byte(b byte) {
	t.h ^= uint64(b)
	t.h *= fnvPrime64
}

// U64 folds x as 8 little-endian bytes.
func (t *Trace) U64(x uint64) {
	for i := 0; i < 8; i++ {
		t.h ^= x & 0xff
		t.h *= fnvPrime64
		x >>= 8
	}
}

// Str folds a length-prefixed string (the prefix keeps "ab"+"c" apart from "a"+"bc").
func (t *Trace) Str(s string) {
	t.U64(uint64(len(s)))
	for i := 0; i < len(s); i++ {
		t.h ^= uint64(s[i])
		t.h *= fnvPrime64
	}
}

// Bytes folds a length-prefixed byte slice.
func (t *Trace) Bytes(b []byte) {
	t.U64(uint64(len(b)))
	for _, c := range b {
		t.h ^= uint64(c)
		t.h *= fnvPrime64
	}
}

// Trace event kinds. They are part of the hash's definition: renumbering
// them changes every hash (which is fine across commits, never within one).
const (
	traceDeliver byte = iota + 1
	traceDrop
	traceFault
	traceHeal
	traceCall
	traceReturn
	traceCrash
	traceRestart
	tracePause
	traceResume
	traceFsync
	tracePhase
)
