package failover

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidConfig: a configuration field is invalid; the message names it.
var ErrInvalidConfig = errors.New("failover: invalid config")

func configErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// Config holds the timing and policy knobs of automatic failover. Defaults
// come from the paper's production settings; FastConfig is a profile for
// deployments that can afford sub-second heartbeats.
type Config struct {
	// HeartbeatInterval is how often a node tells every other node it is
	// alive. Heartbeats are per node, never per partition.
	HeartbeatInterval time.Duration
	// SuspectProbeInterval is how often, between heartbeat rounds, a node
	// sends a probe (KindProbe) to each node it suspects: a node that comes back
	// (a healed link, a restart) is noticed within it rather than at its
	// next round. The write regions stop probing replicas on a suspected
	// node (partition.Host.SetReachable) and count on this one probe per
	// node, never per partition.
	SuspectProbeInterval time.Duration
	// LeaseDuration is how long a node may act as write region after a
	// heartbeat round that a majority of regions acknowledged.
	LeaseDuration time.Duration
	// MaxClockDrift bounds how far two nodes' clocks may disagree over one
	// lease. Another region takes over only after lease plus this bound.
	MaxClockDrift time.Duration
	// GracefulTimeout bounds a graceful switchover: if the target has not
	// caught up by then, the switchover aborts and the old write region is
	// unfenced.
	GracefulTimeout time.Duration
	// ProposeStagger delays backup proposers: the best-ranked candidate
	// proposes first, the next one stagger later, and so on. It keeps
	// conflicts rare without making anyone wait for a leader.
	ProposeStagger time.Duration
	// BackupAfter is how long a backup proposer waits, per rank, before it
	// acts for a live preferred proposer that stayed silent (a gray failure
	// of that node, or the blast-radius cap holding it back).
	BackupAfter time.Duration
	// HoldOffBase and HoldOffMax shape the per-partition hysteresis: after
	// the n-th automatic failover within FlapWindow, the next one waits
	// HoldOffBase * 2^(n-1), capped at HoldOffMax.
	HoldOffBase time.Duration
	HoldOffMax  time.Duration
	FlapWindow  time.Duration
	// GrowHoldOffBase and GrowHoldOffMax shape the write-quorum
	// hysteresis: after a region's n-th shrink out of the write quorum
	// within FlapWindow, growing it back waits GrowHoldOffBase * 2^(n-1),
	// capped at GrowHoldOffMax, so a flapping link does not shrink and
	// grow the write quorum (two register writes) on every flap.
	GrowHoldOffBase time.Duration
	GrowHoldOffMax  time.Duration
	// FailbackAfter is the sustained health a preferred region needs before
	// the write region returns to it.
	FailbackAfter time.Duration
	// CatchUpLagOps is how close (in operations) a replica must be to the
	// write region to count as caught up (for quorum growth and switchover).
	CatchUpLagOps uint64
	// GrayStall is how long a live write region's commit LSN may stand
	// still while clients report errors before it counts as failed.
	GrayStall time.Duration
	// GrayMinErrors is how many client errors against the write region
	// an observer needs within GrayStall (with its commit LSN stalled)
	// before it calls the write region gray-failed.
	GrayMinErrors int
	// MaxConcurrentPerTarget caps failovers in flight into one target
	// region (blast radius); the rest queue by priority.
	MaxConcurrentPerTarget int
	// HistoryLen bounds the transitions kept in the register.
	HistoryLen int
	// AutoFailback enables the return to the preferred region.
	AutoFailback bool
}

// DefaultConfig returns the paper's knobs: heartbeat 30 s, lease 45 s,
// graceful timeout 60 s.
func DefaultConfig() Config {
	return Config{
		HeartbeatInterval:      30 * time.Second,
		SuspectProbeInterval:   2 * time.Second,
		LeaseDuration:          45 * time.Second,
		MaxClockDrift:          2 * time.Second,
		GracefulTimeout:        60 * time.Second,
		ProposeStagger:         2 * time.Second,
		BackupAfter:            10 * time.Second,
		HoldOffBase:            time.Minute,
		HoldOffMax:             time.Hour,
		FlapWindow:             time.Hour,
		GrowHoldOffBase:        time.Minute,
		GrowHoldOffMax:         10 * time.Minute,
		FailbackAfter:          10 * time.Minute,
		CatchUpLagOps:          0,
		GrayStall:              60 * time.Second,
		GrayMinErrors:          2,
		MaxConcurrentPerTarget: 10000,
		HistoryLen:             16,
		AutoFailback:           true,
	}
}

// FastConfig returns the fast profile: heartbeat 500 ms, lease 2 s.
func FastConfig() Config {
	c := DefaultConfig()
	c.HeartbeatInterval = 500 * time.Millisecond
	c.SuspectProbeInterval = 500 * time.Millisecond
	c.LeaseDuration = 2 * time.Second
	c.MaxClockDrift = 250 * time.Millisecond
	c.ProposeStagger = 250 * time.Millisecond
	c.BackupAfter = 2 * time.Second
	c.HoldOffBase = 5 * time.Second
	c.HoldOffMax = 10 * time.Minute
	c.FlapWindow = 10 * time.Minute
	c.GrowHoldOffBase = 15 * time.Second
	c.GrowHoldOffMax = 2 * time.Minute
	c.FailbackAfter = time.Minute
	c.GrayStall = 3 * time.Second
	return c
}

// Profile returns a named profile: "paper" (or "default") or "fast".
func Profile(name string) (Config, error) {
	switch name {
	case "paper", "default", "":
		return DefaultConfig(), nil
	case "fast":
		return FastConfig(), nil
	}
	return Config{}, configErr("profile", "unknown profile %q (paper, fast)", name)
}

// Validate checks every field and the relations that make leases safe.
func (c Config) Validate() error {
	switch {
	case c.HeartbeatInterval <= 0:
		return configErr("HeartbeatInterval", "must be positive, got %v", c.HeartbeatInterval)
	case c.SuspectProbeInterval <= 0 || c.SuspectProbeInterval > c.HeartbeatInterval:
		return configErr("SuspectProbeInterval", "%v must be positive and at most HeartbeatInterval %v", c.SuspectProbeInterval, c.HeartbeatInterval)
	case c.MaxClockDrift < 0:
		return configErr("MaxClockDrift", "must not be negative, got %v", c.MaxClockDrift)
	case c.LeaseDuration <= c.HeartbeatInterval+c.MaxClockDrift:
		// A lease that expires before the next heartbeat round can renew
		// it would make a healthy write region stop accepting writes.
		return configErr("LeaseDuration", "%v must exceed HeartbeatInterval %v + MaxClockDrift %v",
			c.LeaseDuration, c.HeartbeatInterval, c.MaxClockDrift)
	case c.GracefulTimeout <= 0:
		return configErr("GracefulTimeout", "must be positive, got %v", c.GracefulTimeout)
	case c.ProposeStagger < 0:
		return configErr("ProposeStagger", "must not be negative, got %v", c.ProposeStagger)
	case c.BackupAfter < c.ProposeStagger:
		return configErr("BackupAfter", "%v is below ProposeStagger %v", c.BackupAfter, c.ProposeStagger)
	case c.HoldOffBase < 0:
		return configErr("HoldOffBase", "must not be negative, got %v", c.HoldOffBase)
	case c.HoldOffMax < c.HoldOffBase:
		return configErr("HoldOffMax", "%v is below HoldOffBase %v", c.HoldOffMax, c.HoldOffBase)
	case c.FlapWindow < 0:
		return configErr("FlapWindow", "must not be negative, got %v", c.FlapWindow)
	case c.GrowHoldOffBase < 0:
		return configErr("GrowHoldOffBase", "must not be negative, got %v", c.GrowHoldOffBase)
	case c.GrowHoldOffMax < c.GrowHoldOffBase:
		return configErr("GrowHoldOffMax", "%v is below GrowHoldOffBase %v", c.GrowHoldOffMax, c.GrowHoldOffBase)
	case c.GrowHoldOffMax > c.FlapWindow:
		// Shrinks older than FlapWindow are forgotten: a longer hold-off
		// would outlive the record that justifies it.
		return configErr("GrowHoldOffMax", "%v exceeds FlapWindow %v", c.GrowHoldOffMax, c.FlapWindow)
	case c.FailbackAfter < 0:
		return configErr("FailbackAfter", "must not be negative, got %v", c.FailbackAfter)
	case c.GrayStall <= c.HeartbeatInterval:
		return configErr("GrayStall", "%v must exceed HeartbeatInterval %v (progress is reported by heartbeats)", c.GrayStall, c.HeartbeatInterval)
	case c.GrayStall <= c.TakeoverDelay():
		// A write region that stopped heartbeating is judged by its lease;
		// gray evidence is only for a write region still heard from.
		return configErr("GrayStall", "%v must exceed LeaseDuration + MaxClockDrift %v", c.GrayStall, c.TakeoverDelay())
	case c.GrayMinErrors < 1:
		return configErr("GrayMinErrors", "must be at least 1, got %d", c.GrayMinErrors)
	case c.MaxConcurrentPerTarget < 1:
		return configErr("MaxConcurrentPerTarget", "must be at least 1, got %d", c.MaxConcurrentPerTarget)
	case c.HistoryLen < 1 || c.HistoryLen > MaxHistory:
		return configErr("HistoryLen", "must be in [1, %d], got %d", MaxHistory, c.HistoryLen)
	}
	return nil
}

// TakeoverDelay is how long after the last heartbeat heard from a write
// region another region may replace it: its lease can not outlive this.
func (c Config) TakeoverDelay() time.Duration {
	if canaryNoDriftMargin {
		return c.LeaseDuration
	}
	return c.LeaseDuration + c.MaxClockDrift
}
