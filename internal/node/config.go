package node

import (
	"errors"
	"fmt"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/guard"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
)

// NodeID names a node: its acceptor, its manager and its transport peer.
type NodeID = failover.NodeID

// ErrInvalidConfig: a Config failed validation; the error names the field.
var ErrInvalidConfig = errors.New("node: invalid config")

// Bounds of a node.
const (
	// MaxNodeID bounds node ids: a proposer id packs the node id into its
	// low bits (see proposerID), so a reply finds its node with no table.
	MaxNodeID = 1<<proposerIDBits - 1
	// MaxBoot bounds the incarnation number packed above the node id.
	MaxBoot = 1<<(63-proposerIDBits) - 1
	// MaxPartitionID bounds partition ids: hosted partitions are indexed
	// by id in a flat table (one pointer each), so a hostile id must not
	// size it.
	MaxPartitionID = 1 << 22
	// DefaultHostTickGrain is the resolution of the data plane's timers.
	DefaultHostTickGrain = 10 * time.Millisecond
	// DefaultPumpRounds bounds one Ready's inner loop (see Config.PumpRounds).
	DefaultPumpRounds = 64
	// DefaultLearnRetry is how long a shared register value waits for a
	// peer's acknowledgement before it is sent again (Config.LearnRetry).
	DefaultLearnRetry = time.Second
	// MaxLearnRetry bounds Config.LearnRetry.
	MaxLearnRetry = time.Minute
)

const proposerIDBits = 16

// Config configures a Node. Durations are on the node's own clock, the one
// its driver passes to every call.
type Config struct {
	// ID is this node; Region its region (it must match Nodes).
	ID     NodeID
	Region quorum.Region
	// Boot is this incarnation: strictly greater than every earlier
	// incarnation of the same node. The proposer's ballots and the data
	// plane's freshness probes are unique because of it, so the driver
	// persists it (a restart counter in the data directory) or draws it
	// from a clock that never repeats.
	Boot uint64
	// Nodes are every node of the cluster, this one included.
	Nodes []failover.Node
	// Acceptors is the register's acceptor set (a majority quorum of them
	// decides). A node in it hosts an acceptor.
	Acceptors []NodeID
	// AcceptorState is what this node's acceptor recovered from its store
	// (ignored if the node hosts no acceptor).
	AcceptorState caspaxos.State

	// Failover is the failover timing profile.
	Failover failover.Config
	// Manager tunes the failover manager; its Failover, Self and Nodes
	// fields are replaced by this Config's.
	Manager failover.ManagerConfig
	// Host tunes the data plane (partition.DefaultConfig); its Region and
	// Boot are this Config's (zero, or equal to them).
	Host partition.Config
	// Proposer tunes the register's proposer; its ID (unique per
	// incarnation, see proposerID) and Quorum (a majority of Acceptors) are
	// replaced.
	Proposer caspaxos.ProposerConfig
	// Rand is the proposer's randomness (backoff jitter).
	Rand caspaxos.Rand

	// WatchAll are nodes that watch every register this node commits, on
	// top of the nodes hosting the partition (say a node that serves DNS
	// for a region whose replicas it does not host).
	WatchAll []NodeID
	// HostTickGrain rounds the data plane's timer up to a grid, so that
	// thousands of partitions' heartbeat and retransmit deadlines share one
	// tick, as a kernel timer wheel would (0: DefaultHostTickGrain).
	HostTickGrain time.Duration
	// PumpRounds bounds the rounds Ready runs the cores for: they settle
	// in a few; more means a core keeps asking for the same thing.
	PumpRounds int
	// LearnRetry is how long a committed value this node shared waits for
	// a peer's acknowledgement before it is sent to that peer again,
	// doubling per resend up to 16 times this (0: DefaultLearnRetry).
	LearnRetry time.Duration
	// Observer sees what the node does (nil: nothing).
	Observer Observer
	// Guards counts every guard and reject path of the node's cores
	// (package guard); it replaces the Proposer's, Manager's and Host's
	// own when set. Nil counts nothing. The simulator gives every node of
	// a world one guard.Counts; the daemon exports them to Prometheus.
	Guards guard.Counter
}

func configErr(field, format string, args ...any) error {
	return fmt.Errorf("node: Config.%s: %s: %w", field, fmt.Sprintf(format, args...), ErrInvalidConfig)
}

// validate checks the config, including the relations between values.
func (c *Config) validate() error {
	if c.ID == 0 || c.ID > MaxNodeID {
		return configErr("ID", "must be in 1..%d, got %d", MaxNodeID, c.ID)
	}
	if c.Boot == 0 || c.Boot > MaxBoot {
		return configErr("Boot", "must be in 1..%d, got %d", uint64(MaxBoot), c.Boot)
	}
	if c.Region == "" {
		return configErr("Region", "must be set")
	}
	seen := make(map[NodeID]bool, len(c.Nodes))
	self := false
	for i, n := range c.Nodes {
		if n.ID == 0 || n.ID > MaxNodeID || n.Region == "" {
			return configErr(fmt.Sprintf("Nodes[%d]", i), "needs an id in 1..%d and a region, got %d %q", MaxNodeID, n.ID, n.Region)
		}
		if seen[n.ID] {
			return configErr(fmt.Sprintf("Nodes[%d]", i), "node %d listed twice", n.ID)
		}
		seen[n.ID] = true
		if n.ID == c.ID {
			self = true
			if n.Region != c.Region {
				return configErr("Region", "%q, but Nodes places node %d in %q", c.Region, c.ID, n.Region)
			}
		}
	}
	if !self {
		return configErr("Nodes", "does not list this node (%d)", c.ID)
	}
	if len(c.Acceptors) == 0 {
		return configErr("Acceptors", "must not be empty")
	}
	for i, a := range c.Acceptors {
		if !seen[a] {
			return configErr(fmt.Sprintf("Acceptors[%d]", i), "node %d is not in Nodes", a)
		}
	}
	for i, a := range c.WatchAll {
		if !seen[a] {
			return configErr(fmt.Sprintf("WatchAll[%d]", i), "node %d is not in Nodes", a)
		}
	}
	if c.Host.Region != "" && c.Host.Region != c.Region {
		return configErr("Host.Region", "%q differs from Region %q", c.Host.Region, c.Region)
	}
	if c.Host.Boot != 0 && c.Host.Boot != c.Boot {
		return configErr("Host.Boot", "%d differs from Boot %d", c.Host.Boot, c.Boot)
	}
	if c.Rand == nil {
		return configErr("Rand", "must be set (the proposer's backoff jitter)")
	}
	if c.HostTickGrain < 0 || c.HostTickGrain > time.Second {
		return configErr("HostTickGrain", "must be in 0..1s, got %v", c.HostTickGrain)
	}
	if c.PumpRounds < 0 {
		return configErr("PumpRounds", "must not be negative, got %d", c.PumpRounds)
	}
	if c.LearnRetry < 0 || c.LearnRetry > MaxLearnRetry {
		return configErr("LearnRetry", "must be in 0..%v, got %v", MaxLearnRetry, c.LearnRetry)
	}
	return nil
}

// proposerID is the register proposer's id for incarnation boot of node
// id: unique across restarts (a restarted proposer that reused its id could
// reuse a ballot with another value), and the node that owns it is its low
// bits.
func proposerID(id NodeID, boot uint64) caspaxos.NodeID {
	return caspaxos.NodeID(boot<<proposerIDBits | uint64(id))
}

// nodeOfProposer is the node hosting proposer p.
func nodeOfProposer(p caspaxos.NodeID) NodeID { return NodeID(uint64(p) & MaxNodeID) }

// ErrUnknownPeer: a batch came from a node the cluster does not list.
var ErrUnknownPeer = errors.New("node: unknown peer")
