package nodewire

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/fmnode/fmnode/failover"
)

// minHeartbeatBytes: kind, from, to, seq, view seq, sent at, three counts.
const minHeartbeatBytes = 9

func knownKind(k failover.HeartbeatKind) bool {
	return k >= failover.KindHeartbeat && k <= failover.KindProbe
}

func checkHeartbeat(h *failover.Heartbeat) error {
	if !knownKind(h.Kind) {
		return fmt.Errorf("unknown heartbeat kind %d", uint8(h.Kind))
	}
	for _, l := range [...]struct {
		name string
		ids  []NodeID
	}{{"suspects", h.Suspects}, {"gray", h.Gray}, {"withheld", h.Withheld}} {
		if err := checkNodeList(l.ids); err != nil {
			return fmt.Errorf("%s: %w", l.name, err)
		}
	}
	return nil
}

// checkNodeList: the lists are sets, sent sorted so that they delta-encode
// and have one encoding; a duplicate or disorder is a sender bug.
func checkNodeList(ids []NodeID) error {
	if len(ids) > MaxNodeList {
		return fmt.Errorf("%d nodes exceed %d", len(ids), MaxNodeList)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			return fmt.Errorf("not strictly ascending at %d", i)
		}
	}
	return nil
}

func appendHeartbeat(dst []byte, h *failover.Heartbeat) ([]byte, error) {
	if err := checkHeartbeat(h); err != nil {
		return dst, err
	}
	dst = append(dst, byte(h.Kind))
	dst = binary.AppendUvarint(dst, uint64(h.From))
	dst = binary.AppendUvarint(dst, uint64(h.To))
	dst = binary.AppendUvarint(dst, h.Seq)
	dst = binary.AppendUvarint(dst, h.ViewSeq)
	dst = binary.AppendVarint(dst, int64(h.SentAt))
	dst = appendNodeList(dst, h.Suspects)
	dst = appendNodeList(dst, h.Gray)
	return appendNodeList(dst, h.Withheld), nil
}

// appendNodeList appends count, first id, then the gaps between
// consecutive ids (each at least one).
func appendNodeList(dst []byte, ids []NodeID) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	var prev NodeID
	for i, id := range ids {
		if i == 0 {
			dst = binary.AppendUvarint(dst, uint64(id))
		} else {
			dst = binary.AppendUvarint(dst, uint64(id-prev))
		}
		prev = id
	}
	return dst
}

func decodeHeartbeat(r *reader, h *failover.Heartbeat) {
	h.Kind = failover.HeartbeatKind(r.byte1("heartbeat kind"))
	if r.err == nil && !knownKind(h.Kind) {
		r.fail("unknown heartbeat kind %d", uint8(h.Kind))
		return
	}
	h.From = NodeID(r.uvarint("heartbeat from"))
	h.To = NodeID(r.uvarint("heartbeat to"))
	h.Seq = r.uvarint("heartbeat seq")
	h.ViewSeq = r.uvarint("heartbeat view seq")
	h.SentAt = time.Duration(r.varint("heartbeat sent at"))
	h.Suspects = decodeNodeList(r, "suspects")
	h.Gray = decodeNodeList(r, "gray")
	h.Withheld = decodeNodeList(r, "withheld")
}

func decodeNodeList(r *reader, field string) []NodeID {
	n := r.count(field, MaxNodeList, 1)
	if n == 0 {
		return nil
	}
	ids := make([]NodeID, n)
	for i := range ids {
		v := NodeID(r.uvarint(field))
		if i == 0 {
			ids[i] = v
			continue
		}
		if r.err == nil && (v == 0 || ids[i-1]+v < ids[i-1]) {
			r.fail("%s not strictly ascending or overflowing at %d", field, i)
		}
		ids[i] = ids[i-1] + v
	}
	if r.err != nil {
		return nil
	}
	return ids
}
