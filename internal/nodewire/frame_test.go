package nodewire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/wire"
	"github.com/stretchr/testify/require"
)

// TestFrameRoundTrip: frames written back to back read back in order
// through one bufio.Reader and one reused buffer, then a clean io.EOF.
func TestFrameRoundTrip(t *testing.T) {
	g := newGen(5)
	var stream []byte
	var want []Batch
	for range 50 {
		b := g.batch()
		var err error
		stream, err = AppendFrame(stream, &b)
		require.NoError(t, err)
		want = append(want, canonical(b))
	}
	r := bufio.NewReaderSize(bytes.NewReader(stream), 64)
	var buf []byte
	for i, w := range want {
		var got Batch
		var err error
		got, buf, err = ReadFrame(r, DefaultMaxFrameBytes, buf)
		require.NoError(t, err, "frame %d", i)
		require.Equal(t, w, got, "frame %d", i)
	}
	_, _, err := ReadFrame(r, DefaultMaxFrameBytes, buf)
	require.ErrorIs(t, err, io.EOF)
}

// TestReadFrameRefuses: corrupt framing and corrupt payloads wrap
// ErrCorrupt; a stream cut inside a frame is io.ErrUnexpectedEOF.
func TestReadFrameRefuses(t *testing.T) {
	b := newGen(6).batch()
	frame, err := AppendFrame(nil, &b)
	require.NoError(t, err)
	flip := func(i int) []byte {
		f := bytes.Clone(frame)
		f[i] ^= 0x01
		return f
	}
	for _, tc := range []struct {
		name    string
		stream  []byte
		max     int
		want    error
		message string
	}{
		{"checksum", flip(len(frame) - 1), DefaultMaxFrameBytes, ErrCorrupt, "checksum mismatch"},
		{"payload bit", flip(wire.FrameHeaderBytes), DefaultMaxFrameBytes, ErrCorrupt, "checksum mismatch"},
		{"magic", flip(0), DefaultMaxFrameBytes, ErrCorrupt, "bad magic"},
		{"too large", frame, 4, ErrCorrupt, "exceeds the bound 4"},
		{"cut", frame[:len(frame)-1], DefaultMaxFrameBytes, io.ErrUnexpectedEOF, "unexpected EOF"},
		{"bad payload", wire.AppendFrame(nil, []byte{formatV2, 0, 0, 9}), DefaultMaxFrameBytes, ErrCorrupt, "cas count 9 cannot fit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ReadFrame(bufio.NewReader(bytes.NewReader(tc.stream)), tc.max, nil)
			require.ErrorIs(t, err, tc.want)
			require.ErrorContains(t, err, tc.message)
		})
	}
}

// TestReadFrameTooLargeIsTyped: the transport can tell an oversized frame
// (a configuration mismatch) from garbage.
func TestReadFrameTooLargeIsTyped(t *testing.T) {
	b := Batch{Learns: []Learn{{Key: "k", Data: make([]byte, 100)}}}
	frame, err := AppendFrame(nil, &b)
	require.NoError(t, err)
	_, _, err = ReadFrame(bufio.NewReader(bytes.NewReader(frame)), 10, nil)
	var tooLarge *wire.FrameTooLargeError
	require.True(t, errors.As(err, &tooLarge), "%v", err)
	require.ErrorIs(t, err, caspaxos.ErrCorrupt)
}

// TestAppendFrameRefuses: an unencodable batch leaves dst unchanged.
func TestAppendFrameRefuses(t *testing.T) {
	b := Batch{CAS: []caspaxos.Message{{}}}
	got, err := AppendFrame([]byte("keep"), &b)
	require.ErrorIs(t, err, ErrInvalid)
	require.Equal(t, []byte("keep"), got)
}

// appendRawFrame frames payload as it is, valid or not.
func appendRawFrame(payload []byte) []byte { return wire.AppendFrame(nil, payload) }
