package nodewire

import (
	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/wire"
	"github.com/fmnode/fmnode/partition"
)

// Bounds. The decoder refuses anything beyond them before allocating, and
// Encode refuses the same, so a hostile count or length can at worst cost
// the bytes that actually arrived.
const (
	// DefaultMaxFrameBytes bounds a frame's payload unless the transport
	// configures otherwise (the same default as caspaxos/wire).
	DefaultMaxFrameBytes = wire.DefaultMaxFrameBytes
	// MaxPayloadBytes bounds an encoded batch: the largest payload any
	// frame may carry.
	MaxPayloadBytes = wire.MaxFrameBytesLimit

	// MaxBatchMessages bounds the messages of all kinds in one batch.
	MaxBatchMessages = 1 << 16
	// MaxBatchHeartbeats bounds the heartbeats of one batch: a node pair
	// exchanges a handful per round, so more means a runaway sender.
	MaxBatchHeartbeats = 256

	// MaxMessageOps bounds the ops of one partition message (its
	// MaxBatchOps has no hard bound of its own; the default is 256).
	MaxMessageOps = 1 << 16
	// MaxMessageKVs bounds the key-value pairs of one snapshot chunk.
	MaxMessageKVs = 1 << 16
	// MaxHistory bounds the epoch history a snapshot chunk carries.
	MaxHistory = partition.HardMaxEpochHistory
	// MaxKeyBytes bounds a partition key (op or KV).
	MaxKeyBytes = partition.HardMaxKeyBytes
	// MaxOpBytes bounds key plus value of one op, and a KV's value.
	MaxOpBytes = partition.HardMaxOpBytes
	// MaxRegionBytes bounds a region name (partition stores region names
	// up to 255 bytes).
	MaxRegionBytes = 255

	// MaxNodeList bounds a heartbeat's Suspects, Gray and Withheld lists
	// (the simulator's largest cluster has 1024 nodes).
	MaxNodeList = 1024

	// MaxLearnKeyBytes and MaxLearnDataBytes bound a Learn: it carries a
	// register value, so the register bounds apply.
	MaxLearnKeyBytes  = caspaxos.MaxKeyBytes
	MaxLearnDataBytes = caspaxos.MaxValueBytes
)
