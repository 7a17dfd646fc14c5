package partition

import (
	"fmt"
	"time"
)

// MsgType is the type of a replica-to-replica message.
type MsgType uint8

// Message types. Every message carries (Partition, Epoch): the epoch of the
// sender's current knowledge. A receiver with a greater epoch answers
// MsgStale and ignores the rest; one with a smaller epoch adopts the
// greater epoch before acting (it has been fenced by a failover).
const (
	// MsgAppend (write region -> follower): ops after (Prev, PrevEpoch),
	// the commit and stable positions, and a freshness grant. With no ops
	// it is a heartbeat.
	MsgAppend MsgType = iota + 1
	// MsgAppendResp (follower -> write region): Success with Match (the
	// follower's log equals the write region's up to Match), or a mismatch
	// with a Hint, or NeedSnapshot. Carries a freshness probe.
	MsgAppendResp
	// MsgSnapshot (write region -> follower): one chunk of the state.
	MsgSnapshot
	// MsgSnapshotResp (follower -> write region): chunk Seq installed.
	MsgSnapshotResp
	// MsgStale: the receiver of a message found its epoch stale; carries
	// the current epoch and write region.
	MsgStale
)

func (t MsgType) String() string {
	switch t {
	case MsgAppend:
		return "append"
	case MsgAppendResp:
		return "append-resp"
	case MsgSnapshot:
		return "snapshot"
	case MsgSnapshotResp:
		return "snapshot-resp"
	case MsgStale:
		return "stale"
	default:
		return fmt.Sprintf("MsgType(%d)", uint8(t))
	}
}

// Valid reports whether t is a known type.
func (t MsgType) Valid() bool { return t >= MsgAppend && t <= MsgStale }

// Message is a replica-to-replica message. One flat struct keeps the
// transports simple; each type uses the fields listed for it.
type Message struct {
	Type      MsgType
	Partition ID
	Epoch     Epoch
	From, To  Region

	// MsgAppend.
	Prev       LSN
	PrevEpoch  Epoch
	Entries    []Op
	Commit     LSN // write region's commit position
	Stable     LSN // durable on every replica (undo and compaction floor)
	LeaderLast LSN // write region's last assigned LSN when it built the message
	// Echo answers the follower's latest probe (ProbeBoot, Probe): the
	// follower may serve bounded-staleness reads until Echo + Grant
	// (shortened by the drift margin) once it has applied LeaderLast.
	// Grant is T cut to what remains of the write region's lease, and is
	// set only while that lease holds and is validated for the epoch (see
	// the package doc, Reads); an echo with Grant 0 grants nothing. Member
	// says whether the follower is in the write quorum (only members serve
	// bounded-staleness reads).
	EchoBoot uint64
	Echo     time.Duration
	Grant    time.Duration
	Member   bool
	// WantAck: the write region does not know the follower has matched up
	// to Prev; a heartbeat with it set must be answered.
	WantAck bool

	// MsgAppendResp.
	Success      bool
	Match        LSN
	Hint         LSN
	HintEpoch    Epoch
	NeedSnapshot bool
	ProbeBoot    uint64
	Probe        time.Duration // follower's clock when it built the response
	WantGrant    bool          // the follower needs a freshness grant now

	// MsgSnapshot / MsgSnapshotResp.
	Seq          uint32
	Last         bool // final chunk
	Base         LSN  // the snapshot replaces the log up to Base
	BaseEpoch    Epoch
	ConsistentAt LSN // the state is consistent once ops up to it are applied
	History      []EpochRange
	KVs          []KV

	// MsgStale.
	WriteRegion Region
}

// String summarises the message for logs and traces.
func (m *Message) String() string {
	switch m.Type {
	case MsgAppend:
		return fmt.Sprintf("%s p%d e%d %s->%s prev=%d:%d n=%d commit=%d stable=%d", m.Type, m.Partition, m.Epoch, m.From, m.To, m.PrevEpoch, m.Prev, len(m.Entries), m.Commit, m.Stable)
	case MsgAppendResp:
		return fmt.Sprintf("%s p%d e%d %s->%s ok=%v match=%d hint=%d:%d snap=%v", m.Type, m.Partition, m.Epoch, m.From, m.To, m.Success, m.Match, m.HintEpoch, m.Hint, m.NeedSnapshot)
	case MsgSnapshot:
		return fmt.Sprintf("%s p%d e%d %s->%s seq=%d last=%v base=%d kvs=%d", m.Type, m.Partition, m.Epoch, m.From, m.To, m.Seq, m.Last, m.Base, len(m.KVs))
	default:
		return fmt.Sprintf("%s p%d e%d %s->%s", m.Type, m.Partition, m.Epoch, m.From, m.To)
	}
}

// WriteRequest is a client write. Epoch must be the partition's current
// epoch as the client knows it (0 if unknown: the reply redirects). The
// core keeps Key and Value in the op it creates: the caller must not modify
// them afterwards.
type WriteRequest struct {
	Partition ID
	Epoch     Epoch
	Ref       ClientRef
	Key       []byte
	Value     []byte
	Delete    bool
	// If makes the write a compare-and-set: applied only if the key's
	// current state satisfies it, else answered with a
	// *ConditionFailedError (see cas.go). nil: unconditional.
	If *Condition
	// PollWait, if positive, says the write is a client's poll for a
	// pending failover (routing's Decision.Poll): a follower of Epoch,
	// which would redirect it with nothing new, may hold it up to
	// PollWait (at most Config.MaxPollWait) and handle it when its route
	// moves (poll.go). 0: answered at once.
	PollWait time.Duration
}

// ReadRequest is a client read.
type ReadRequest struct {
	Partition ID
	Ref       ClientRef
	Key       []byte
	// Consistency of this read; 0 means the partition's level. A read may
	// ask for a weaker level than the partition's, never a stronger one
	// than strong.
	Consistency Consistency
	// Epoch is checked for strong reads (like a write's).
	Epoch Epoch
	// Token is the session token for session reads.
	Token Token
}

// ReplyKind says what a Reply answers.
type ReplyKind uint8

// Reply kinds.
const (
	ReplyWrite ReplyKind = iota + 1
	ReplyRead
	ReplyControl
)

// Reply answers a client request or a control operation.
type Reply struct {
	Kind      ReplyKind
	Partition ID
	Ref       ClientRef
	// Token: for a write, its (epoch, LSN); for a read, the position of the
	// state it read (merge it into the session).
	Token Token
	// Epoch is the replying replica's epoch (for reads).
	Epoch Epoch
	// Read result: the value, and Version, the position of the op that
	// wrote it (zero if not found).
	Value   []byte
	Found   bool
	Version Token
	Err     error
}

// Read is a read the core admitted; the driver executes it against the
// store after the Ready's writes and before the next Ready's writes, and
// replies with Token (the replica's applied position then) merged with the
// position of the value read.
type Read struct {
	Partition ID
	Ref       ClientRef
	Key       []byte
	Token     Token
	Epoch     Epoch // the replica's epoch
}

// FetchKind says what a Fetch reads.
type FetchKind uint8

// Fetch kinds.
const (
	// FetchLog reads log ops for a follower that needs ops no longer in
	// memory.
	FetchLog FetchKind = iota + 1
	// FetchState reads a chunk of the applied state for a snapshot.
	FetchState
	// FetchKey reads one key of the applied state for a compare-and-set
	// (the result's KVs hold it, or nothing if absent).
	FetchKey
)

// Fetch is a store read the core needs; the driver executes it after the
// Ready's writes and hands the result back with Host.StepFetch.
type Fetch struct {
	Kind      FetchKind
	Partition ID
	To        Region // the follower it is for
	From      LSN    // FetchLog: first LSN
	MaxOps    int
	MaxBytes  int
	After     []byte // FetchState: last key of the previous chunk (nil: start)
	Seq       uint32 // FetchState: chunk number; FetchKey: the compare-and-set's number
	Key       []byte // FetchKey: the key
	Epoch     Epoch  // epoch of the request; results of another epoch are dropped
}

// FetchResult is the outcome of a Fetch.
type FetchResult struct {
	Fetch   Fetch
	Ops     []Op
	KVs     []KV
	More    bool
	Applied LSN // FetchState: applied LSN of the consistent view
	Err     error
}
