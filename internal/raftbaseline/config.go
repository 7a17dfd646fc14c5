package raftbaseline

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fmnode/fmnode/failover"
)

// ErrInvalidConfig: a configuration field is invalid; the message names it.
var ErrInvalidConfig = errors.New("raftbaseline: invalid config")

func configErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: Config.%s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// Defaults and bounds.
const (
	// DefaultMaxInflight bounds the controller's decisions being applied
	// at once and the bench's; raft batches them into append entries.
	DefaultMaxInflight = 1024
	// DefaultHeartbeatBatch is the replica records per heartbeat command.
	DefaultHeartbeatBatch = 512
	// DefaultApplyTimeout bounds one Apply (enqueue and commit).
	DefaultApplyTimeout = 10 * time.Second
)

// Config configures one voter: one region's node of the baseline.
type Config struct {
	// ID is the voter's raft server ID; Region the region it serves (one
	// voter per region).
	ID     string
	Region failover.Region
	// Dir holds the raft-wal log and stable store and the snapshots.
	Dir string
	// Failover are the product's failover rules and timings; the
	// heartbeat interval and takeover delay are the baseline's too.
	Failover failover.Config
	// RaftHeartbeatTimeout, RaftElectionTimeout and RaftLeaderLease are
	// hashicorp/raft's timeouts; zero scales them to the failover
	// heartbeat: min(raft's default, HeartbeatInterval), and the leader
	// lease half of that.
	RaftHeartbeatTimeout time.Duration
	RaftElectionTimeout  time.Duration
	RaftLeaderLease      time.Duration
	// Replicas reports the partition replicas this region hosts (nil: a
	// replica of every partition in the map, at the map's epoch, as a
	// data plane that follows the register would report; see FSMReplicas).
	Replicas ReplicaSource
	// HeartbeatBatch is the replica records per heartbeat command
	// (default DefaultHeartbeatBatch, at most MaxHeartbeatEntries).
	HeartbeatBatch int
	// MaxInflight bounds the controller's applies in flight.
	MaxInflight int
	// ApplyTimeout bounds one Apply.
	ApplyTimeout time.Duration
	// Clock is this node's monotonic clock (default: time since New).
	Clock func() time.Duration
	// OnState, if set, is called (on raft's FSM goroutine) with every
	// state put this node's state machine applies.
	OnState func(key string, s failover.State, version uint64)
	// LogOutput receives raft's own log (default: discarded).
	LogOutput io.Writer
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.ID == "":
		return c, configErr("ID", "must be set")
	case c.Region == "" || len(c.Region) > MaxRegionBytes:
		return c, configErr("Region", "must be 1..%d bytes, got %q", MaxRegionBytes, c.Region)
	case c.Dir == "":
		return c, configErr("Dir", "must be set")
	}
	if err := c.Failover.Validate(); err != nil {
		return c, fmt.Errorf("%w: Config.Failover: %w", ErrInvalidConfig, err)
	}
	hb := c.Failover.HeartbeatInterval
	if c.RaftHeartbeatTimeout == 0 {
		c.RaftHeartbeatTimeout = min(time.Second, hb)
	}
	if c.RaftElectionTimeout == 0 {
		c.RaftElectionTimeout = min(time.Second, hb)
	}
	if c.RaftLeaderLease == 0 {
		c.RaftLeaderLease = c.RaftHeartbeatTimeout / 2
	}
	if c.HeartbeatBatch == 0 {
		c.HeartbeatBatch = DefaultHeartbeatBatch
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = DefaultMaxInflight
	}
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = DefaultApplyTimeout
	}
	switch {
	case c.RaftHeartbeatTimeout < 5*time.Millisecond:
		return c, configErr("RaftHeartbeatTimeout", "%v is below raft's 5ms floor", c.RaftHeartbeatTimeout)
	case c.RaftElectionTimeout < c.RaftHeartbeatTimeout:
		return c, configErr("RaftElectionTimeout", "%v is below RaftHeartbeatTimeout %v", c.RaftElectionTimeout, c.RaftHeartbeatTimeout)
	case c.RaftLeaderLease < 5*time.Millisecond || c.RaftLeaderLease > c.RaftHeartbeatTimeout:
		return c, configErr("RaftLeaderLease", "%v must be in [5ms, RaftHeartbeatTimeout %v]", c.RaftLeaderLease, c.RaftHeartbeatTimeout)
	case c.HeartbeatBatch < 1 || c.HeartbeatBatch > MaxHeartbeatEntries:
		return c, configErr("HeartbeatBatch", "must be in 1..%d, got %d", MaxHeartbeatEntries, c.HeartbeatBatch)
	case c.MaxInflight < 1 || c.MaxInflight > 1<<16:
		return c, configErr("MaxInflight", "must be in 1..%d, got %d", 1<<16, c.MaxInflight)
	case c.ApplyTimeout <= 0:
		return c, configErr("ApplyTimeout", "must be positive, got %v", c.ApplyTimeout)
	}
	if c.LogOutput == nil {
		c.LogOutput = io.Discard
	}
	if c.Clock == nil {
		start := time.Now()
		c.Clock = func() time.Duration { return time.Since(start) }
	}
	return c, nil
}
