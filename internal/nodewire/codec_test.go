package nodewire

import (
	"testing"

	"github.com/fmnode/fmnode/partition"

	"github.com/stretchr/testify/require"
)

// TestRoundTrip: random batches decode to their canonical form, and the
// encoding is canonical (re-encoding the decoded batch gives the same
// bytes).
func TestRoundTrip(t *testing.T) {
	g := newGen(1)
	for i := range 5000 {
		b := g.batch()
		enc, err := Encode(nil, &b)
		require.NoError(t, err, "batch %d", i)
		got, err := Decode(enc)
		require.NoError(t, err, "batch %d", i)
		require.Equal(t, canonical(b), got, "batch %d", i)
		again, err := Encode(nil, &got)
		require.NoError(t, err)
		require.Equal(t, enc, again, "batch %d: encoding not canonical", i)
	}
}

// TestEncodeAppends: Encode appends after dst's bytes and leaves them be.
func TestEncodeAppends(t *testing.T) {
	b := newGen(2).batch()
	alone, err := Encode(nil, &b)
	require.NoError(t, err)
	prefixed, err := Encode([]byte("xyz"), &b)
	require.NoError(t, err)
	require.Equal(t, append([]byte("xyz"), alone...), prefixed)
}

// TestDecodeDoesNotAlias: clobbering the payload after decoding leaves the
// batch unchanged (the transport reuses its read buffer).
func TestDecodeDoesNotAlias(t *testing.T) {
	g := newGen(3)
	for range 200 {
		b := g.batch()
		enc, err := Encode(nil, &b)
		require.NoError(t, err)
		got, err := Decode(enc)
		require.NoError(t, err)
		for i := range enc {
			enc[i] = 0xee
		}
		require.Equal(t, canonical(b), got)
	}
}

// TestDecodedSlicesCapped: appending to a decoded key or value never
// overwrites its neighbour in the message's shared allocation.
func TestDecodedSlicesCapped(t *testing.T) {
	b := Batch{Data: []partition.Message{{Type: partition.MsgAppend, Entries: []partition.Op{
		{LSN: 1, Epoch: 1, Key: []byte("a"), Value: []byte("b")},
		{LSN: 2, Epoch: 1, Key: []byte("c"), Value: []byte("d")},
	}}}}
	enc, err := Encode(nil, &b)
	require.NoError(t, err)
	got, err := Decode(enc)
	require.NoError(t, err)
	ops := got.Data[0].Entries
	_ = append(ops[0].Key, 'X')
	_ = append(ops[0].Value, 'Y')
	require.Equal(t, canonical(b), got)
}
