package nodewire

import (
	"math"
	"time"

	"github.com/fmnode/fmnode/partition"
)

// fieldReader reads the fields whose bit is set in mask; a present field
// must be non-zero (that is what makes the encoding canonical).
type fieldReader struct {
	*reader
	mask uint64
}

func (f fieldReader) uvarint(bit uint64, field string) uint64 {
	if f.mask&bit == 0 {
		return 0
	}
	v := f.reader.uvarint(field)
	if f.err == nil && v == 0 {
		f.fail("%s present but zero", field)
	}
	return v
}

func (f fieldReader) u32(bit uint64, field string) uint32 {
	v := f.uvarint(bit, field)
	if f.err == nil && v > math.MaxUint32 {
		f.fail("%s %d overflows 32 bits", field, v)
		return 0
	}
	return uint32(v)
}

func (f fieldReader) duration(bit uint64, field string) time.Duration {
	if f.mask&bit == 0 {
		return 0
	}
	v := f.reader.varint(field)
	if f.err == nil && v == 0 {
		f.fail("%s present but zero", field)
	}
	return time.Duration(v)
}

func (f fieldReader) region(bit uint64, field string) partition.Region {
	if f.mask&bit == 0 {
		return ""
	}
	b := f.reader.bytes(field, MaxRegionBytes)
	if f.err == nil && len(b) == 0 {
		f.fail("%s present but empty", field)
	}
	return partition.Region(f.reader.region(b))
}

// count reads a present list's count, which must be at least one.
func (f fieldReader) count(bit uint64, field string, limit, minBytes int) int {
	if f.mask&bit == 0 {
		return 0
	}
	n := f.reader.count(field, limit, minBytes)
	if f.err == nil && n == 0 {
		f.fail("%s present but empty", field)
	}
	return n
}

// decodeData decodes one partition message. Its byte slices alias r's
// input until own copies them out.
func decodeData(r *reader, m *partition.Message) {
	m.Type = partition.MsgType(r.byte1("type"))
	mask := r.uvarint("mask")
	if r.err != nil {
		return
	}
	if !m.Type.Valid() {
		r.fail("unknown partition message type %d", uint8(m.Type))
		return
	}
	if mask >= dLimit {
		r.fail("unknown mask bits %#x", mask&^(dLimit-1))
		return
	}
	f := fieldReader{reader: r, mask: mask}
	m.Member, m.WantAck, m.Success = mask&dMember != 0, mask&dWantAck != 0, mask&dSuccess != 0
	m.NeedSnapshot, m.WantGrant, m.Last = mask&dNeedSnapshot != 0, mask&dWantGrant != 0, mask&dLast != 0
	m.Partition = partition.ID(f.u32(dPartition, "partition"))
	m.Epoch = partition.Epoch(f.uvarint(dEpoch, "epoch"))
	m.From = f.region(dFrom, "from")
	m.To = f.region(dTo, "to")
	f.appendFields(m)
	f.respFields(m)
	f.snapshotFields(m)
	m.WriteRegion = f.region(dWriteRegion, "write region")
}

func (f fieldReader) appendFields(m *partition.Message) {
	m.Prev = partition.LSN(f.uvarint(dPrev, "prev"))
	m.PrevEpoch = partition.Epoch(f.uvarint(dPrevEpoch, "prev epoch"))
	if n := f.count(dEntries, "op count", MaxMessageOps, minOpBytes); n > 0 {
		m.Entries = make([]partition.Op, n)
		for i := range m.Entries {
			decodeOp(f.reader, &m.Entries[i])
		}
	}
	m.Commit = partition.LSN(f.uvarint(dCommit, "commit"))
	m.Stable = partition.LSN(f.uvarint(dStable, "stable"))
	m.LeaderLast = partition.LSN(f.uvarint(dLeaderLast, "leader last"))
	m.EchoBoot = f.uvarint(dEchoBoot, "echo boot")
	m.Echo = f.duration(dEcho, "echo")
	m.Grant = f.duration(dGrant, "grant")
}

func (f fieldReader) respFields(m *partition.Message) {
	m.Match = partition.LSN(f.uvarint(dMatch, "match"))
	m.Hint = partition.LSN(f.uvarint(dHint, "hint"))
	m.HintEpoch = partition.Epoch(f.uvarint(dHintEpoch, "hint epoch"))
	m.ProbeBoot = f.uvarint(dProbeBoot, "probe boot")
	m.Probe = f.duration(dProbe, "probe")
}

func (f fieldReader) snapshotFields(m *partition.Message) {
	m.Seq = f.u32(dSeq, "seq")
	m.Base = partition.LSN(f.uvarint(dBase, "base"))
	m.BaseEpoch = partition.Epoch(f.uvarint(dBaseEpoch, "base epoch"))
	m.ConsistentAt = partition.LSN(f.uvarint(dConsistentAt, "consistent at"))
	if n := f.count(dHistory, "history count", MaxHistory, minHistoryBytes); n > 0 {
		m.History = make([]partition.EpochRange, n)
		for i := range m.History {
			m.History[i].Epoch = partition.Epoch(f.reader.uvarint("history epoch"))
			m.History[i].After = partition.LSN(f.reader.uvarint("history after"))
		}
	}
	if n := f.count(dKVs, "kv count", MaxMessageKVs, minKVBytes); n > 0 {
		m.KVs = make([]partition.KV, n)
		for i := range m.KVs {
			kv := &m.KVs[i]
			kv.Key = f.reader.bytes("kv key", MaxKeyBytes)
			kv.Value = f.reader.bytes("kv value", MaxOpBytes)
			kv.LSN = partition.LSN(f.reader.uvarint("kv lsn"))
			kv.Epoch = partition.Epoch(f.reader.uvarint("kv epoch"))
		}
	}
}

func decodeOp(r *reader, op *partition.Op) {
	op.LSN = partition.LSN(r.uvarint("op lsn"))
	op.Epoch = partition.Epoch(r.uvarint("op epoch"))
	flags := r.byte1("op flags")
	if r.err == nil && flags&^opDelete != 0 {
		r.fail("unknown op flags %#x", flags)
	}
	op.Delete = flags&opDelete != 0
	op.Key = r.bytes("op key", MaxKeyBytes)
	op.Value = r.bytes("op value", MaxOpBytes-len(op.Key))
	if r.err == nil && op.Delete && op.Value != nil {
		r.fail("delete op with a value")
	}
}

// own copies the message's byte slices out of the input into one
// allocation per message: the message's ops and KVs are retained (and
// dropped) together, so a retained op never pins a whole frame nor other
// messages' bytes. Each slice is capped so an append cannot clobber its
// neighbour.
func own(m *partition.Message) {
	total := 0
	for i := range m.Entries {
		total += len(m.Entries[i].Key) + len(m.Entries[i].Value)
	}
	for i := range m.KVs {
		total += len(m.KVs[i].Key) + len(m.KVs[i].Value)
	}
	if total == 0 {
		return
	}
	a := arena(make([]byte, 0, total))
	for i := range m.Entries {
		m.Entries[i].Key, m.Entries[i].Value = a.copy(m.Entries[i].Key), a.copy(m.Entries[i].Value)
	}
	for i := range m.KVs {
		m.KVs[i].Key, m.KVs[i].Value = a.copy(m.KVs[i].Key), a.copy(m.KVs[i].Value)
	}
}

type arena []byte

// copy returns b copied into the arena (nil stays nil), capped at its length.
func (a *arena) copy(b []byte) []byte {
	if b == nil {
		return nil
	}
	start := len(*a)
	*a = append(*a, b...)
	return (*a)[start:len(*a):len(*a)]
}
