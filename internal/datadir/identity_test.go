package datadir

import (
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/node"
)

func testIdentity() Identity {
	return Identity{Cluster: "prod-eu", NodeID: 7, Name: "node-7", Region: "eu-west"}
}

func mustEncode(t testing.TB, id Identity, boot uint64) []byte {
	t.Helper()
	b, err := encodeIdentity(id, boot)
	require.NoError(t, err)
	return b
}

// reseal recomputes the checksum of an identity file whose body was edited.
func reseal(b []byte) []byte {
	b = append([]byte(nil), b...)
	n := len(b) - 4
	binary.BigEndian.PutUint32(b[n:], crc32.Checksum(b[:n], crcTable()))
	return b
}

func TestMaxBootIsNodeMaxBoot(t *testing.T) {
	assert.Equal(t, uint64(node.MaxBoot), uint64(MaxBoot))
}

func TestIdentityRoundTrip(t *testing.T) {
	long := strings.Repeat("x", maxFieldBytes)
	tests := []struct {
		name string
		id   Identity
		boot uint64
	}{
		{name: "typical", id: testIdentity(), boot: 1},
		{name: "empty region", id: Identity{Cluster: "c", NodeID: 0, Name: "n"}, boot: 42},
		{name: "largest", id: Identity{Cluster: long, NodeID: 65535, Name: long, Region: long}, boot: MaxBoot},
		{name: "utf-8", id: Identity{Cluster: "clüster", NodeID: 1, Name: "nœud", Region: "東京"}, boot: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := mustEncode(t, tc.id, tc.boot)
			assert.LessOrEqual(t, len(b), MaxIdentityBytes)
			id, boot, err := decodeIdentity(b)
			require.NoError(t, err)
			assert.Equal(t, tc.id, id)
			assert.Equal(t, tc.boot, boot)
		})
	}
}

func TestEncodeIdentityRefuses(t *testing.T) {
	ok := testIdentity()
	with := func(f func(*Identity)) Identity { id := ok; f(&id); return id }
	tests := []struct {
		name string
		id   Identity
		boot uint64
		want string
	}{
		{name: "empty cluster", id: with(func(i *Identity) { i.Cluster = "" }), boot: 1, want: "Identity.Cluster is empty"},
		{name: "empty name", id: with(func(i *Identity) { i.Name = "" }), boot: 1, want: "Identity.Name is empty"},
		{name: "long region", id: with(func(i *Identity) { i.Region = strings.Repeat("r", 256) }), boot: 1, want: "Identity.Region is 256 bytes"},
		{name: "bad utf-8", id: with(func(i *Identity) { i.Name = "\xff" }), boot: 1, want: "not valid UTF-8"},
		{name: "control char", id: with(func(i *Identity) { i.Cluster = "a\nb" }), boot: 1, want: "control character"},
		{name: "boot zero", id: ok, boot: 0, want: "boot 0 outside"},
		{name: "boot too big", id: ok, boot: MaxBoot + 1, want: "outside 1.."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := encodeIdentity(tc.id, tc.boot)
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestDecodeIdentityRefuses(t *testing.T) {
	good := mustEncode(t, testIdentity(), 5)
	edit := func(f func([]byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{name: "empty", b: nil, want: "empty file"},
		{name: "short header", b: good[:5], want: "shorter than the 9-byte header"},
		{name: "bad magic", b: edit(func(b []byte) []byte { b[0] = 'F'; return b }), want: "not an fmnode identity file"},
		{name: "unknown version", b: edit(func(b []byte) []byte { b[8] = 2; return reseal(b) }), want: "unknown format version 2"},
		{name: "version zero", b: edit(func(b []byte) []byte { b[8] = 0; return reseal(b) }), want: "unknown format version 0"},
		{name: "bad checksum", b: edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), want: "checksum mismatch"},
		{name: "flipped node id", b: edit(func(b []byte) []byte { b[10] ^= 0x80; return b }), want: "checksum mismatch"},
		{name: "trailing byte", b: append(append([]byte(nil), good...), 0), want: "1 bytes after the checksum"},
		{name: "oversized", b: make([]byte, MaxIdentityBytes+1), want: "the format's bound"},
		{name: "string past end", b: edit(func(b []byte) []byte { b[19] = 200; return b }), want: "truncated"},
		{name: "sealed boot zero", b: edit(func(b []byte) []byte { binary.BigEndian.PutUint64(b[11:], 0); return reseal(b) }), want: "boot counter 0"},
		{name: "sealed empty cluster", b: reseal(append(append([]byte(nil), good[:19]...), append([]byte{0, 1, 'n', 0}, 0, 0, 0, 0)...)), want: "Identity.Cluster is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := decodeIdentity(tc.b)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	t.Run("every truncation", func(t *testing.T) {
		for n := range len(good) {
			_, _, err := decodeIdentity(good[:n])
			require.Error(t, err, "length %d", n)
		}
	})
	t.Run("every bit flip", func(t *testing.T) {
		for i := range len(good) {
			for bit := range 8 {
				b := append([]byte(nil), good...)
				b[i] ^= 1 << bit
				_, _, err := decodeIdentity(b)
				require.Error(t, err, "byte %d bit %d", i, bit)
			}
		}
	})
}

// FuzzDecodeIdentity: arbitrary bytes never panic the decoder, and bytes
// it accepts are exactly what encoding the decoded identity gives back
// (so the format has one spelling per identity and no ignored bytes).
// With seal set the last four bytes are replaced by the right checksum,
// so the fuzzer also reaches the checks behind the checksum.
func FuzzDecodeIdentity(f *testing.F) {
	for _, seal := range []bool{false, true} {
		f.Add(mustEncode(f, testIdentity(), 1), seal)
		f.Add(mustEncode(f, Identity{Cluster: "c", Name: "n"}, MaxBoot), seal)
		f.Add(mustEncode(f, Identity{Cluster: "東京", NodeID: 65535, Name: strings.Repeat("n", 255), Region: "r"}, 1<<40), seal)
		f.Add([]byte{}, seal)
		f.Add([]byte(identityMagic), seal)
		f.Add(append([]byte(identityMagic), 2), seal)
	}
	f.Fuzz(func(t *testing.T, b []byte, seal bool) {
		if seal && len(b) >= 4 {
			b = reseal(b)
		}
		id, boot, err := decodeIdentity(b)
		if err != nil {
			return
		}
		again, err := encodeIdentity(id, boot)
		require.NoError(t, err)
		require.Equal(t, b, again)
	})
}
