package noderun

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/txtdns"
)

// Errors a caller acts on.
var (
	// ErrInvalidConfig: a Config failed validation; the error names the field.
	ErrInvalidConfig = errors.New("noderun: invalid config")
	// ErrStopped: the driver is not running (never started, stopped, or
	// failed on a store error).
	ErrStopped = errors.New("noderun: stopped")
	// ErrBusy: the inbox is full; the request was not taken (retry later).
	ErrBusy = errors.New("noderun: inbox full")
)

// Defaults.
const (
	DefaultInboxSize      = 1 << 14
	DefaultMaxInflight    = 4
	DefaultEventsPerReady = 4096
)

// Sender carries batches to peers (nodenet.Transport satisfies it). Send
// must not block for long; it may drop (the protocols retransmit). It must
// not keep b's slices: it encodes or copies them before it returns (the
// node reuses them).
type Sender interface {
	Send(to node.NodeID, b *nodewire.Batch) error
}

// Partition is one partition this node hosts.
type Partition struct {
	Placement node.Placement
	// Spec creates the replica when the store has none.
	Spec partition.Spec
	// Register, when set, is the initial register state this node writes
	// (if the register holds none): one node per partition does it.
	Register *failover.State
}

// Config configures a Driver.
type Config struct {
	// Node is the node's config; its AcceptorState is loaded from
	// AcceptorStore, and its Boot must be a fresh incarnation (the daemon
	// persists a counter in its data directory).
	Node node.Config
	// AcceptorStore holds the register's acceptor records (bbolt).
	AcceptorStore caspaxos.Store
	// PartitionStore holds the partition replicas (pebble).
	PartitionStore partition.Store
	// Partitions are the partitions this node hosts.
	Partitions []Partition
	// Clock is the node's clock (default: see the package doc).
	Clock func() time.Duration
	// Publisher, when set, gets every route the node learns.
	Publisher *txtdns.Publisher
	// InboxSize bounds queued deliveries and requests.
	InboxSize int
	// MaxInflight bounds Readys waiting for their fsync.
	MaxInflight int
	// EventsPerReady bounds the events the loop takes before a Ready.
	EventsPerReady int
	Logger         *slog.Logger
}

func configErr(field, format string, args ...any) error {
	return fmt.Errorf("noderun: Config.%s: %s: %w", field, fmt.Sprintf(format, args...), ErrInvalidConfig)
}

func (c *Config) withDefaults() (Config, error) {
	cfg := *c
	if cfg.AcceptorStore == nil {
		return cfg, configErr("AcceptorStore", "must be set")
	}
	if cfg.PartitionStore == nil {
		return cfg, configErr("PartitionStore", "must be set")
	}
	if cfg.InboxSize == 0 {
		cfg.InboxSize = DefaultInboxSize
	}
	if cfg.MaxInflight == 0 {
		cfg.MaxInflight = DefaultMaxInflight
	}
	if cfg.EventsPerReady == 0 {
		cfg.EventsPerReady = DefaultEventsPerReady
	}
	if cfg.InboxSize < 1 || cfg.InboxSize > 1<<22 {
		return cfg, configErr("InboxSize", "must be in 1..%d, got %d", 1<<22, cfg.InboxSize)
	}
	if cfg.MaxInflight < 1 || cfg.MaxInflight > 64 {
		return cfg, configErr("MaxInflight", "must be in 1..64, got %d", cfg.MaxInflight)
	}
	if cfg.EventsPerReady < 1 {
		return cfg, configErr("EventsPerReady", "must be positive, got %d", cfg.EventsPerReady)
	}
	if cfg.Clock == nil {
		cfg.Clock = WallClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// WallClock is the default clock: the wall clock at the call plus the
// monotonic time since, as a duration since the Unix epoch.
func WallClock() func() time.Duration {
	start := time.Now()
	base := time.Duration(start.UnixNano())
	return func() time.Duration { return base + time.Since(start) }
}
