package nodewire

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
	"github.com/stretchr/testify/require"
)

func uv(x uint64) []byte { return binary.AppendUvarint(nil, x) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// hdr is the header of a hand-made payload (format, from 0, to 0).
func hdr() []byte { return []byte{formatV2, 0, 0} }

// noSections is five empty sections.
func noSections() []byte { return []byte{0, 0, 0, 0, 0} }

// dataOnly is a batch whose only section is one partition message body.
func dataOnly(body ...[]byte) []byte {
	return cat(hdr(), []byte{0, 1}, cat(body...), []byte{0, 0, 0})
}

// hbOnly is a batch whose only section is one heartbeat body.
func hbOnly(body ...[]byte) []byte { return cat(hdr(), []byte{0, 0, 1}, cat(body...), []byte{0, 0}) }

// TestDecodeRefuses: malformed payloads are refused with ErrCorrupt and a
// message naming the problem.
func TestDecodeRefuses(t *testing.T) {
	validHB := []byte{byte(failover.KindHeartbeat), 0, 0, 0, 0, 0}
	for _, tc := range []struct {
		name, want string
		payload    []byte
	}{
		{"empty", "format truncated", nil},
		{"unknown format", "unknown format version 1", cat([]byte{1, 0, 0}, noSections())},
		{"trailing byte", "1 trailing bytes", cat(hdr(), noSections(), []byte{0})},
		{"non-canonical uvarint", "from not in shortest form", cat([]byte{formatV2, 0x80, 0x00, 0}, noSections())},
		{"uvarint overflow", "from overflows 64 bits", cat([]byte{formatV2}, bytes.Repeat([]byte{0xff}, 10), []byte{1, 0}, noSections())},
		{"cas count beyond bytes", "cas count 5 cannot fit", cat(hdr(), []byte{5, 0, 0, 0})},
		{"unknown cas type", "unknown type 99", cat(hdr(), []byte{1, 6, 1, 99, 0, 0, 0, 0}, []byte{0, 0, 0})},
		{"empty cas message", "format truncated", cat(hdr(), []byte{1, 0}, bytes.Repeat([]byte{0}, 9))},
		{"cas count over budget", "cas count 65537 exceeds 65536", cat(hdr(), uv(MaxBatchMessages+1), []byte{0, 0, 0})},
		{"unknown data type 0", "unknown partition message type 0", dataOnly([]byte{0, 0})},
		{"unknown data type", "unknown partition message type 6", dataOnly([]byte{6, 0})},
		{"unknown mask bits", "unknown mask bits 0x80000000", dataOnly([]byte{1}, uv(1<<31))},
		{"present zero field", "partition present but zero", dataOnly([]byte{1}, uv(dPartition), []byte{0})},
		{"partition over 32 bits", "partition 4294967296 overflows 32 bits", dataOnly([]byte{1}, uv(dPartition), uv(1<<32))},
		{"seq over 32 bits", "seq 4294967296 overflows 32 bits", dataOnly([]byte{1}, uv(dSeq), uv(1<<32))},
		{"present zero duration", "echo present but zero", dataOnly([]byte{1}, uv(dEcho), []byte{0})},
		{"present empty region", "from present but empty", dataOnly([]byte{1}, uv(dFrom), []byte{0})},
		{"region too long", "from length 256 exceeds 255", dataOnly([]byte{1}, uv(dFrom), uv(256), bytes.Repeat([]byte{'r'}, 256))},
		{"present empty list", "op count present but empty", dataOnly([]byte{1}, uv(dEntries), []byte{0})},
		{"op count over bound", "op count 65537 exceeds 65536", dataOnly([]byte{1}, uv(dEntries), uv(MaxMessageOps+1))},
		{"unknown op flags", "unknown op flags 0x2", dataOnly([]byte{1}, uv(dEntries), []byte{1, 1, 1, 2, 0, 0})},
		{"delete with value", "delete op with a value", dataOnly([]byte{1}, uv(dEntries), []byte{1, 1, 1, 1, 0, 1, 'x'})},
		{"op key too long", "op key length 4097 exceeds 4096", dataOnly([]byte{1}, uv(dEntries), []byte{1, 1, 1, 0}, uv(MaxKeyBytes+1), make([]byte, MaxKeyBytes+1), []byte{0})},
		{"history over bound", "history count 257 exceeds 256", dataOnly([]byte{1}, uv(dHistory), uv(MaxHistory+1), make([]byte, 600))},
		{"kv value length beyond bytes", "kv value length 9 but 5 bytes left", dataOnly([]byte{1}, uv(dKVs), []byte{1, 0, 9, 0, 0})},
		{"unknown heartbeat kind 0", "unknown heartbeat kind 0", hbOnly([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0})},
		{"unknown heartbeat kind", "unknown heartbeat kind 5", hbOnly([]byte{5, 0, 0, 0, 0, 0, 0, 0, 0})},
		{"heartbeat count over bound", "heartbeat count 257 exceeds 256", cat(hdr(), []byte{0, 0}, uv(MaxBatchHeartbeats+1), make([]byte, 9*(MaxBatchHeartbeats+1)))},
		{"suspects duplicate", "suspects not strictly ascending or overflowing at 1", hbOnly(validHB, []byte{2, 5, 0, 0, 0})},
		{"gray overflow", "gray not strictly ascending or overflowing at 1", hbOnly(validHB, []byte{0, 2}, uv(math.MaxUint64), []byte{1, 0})},
		{"withheld over bound", "withheld 1025 exceeds 1024", hbOnly(validHB, []byte{0, 0}, uv(MaxNodeList+1), make([]byte, MaxNodeList+1))},
		{"learn key too long", "learn key length 1025 exceeds 1024", cat(hdr(), []byte{0, 0, 0, 1}, uv(MaxLearnKeyBytes+1), make([]byte, MaxLearnKeyBytes+3))},
		{"learn data too long", "learn data length 1048577 exceeds 1048576", cat(hdr(), []byte{0, 0, 0, 1, 0, 0}, uv(MaxLearnDataBytes+1))},
		{"learn ack key too long", "learn ack key length 1025 exceeds 1024", cat(hdr(), []byte{0, 0, 0, 0, 1}, uv(MaxLearnKeyBytes+1), make([]byte, MaxLearnKeyBytes+2))},
		{"learn ack truncated", "learn ack version truncated", cat(hdr(), []byte{0, 0, 0, 0, 1, 1, 'k'})},
		{"total over budget", "heartbeat count 1 exceeds 0", cat(hdr(), []byte{0}, uv(MaxBatchMessages), bytes.Repeat([]byte{1, 0}, MaxBatchMessages), []byte{1}, validHB, []byte{0, 0, 0, 0, 0})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.payload)
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestDecodeRefusesCASWithBothSentinels: a bad CAS message is corrupt for
// this package and for caspaxos.
func TestDecodeRefusesCASWithBothSentinels(t *testing.T) {
	_, err := Decode(cat(hdr(), []byte{1, 6, 1, 99, 0, 0, 0, 0}, []byte{0, 0, 0}))
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorIs(t, err, caspaxos.ErrCorrupt)
}

// TestDecodeTruncated: every proper prefix of a valid encoding is refused.
func TestDecodeTruncated(t *testing.T) {
	g := newGen(4)
	for range 20 {
		b := g.batch()
		enc, err := Encode(nil, &b)
		require.NoError(t, err)
		for n := range len(enc) {
			_, err := Decode(enc[:n])
			require.ErrorIs(t, err, ErrCorrupt, "prefix of %d of %d bytes", n, len(enc))
		}
	}
}

// TestEncodeRefuses: Encode refuses what Decode would refuse, with
// ErrInvalid, and leaves dst as it was.
func TestEncodeRefuses(t *testing.T) {
	data := func(f func(*partition.Message)) Batch {
		m := partition.Message{Type: partition.MsgAppend}
		f(&m)
		return Batch{Data: []partition.Message{m}}
	}
	hb := func(f func(*failover.Heartbeat)) Batch {
		h := failover.Heartbeat{Kind: failover.KindHeartbeat}
		f(&h)
		return Batch{Heartbeats: []failover.Heartbeat{h}}
	}
	op := func(o partition.Op) Batch {
		return data(func(m *partition.Message) { m.Entries = []partition.Op{o} })
	}
	long := strings.Repeat("x", MaxRegionBytes+1)
	for _, tc := range []struct {
		name, want string
		b          Batch
	}{
		{"too many messages", "65537 messages exceed 65536", Batch{Learns: make([]Learn, MaxBatchMessages+1)}},
		{"too many heartbeats", "257 heartbeats exceed 256", Batch{Heartbeats: make([]failover.Heartbeat, MaxBatchHeartbeats+1)}},
		{"unknown cas type", "unknown message type 0", Batch{CAS: []caspaxos.Message{{}}}},
		{"cas key too large", "key of 1025 bytes", Batch{CAS: []caspaxos.Message{{Type: caspaxos.MsgPrepare, Items: []caspaxos.Item{{Key: strings.Repeat("k", caspaxos.MaxKeyBytes+1)}}}}}},
		{"unknown data type", "unknown type 6", data(func(m *partition.Message) { m.Type = 6 })},
		{"from region too long", "region name over 255", data(func(m *partition.Message) { m.From = partition.Region(long) })},
		{"write region too long", "region name over 255", data(func(m *partition.Message) { m.WriteRegion = partition.Region(long) })},
		{"too many ops", "65537 ops exceed 65536", data(func(m *partition.Message) { m.Entries = make([]partition.Op, MaxMessageOps+1) })},
		{"too many kvs", "65537 kvs exceed 65536", data(func(m *partition.Message) { m.KVs = make([]partition.KV, MaxMessageKVs+1) })},
		{"history too long", "history of 257 exceeds 256", data(func(m *partition.Message) { m.History = make([]partition.EpochRange, MaxHistory+1) })},
		{"op key too long", "op 0: key of 4097 bytes", op(partition.Op{Key: make([]byte, MaxKeyBytes+1)})},
		{"op too large", "key and value of 4194305 bytes", op(partition.Op{Key: []byte("k"), Value: make([]byte, MaxOpBytes)})},
		{"delete with value", "delete with a value", op(partition.Op{Delete: true, Value: []byte("v")})},
		{"kv value too large", "kv 0: key of 1 or value of 4194305", data(func(m *partition.Message) {
			m.KVs = []partition.KV{{Key: []byte("k"), Value: make([]byte, MaxOpBytes+1)}}
		})},
		{"unknown heartbeat kind", "unknown heartbeat kind 5", hb(func(h *failover.Heartbeat) { h.Kind = 5 })},
		{"suspects unsorted", "suspects: not strictly ascending at 1", hb(func(h *failover.Heartbeat) { h.Suspects = []NodeID{3, 2} })},
		{"gray duplicate", "gray: not strictly ascending at 2", hb(func(h *failover.Heartbeat) { h.Gray = []NodeID{1, 2, 2} })},
		{"withheld too long", "withheld: 1025 nodes exceed 1024", hb(func(h *failover.Heartbeat) { h.Withheld = make([]NodeID, MaxNodeList+1) })},
		{"learn key too long", "learn 0: key of 1025 bytes", Batch{Learns: []Learn{{Key: strings.Repeat("k", MaxLearnKeyBytes+1)}}}},
		{"learn data too long", "data of 1048577 bytes", Batch{Learns: []Learn{{Data: make([]byte, MaxLearnDataBytes+1)}}}},
		{"learn ack key too long", "learn ack 0: key of 1025 bytes", Batch{LearnAcks: []LearnAck{{Key: strings.Repeat("k", MaxLearnKeyBytes+1)}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("keep")
			got, err := Encode(dst, &tc.b)
			require.ErrorIs(t, err, ErrInvalid)
			require.ErrorContains(t, err, tc.want)
			require.Equal(t, []byte("keep"), got)
		})
	}
}
