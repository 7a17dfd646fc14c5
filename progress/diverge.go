package progress

import (
	"fmt"
)

// LSNRange is the half-open range of LSNs (After, Last]. It is empty when
// Last <= After. Ops have dense LSNs, so Len is also the number of ops.
type LSNRange struct {
	After LSN // exclusive
	Last  LSN // inclusive
}

// Len is the number of LSNs (and ops) in the range.
func (r LSNRange) Len() uint64 {
	if r.Last <= r.After {
		return 0
	}
	return uint64(r.Last - r.After)
}

// Empty reports whether the range holds no LSN.
func (r LSNRange) Empty() bool { return r.Last <= r.After }

// Contains reports whether l is in (After, Last].
func (r LSNRange) Contains(l LSN) bool { return l > r.After && l <= r.Last }

func (r LSNRange) String() string { return fmt.Sprintf("(%d, %d]", r.After, r.Last) }

// Reason says which rule placed a replica. Callers can count divergences by
// reason; Divergence.Why turns it into a sentence for operators.
type Reason uint8

// Reasons, in the order locate tests them.
const (
	// ReasonEmptyLog: the replica holds no ops; it needs the whole lineage.
	ReasonEmptyLog Reason = iota + 1
	// ReasonCurrentEpoch: the replica follows the current write region; its
	// log is a prefix of the lineage.
	ReasonCurrentEpoch
	// ReasonCompacted: the replica's epoch is below BaseEpoch; compaction
	// forgot where it ended, so the replica needs a snapshot.
	ReasonCompacted
	// ReasonWithinEpoch: the replica stopped at or before the end of its
	// epoch in the lineage: no false progress, only a delta.
	ReasonWithinEpoch
	// ReasonFalseProgress: the replica holds ops past the end of its epoch
	// in the lineage (an old write region's unreplicated writes, or ops
	// copied from one).
	ReasonFalseProgress
)

func (r Reason) String() string {
	switch r {
	case ReasonEmptyLog:
		return "empty-log"
	case ReasonCurrentEpoch:
		return "current-epoch"
	case ReasonCompacted:
		return "compacted"
	case ReasonWithinEpoch:
		return "within-epoch"
	case ReasonFalseProgress:
		return "false-progress"
	default:
		return fmt.Sprintf("reason(%d)", uint8(r))
	}
}

// Divergence is what a returning replica must do to rejoin the lineage.
type Divergence struct {
	// CommonLSN is the last LSN at which the replica's log and the lineage
	// agree: it keeps its ops up to here.
	CommonLSN LSN
	// FalseProgress is (CommonLSN, replica's last LSN]: ops the replica
	// holds that are not in the lineage and never will be (an old write
	// region's writes that did not reach the promoted region). They are set
	// aside, not replayed. Empty if the replica has none, and when
	// NeedsSnapshot (then it is unknown).
	FalseProgress LSNRange
	// FalseProgressOps is FalseProgress.Len(), kept as its own field for the
	// data-loss accounting the paper reports (RPO in ops).
	FalseProgressOps uint64
	// Delta is (CommonLSN, lineage's last LSN]: what the write region ships.
	Delta LSNRange
	// NeedsSnapshot: the replica's epoch is older than anything the table
	// remembers (BaseEpoch), so its divergence point is unknown. It must
	// drop its log and install a snapshot; CommonLSN is 0 and Delta is the
	// whole lineage, which is also what a caller ignoring the flag would do.
	NeedsSnapshot bool

	// Reason is the rule that applied; Epoch and EpochEnd are the inputs it
	// used (the replica's epoch and, for ReasonWithinEpoch and
	// ReasonFalseProgress, where that epoch ended in the lineage).
	Reason   Reason
	Epoch    Epoch
	EpochEnd LSN
}

// Why explains the answer in a sentence for logs and operators. It is a
// method, not a field, so that computing divergences for many replicas
// formats nothing.
func (d Divergence) Why() string {
	switch d.Reason {
	case ReasonEmptyLog:
		return fmt.Sprintf("empty log: ships the whole lineage %v", d.Delta)
	case ReasonCurrentEpoch:
		return fmt.Sprintf("replica follows current epoch %d: no false progress; ships %v", d.Epoch, d.Delta)
	case ReasonCompacted:
		return fmt.Sprintf("epoch %d is below the table's base epoch; its end was compacted away: install a snapshot", d.Epoch)
	case ReasonWithinEpoch:
		return fmt.Sprintf("epoch %d ended at LSN %d and the replica stopped at %d: no false progress; ships %v",
			d.Epoch, d.EpochEnd, d.CommonLSN, d.Delta)
	case ReasonFalseProgress:
		return fmt.Sprintf("epoch %d ended at LSN %d; the replica holds %d ops past it (false progress %v, set aside); ships %v",
			d.Epoch, d.EpochEnd, d.FalseProgressOps, d.FalseProgress, d.Delta)
	default:
		return d.Reason.String()
	}
}

// location is where a replica position falls in the table.
type location struct {
	common LSN // last LSN shared with the lineage
	end    LSN // where the replica's epoch ended (ReasonWithinEpoch, ReasonFalseProgress)
	reason Reason
}

// locate finds a replica's common LSN with the lineage from its position:
// the epoch of the write region whose log the replica's log is a prefix of
// (the epoch of its last op, or the epoch it last reconciled with), and its
// last LSN. Replication keeps logs matching (a replica truncates to its
// common prefix with a write region before appending from it), so the
// replica agrees with epoch e's write region up to its last LSN, and that
// write region's log is the lineage up to EndOf(e). Hence
// common = min(lastLSN, EndOf(e)); the open epoch has no end.
func (t Table) locate(e Epoch, last LSN) (location, error) {
	cur := t.Current()
	switch {
	case e > cur.Epoch:
		return location{}, fmt.Errorf("%w: replica epoch %d is after current epoch %d", ErrReplicaAhead, e, cur.Epoch)
	case e == 0 && last != 0:
		return location{}, fmt.Errorf("%w: epoch 0 (empty log) with last LSN %d", ErrInvalidPosition, last)
	case last == 0:
		// An empty log shares the (empty) prefix with any lineage, whichever
		// epoch it was reconciled with, compacted or not.
		return location{reason: ReasonEmptyLog}, nil
	case e == cur.Epoch:
		return location{common: last, reason: ReasonCurrentEpoch}, nil
	case e < t.BaseEpoch:
		return location{reason: ReasonCompacted}, nil
	}
	end, ok := t.EndOf(e)
	if !ok {
		return location{}, fmt.Errorf("%w: epoch %d (table holds epochs %d..%d, base epoch %d)",
			ErrUnknownEpoch, e, t.Epochs[0].Epoch, cur.Epoch, t.BaseEpoch)
	}
	if last <= end {
		return location{common: last, end: end, reason: ReasonWithinEpoch}, nil
	}
	return location{common: end, end: end, reason: ReasonFalseProgress}, nil
}

func divergence(loc location, e Epoch, replicaLast, lineageLast LSN) Divergence {
	if loc.reason == ReasonCompacted {
		return Divergence{Delta: LSNRange{After: 0, Last: lineageLast}, NeedsSnapshot: true, Reason: loc.reason, Epoch: e}
	}
	fp := LSNRange{After: loc.common, Last: replicaLast}
	return Divergence{
		CommonLSN:        loc.common,
		FalseProgress:    fp,
		FalseProgressOps: fp.Len(),
		Delta:            LSNRange{After: loc.common, Last: lineageLast},
		Reason:           loc.reason,
		Epoch:            e,
		EpochEnd:         loc.end,
	}
}

// Diverge computes, for a returning replica, its divergence point, its
// false progress and the delta it needs. The replica reports its position:
// replicaEpoch is the epoch of the write region whose log its log is a
// prefix of (the epoch of its last op, or the epoch it last reconciled
// with; both work), replicaLastLSN its last LSN; an empty log is (0, 0).
// lineageLastLSN is the current write region's last LSN.
//
// Errors: invalid table; ErrLineageTooShort; ErrReplicaAhead (epoch after
// the current one, or more ops in the current epoch than the write region
// has); ErrUnknownEpoch (an epoch no write region had); ErrInvalidPosition.
// A replica from an epoch compaction forgot is not an error: the result has
// NeedsSnapshot set.
func (t Table) Diverge(replicaEpoch Epoch, replicaLastLSN, lineageLastLSN LSN) (Divergence, error) {
	if err := t.Validate(); err != nil {
		return Divergence{}, err
	}
	if cur := t.Current(); lineageLastLSN < cur.StartLSN {
		return Divergence{}, fmt.Errorf("progress: %w: lineage last LSN %d, epoch %d started at %d",
			ErrLineageTooShort, lineageLastLSN, cur.Epoch, cur.StartLSN)
	}
	loc, err := t.locate(replicaEpoch, replicaLastLSN)
	if err != nil {
		return Divergence{}, fmt.Errorf("progress: diverge: %w", err)
	}
	if loc.reason == ReasonCurrentEpoch && replicaLastLSN > lineageLastLSN {
		// In the current epoch the replica's log is a prefix of the write
		// region's, so it cannot be longer.
		return Divergence{}, fmt.Errorf("progress: diverge: %w: replica at LSN %d in current epoch %d, write region only at %d",
			ErrReplicaAhead, replicaLastLSN, replicaEpoch, lineageLastLSN)
	}
	return divergence(loc, replicaEpoch, replicaLastLSN, lineageLastLSN), nil
}
