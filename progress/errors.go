package progress

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns wraps at least one of
// them (some wrap two, e.g. ErrInvalidTable and the rule that failed), so
// callers branch with errors.Is and never on message text.
var (
	// ErrInvalidTable: a Table breaks a structural invariant (see
	// Table.Validate). Methods refuse invalid receivers instead of computing
	// answers from a table that could send a replica the wrong delta.
	ErrInvalidTable = errors.New("invalid progress table")
	// ErrInvalidPartition: the partition name is empty or too long.
	ErrInvalidPartition = errors.New("invalid partition name")
	// ErrInvalidRegion: a write-region name is empty or too long.
	ErrInvalidRegion = errors.New("invalid write-region name")
	// ErrEpochNotIncreasing: epochs must be strictly increasing; a failover
	// that does not raise the epoch could not fence the old write region.
	ErrEpochNotIncreasing = errors.New("epoch not increasing")
	// ErrLSNRegression: an LSN range goes backwards, or a new epoch would
	// start below what the table allows (the current epoch's start for
	// Open, the base LSN for OpenBehind).
	ErrLSNRegression = errors.New("LSN goes backwards")
	// ErrTooManyEpochs: more than MaxEpochs epochs (decoding or Validate).
	ErrTooManyEpochs = errors.New("too many epochs")
	// ErrMaxEpochsRange: Compact's maxEpochs is outside [1, MaxEpochs].
	ErrMaxEpochsRange = errors.New("maxEpochs out of range")

	// ErrReplicaAhead: a replica reports a position the table says cannot
	// exist: an epoch after the current one, or more ops in the current
	// epoch than the write region has. Either the replica or the caller's
	// table is stale or wrong; shipping a delta would be guesswork.
	ErrReplicaAhead = errors.New("replica ahead of the progress table")
	// ErrUnknownEpoch: the replica's epoch falls in a gap between two
	// epochs the table holds, so no write region ever had it.
	ErrUnknownEpoch = errors.New("epoch not in the progress table")
	// ErrInvalidPosition: a replica position that is malformed on its face
	// (epoch 0, which is reserved for an empty log, with a non-zero LSN).
	ErrInvalidPosition = errors.New("invalid replica position")
	// ErrLineageTooShort: the lineage's last LSN is below the start of the
	// current epoch, which the write region held when it was promoted.
	ErrLineageTooShort = errors.New("lineage last LSN below the current epoch's start")

	// ErrCandidateBehind: Promote refuses a candidate whose common LSN with
	// the lineage is below the current epoch's start, because promoting it
	// drops ops that were already part of the lineage. See
	// CandidateBehindError for the numbers; OpenBehind does it on purpose.
	ErrCandidateBehind = errors.New("candidate behind the current epoch's start")
	// ErrSnapshotRequired: the candidate's epoch was compacted away, so the
	// table cannot tell where its log leaves the lineage.
	ErrSnapshotRequired = errors.New("replica's epoch was compacted away; it needs a snapshot")

	// ErrCorrupt: Decode was given bytes that are not a canonical encoding
	// of a valid table.
	ErrCorrupt = errors.New("corrupt progress table encoding")
	// ErrUnknownVersion: the encoding has a format byte this build does not
	// know (ErrCorrupt is wrapped too, so one check catches both).
	ErrUnknownVersion = errors.New("unknown progress table format version")
)

// CandidateBehindError carries the numbers behind ErrCandidateBehind so that
// the failover layer can decide, and log, whether to accept the loss with
// OpenBehind(newEpoch, region, CommonLSN).
type CandidateBehindError struct {
	Region       string // the candidate write region
	CommonLSN    LSN    // the candidate's last LSN shared with the lineage
	CurrentEpoch Epoch  // the epoch being replaced
	CurrentStart LSN    // its StartLSN: ops (CommonLSN, CurrentStart] would leave the lineage
}

func (e *CandidateBehindError) Error() string {
	return fmt.Sprintf("progress: candidate %q shares the lineage only through LSN %d, below epoch %d's start %d (%d lineage ops would be lost): %v",
		e.Region, e.CommonLSN, e.CurrentEpoch, e.CurrentStart, uint64(e.CurrentStart-e.CommonLSN), ErrCandidateBehind)
}

// Unwrap lets errors.Is(err, ErrCandidateBehind) match.
func (e *CandidateBehindError) Unwrap() error { return ErrCandidateBehind }
