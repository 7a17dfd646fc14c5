package clusterspec

import (
	"time"

	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/txtdns"
)

// Format is the codec version Encode writes and Decode reads.
const Format = 1

// Bounds. A spec is replicated to every acceptor and read by every agent
// at start, so everything in it is bounded.
const (
	// MaxBytes bounds an encoded spec (256 nodes take about 50 KiB).
	MaxBytes = 256 << 10
	// MinRegions and MaxRegions bound Regions: a failover needs a second
	// region, and a partition's register state holds at most
	// failover.MaxRegions.
	MinRegions = 2
	MaxRegions = 16
	// MaxNodes bounds Nodes.
	MaxNodes = 256
	// MaxPartitions bounds Partitions: the node indexes hosted partitions
	// by id in a flat table.
	MaxPartitions = node.MaxPartitionID
	// MaxLabelLen bounds the cluster, node and zone names (a DNS label,
	// as in the agent's local config).
	MaxLabelLen = 63
	// MaxRegionLen bounds a region name: the routing client's TXT records
	// carry it.
	MaxRegionLen = txtdns.MaxRegionLen
	// MaxAddrLen bounds an address (a DNS name and a port).
	MaxAddrLen = 253 + len(":65535")
	// MaxBlastRadius bounds BlastRadius: more than every partition means
	// no cap.
	MaxBlastRadius = MaxPartitions
	// MaxPauseReasonLen bounds Pause, the reason a global pause gives.
	MaxPauseReasonLen = 200

	// MinMaxStaleness is the smallest staleness bound: below the data
	// plane's replication heartbeat a follower could not stay within it
	// between two messages, and nearly every write would be held.
	MinMaxStaleness = partition.DefaultHeartbeatInterval
	// MaxMaxStaleness bounds the staleness bound; a bounded read older
	// than this is eventual in all but name.
	MaxMaxStaleness = time.Hour
	// MaxStalenessOpsLimit bounds MaxStalenessOps.
	MaxStalenessOpsLimit = 1 << 40
	// DefaultMaxStalenessOps is the op bound when MaxStalenessOps is 0.
	DefaultMaxStalenessOps = 100000
	// MaxStalenessHold bounds StalenessHold: a client's write waits that
	// long with no answer.
	MaxStalenessHold = time.Minute
	// DefaultStalenessHold is the hold when StalenessHold is 0, cut to
	// MaxStaleness.
	DefaultStalenessHold = time.Second

	// MaxOverride bounds a duration override of the timing profile.
	MaxOverride = 24 * time.Hour
)

// Spec is what every agent of a cluster agrees on. `fmnode init` writes
// it once into a system register; agents wait for it before hosting
// anything and derive from it their node configuration and the
// partitions they host. Regions, Partitions, Nodes and Cluster are fixed
// at init (placement and the partitions' registers are derived from
// them); the rest may be edited at run time (Set, Apply).
//
// The methods that derive values (Placement, Acceptors, InitialState, ...)
// assume a valid spec: one that Validate accepts, as Decode and Encode
// guarantee.
type Spec struct {
	// Format is the codec version: Format.
	Format int `json:"format"`
	// Cluster labels the cluster ([a-z0-9-], at most 63, as the agents'
	// local config spells it).
	Cluster string `json:"cluster"`
	// Regions are the regions in priority order: the first one that is
	// not in NeverPromote is the preferred region, every partition's
	// initial write region and the one failback returns to.
	Regions []string `json:"regions"`
	// NeverPromote are regions failover never makes write region (a
	// read-only or disaster-recovery copy); a subset of Regions, kept in
	// their priority order.
	NeverPromote []string `json:"never_promote,omitempty"`
	// Partitions is the partition count; partition ids are 1..Partitions.
	Partitions int `json:"partitions"`
	// Consistency is the data plane's level of every partition: strong,
	// bounded, session or eventual.
	Consistency string `json:"consistency"`
	// MaxStaleness (T), MaxStalenessOps (K) and StalenessHold bound a
	// bounded-staleness read (at most K ops and T behind) and how long a
	// write that would exceed them is held before it is refused. Only
	// for bounded, which requires MaxStaleness; MaxStalenessOps 0 means
	// DefaultMaxStalenessOps, StalenessHold 0 DefaultStalenessHold cut
	// to T.
	MaxStaleness    Duration `json:"max_staleness,omitempty"`
	MaxStalenessOps uint64   `json:"max_staleness_ops,omitempty"`
	StalenessHold   Duration `json:"staleness_hold,omitempty"`
	// MinDurability is the write quorum's minimum size in regions: a
	// write commits only once durable in at least that many, and the
	// write quorum never shrinks below it. 1..len(Regions).
	MinDurability int `json:"min_durability"`
	// Profile is the failover timing.
	Profile Profile `json:"profile"`
	// BlastRadius caps failovers in flight into one target region
	// (failover.Config.MaxConcurrentPerTarget); 0: the profile's default.
	BlastRadius int `json:"blast_radius,omitempty"`
	// Pause, when not empty, suspends automatic failover of every
	// partition, cluster-wide, and says why (`fmnode pause` without a
	// partition). It lives here, in the system register, so that it
	// survives restarts and reaches agents that were down when it was
	// set. Switchovers and drains still run: only the automatic
	// decisions stop.
	Pause string `json:"pause,omitempty"`
	// Nodes are the members recorded at init, sorted by id. Placement
	// derives from them alone, never from who is alive.
	Nodes []Node `json:"nodes"`
}

// Node is a member of the cluster as recorded at init.
type Node struct {
	// ID is the node's id, 1..65535 (node_id in its local config).
	ID uint16 `json:"id"`
	// Name, Region and Zone are as in its local config.
	Name   string `json:"name"`
	Region string `json:"region"`
	Zone   string `json:"zone"`
	// NodeAddr and APIAddr are its advertised node transport and HTTP
	// API addresses (host:port); DNSAddr its DNS server's, if it runs one.
	NodeAddr string `json:"node_addr"`
	APIAddr  string `json:"api_addr"`
	DNSAddr  string `json:"dns_addr,omitempty"`
}

// Consistency names, as the spec spells them.
const (
	ConsistencyStrong   = "strong"
	ConsistencyBounded  = "bounded"
	ConsistencySession  = "session"
	ConsistencyEventual = "eventual"
)

// level maps a consistency name to the data plane's level, 0 if unknown.
// Only the four canonical names: a spec has one spelling of each.
func level(name string) partition.Consistency {
	switch name {
	case ConsistencyStrong:
		return partition.Strong
	case ConsistencyBounded:
		return partition.BoundedStaleness
	case ConsistencySession:
		return partition.Session
	case ConsistencyEventual:
		return partition.Eventual
	}
	return 0
}
