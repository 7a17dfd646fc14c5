package partition

import (
	"github.com/fmnode/fmnode/quorum"
)

// Store is the durable state of the partitions of one host: per partition
// an LSN-ordered log, the applied key-value state, undo records for applied
// ops that a failover could still truncate, conflict records, and two small
// records (Meta and ApplyState). Many partitions share one store, and one
// Commit makes the writes of many partitions durable with one sync (group
// commit).
//
// MemStore is the in-memory twin; pebblestore.Store keeps it in pebble.
// Both run the same write logic (ApplyWrites over their KV), so they cannot
// disagree on what a Write means.
type Store interface {
	// Partitions lists the hosted partitions, ascending.
	Partitions() ([]ID, error)
	// Load recovers one partition: its records and the log ops above its
	// applied LSN (never compacted, and bounded by the write window).
	Load(p ID) (Recovered, error)
	// Commit applies the writes atomically and in order, and returns once
	// they are durable. A failed Commit applied nothing. After a failure
	// the store may refuse further writes until it is reopened.
	Commit(ws []Write) error
	// ReadLog returns ops of p from LSN from on, ascending, at most
	// maxOps ops and about maxBytes bytes (at least one op if any).
	ReadLog(p ID, from LSN, maxOps, maxBytes int) ([]Op, error)
	// Get reads key from p's applied state.
	Get(p ID, key []byte) (KV, bool, error)
	// ReadKV returns a chunk of p's applied state: pairs with keys after
	// `after` (from the first key if after is nil), ascending, about
	// maxBytes, with more=true if keys remain, and the applied LSN of the
	// same consistent view.
	ReadKV(p ID, after []byte, maxBytes int) (kvs []KV, more bool, applied LSN, err error)
	// Conflicts lists p's conflict records after the given position
	// (epoch, LSN), ascending, at most limit.
	Conflicts(p ID, after Token, limit int) ([]ConflictRecord, error)
	Close() error
}

// AsyncStore is a Store that can overlap commits. CommitAsync applies ws
// atomically (visible to reads when it returns) and queues it for
// durability; wait blocks until it is durable. Commits become durable in
// the order they were started. A driver may run a Ready's reads right after
// CommitAsync (they see exactly that Ready's writes and the earlier ones:
// only committed ops are applied, so nothing they return can be lost), but
// must not send its messages or call Advance before wait returns.
type AsyncStore interface {
	Store
	CommitAsync(ws []Write) (wait func() error, err error)
}

// CommitAsync applies ws to st and returns the wait for its durability:
// st's own CommitAsync when it is an AsyncStore; otherwise st commits ws
// durably here and the wait returns at once. Drivers that pipeline their
// commits call this, so that every store works with them.
func CommitAsync(st Store, ws []Write) (wait func() error, err error) {
	if as, ok := st.(AsyncStore); ok {
		return as.CommitAsync(ws)
	}
	if err := st.Commit(ws); err != nil {
		return nil, err
	}
	return func() error { return nil }, nil
}

// Meta is a partition replica's hard state. It changes rarely (epoch,
// role, quorum, history, compaction, snapshot state).
type Meta struct {
	Epoch       Epoch
	Role        Role
	WriteRegion Region // "" if unknown
	Level       Level
	Quorum      quorum.WriteQuorum // as last configured (the write region uses it)
	History     []EpochRange
	// LogBase is the LSN before the log's first op (the last compacted op,
	// or a snapshot's base) and LogBaseEpoch its epoch.
	LogBase      LSN
	LogBaseEpoch Epoch
	// NeedSnapshot: the replica's state is not usable (a snapshot install
	// is in progress or a truncation went below what it could undo).
	NeedSnapshot bool
	// ReadableFrom: reads wait until Applied reaches it (the point from
	// which a fuzzy snapshot's state is consistent).
	ReadableFrom LSN
}

// ApplyState is written with every apply: the applied position and the
// floor above which every applied op has an undo record.
type ApplyState struct {
	Applied      LSN
	AppliedEpoch Epoch
	UndoFloor    LSN
}

// Recovered is what Load returns for one partition.
type Recovered struct {
	Partition ID
	Meta      Meta
	Apply     ApplyState
	// Last is the LSN of the last op in the log (LogBase if the log is
	// empty), LastEpoch its epoch.
	Last      LSN
	LastEpoch Epoch
	// Tail holds the ops in (Apply.Applied, Last].
	Tail []Op
}

// ConflictReason says why ops were moved out of the log.
type ConflictReason uint8

// Conflict reasons.
const (
	// ConflictTruncate: a Truncate or Promote control operation (failover:
	// the ops were not part of the new lineage).
	ConflictTruncate ConflictReason = iota + 1
	// ConflictOverwrite: the write region of a newer epoch replicated a
	// different op at the same LSN.
	ConflictOverwrite
	// ConflictSnapshot: a snapshot from the lineage replaced the log.
	ConflictSnapshot
)

func (r ConflictReason) String() string {
	switch r {
	case ConflictTruncate:
		return "truncate"
	case ConflictOverwrite:
		return "overwrite"
	case ConflictSnapshot:
		return "snapshot"
	default:
		return "unknown"
	}
}

// ConflictRecord is an op removed from the log by a truncation: never
// silently dropped, kept until an operator exports and deletes it.
type ConflictRecord struct {
	Partition ID
	Op        Op
	// RemovedAt is the replica's epoch when the op was removed.
	RemovedAt Epoch
	Reason    ConflictReason
}

// Write is what one partition asks the store to make durable, applied in
// this order: Reset, Truncate, Install, Append, Apply, CompactTo,
// PruneUndoTo, Meta, ApplyState.
type Write struct {
	Partition ID
	// Reset starts a snapshot install: every log op not in the lineage
	// goes to the conflict records, then log, applied state and undo
	// records are deleted.
	Reset *Reset
	// Truncate moves log ops above After to the conflict records and undoes
	// applied ops above After with their undo records.
	Truncate *Truncation
	// Install writes snapshot pairs into the applied state.
	Install []KV
	// Append adds ops to the log (LSNs contiguous with the log's end).
	Append []Op
	// Apply applies ops to the state; ops with LSN > UndoAbove first get an
	// undo record holding the value they replace.
	Apply     []Op
	UndoAbove LSN
	// CompactTo deletes log ops at or below it (0: none).
	CompactTo LSN
	// PruneUndoTo deletes undo records at or below it (0: none).
	PruneUndoTo LSN
	// PurgeConflictsThrough deletes conflict records at or below this
	// (epoch, LSN) position (zero: none); only an operator does this,
	// after exporting them (PurgeConflicts).
	PurgeConflictsThrough Token
	Meta                  *Meta
	ApplyState            *ApplyState

	// mark tells the core, when the write is durable, what became durable.
	mark writeMark
}

// Reset is the first step of installing a snapshot.
type Reset struct {
	// Lineage is the write region's history and Last its last LSN: a log op
	// (lsn, epoch) belongs to the lineage iff lsn <= Last and the lineage's
	// epoch at lsn is epoch; the others are conflicts.
	Lineage   []EpochRange
	Last      LSN
	RemovedAt Epoch
}

// Truncation removes the log above After.
type Truncation struct {
	After LSN
	// Applied is the applied LSN before the truncation: applied ops in
	// (After, Applied] are undone (the core guarantees their undo records).
	Applied   LSN
	RemovedAt Epoch
	Reason    ConflictReason
}

// writeMark records, for the core, the log position a Write makes durable.
type writeMark struct {
	gen  uint64 // log generation (bumped by truncations)
	last LSN    // last LSN of the log when the write was sealed
}

func (w *Write) empty() bool {
	return w.Reset == nil && w.Truncate == nil && len(w.Install) == 0 && len(w.Append) == 0 &&
		len(w.Apply) == 0 && w.CompactTo == 0 && w.PruneUndoTo == 0 && w.Meta == nil && w.ApplyState == nil &&
		w.PurgeConflictsThrough == (Token{})
}

// needsReads reports whether applying the write reads the store (so a
// batch engine must see its own earlier writes).
func (w *Write) needsReads() bool {
	if w.Reset != nil || w.Truncate != nil {
		return true
	}
	for i := range w.Apply {
		if w.Apply[i].LSN > w.UndoAbove {
			return true
		}
	}
	return false
}

// NeedsScan reports whether applying ws iterates over the store
// (truncations and resets): the batch must then be able to iterate over
// the store merged with its own earlier writes.
func NeedsScan(ws []Write) bool {
	for i := range ws {
		if ws[i].Reset != nil || ws[i].Truncate != nil {
			return true
		}
	}
	return false
}

// NeedsReads reports whether applying ws reads the store (point reads of
// state values for undo records, or scans): a batch engine must then let
// the reads see the batch's own earlier writes.
func NeedsReads(ws []Write) bool {
	for i := range ws {
		if ws[i].needsReads() {
			return true
		}
	}
	return false
}
