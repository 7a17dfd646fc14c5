package partition

import (
	"log/slog"
	"time"

	"github.com/fmnode/fmnode/guard"
)

// Hard bounds that no configuration may exceed. Decoders refuse anything
// beyond them, so a corrupt length can never make a decoder allocate more.
const (
	// HardMaxKeyBytes bounds a key.
	HardMaxKeyBytes = 4 << 10
	// HardMaxOpBytes bounds key plus value of one op (4 MiB).
	HardMaxOpBytes = 4 << 20
	// HardMaxEpochHistory bounds a replica's epoch history.
	HardMaxEpochHistory = 256
	// maxRegionBytes bounds a region name in stored and wire records.
	maxRegionBytes = 255
	// maxReplicas bounds the regions of one partition.
	maxReplicas = 16
	// maxContactBackoff bounds Config.MaxContactBackoff.
	maxContactBackoff = 5 * time.Minute
	// maxParkedPolls and maxPollWait bound Config.MaxParkedPolls and
	// Config.MaxPollWait.
	maxParkedPolls = 1 << 16
	maxPollWait    = time.Minute
)

// Config is the configuration of a Host: the limits and timings shared by
// every partition it hosts. Level (per partition) is separate.
type Config struct {
	// Region is the region of this host's replicas.
	Region Region
	// Boot distinguishes this incarnation of the host from earlier ones
	// (a restart counter or a random number). Freshness probes carry it so
	// that a grant answering a probe from before a restart, measured on a
	// clock with another origin, is ignored. Must be non-zero.
	Boot uint64

	// MaxKeyBytes bounds a key; MaxOpBytes bounds key plus value.
	MaxKeyBytes int
	MaxOpBytes  int
	// MaxBatchOps and MaxBatchBytes bound the ops of one replication
	// message (and of one log fetch).
	MaxBatchOps   int
	MaxBatchBytes int
	// MaxInflightOps is the replication window: ops sent to one follower
	// and not yet acknowledged.
	MaxInflightOps int
	// MaxPendingWrites bounds a partition's client writes that are held or
	// assigned but not committed. Beyond it writes get ErrBackpressure.
	MaxPendingWrites int
	// MaxPendingReads bounds the reads a host queues between two Readys.
	MaxPendingReads int
	// MaxParkedPolls bounds the clients' polls a host's followers hold
	// until their route moves (poll.go); beyond it a poll is answered at
	// once. Keep it below the requests the driver serves at once. 0: no
	// poll is held.
	MaxParkedPolls int
	// MaxPollWait bounds how long a poll is held (the client asks for its
	// WriteRequest.PollWait). 0: no poll is held.
	MaxPollWait time.Duration
	// MaxTailOps bounds the committed ops a write region keeps in memory
	// for replication (older ones are fetched from the store).
	MaxTailOps int

	// RetainLogOps is how many applied, fully replicated ops the log keeps
	// for catching replicas up by delta before compacting them.
	RetainLogOps uint64
	// MaxLogOps bounds the retained log: beyond it the log is compacted
	// even if a replica still needs the ops (it will get a snapshot).
	MaxLogOps uint64
	// CompactStepOps: compaction runs when it can drop at least this many
	// ops, so that range deletions stay rare.
	CompactStepOps uint64

	// HeartbeatInterval: how often a write region with replication work
	// outstanding (unacknowledged ops, commit positions not yet
	// propagated) sends to each follower. Idle partitions send nothing.
	HeartbeatInterval time.Duration
	// RetransmitTimeout: ops unacknowledged this long are sent again.
	RetransmitTimeout time.Duration
	// MaxContactBackoff caps how far apart the write region's probes of a
	// follower that stopped answering get. A follower that has left a
	// RetransmitTimeout's worth of heartbeats unanswered is probed at
	// doubling intervals up to this cap, with no window retransmissions
	// meanwhile, so that a dead region costs each partition O(1/cap)
	// messages instead of one per HeartbeatInterval. Any answer from the
	// follower (including the one a restarted follower sends unasked)
	// ends the backoff and resends the window at once, so the cap bounds
	// how late catch-up can start after a silent follower comes back.
	// Equal to HeartbeatInterval: no backoff.
	MaxContactBackoff time.Duration
	// CommitTimeout: a write not committed this long gets ErrUnknownOutcome
	// (the op stays in the log and may still commit).
	CommitTimeout time.Duration
	// LeaseGatesWrites: the write region refuses new writes, and answers
	// committed ones with an unknown outcome instead of an acknowledgement,
	// once its lease (SetLease) has lapsed. Another region may take over
	// after the lease plus the drift bound, starting from what the write
	// quorum held then, so an acknowledgement after the lease could name a
	// write the new lineage never had. The failover drivers turn it on;
	// harnesses without leases leave it off.
	LeaseGatesWrites bool

	// SnapshotChunkBytes bounds one snapshot chunk.
	SnapshotChunkBytes int
	// MaxEpochHistory bounds a replica's epoch history.
	MaxEpochHistory int
	// DriftMargin is the bound on clock rate drift between replicas
	// (0.01 = 1%); freshness grants for bounded-staleness reads are
	// shortened by it on followers and lengthened by it on the write region.
	DriftMargin float64

	// Logger receives rare events (fencing, promotion, truncation,
	// snapshots). Nil discards them.
	Logger *slog.Logger
	// Guards counts the replicas' guards and reject paths (stale epochs
	// and routes, lease gates, the strong commit rule); nil counts nothing.
	Guards guard.Counter
}

// Defaults.
const (
	DefaultMaxKeyBytes        = 1 << 10
	DefaultMaxOpBytes         = 256 << 10
	DefaultMaxBatchOps        = 256
	DefaultMaxBatchBytes      = 1 << 20
	DefaultMaxInflightOps     = 1024
	DefaultMaxPendingWrites   = 1024
	DefaultMaxPendingReads    = 1 << 16
	DefaultMaxParkedPolls     = 512 // half the data API's DefaultMaxInFlight
	DefaultMaxPollWait        = 2 * time.Second
	DefaultMaxTailOps         = 256
	DefaultRetainLogOps       = 1024
	DefaultMaxLogOps          = 1 << 16
	DefaultCompactStepOps     = 256
	DefaultHeartbeatInterval  = 100 * time.Millisecond
	DefaultRetransmitTimeout  = 500 * time.Millisecond
	DefaultMaxContactBackoff  = 4 * time.Second
	DefaultCommitTimeout      = 10 * time.Second
	DefaultSnapshotChunkBytes = 1 << 20
	DefaultMaxEpochHistory    = 32
	DefaultDriftMargin        = 0.01
)

// DefaultConfig returns the defaults for a host in region.
func DefaultConfig(region Region, boot uint64) Config {
	return Config{
		Region:             region,
		Boot:               boot,
		MaxKeyBytes:        DefaultMaxKeyBytes,
		MaxOpBytes:         DefaultMaxOpBytes,
		MaxBatchOps:        DefaultMaxBatchOps,
		MaxBatchBytes:      DefaultMaxBatchBytes,
		MaxInflightOps:     DefaultMaxInflightOps,
		MaxPendingWrites:   DefaultMaxPendingWrites,
		MaxPendingReads:    DefaultMaxPendingReads,
		MaxParkedPolls:     DefaultMaxParkedPolls,
		MaxPollWait:        DefaultMaxPollWait,
		MaxTailOps:         DefaultMaxTailOps,
		RetainLogOps:       DefaultRetainLogOps,
		MaxLogOps:          DefaultMaxLogOps,
		CompactStepOps:     DefaultCompactStepOps,
		HeartbeatInterval:  DefaultHeartbeatInterval,
		RetransmitTimeout:  DefaultRetransmitTimeout,
		MaxContactBackoff:  DefaultMaxContactBackoff,
		CommitTimeout:      DefaultCommitTimeout,
		SnapshotChunkBytes: DefaultSnapshotChunkBytes,
		MaxEpochHistory:    DefaultMaxEpochHistory,
		DriftMargin:        DefaultDriftMargin,
	}
}

// Validate checks every field and the relations between them.
func (c Config) Validate() error {
	switch {
	case c.Region == "":
		return configErr("Region", "must not be empty")
	case len(c.Region) > maxRegionBytes:
		return configErr("Region", "%d bytes exceeds %d", len(c.Region), maxRegionBytes)
	case c.Boot == 0:
		return configErr("Boot", "must be non-zero")
	case c.MaxKeyBytes < 1 || c.MaxKeyBytes > HardMaxKeyBytes:
		return configErr("MaxKeyBytes", "must be in [1, %d], got %d", HardMaxKeyBytes, c.MaxKeyBytes)
	case c.MaxOpBytes < c.MaxKeyBytes || c.MaxOpBytes > HardMaxOpBytes:
		return configErr("MaxOpBytes", "must be in [MaxKeyBytes %d, %d], got %d", c.MaxKeyBytes, HardMaxOpBytes, c.MaxOpBytes)
	case c.MaxBatchOps < 1:
		return configErr("MaxBatchOps", "must be at least 1, got %d", c.MaxBatchOps)
	case c.MaxBatchBytes < c.MaxOpBytes+64:
		return configErr("MaxBatchBytes", "%d cannot hold one op of MaxOpBytes %d", c.MaxBatchBytes, c.MaxOpBytes)
	case c.MaxInflightOps < c.MaxBatchOps:
		return configErr("MaxInflightOps", "%d is below MaxBatchOps %d", c.MaxInflightOps, c.MaxBatchOps)
	case c.MaxPendingWrites < 1:
		return configErr("MaxPendingWrites", "must be at least 1, got %d", c.MaxPendingWrites)
	case c.MaxPendingReads < 1:
		return configErr("MaxPendingReads", "must be at least 1, got %d", c.MaxPendingReads)
	case c.MaxParkedPolls < 0 || c.MaxParkedPolls > maxParkedPolls:
		return configErr("MaxParkedPolls", "must be in [0, %d], got %d", maxParkedPolls, c.MaxParkedPolls)
	case c.MaxPollWait < 0 || c.MaxPollWait > maxPollWait:
		return configErr("MaxPollWait", "must be in [0, %v], got %v", maxPollWait, c.MaxPollWait)
	case c.MaxTailOps < 0:
		return configErr("MaxTailOps", "must not be negative, got %d", c.MaxTailOps)
	case c.MaxLogOps < c.RetainLogOps+c.CompactStepOps:
		return configErr("MaxLogOps", "%d is below RetainLogOps %d + CompactStepOps %d", c.MaxLogOps, c.RetainLogOps, c.CompactStepOps)
	case c.MaxLogOps < uint64(c.MaxPendingWrites)+uint64(c.MaxInflightOps):
		return configErr("MaxLogOps", "%d is below MaxPendingWrites + MaxInflightOps (%d): uncommitted ops must fit", c.MaxLogOps, c.MaxPendingWrites+c.MaxInflightOps)
	case c.CompactStepOps < 1:
		return configErr("CompactStepOps", "must be at least 1, got %d", c.CompactStepOps)
	case c.HeartbeatInterval <= 0:
		return configErr("HeartbeatInterval", "must be positive, got %v", c.HeartbeatInterval)
	case c.RetransmitTimeout < c.HeartbeatInterval:
		return configErr("RetransmitTimeout", "%v is below HeartbeatInterval %v", c.RetransmitTimeout, c.HeartbeatInterval)
	case c.MaxContactBackoff < c.HeartbeatInterval:
		return configErr("MaxContactBackoff", "%v is below HeartbeatInterval %v", c.MaxContactBackoff, c.HeartbeatInterval)
	case c.MaxContactBackoff > maxContactBackoff:
		return configErr("MaxContactBackoff", "%v exceeds %v: a follower back from an outage could wait that long for its first probe", c.MaxContactBackoff, maxContactBackoff)
	case c.CommitTimeout < c.RetransmitTimeout:
		return configErr("CommitTimeout", "%v is below RetransmitTimeout %v", c.CommitTimeout, c.RetransmitTimeout)
	case c.SnapshotChunkBytes < c.MaxOpBytes+64 || c.SnapshotChunkBytes > 64<<20:
		return configErr("SnapshotChunkBytes", "must be in [MaxOpBytes+64, 64 MiB], got %d", c.SnapshotChunkBytes)
	case c.MaxEpochHistory < 2 || c.MaxEpochHistory > HardMaxEpochHistory:
		return configErr("MaxEpochHistory", "must be in [2, %d], got %d", HardMaxEpochHistory, c.MaxEpochHistory)
	case c.DriftMargin < 0 || c.DriftMargin >= 0.5:
		return configErr("DriftMargin", "must be in [0, 0.5), got %v", c.DriftMargin)
	}
	return nil
}

// Level is a partition's consistency configuration.
type Level struct {
	Consistency Consistency
	// StalenessOps (K) and StalenessTime (T) bound how far a
	// bounded-staleness read may lag the write region: at most K ops and at
	// most T behind. Only for BoundedStaleness.
	StalenessOps  uint64
	StalenessTime time.Duration
	// StalenessHold is how long a write is held back when accepting it
	// would exceed the bound, before it is rejected with ErrStalenessBound.
	StalenessHold time.Duration
}

// Validate checks the level, naming the field.
func (l Level) Validate() error {
	if !l.Consistency.Valid() {
		return configErr("Level.Consistency", "unknown level %d", l.Consistency)
	}
	if l.Consistency != BoundedStaleness {
		if l.StalenessOps != 0 || l.StalenessTime != 0 || l.StalenessHold != 0 {
			return configErr("Level.StalenessOps", "staleness bounds are only for bounded staleness, not %v", l.Consistency)
		}
		return nil
	}
	switch {
	case l.StalenessOps < 1:
		return configErr("Level.StalenessOps", "must be at least 1, got %d", l.StalenessOps)
	case l.StalenessTime <= 0:
		return configErr("Level.StalenessTime", "must be positive, got %v", l.StalenessTime)
	case l.StalenessHold <= 0:
		return configErr("Level.StalenessHold", "must be positive, got %v", l.StalenessHold)
	}
	return nil
}
