package nodewire

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/fmnode/fmnode/partition"
)

// Bits of a partition message's mask: six flags, then one bit per field
// that is present (exactly the non-zero ones), in encoding order.
const (
	dMember uint64 = 1 << iota
	dWantAck
	dSuccess
	dNeedSnapshot
	dWantGrant
	dLast
	dPartition
	dEpoch
	dFrom
	dTo
	dPrev
	dPrevEpoch
	dEntries
	dCommit
	dStable
	dLeaderLast
	dEchoBoot
	dEcho
	dGrant
	dMatch
	dHint
	dHintEpoch
	dProbeBoot
	dProbe
	dSeq
	dBase
	dBaseEpoch
	dConsistentAt
	dHistory
	dKVs
	dWriteRegion
	dLimit // first undefined bit

	opDelete byte = 1

	minDataBytes    = 2 // type, mask
	minOpBytes      = 5 // lsn, epoch, flags, key length, value length
	minKVBytes      = 4 // key length, value length, lsn, epoch
	minHistoryBytes = 2 // epoch, after
)

func dataMask(m *partition.Message) uint64 {
	var f uint64
	bit := func(b uint64, on bool) {
		if on {
			f |= b
		}
	}
	bit(dMember, m.Member)
	bit(dWantAck, m.WantAck)
	bit(dSuccess, m.Success)
	bit(dNeedSnapshot, m.NeedSnapshot)
	bit(dWantGrant, m.WantGrant)
	bit(dLast, m.Last)
	bit(dPartition, m.Partition != 0)
	bit(dEpoch, m.Epoch != 0)
	bit(dFrom, m.From != "")
	bit(dTo, m.To != "")
	bit(dPrev, m.Prev != 0)
	bit(dPrevEpoch, m.PrevEpoch != 0)
	bit(dEntries, len(m.Entries) != 0)
	bit(dCommit, m.Commit != 0)
	bit(dStable, m.Stable != 0)
	bit(dLeaderLast, m.LeaderLast != 0)
	bit(dEchoBoot, m.EchoBoot != 0)
	bit(dEcho, m.Echo != 0)
	bit(dGrant, m.Grant != 0)
	bit(dMatch, m.Match != 0)
	bit(dHint, m.Hint != 0)
	bit(dHintEpoch, m.HintEpoch != 0)
	bit(dProbeBoot, m.ProbeBoot != 0)
	bit(dProbe, m.Probe != 0)
	bit(dSeq, m.Seq != 0)
	bit(dBase, m.Base != 0)
	bit(dBaseEpoch, m.BaseEpoch != 0)
	bit(dConsistentAt, m.ConsistentAt != 0)
	bit(dHistory, len(m.History) != 0)
	bit(dKVs, len(m.KVs) != 0)
	bit(dWriteRegion, m.WriteRegion != "")
	return f
}

// checkData refuses what decodeData would refuse, so that Encode never
// sends a message its peer must reject.
func checkData(m *partition.Message) error {
	switch {
	case !m.Type.Valid():
		return fmt.Errorf("unknown type %d", uint8(m.Type))
	case len(m.From) > MaxRegionBytes || len(m.To) > MaxRegionBytes || len(m.WriteRegion) > MaxRegionBytes:
		return fmt.Errorf("region name over %d bytes", MaxRegionBytes)
	case len(m.Entries) > MaxMessageOps:
		return fmt.Errorf("%d ops exceed %d", len(m.Entries), MaxMessageOps)
	case len(m.KVs) > MaxMessageKVs:
		return fmt.Errorf("%d kvs exceed %d", len(m.KVs), MaxMessageKVs)
	case len(m.History) > MaxHistory:
		return fmt.Errorf("history of %d exceeds %d", len(m.History), MaxHistory)
	}
	for i := range m.Entries {
		if err := checkOp(&m.Entries[i]); err != nil {
			return fmt.Errorf("op %d: %w", i, err)
		}
	}
	for i := range m.KVs {
		kv := &m.KVs[i]
		if len(kv.Key) > MaxKeyBytes || len(kv.Value) > MaxOpBytes {
			return fmt.Errorf("kv %d: key of %d or value of %d bytes over %d/%d", i, len(kv.Key), len(kv.Value), MaxKeyBytes, MaxOpBytes)
		}
	}
	return nil
}

func checkOp(op *partition.Op) error {
	switch {
	case len(op.Key) > MaxKeyBytes:
		return fmt.Errorf("key of %d bytes exceeds %d", len(op.Key), MaxKeyBytes)
	case len(op.Key)+len(op.Value) > MaxOpBytes:
		return fmt.Errorf("key and value of %d bytes exceed %d", len(op.Key)+len(op.Value), MaxOpBytes)
	case op.Delete && len(op.Value) != 0:
		return fmt.Errorf("delete with a value")
	}
	return nil
}

// fieldWriter appends the fields whose bit is set in mask.
type fieldWriter struct {
	dst  []byte
	mask uint64
}

func (w *fieldWriter) uvarint(bit, v uint64) {
	if w.mask&bit != 0 {
		w.dst = binary.AppendUvarint(w.dst, v)
	}
}

func (w *fieldWriter) duration(bit uint64, d time.Duration) {
	if w.mask&bit != 0 {
		w.dst = binary.AppendVarint(w.dst, int64(d))
	}
}

func (w *fieldWriter) region(bit uint64, s partition.Region) {
	if w.mask&bit != 0 {
		w.dst = appendString(w.dst, string(s))
	}
}

func appendData(dst []byte, m *partition.Message) ([]byte, error) {
	if err := checkData(m); err != nil {
		return dst, err
	}
	w := fieldWriter{mask: dataMask(m)}
	w.dst = binary.AppendUvarint(append(dst, byte(m.Type)), w.mask)
	w.uvarint(dPartition, uint64(m.Partition))
	w.uvarint(dEpoch, uint64(m.Epoch))
	w.region(dFrom, m.From)
	w.region(dTo, m.To)
	w.appendFields(m)
	w.respFields(m)
	w.snapshotFields(m)
	w.region(dWriteRegion, m.WriteRegion)
	return w.dst, nil
}

func (w *fieldWriter) appendFields(m *partition.Message) {
	w.uvarint(dPrev, uint64(m.Prev))
	w.uvarint(dPrevEpoch, uint64(m.PrevEpoch))
	if w.mask&dEntries != 0 {
		w.dst = binary.AppendUvarint(w.dst, uint64(len(m.Entries)))
		for i := range m.Entries {
			w.dst = appendOp(w.dst, &m.Entries[i])
		}
	}
	w.uvarint(dCommit, uint64(m.Commit))
	w.uvarint(dStable, uint64(m.Stable))
	w.uvarint(dLeaderLast, uint64(m.LeaderLast))
	w.uvarint(dEchoBoot, m.EchoBoot)
	w.duration(dEcho, m.Echo)
	w.duration(dGrant, m.Grant)
}

func (w *fieldWriter) respFields(m *partition.Message) {
	w.uvarint(dMatch, uint64(m.Match))
	w.uvarint(dHint, uint64(m.Hint))
	w.uvarint(dHintEpoch, uint64(m.HintEpoch))
	w.uvarint(dProbeBoot, m.ProbeBoot)
	w.duration(dProbe, m.Probe)
}

func (w *fieldWriter) snapshotFields(m *partition.Message) {
	w.uvarint(dSeq, uint64(m.Seq))
	w.uvarint(dBase, uint64(m.Base))
	w.uvarint(dBaseEpoch, uint64(m.BaseEpoch))
	w.uvarint(dConsistentAt, uint64(m.ConsistentAt))
	if w.mask&dHistory != 0 {
		w.dst = binary.AppendUvarint(w.dst, uint64(len(m.History)))
		for _, h := range m.History {
			w.dst = binary.AppendUvarint(w.dst, uint64(h.Epoch))
			w.dst = binary.AppendUvarint(w.dst, uint64(h.After))
		}
	}
	if w.mask&dKVs != 0 {
		w.dst = binary.AppendUvarint(w.dst, uint64(len(m.KVs)))
		for i := range m.KVs {
			w.dst = appendKV(w.dst, &m.KVs[i])
		}
	}
}

func appendOp(dst []byte, op *partition.Op) []byte {
	dst = binary.AppendUvarint(dst, uint64(op.LSN))
	dst = binary.AppendUvarint(dst, uint64(op.Epoch))
	var flags byte
	if op.Delete {
		flags = opDelete
	}
	dst = appendBytes(append(dst, flags), op.Key)
	return appendBytes(dst, op.Value)
}

func appendKV(dst []byte, kv *partition.KV) []byte {
	dst = appendBytes(dst, kv.Key)
	dst = appendBytes(dst, kv.Value)
	dst = binary.AppendUvarint(dst, uint64(kv.LSN))
	return binary.AppendUvarint(dst, uint64(kv.Epoch))
}
