package nodewire

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
)

// gen builds random valid batches exercising every field: zero and
// non-zero numbers of every width, negative durations, nil and empty
// (non-nil) slices and byte strings.
type gen struct{ rng *rand.Rand }

func newGen(seed uint64) gen { return gen{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))} }

// num is zero a third of the time, else small, else any 64-bit value.
func (g gen) num() uint64 {
	switch g.rng.IntN(3) {
	case 0:
		return 0
	case 1:
		return g.rng.Uint64N(300)
	default:
		return g.rng.Uint64() >> g.rng.UintN(64)
	}
}

func (g gen) dur() time.Duration {
	d := time.Duration(g.num())
	if g.rng.IntN(2) == 0 {
		d = -d
	}
	return d
}

func (g gen) flag() bool { return g.rng.IntN(2) == 0 }

// bytes returns nil, empty non-nil, or up to max random bytes.
func (g gen) bytes(max int) []byte {
	switch g.rng.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, g.rng.IntN(max+1))
	for i := range b {
		b[i] = byte(g.rng.Uint32())
	}
	return b
}

func (g gen) str(max int) string { return string(g.bytes(max)) }

// count returns a list length; -1 asks for an empty non-nil list.
func (g gen) count(max int) int {
	if g.rng.IntN(4) == 0 {
		return -1
	}
	return g.rng.IntN(max + 1)
}

func makeList[T any](n int, f func() T) []T {
	if n < 0 {
		return []T{}
	}
	if n == 0 {
		return nil
	}
	s := make([]T, n)
	for i := range s {
		s[i] = f()
	}
	return s
}

func (g gen) batch() Batch {
	return Batch{
		From:       NodeID(g.num()),
		To:         NodeID(g.num()),
		CAS:        makeList(g.count(3), g.cas),
		Data:       makeList(g.count(4), g.data),
		Heartbeats: makeList(g.count(3), g.heartbeat),
		Learns:     makeList(g.count(3), g.learn),
		LearnAcks:  makeList(g.count(3), g.learnAck),
	}
}

func (g gen) ballot() caspaxos.Ballot {
	return caspaxos.Ballot{Counter: g.num(), Proposer: caspaxos.NodeID(g.num())}
}

func (g gen) cas() caspaxos.Message {
	return caspaxos.Message{
		Type: caspaxos.MsgType(1 + g.rng.IntN(int(caspaxos.MsgEraseReply))),
		From: caspaxos.NodeID(g.num()), To: caspaxos.NodeID(g.num()), Age: g.num(),
		Items: makeList(g.count(3), func() caspaxos.Item {
			return caspaxos.Item{
				Key: g.str(20), Ballot: g.ballot(), Next: g.ballot(), Accepted: g.ballot(), Conflict: g.ballot(),
				Value:  caspaxos.Value{Version: g.num(), Data: g.bytes(30), Tombstone: g.flag()},
				Reject: caspaxos.Reject(g.rng.IntN(int(caspaxos.RejectNotTombstone) + 1)),
			}
		}),
	}
}

func (g gen) data() partition.Message {
	m := partition.Message{
		Type:      partition.MsgType(1 + g.rng.IntN(int(partition.MsgStale))),
		Partition: partition.ID(g.num()), Epoch: partition.Epoch(g.num()),
		From: partition.Region(g.str(12)), To: partition.Region(g.str(12)),
		Prev: partition.LSN(g.num()), PrevEpoch: partition.Epoch(g.num()),
		Entries: makeList(g.count(5), g.op),
		Commit:  partition.LSN(g.num()), Stable: partition.LSN(g.num()), LeaderLast: partition.LSN(g.num()),
		EchoBoot: g.num(), Echo: g.dur(), Grant: g.dur(), Member: g.flag(), WantAck: g.flag(),
		Success: g.flag(), Match: partition.LSN(g.num()), Hint: partition.LSN(g.num()), HintEpoch: partition.Epoch(g.num()),
		NeedSnapshot: g.flag(), ProbeBoot: g.num(), Probe: g.dur(), WantGrant: g.flag(),
		Seq: uint32(g.num()), Last: g.flag(), Base: partition.LSN(g.num()), BaseEpoch: partition.Epoch(g.num()),
		ConsistentAt: partition.LSN(g.num()),
		History: makeList(g.count(4), func() partition.EpochRange {
			return partition.EpochRange{Epoch: partition.Epoch(g.num()), After: partition.LSN(g.num())}
		}),
		KVs: makeList(g.count(4), func() partition.KV {
			return partition.KV{Key: g.bytes(16), Value: g.bytes(40), LSN: partition.LSN(g.num()), Epoch: partition.Epoch(g.num())}
		}),
		WriteRegion: partition.Region(g.str(12)),
	}
	return m
}

func (g gen) op() partition.Op {
	op := partition.Op{LSN: partition.LSN(g.num()), Epoch: partition.Epoch(g.num()), Delete: g.flag(), Key: g.bytes(16)}
	if !op.Delete {
		op.Value = g.bytes(40)
	}
	return op
}

func (g gen) nodes() []NodeID {
	n := g.count(6)
	if n <= 0 {
		return makeList(n, func() NodeID { return 0 })
	}
	set := map[NodeID]bool{}
	for len(set) < n {
		set[NodeID(g.num())] = true
	}
	ids := make([]NodeID, 0, n)
	for id := range set {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (g gen) heartbeat() failover.Heartbeat {
	return failover.Heartbeat{
		Kind: failover.HeartbeatKind(1 + g.rng.IntN(int(failover.KindProbe))),
		From: NodeID(g.num()), To: NodeID(g.num()), Seq: g.num(),
		Suspects: g.nodes(), ViewSeq: g.num(), SentAt: g.dur(), Gray: g.nodes(), Withheld: g.nodes(),
	}
}

func (g gen) learnAck() LearnAck { return LearnAck{Key: g.str(20), Version: g.num()} }

func (g gen) learn() Learn {
	return Learn{Key: g.str(20), Version: g.num(), Data: g.bytes(50)}
}

// canonical is b as Decode returns it: every empty slice and byte string
// nil. It works on a deep copy.
func canonical(b Batch) Batch {
	b.CAS = canonList(b.CAS, func(m *caspaxos.Message) {
		m.Items = canonList(m.Items, func(it *caspaxos.Item) { it.Value.Data = canonBytes(it.Value.Data) })
	})
	b.Data = canonList(b.Data, func(m *partition.Message) {
		m.Entries = canonList(m.Entries, func(op *partition.Op) { op.Key, op.Value = canonBytes(op.Key), canonBytes(op.Value) })
		m.History = canonList(m.History, func(*partition.EpochRange) {})
		m.KVs = canonList(m.KVs, func(kv *partition.KV) { kv.Key, kv.Value = canonBytes(kv.Key), canonBytes(kv.Value) })
	})
	b.Heartbeats = canonList(b.Heartbeats, func(h *failover.Heartbeat) {
		h.Suspects, h.Gray, h.Withheld = canonList(h.Suspects, nil), canonList(h.Gray, nil), canonList(h.Withheld, nil)
	})
	b.Learns = canonList(b.Learns, func(l *Learn) { l.Data = canonBytes(l.Data) })
	b.LearnAcks = canonList(b.LearnAcks, nil)
	return b
}

func canonList[T any](s []T, f func(*T)) []T {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	for i := range s {
		if f != nil {
			f(&s[i])
		}
	}
	return s
}

func canonBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return slices.Clone(b)
}
