package caspaxos

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRecordCodecRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		rec  Record
	}{
		{name: "zero", rec: Record{}},
		{name: "promise only", rec: Record{Key: "p/1", Promised: Ballot{Counter: 7, Proposer: 3}}},
		{
			name: "accepted value",
			rec: Record{
				Key:      "partition/42",
				Promised: Ballot{Counter: 9, Proposer: 2},
				Accepted: Ballot{Counter: 9, Proposer: 2},
				Value:    Value{Version: 5, Data: []byte(`{"write":"eu-west"}`)},
			},
		},
		{name: "tombstone", rec: Record{Key: "gone", Promised: Ballot{1, 1}, Accepted: Ballot{1, 1}, Value: Value{Version: 3, Tombstone: true}}},
		{
			name: "max integers",
			rec: Record{
				Key:      "m",
				Promised: Ballot{Counter: math.MaxUint64, Proposer: math.MaxUint64},
				Accepted: Ballot{Counter: math.MaxUint64, Proposer: math.MaxUint64},
				Value:    Value{Version: math.MaxUint64, Data: []byte{0}},
			},
		},
		{name: "binary key", rec: Record{Key: "\x00\xff\x80", Value: Value{Version: 1, Data: []byte{1, 2, 3}}}},
		{name: "largest key", rec: Record{Key: strings.Repeat("k", MaxKeyBytes), Value: Value{Version: 1}}},
		{name: "largest value", rec: Record{Key: "big", Value: Value{Version: 1, Data: bytes.Repeat([]byte{0xab}, MaxValueBytes)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, CheckRecord(tt.rec))
			enc := EncodeRecord(nil, tt.rec)
			got, err := DecodeRecord(enc)
			require.NoError(t, err)
			assert.Equal(t, tt.rec, got)

			// Appending keeps what was in dst and yields the same bytes.
			prefixed := EncodeRecord([]byte("xyz"), tt.rec)
			assert.Equal(t, []byte("xyz"), prefixed[:3])
			assert.Equal(t, enc, prefixed[3:])
		})
	}
}

func TestDecodeRecordDoesNotAlias(t *testing.T) {
	enc := EncodeRecord(nil, Record{Key: "k", Value: Value{Version: 1, Data: []byte("data")}})
	got, err := DecodeRecord(enc)
	require.NoError(t, err)
	for i := range enc {
		enc[i] = 0
	}
	assert.Equal(t, "k", got.Key)
	assert.Equal(t, []byte("data"), got.Value.Data)
}

func TestEncodeRecordNoAllocWithCapacity(t *testing.T) {
	r := Record{Key: "partition/1", Promised: Ballot{3, 1}, Accepted: Ballot{3, 1}, Value: Value{Version: 2, Data: make([]byte, 100)}}
	buf := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(100, func() { buf = EncodeRecord(buf[:0], r) })
	assert.Zero(t, allocs)
}

// reseal recomputes the checksum after a test edits the payload, so that
// the decoder's structural checks (not the checksum) are what is exercised.
func reseal(b []byte) []byte {
	payload := b[:len(b)-checksumLen]
	out := append([]byte(nil), payload...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli()))
}

// sealed builds version byte + payload fields + checksum.
func sealed(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli()))
}

func TestDecodeRecordRejects(t *testing.T) {
	good := EncodeRecord(nil, Record{Key: "key", Promised: Ballot{2, 1}, Accepted: Ballot{2, 1}, Value: Value{Version: 1, Data: []byte("v")}})
	flipped := append([]byte(nil), good...)
	flipped[5] ^= 0x10
	badVersion := append([]byte(nil), good...)
	badVersion[0] = 9
	badVersion = reseal(badVersion)
	badFlags := append([]byte(nil), good...)
	badFlags[6] = 0x82
	badFlags = reseal(badFlags)
	fields := []byte{1, 0, 0, 0, 0, 0, 0} // version, four ballot uvarints, version uvarint, flags
	over := binary.AppendUvarint(nil, MaxKeyBytes+1)
	overValue := binary.AppendUvarint(nil, MaxValueBytes+1)
	overflow := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}

	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{name: "nil", in: nil, want: "shorter than the minimum"},
		{name: "short", in: good[:5], want: "shorter than the minimum"},
		{name: "truncated", in: good[:len(good)-1], want: "checksum mismatch"},
		{name: "flipped bit", in: flipped, want: "checksum mismatch"},
		{name: "appended byte", in: append(append([]byte(nil), good...), 0), want: "checksum mismatch"},
		{name: "unknown version", in: badVersion, want: "unknown format version 9"},
		{name: "unknown flags", in: badFlags, want: "unknown flags 0x82"},
		{name: "key too long", in: sealed(fields, over, make([]byte, 8)), want: "key length 1025 exceeds 1024"},
		{name: "value too long", in: sealed(fields, []byte{0}, overValue, make([]byte, 8)), want: "data length 1048577 exceeds 1048576"},
		{name: "key past end", in: sealed(fields, []byte{9, 'a'}, []byte{0, 0, 0}), want: "key length 9 but 4 bytes left"},
		{name: "varint overflow", in: sealed([]byte{1}, overflow, []byte{0, 0, 0, 0, 0, 0, 0}), want: "promised counter overflows"},
		{name: "data length truncated", in: sealed(fields, []byte{5, 'a', 'b', 'c', 'd', 'e'}), want: "data length truncated"},
		{name: "trailing bytes", in: sealed(fields, []byte{0, 0, 7, 7}), want: "2 trailing bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRecord(tt.in)
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestCheckRecord(t *testing.T) {
	tests := []struct {
		name string
		rec  Record
		want error
	}{
		{name: "empty", rec: Record{}},
		{name: "bounds", rec: Record{Key: strings.Repeat("k", MaxKeyBytes), Value: Value{Data: make([]byte, MaxValueBytes)}}},
		{name: "key", rec: Record{Key: strings.Repeat("k", MaxKeyBytes+1)}, want: ErrKeyTooLarge},
		{name: "value", rec: Record{Key: "k", Value: Value{Data: make([]byte, MaxValueBytes+1)}}, want: ErrValueTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckRecord(tt.rec)
			if tt.want == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tt.want)
		})
	}
}

func TestAgeFloorCodec(t *testing.T) {
	for _, floor := range []uint64{0, 1, 1 << 40, math.MaxUint64} {
		got, err := DecodeAgeFloor(EncodeAgeFloor(nil, floor))
		require.NoError(t, err)
		assert.Equal(t, floor, got)
	}
	good := EncodeAgeFloor(nil, 77)
	flipped := append([]byte(nil), good...)
	flipped[8] ^= 1
	badVersion := append([]byte(nil), good...)
	badVersion[0] = 2
	zeroRecord := EncodeRecord(nil, Record{})
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{name: "empty", in: nil, want: "0 bytes, want 13"},
		{name: "short", in: good[:12], want: "12 bytes, want 13"},
		{name: "long", in: append(append([]byte(nil), good...), 0), want: "14 bytes, want 13"},
		{name: "flipped", in: flipped, want: "checksum mismatch"},
		{name: "version", in: reseal(badVersion), want: "unknown format version 2"},
		{name: "record bytes", in: zeroRecord, want: "unknown format version 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeAgeFloor(tt.in)
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// FuzzDecodeRecord checks two properties: arbitrary bytes never panic the
// decoder (and whatever it accepts re-encodes to something that decodes to
// the same record), and every in-bounds record survives encode then decode.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte{}, "", uint64(0), uint64(0), uint64(0), uint64(0), uint64(0), false, []byte(nil))
	f.Add(EncodeRecord(nil, Record{Key: "k", Promised: Ballot{1, 2}, Value: Value{Version: 1, Data: []byte("x")}}),
		"partition/7", uint64(3), uint64(1), uint64(3), uint64(1), uint64(4), false, []byte("eu-west"))
	f.Add(EncodeRecord(nil, Record{Key: "t", Value: Value{Version: 9, Tombstone: true}}),
		"t", uint64(math.MaxUint64), uint64(math.MaxUint64), uint64(1), uint64(0), uint64(math.MaxUint64), true, []byte{})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "\x00", uint64(1<<7), uint64(1<<14), uint64(0), uint64(0), uint64(0), false, []byte{0})

	f.Fuzz(func(t *testing.T, raw []byte, key string, pc, pp, ac, ap, ver uint64, tomb bool, data []byte) {
		if got, err := DecodeRecord(raw); err == nil {
			again, err := DecodeRecord(EncodeRecord(nil, got))
			require.NoError(t, err)
			require.Equal(t, got, again)
		} else {
			require.ErrorIs(t, err, ErrCorrupt)
		}

		r := Record{
			Key:      key,
			Promised: Ballot{Counter: pc, Proposer: NodeID(pp)},
			Accepted: Ballot{Counter: ac, Proposer: NodeID(ap)},
			Value:    Value{Version: ver, Tombstone: tomb, Data: data},
		}
		if len(r.Value.Data) == 0 {
			r.Value.Data = nil // the decoder's canonical empty
		}
		enc := EncodeRecord(nil, r)
		got, err := DecodeRecord(enc)
		if CheckRecord(r) != nil {
			require.ErrorIs(t, err, ErrCorrupt, "out-of-bounds record must not decode")
			return
		}
		require.NoError(t, err)
		require.Equal(t, r, got)
	})
}

// FuzzDecodeAgeFloor: arbitrary bytes never panic, and every floor round-trips.
func FuzzDecodeAgeFloor(f *testing.F) {
	f.Add([]byte{}, uint64(0))
	f.Add(EncodeAgeFloor(nil, 5), uint64(math.MaxUint64))
	f.Fuzz(func(t *testing.T, raw []byte, floor uint64) {
		if _, err := DecodeAgeFloor(raw); err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
		}
		got, err := DecodeAgeFloor(EncodeAgeFloor(nil, floor))
		require.NoError(t, err)
		require.Equal(t, floor, got)
	})
}
