package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
)

func ballot(c uint64, p caspaxos.NodeID) caspaxos.Ballot {
	return caspaxos.Ballot{Counter: c, Proposer: p}
}

// sampleMessages covers every type and every item field, including the
// extremes of each integer.
func sampleMessages() map[string]caspaxos.Message {
	big := bytes.Repeat([]byte{0xab}, caspaxos.MaxValueBytes)
	return map[string]caspaxos.Message{
		"empty prepare": {Type: caspaxos.MsgPrepare, From: 1, To: 2},
		"prepare": {Type: caspaxos.MsgPrepare, From: 7, To: 1, Age: 3, Items: []caspaxos.Item{
			{Key: "a", Ballot: ballot(1, 7)}, {Key: "partition/0042", Ballot: ballot(300, 7)},
		}},
		"prepare reply ok": {Type: caspaxos.MsgPrepareReply, From: 1, To: 7, Items: []caspaxos.Item{
			{Key: "a", Ballot: ballot(1, 7), Accepted: ballot(1, 3), Value: caspaxos.Value{Version: 9, Data: []byte("hello")}},
		}},
		"prepare reply conflict": {Type: caspaxos.MsgPrepareReply, From: 1, To: 7, Items: []caspaxos.Item{
			{Key: "a", Ballot: ballot(1, 7), Conflict: ballot(5, 8), Reject: caspaxos.RejectConflict},
		}},
		"accept with next": {Type: caspaxos.MsgAccept, From: 7, To: 2, Items: []caspaxos.Item{
			{Key: "k", Ballot: ballot(4, 7), Next: ballot(5, 7), Value: caspaxos.Value{Version: 1, Data: []byte{0}}},
		}},
		"accept tombstone": {Type: caspaxos.MsgAccept, From: 7, To: 2, Items: []caspaxos.Item{
			{Key: "k", Ballot: ballot(4, 7), Value: caspaxos.Value{Version: 2, Tombstone: true}},
		}},
		"accept reply every reject": {Type: caspaxos.MsgAcceptReply, From: 2, To: 7, Age: 1, Items: []caspaxos.Item{
			{Key: "a", Ballot: ballot(4, 7), Next: ballot(5, 7)},
			{Key: "b", Ballot: ballot(4, 7), Reject: caspaxos.RejectConflict, Conflict: ballot(9, 1)},
			{Key: "c", Ballot: ballot(4, 7), Reject: caspaxos.RejectStaleAge},
			{Key: "d", Ballot: ballot(4, 7), Reject: caspaxos.RejectMalformed},
			{Key: "e", Ballot: ballot(4, 7), Reject: caspaxos.RejectNotTombstone},
		}},
		"raise age":       {Type: caspaxos.MsgRaiseAge, From: 7, To: 2, Age: 12},
		"raise age reply": {Type: caspaxos.MsgRaiseAgeReply, From: 2, To: 7, Age: 12},
		"erase":           {Type: caspaxos.MsgErase, From: 7, To: 2, Items: []caspaxos.Item{{Key: "x", Ballot: ballot(3, 7)}}},
		"erase reply":     {Type: caspaxos.MsgEraseReply, From: 2, To: 7, Items: []caspaxos.Item{{Key: "x", Ballot: ballot(3, 7)}}},
		"extremes": {Type: caspaxos.MsgAccept, From: math.MaxUint64, To: math.MaxUint64, Age: math.MaxUint64, Items: []caspaxos.Item{{
			Key:      strings.Repeat("k", caspaxos.MaxKeyBytes),
			Ballot:   ballot(math.MaxUint64, math.MaxUint64),
			Next:     ballot(math.MaxUint64, 1),
			Accepted: ballot(1, math.MaxUint64),
			Conflict: ballot(math.MaxUint64, 0),
			Value:    caspaxos.Value{Version: math.MaxUint64, Data: big, Tombstone: true},
			Reject:   caspaxos.RejectNotTombstone,
		}}},
		"empty key": {Type: caspaxos.MsgPrepare, From: 1, To: 2, Items: []caspaxos.Item{{Key: "", Ballot: ballot(1, 1)}}},
	}
}

func TestMessageRoundTrip(t *testing.T) {
	for name, m := range sampleMessages() {
		t.Run(name, func(t *testing.T) {
			b, err := AppendMessage(nil, m)
			require.NoError(t, err)
			got, err := DecodeMessage(b)
			require.NoError(t, err)
			assert.Equal(t, m, got)
			// The interning decoder gives the same result, twice.
			d := NewDecoder(16)
			for range 2 {
				got, err = d.Decode(b)
				require.NoError(t, err)
				assert.Equal(t, m, got)
			}
			// Canonical: re-encoding gives the same bytes.
			again, err := AppendMessage(nil, got)
			require.NoError(t, err)
			assert.Equal(t, b, again)
			// Appending keeps what was in dst.
			pre := []byte("prefix")
			withPre, err := AppendMessage(pre, m)
			require.NoError(t, err)
			assert.Equal(t, append([]byte("prefix"), b...), withPre)
		})
	}
}

func TestDecodeSharesNoMemory(t *testing.T) {
	m := caspaxos.Message{Type: caspaxos.MsgAccept, From: 1, To: 2, Items: []caspaxos.Item{
		{Key: "key", Ballot: ballot(1, 1), Value: caspaxos.Value{Version: 1, Data: []byte("data")}},
	}}
	b, err := AppendMessage(nil, m)
	require.NoError(t, err)
	got, err := DecodeMessage(b)
	require.NoError(t, err)
	for i := range b {
		b[i] = 0xff
	}
	assert.Equal(t, m, got)
}

func TestEmptyDataDecodesAsNil(t *testing.T) {
	m := caspaxos.Message{Type: caspaxos.MsgAccept, From: 1, To: 2, Items: []caspaxos.Item{
		{Key: "k", Ballot: ballot(1, 1), Value: caspaxos.Value{Version: 1, Data: []byte{}}},
	}}
	b, err := AppendMessage(nil, m)
	require.NoError(t, err)
	got, err := DecodeMessage(b)
	require.NoError(t, err)
	assert.Nil(t, got.Items[0].Value.Data)
	assert.True(t, got.Items[0].Value.Equal(m.Items[0].Value))
}

func TestAppendMessageRefuses(t *testing.T) {
	tests := map[string]struct {
		m    caspaxos.Message
		want error
	}{
		"unknown type":  {m: caspaxos.Message{Type: 0}},
		"type too high": {m: caspaxos.Message{Type: caspaxos.MsgEraseReply + 1}},
		"too many items": {m: caspaxos.Message{Type: caspaxos.MsgPrepare,
			Items: make([]caspaxos.Item, MaxItems+1)}},
		"key too large": {m: caspaxos.Message{Type: caspaxos.MsgPrepare,
			Items: []caspaxos.Item{{Key: strings.Repeat("k", caspaxos.MaxKeyBytes+1)}}}, want: caspaxos.ErrKeyTooLarge},
		"value too large": {m: caspaxos.Message{Type: caspaxos.MsgAccept,
			Items: []caspaxos.Item{{Key: "k", Value: caspaxos.Value{Version: 1, Data: make([]byte, caspaxos.MaxValueBytes+1)}}}},
			want: caspaxos.ErrValueTooLarge},
		"unknown reject": {m: caspaxos.Message{Type: caspaxos.MsgAcceptReply,
			Items: []caspaxos.Item{{Key: "k", Reject: maxReject + 1}}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dst := []byte("keep")
			out, err := AppendMessage(dst, tc.m)
			require.Error(t, err)
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
			}
			assert.Equal(t, "keep", string(out))
		})
	}
}

// header builds a message header by hand for the corruption cases.
func header(format, typ byte, count uint64) []byte {
	b := []byte{format, typ, 1, 2, 0}
	return binary.AppendUvarint(b, count)
}

func TestDecodeMessageRejects(t *testing.T) {
	valid, err := AppendMessage(nil, caspaxos.Message{Type: caspaxos.MsgAccept, From: 1, To: 2, Items: []caspaxos.Item{
		{Key: "k", Ballot: ballot(1, 1), Value: caspaxos.Value{Version: 1, Data: []byte("v")}},
	}})
	require.NoError(t, err)
	hugeKey := append(header(1, byte(caspaxos.MsgPrepare), 1), 0)
	hugeKey = binary.AppendUvarint(hugeKey, caspaxos.MaxKeyBytes+1)
	hugeKey = append(hugeKey, make([]byte, caspaxos.MaxKeyBytes+1)...)
	hugeData := append(header(1, byte(caspaxos.MsgAccept), 1), flagData, 0)
	hugeData = binary.AppendUvarint(hugeData, caspaxos.MaxValueBytes+1)

	tests := map[string]struct {
		b    []byte
		want string
	}{
		"empty":              {b: nil, want: "format truncated"},
		"unknown format":     {b: header(2, byte(caspaxos.MsgPrepare), 0), want: "unknown format version 2"},
		"unknown type zero":  {b: header(1, 0, 0), want: "unknown type 0"},
		"unknown type high":  {b: header(1, 9, 0), want: "unknown type 9"},
		"count above bound":  {b: header(1, byte(caspaxos.MsgPrepare), MaxItems+1), want: "exceed"},
		"count beyond bytes": {b: header(1, byte(caspaxos.MsgPrepare), 1000), want: "cannot fit"},
		"trailing bytes":     {b: append(append([]byte(nil), valid...), 0), want: "1 trailing bytes"},
		"truncated":          {b: valid[:len(valid)-1], want: "data length 1 but 0 bytes left"},
		"uvarint overflow": {b: append([]byte{1, byte(caspaxos.MsgPrepare)},
			0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), want: "overflows"},
		"non-minimal uvarint": {b: []byte{1, byte(caspaxos.MsgPrepare), 0x81, 0x00, 2, 0, 0}, want: "shortest form"},
		"key too large":       {b: hugeKey, want: "key length 1025 exceeds 1024"},
		"data too large":      {b: hugeData, want: "data length 1048577 exceeds"},
		"zero ballot flagged": {b: append(header(1, byte(caspaxos.MsgPrepare), 1), flagBallot, 0, 0, 0), want: "flagged but zero"},
		"zero version flagged": {b: append(header(1, byte(caspaxos.MsgAccept), 1), flagVersion, 0, 0),
			want: "version flagged but zero"},
		"empty data flagged": {b: append(header(1, byte(caspaxos.MsgAccept), 1), flagData, 0, 0),
			want: "data flagged but empty"},
		"reject none flagged": {b: append(header(1, byte(caspaxos.MsgAcceptReply), 1), flagReject, 0, 0),
			want: "unknown reject 0"},
		"reject unknown": {b: append(header(1, byte(caspaxos.MsgAcceptReply), 1), flagReject, 0, 99),
			want: "unknown reject 99"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeMessage(tc.b)
			require.Error(t, err)
			assert.ErrorIs(t, err, caspaxos.ErrCorrupt)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestDecoderInternTableIsBounded(t *testing.T) {
	d := NewDecoder(4)
	for i := range 100 {
		b, err := AppendMessage(nil, caspaxos.Message{Type: caspaxos.MsgPrepare, From: 1, To: 2,
			Items: []caspaxos.Item{{Key: fmt.Sprintf("key-%d", i), Ballot: ballot(1, 1)}}})
		require.NoError(t, err)
		m, err := d.Decode(b)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("key-%d", i), m.Items[0].Key)
		assert.LessOrEqual(t, len(d.keys), 4)
	}
}

func TestDecodeAllocations(t *testing.T) {
	m := benchMessage(caspaxos.MsgAcceptReply, 64, 0)
	b, err := AppendMessage(nil, m)
	require.NoError(t, err)
	d := NewDecoder(1 << 10)
	_, err = d.Decode(b)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := d.Decode(b); err != nil {
			t.Fatal(err)
		}
	})
	// A reply of 64 items with interned keys: only the item slice.
	assert.LessOrEqual(t, allocs, 1.0)

	buf := make([]byte, 0, 1<<16)
	allocs = testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = AppendMessageFrame(buf[:0], m); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

// benchMessage builds a message of n items whose keys look like the bench's.
func benchMessage(t caspaxos.MsgType, n, dataBytes int) caspaxos.Message {
	m := caspaxos.Message{Type: t, From: 1, To: 2}
	var data []byte
	if dataBytes > 0 {
		data = bytes.Repeat([]byte{'x'}, dataBytes)
	}
	for i := range n {
		m.Items = append(m.Items, caspaxos.Item{
			Key:    fmt.Sprintf("k%06d", i),
			Ballot: ballot(uint64(1000+i), 1),
			Next:   ballot(uint64(1001+i), 1),
			Value:  caspaxos.Value{Version: uint64(10 + i), Data: data},
		})
	}
	return m
}

func BenchmarkAppendMessage(b *testing.B) {
	for _, n := range []int{1, 64, 512} {
		m := benchMessage(caspaxos.MsgAccept, n, 16)
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			buf, _ := AppendMessageFrame(nil, m)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = AppendMessageFrame(buf[:0], m)
			}
		})
	}
}

func BenchmarkDecodeMessage(b *testing.B) {
	for _, n := range []int{1, 64, 512} {
		for _, intern := range []bool{false, true} {
			m := benchMessage(caspaxos.MsgAccept, n, 16)
			enc, _ := AppendMessage(nil, m)
			b.Run(fmt.Sprintf("items=%d/intern=%v", n, intern), func(b *testing.B) {
				d := &Decoder{}
				if intern {
					d = NewDecoder(1 << 16)
				}
				b.SetBytes(int64(len(enc)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := d.Decode(enc); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
