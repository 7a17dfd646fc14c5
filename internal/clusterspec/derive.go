package clusterspec

import (
	"fmt"
	"slices"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
)

// The register's acceptor set.
const (
	// AcceptorsPerRegion: the register takes at most this many acceptors
	// from each region.
	AcceptorsPerRegion = 3
)

// preferred is the first region not in NeverPromote ("" if none).
func (s Spec) preferred() string {
	for _, r := range s.Regions {
		if !slices.Contains(s.NeverPromote, r) {
			return r
		}
	}
	return ""
}

// Preferred is the preferred region: the first of Regions that is not in
// NeverPromote. It is every partition's initial write region, and the one
// failback returns to (failover picks it from the state's priority the
// same way).
func (s Spec) Preferred() string { return s.preferred() }

// Node returns the node with id.
func (s Spec) Node(id uint16) (Node, bool) {
	for _, n := range s.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return Node{}, false
}

// RegionNodes are the nodes of region, in id order.
func (s Spec) RegionNodes(region string) []Node {
	var out []Node
	for _, n := range s.Nodes {
		if n.Region == region {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b Node) int { return int(a.ID) - int(b.ID) })
	return out
}

// FailoverNodes are the nodes as failover and the node know them, in id
// order.
func (s Spec) FailoverNodes() []failover.Node {
	out := make([]failover.Node, len(s.Nodes))
	for i, n := range s.Nodes {
		out[i] = failover.Node{ID: failover.NodeID(n.ID), Region: quorum.Region(n.Region)}
	}
	slices.SortFunc(out, func(a, b failover.Node) int { return int(a.ID) - int(b.ID) })
	return out
}

// Acceptors are the register's acceptors, in id order: the
// AcceptorsPerRegion nodes of lowest id in each region. Every CAS costs a
// round trip to every acceptor (a majority decides, but the proposer sends
// to all), so a large cluster does not make each node one; and taking at
// most as many from each region bounds what the loss of one region takes
// from the majority (all nodes of a 5/2/2 cluster would lose the majority
// with the big region; 3/2/2 keeps it). Lowest id because every agent
// must compute the same set from the spec alone.
func (s Spec) Acceptors() []failover.NodeID {
	var out []failover.NodeID
	for _, r := range s.Regions {
		for i, n := range s.RegionNodes(r) {
			if i == AcceptorsPerRegion {
				break
			}
			out = append(out, failover.NodeID(n.ID))
		}
	}
	slices.Sort(out)
	return out
}

// IsAcceptor reports whether node id hosts an acceptor.
func (s Spec) IsAcceptor(id uint16) bool {
	return slices.Contains(s.Acceptors(), failover.NodeID(id))
}

// Level is the data plane's consistency level of every partition.
func (s Spec) Level() partition.Level {
	l := partition.Level{Consistency: level(s.Consistency)}
	if l.Consistency == partition.BoundedStaleness {
		l.StalenessTime = s.MaxStaleness.D()
		l.StalenessOps = s.MaxStalenessOps
		if l.StalenessOps == 0 {
			l.StalenessOps = DefaultMaxStalenessOps
		}
		l.StalenessHold = s.StalenessHold.D()
		if l.StalenessHold == 0 {
			l.StalenessHold = min(DefaultStalenessHold, l.StalenessTime)
		}
	}
	return l
}

// replicaRegions are the regions sorted by name, as a write quorum lists
// them.
func (s Spec) replicaRegions() []quorum.Region {
	rs := make([]quorum.Region, len(s.Regions))
	for i, r := range s.Regions {
		rs[i] = quorum.Region(r)
	}
	slices.Sort(rs)
	return rs
}

// PartitionSpec is the data plane's spec of partition p's new replicas:
// the level, every region in the write quorum with the preferred region
// writing, epoch 1. It is the same for every partition today; it takes p
// so that callers need not change if that does.
func (s Spec) PartitionSpec(p partition.ID) partition.Spec {
	rs := s.replicaRegions()
	return partition.Spec{
		Level: s.Level(),
		Quorum: quorum.WriteQuorum{
			Replicas:      rs,
			WriteRegion:   quorum.Region(s.preferred()),
			Members:       slices.Clone(rs),
			MinDurability: s.MinDurability,
		},
		Epoch: 1,
	}
}

// InitialState is partition p's first register value: the preferred
// region writing at epoch 1, Regions as the priority, NeverPromote set.
func (s Spec) InitialState(p partition.ID) (failover.State, error) {
	if p < 1 || int64(p) > int64(s.Partitions) {
		return failover.State{}, fieldErr("partitions", "partition %d is not in 1..%d", p, s.Partitions)
	}
	prio := make([]quorum.Region, len(s.Regions))
	for i, r := range s.Regions {
		prio[i] = quorum.Region(r)
	}
	st, err := failover.NewState(partition.RegisterKey(p), quorum.Region(s.preferred()), prio, level(s.Consistency), s.MinDurability)
	if err != nil {
		return failover.State{}, fmt.Errorf("clusterspec: initial state of partition %d: %w", p, err)
	}
	for _, r := range s.NeverPromote {
		st.NeverPromote = append(st.NeverPromote, quorum.Region(r))
	}
	return st, nil
}

// NodeConfig fills what node id's node.Config takes from the spec: its id
// and region, the nodes, the acceptors and the failover profile. The
// driver adds what is local (Boot, AcceptorState, Host, Proposer, Rand).
func (s Spec) NodeConfig(id uint16) (node.Config, error) {
	self, ok := s.Node(id)
	if !ok {
		return node.Config{}, fieldErr("nodes", "no node has id %d", id)
	}
	fc, err := s.FailoverConfig()
	if err != nil {
		return node.Config{}, err
	}
	return node.Config{
		ID:        failover.NodeID(id),
		Region:    quorum.Region(self.Region),
		Nodes:     s.FailoverNodes(),
		Acceptors: s.Acceptors(),
		Failover:  fc,
	}, nil
}
