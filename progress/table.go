package progress

import (
	"errors"
	"fmt"
)

// Epoch numbers failover periods. Each failover opens a strictly greater
// epoch, so a write region can be fenced by its epoch. Epoch 0 is reserved:
// it is the position of a replica with an empty log.
type Epoch uint64

// LSN is a log sequence number. A partition's ops carry dense LSNs 1, 2, 3,
// ...; LSN 0 is "before the first op".
type LSN uint64

// Bounds. The table lives inside the partition's CASPaxos register value,
// so it must stay small however many failovers happen: Open and Compact
// never keep more than MaxEpochs epochs, and Decode refuses to read more.
const (
	// MaxEpochs is the hard cap on epochs kept. 32 failovers of one
	// partition without every replica catching up is far beyond any real
	// incident; when it happens the oldest epochs are dropped and replicas
	// still in them need a snapshot, rather than blocking a failover.
	MaxEpochs = 32
	// MaxRegionBytes bounds a write-region name.
	MaxRegionBytes = 64
	// MaxPartitionBytes bounds a partition name.
	MaxPartitionBytes = 256
)

// EpochRange is one row of the progress table: during Epoch, WriteRegion
// was the partition's write region and the ops it wrote that are part of
// the lineage have LSNs in (StartLSN, EndLSN]. StartLSN is the last LSN the
// write region inherited from the lineage when it was promoted. The current
// epoch is Open: its end is not known yet, and EndLSN is zero.
type EpochRange struct {
	Epoch       Epoch
	StartLSN    LSN
	EndLSN      LSN // meaningful only when !Open; zero when Open
	Open        bool
	WriteRegion string
}

// Table is a partition's progress table: the lineage of its log as a list
// of epochs, ascending, the last one open. Consecutive epochs touch
// (Epochs[i+1].StartLSN == Epochs[i].EndLSN), so the table describes the
// lineage from BaseLSN() on without gaps.
//
// BaseEpoch records what compaction forgot: every epoch from BaseEpoch up
// to (not including) Epochs[0].Epoch was dropped and ended exactly at
// BaseLSN(), so the table still answers for replicas in those epochs.
// Replicas in epochs below BaseEpoch need a snapshot. Without compaction
// BaseEpoch == Epochs[0].Epoch.
//
// Tables are values: every method returns a new table and never writes to
// the receiver's Epochs array.
type Table struct {
	Partition string
	BaseEpoch Epoch
	Epochs    []EpochRange
}

// New returns a table whose only epoch is first, the current one. first
// must be Open with EndLSN zero; its StartLSN is where the table's knowledge
// of the lineage begins (0 for a new partition).
func New(partition string, first EpochRange) (Table, error) {
	t := Table{Partition: partition, BaseEpoch: first.Epoch, Epochs: []EpochRange{first}}
	if err := t.Validate(); err != nil {
		return Table{}, err
	}
	return t, nil
}

// Validate checks every invariant the other methods rely on. It is cheap
// (at most MaxEpochs rows), so every method runs it on its receiver.
func (t Table) Validate() error {
	if err := checkName(t.Partition, MaxPartitionBytes); err != nil {
		return fmt.Errorf("progress: %w: %w: %w", ErrInvalidTable, ErrInvalidPartition, err)
	}
	n := len(t.Epochs)
	if n == 0 {
		return fmt.Errorf("progress: %w: partition %q has no epochs", ErrInvalidTable, t.Partition)
	}
	if n > MaxEpochs {
		return fmt.Errorf("progress: %w: %w: %d epochs, at most %d", ErrInvalidTable, ErrTooManyEpochs, n, MaxEpochs)
	}
	if t.BaseEpoch == 0 || t.BaseEpoch > t.Epochs[0].Epoch {
		return fmt.Errorf("progress: %w: base epoch %d must be in [1, %d]", ErrInvalidTable, t.BaseEpoch, t.Epochs[0].Epoch)
	}
	for i, e := range t.Epochs {
		if err := checkName(e.WriteRegion, MaxRegionBytes); err != nil {
			return fmt.Errorf("progress: %w: %w: epoch %d: %w", ErrInvalidTable, ErrInvalidRegion, e.Epoch, err)
		}
		last := i == n-1
		if e.Open != last {
			return fmt.Errorf("progress: %w: epoch %d: exactly the last epoch must be open (open=%t, last=%t)",
				ErrInvalidTable, e.Epoch, e.Open, last)
		}
		if e.Open && e.EndLSN != 0 {
			// Canonical form: an open epoch has no end, so equal tables
			// compare and encode equal.
			return fmt.Errorf("progress: %w: open epoch %d has EndLSN %d, want 0", ErrInvalidTable, e.Epoch, e.EndLSN)
		}
		if !e.Open && e.EndLSN < e.StartLSN {
			return fmt.Errorf("progress: %w: %w: epoch %d ends at %d before its start %d",
				ErrInvalidTable, ErrLSNRegression, e.Epoch, e.EndLSN, e.StartLSN)
		}
		if i == 0 {
			continue
		}
		prev := t.Epochs[i-1]
		if e.Epoch <= prev.Epoch {
			return fmt.Errorf("progress: %w: %w: epoch %d follows epoch %d", ErrInvalidTable, ErrEpochNotIncreasing, e.Epoch, prev.Epoch)
		}
		if e.StartLSN != prev.EndLSN {
			// A gap would leave LSNs with no write region; an overlap would
			// give one LSN two. Either makes the divergence point ambiguous.
			return fmt.Errorf("progress: %w: %w: epoch %d starts at %d but epoch %d ended at %d",
				ErrInvalidTable, ErrLSNRegression, e.Epoch, e.StartLSN, prev.Epoch, prev.EndLSN)
		}
	}
	return nil
}

func checkName(s string, maxBytes int) error {
	if s == "" {
		return errors.New("empty name")
	}
	if len(s) > maxBytes {
		return fmt.Errorf("name of %d bytes exceeds %d", len(s), maxBytes)
	}
	return nil
}

// Current returns the open epoch: the current write region and where its
// epoch started. It returns the zero EpochRange for a table with no epochs
// (which Validate rejects).
func (t Table) Current() EpochRange {
	if len(t.Epochs) == 0 {
		return EpochRange{}
	}
	return t.Epochs[len(t.Epochs)-1]
}

// BaseLSN is where the table's knowledge of the lineage begins: the start
// of its oldest kept epoch. Every op at or below it is part of the lineage
// (whichever epoch wrote it).
func (t Table) BaseLSN() LSN {
	if len(t.Epochs) == 0 {
		return 0
	}
	return t.Epochs[0].StartLSN
}

// EndOf returns the LSN at which the lineage left epoch e: the EndLSN of a
// closed epoch in the table, or BaseLSN() for a compacted epoch in
// [BaseEpoch, Epochs[0].Epoch). ok is false for the open epoch (no end yet),
// for epochs the table does not hold, and for epochs below BaseEpoch.
func (t Table) EndOf(e Epoch) (end LSN, ok bool) {
	if len(t.Epochs) == 0 || e < t.BaseEpoch {
		return 0, false
	}
	if e < t.Epochs[0].Epoch {
		return t.BaseLSN(), true
	}
	i, found := t.find(e)
	if !found || t.Epochs[i].Open {
		return 0, false
	}
	return t.Epochs[i].EndLSN, true
}

// find returns the index of epoch e among the kept epochs. Linear: there
// are at most MaxEpochs of them.
func (t Table) find(e Epoch) (int, bool) {
	for i, r := range t.Epochs {
		if r.Epoch == e {
			return i, true
		}
		if r.Epoch > e {
			break
		}
	}
	return 0, false
}

// Open records a failover: it closes the current epoch at startLSN and opens
// newEpoch with writeRegion as the write region, continuing after startLSN.
// startLSN is the last LSN the new write region shares with the lineage (use
// Promote to derive it from the candidate's position; its raw last LSN is
// wrong if it holds false progress). Ops the old write region wrote beyond
// startLSN become false progress.
//
// Errors: invalid receiver or region, newEpoch not above the current epoch
// (ErrEpochNotIncreasing), startLSN below the current epoch's StartLSN
// (ErrLSNRegression; that drops lineage ops and needs OpenBehind).
//
// If the table already holds MaxEpochs epochs, the oldest is dropped as by
// Compact: a failover must never fail because the table is full.
func (t Table) Open(newEpoch Epoch, writeRegion string, startLSN LSN) (Table, error) {
	if err := t.checkOpen(newEpoch, writeRegion); err != nil {
		return Table{}, err
	}
	if cur := t.Current(); startLSN < cur.StartLSN {
		return Table{}, fmt.Errorf("progress: %w: epoch %d would start at %d, below current epoch %d's start %d (use OpenBehind to drop lineage ops deliberately)",
			ErrLSNRegression, newEpoch, startLSN, cur.Epoch, cur.StartLSN)
	}
	return t.open(newEpoch, writeRegion, startLSN), nil
}

// OpenBehind is Open for a new write region that is behind the start of the
// current epoch, e.g. the only surviving region of an ungraceful failover
// after the previous write region was itself promoted and lost. The lineage
// is cut at startLSN: every epoch is clipped to end at or before it, so all
// ops above startLSN (in any epoch) become false progress. That is data
// loss of ops that may have been acknowledged; callers must mean it (count
// it against the partition's data-loss budget). startLSN may not go below
// BaseLSN(): the table no longer knows which epochs ended there.
func (t Table) OpenBehind(newEpoch Epoch, writeRegion string, startLSN LSN) (Table, error) {
	if err := t.checkOpen(newEpoch, writeRegion); err != nil {
		return Table{}, err
	}
	if base := t.BaseLSN(); startLSN < base {
		return Table{}, fmt.Errorf("progress: %w: epoch %d would start at %d, below the table's base LSN %d",
			ErrLSNRegression, newEpoch, startLSN, base)
	}
	return t.open(newEpoch, writeRegion, startLSN), nil
}

func (t Table) checkOpen(newEpoch Epoch, writeRegion string) error {
	if err := t.Validate(); err != nil {
		return err
	}
	if err := checkName(writeRegion, MaxRegionBytes); err != nil {
		return fmt.Errorf("progress: %w: %w", ErrInvalidRegion, err)
	}
	if cur := t.Current(); newEpoch <= cur.Epoch {
		return fmt.Errorf("progress: %w: new epoch %d is not above current epoch %d", ErrEpochNotIncreasing, newEpoch, cur.Epoch)
	}
	return nil
}

// open clips every epoch at startLSN, closes the current one there and
// appends the new open epoch. When startLSN >= the current epoch's start
// (Open), clipping changes nothing but the current epoch's end; below it
// (OpenBehind), later epochs shrink to empty ranges at startLSN, which keeps
// the ranges touching. The caller has validated.
func (t Table) open(newEpoch Epoch, writeRegion string, startLSN LSN) Table {
	eps := make([]EpochRange, len(t.Epochs), len(t.Epochs)+1)
	copy(eps, t.Epochs)
	for i := range eps {
		eps[i].StartLSN = min(eps[i].StartLSN, startLSN)
		if !eps[i].Open {
			eps[i].EndLSN = min(eps[i].EndLSN, startLSN)
		}
	}
	last := &eps[len(eps)-1]
	last.Open = false
	last.EndLSN = startLSN
	eps = append(eps, EpochRange{Epoch: newEpoch, StartLSN: startLSN, Open: true, WriteRegion: writeRegion})
	out := Table{Partition: t.Partition, BaseEpoch: t.BaseEpoch, Epochs: eps}
	if over := len(eps) - MaxEpochs; over > 0 {
		out = out.dropOldest(over)
	}
	return out
}

// Promote is the failover decision's entry point: it opens newEpoch for a
// candidate that reports its position (candidateEpoch, candidateLastLSN) as
// for Diverge, starting the epoch at the candidate's common LSN with the
// lineage rather than at its raw last LSN. The Divergence tells the
// candidate what to set aside before it accepts writes (its false
// progress); its Delta is empty because the candidate defines the new
// lineage.
//
// A candidate in the current epoch is taken at its word (the table cannot
// see the old write region's last LSN). A candidate whose common LSN is
// below the current epoch's start gets *CandidateBehindError; one from a
// compacted epoch gets ErrSnapshotRequired.
func (t Table) Promote(newEpoch Epoch, writeRegion string, candidateEpoch Epoch, candidateLastLSN LSN) (Table, Divergence, error) {
	if err := t.checkOpen(newEpoch, writeRegion); err != nil {
		return Table{}, Divergence{}, err
	}
	loc, err := t.locate(candidateEpoch, candidateLastLSN)
	if err != nil {
		return Table{}, Divergence{}, fmt.Errorf("progress: promote %q: %w", writeRegion, err)
	}
	if loc.reason == ReasonCompacted {
		return Table{}, Divergence{}, fmt.Errorf("progress: promote %q: %w: epoch %d is below base epoch %d",
			writeRegion, ErrSnapshotRequired, candidateEpoch, t.BaseEpoch)
	}
	cur := t.Current()
	if loc.common < cur.StartLSN {
		return Table{}, Divergence{}, &CandidateBehindError{
			Region: writeRegion, CommonLSN: loc.common, CurrentEpoch: cur.Epoch, CurrentStart: cur.StartLSN,
		}
	}
	out := t.open(newEpoch, writeRegion, loc.common)
	return out, divergence(loc, candidateEpoch, candidateLastLSN, loc.common), nil
}

// Compact drops epochs that no replica can ask about any more, then, if
// more than maxEpochs remain, the oldest ones beyond that bound.
//
// minReplicaLSN must be a lower bound on every replica's CommonLSN (as
// returned by Diverge and confirmed by the replica), counting replicas
// that are down. Closed epochs ending at or below it are dropped: a
// replica whose CommonLSN is at least minReplicaLSN gets exactly the same
// answer from the compacted table. Passing too large a value is never
// unsafe, only pessimistic: replicas the table can no longer place get
// NeedsSnapshot instead of a wrong delta. The same holds for the forced
// drops that enforce maxEpochs (1 <= maxEpochs <= MaxEpochs). The current
// epoch is never dropped.
func (t Table) Compact(minReplicaLSN LSN, maxEpochs int) (Table, error) {
	if err := t.Validate(); err != nil {
		return Table{}, err
	}
	if maxEpochs < 1 || maxEpochs > MaxEpochs {
		return Table{}, fmt.Errorf("progress: %w: %d not in [1, %d]", ErrMaxEpochsRange, maxEpochs, MaxEpochs)
	}
	n := len(t.Epochs)
	k := 0
	for k < n-1 && t.Epochs[k].EndLSN <= minReplicaLSN {
		k++
	}
	k = max(k, n-maxEpochs)
	return t.dropOldest(k), nil
}

// dropOldest returns a copy without the first k epochs (k < len). It keeps
// BaseEpoch pointing at the oldest dropped epoch that ended at the new base
// LSN: ends are non-decreasing, so every epoch from there on ended exactly
// at the base, and replicas in them can still be answered.
func (t Table) dropOldest(k int) Table {
	eps := make([]EpochRange, len(t.Epochs)-k)
	copy(eps, t.Epochs[k:])
	out := Table{Partition: t.Partition, BaseEpoch: t.BaseEpoch, Epochs: eps}
	if k == 0 {
		return out
	}
	newBase := eps[0].StartLSN
	if newBase == t.BaseLSN() {
		// Every dropped epoch was empty at the old base: the old BaseEpoch
		// still ended there.
		return out
	}
	for _, r := range t.Epochs[:k] {
		if r.EndLSN == newBase {
			out.BaseEpoch = r.Epoch
			break
		}
	}
	return out
}
