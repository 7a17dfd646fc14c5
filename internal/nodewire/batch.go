package nodewire

import (
	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
)

// NodeID names a node of the cluster (the same ids the register's
// acceptors and the failover managers use).
type NodeID = failover.NodeID

// Batch is everything one node sends one peer at once: the unit a Node's
// Ready hands out per peer, and the payload of one frame on the node
// transport. Each kind keeps its own core's message type, so the cores
// never see bytes and the codec is the only place that knows the layout.
type Batch struct {
	From, To NodeID
	// CAS are CASPaxos proposer/acceptor messages (caspaxos/wire encodes
	// each one).
	CAS []caspaxos.Message
	// Data are partition replication, catch-up and snapshot messages.
	Data []partition.Message
	// Heartbeats are failover liveness heartbeats, acks and probes.
	Heartbeats []failover.Heartbeat
	// Learns carry committed register values to the nodes that watch the
	// register (the register watch between nodes).
	Learns []Learn
	// LearnAcks acknowledge Learns: the sender keeps sharing a committed
	// value with a node until that node acknowledged it (a lost learn
	// left a node on a stale register value for good).
	LearnAcks []LearnAck
}

// LearnAck says that its sender knows register Key at Version or newer.
type LearnAck struct {
	Key     string
	Version uint64
}

// Learn is one committed register value: key, version and the encoded
// value (a failover.State for a partition's register).
type Learn struct {
	Key     string
	Version uint64
	Data    []byte
}

// Empty reports whether the batch carries nothing.
func (b *Batch) Empty() bool {
	return len(b.CAS)+len(b.Data)+len(b.Heartbeats)+len(b.Learns)+len(b.LearnAcks) == 0
}

// Count is the number of messages in the batch (what bounds queues).
func (b *Batch) Count() int {
	return len(b.CAS) + len(b.Data) + len(b.Heartbeats) + len(b.Learns) + len(b.LearnAcks)
}
