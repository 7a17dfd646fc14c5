package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
)

func TestFrameRoundTrip(t *testing.T) {
	var stream []byte
	var want []caspaxos.Message
	for _, m := range sampleMessages() {
		var err error
		stream, err = AppendMessageFrame(stream, m)
		require.NoError(t, err)
		want = append(want, m)
	}
	stream = AppendFrame(stream, nil) // an empty payload is a valid frame
	r := bufio.NewReaderSize(bytes.NewReader(stream), 64)
	var buf []byte
	for _, m := range want {
		payload, err := ReadFrame(r, DefaultMaxFrameBytes, buf)
		require.NoError(t, err)
		got, err := DecodeMessage(payload)
		require.NoError(t, err)
		assert.Equal(t, m, got)
		buf = payload
	}
	payload, err := ReadFrame(r, DefaultMaxFrameBytes, buf)
	require.NoError(t, err)
	assert.Empty(t, payload)
	_, err = ReadFrame(r, DefaultMaxFrameBytes, buf)
	assert.ErrorIs(t, err, io.EOF)
}

func TestAppendFrameMatchesAppendMessageFrame(t *testing.T) {
	for name, m := range sampleMessages() {
		t.Run(name, func(t *testing.T) {
			payload, err := AppendMessage(nil, m)
			require.NoError(t, err)
			direct, err := AppendMessageFrame([]byte("x"), m)
			require.NoError(t, err)
			assert.Equal(t, AppendFrame([]byte("x"), payload), direct)
		})
	}
}

func TestAppendMessageFrameErrorKeepsDst(t *testing.T) {
	out, err := AppendMessageFrame([]byte("keep"), caspaxos.Message{Type: 0})
	require.Error(t, err)
	assert.Equal(t, "keep", string(out))
}

func validFrame(t *testing.T) []byte {
	t.Helper()
	f, err := AppendMessageFrame(nil, caspaxos.Message{Type: caspaxos.MsgPrepare, From: 1, To: 2,
		Items: []caspaxos.Item{{Key: "k", Ballot: ballot(1, 1)}}})
	require.NoError(t, err)
	return f
}

func TestReadFrameRejects(t *testing.T) {
	good := validFrame(t)
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := map[string]struct {
		b       []byte
		max     int
		wantErr error
		want    string
	}{
		"bad magic":       {b: mutate(func(b []byte) []byte { b[0] = 'G'; return b }), wantErr: caspaxos.ErrCorrupt, want: "bad magic"},
		"http client":     {b: []byte("GET / HTTP/1.1\r\n\r\n"), wantErr: caspaxos.ErrCorrupt, want: "bad magic"},
		"unknown version": {b: mutate(func(b []byte) []byte { b[2] = 9; return b }), wantErr: caspaxos.ErrCorrupt, want: "unknown version 9"},
		"flags set":       {b: mutate(func(b []byte) []byte { b[3] = 1; return b }), wantErr: caspaxos.ErrCorrupt, want: "unknown flags"},
		"checksum":        {b: mutate(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), wantErr: caspaxos.ErrCorrupt, want: "checksum mismatch"},
		"payload flipped": {b: mutate(func(b []byte) []byte { b[FrameHeaderBytes] ^= 0x40; return b }), wantErr: caspaxos.ErrCorrupt, want: "checksum mismatch"},
		"too large": {b: mutate(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[4:], 1<<31); return b }),
			wantErr: caspaxos.ErrCorrupt, want: "exceeds the bound"},
		"above configured max": {b: good, max: 3, wantErr: caspaxos.ErrCorrupt, want: "exceeds the bound 3"},
		"truncated header":     {b: good[:5], wantErr: io.ErrUnexpectedEOF},
		"truncated payload":    {b: good[:FrameHeaderBytes+2], wantErr: io.ErrUnexpectedEOF},
		"truncated checksum":   {b: good[:len(good)-2], wantErr: io.ErrUnexpectedEOF},
		"empty stream":         {b: nil, wantErr: io.EOF},
		"bad bound":            {b: good, max: -1, want: "out of range"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			max := tc.max
			if max == 0 {
				max = DefaultMaxFrameBytes
			}
			_, err := ReadFrame(bufio.NewReader(bytes.NewReader(tc.b)), max, nil)
			require.Error(t, err)
			if tc.wantErr != nil {
				assert.ErrorIs(t, err, tc.wantErr)
			}
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestFrameTooLargeError(t *testing.T) {
	b := validFrame(t)
	binary.LittleEndian.PutUint32(b[4:], 100)
	_, err := ReadFrame(bufio.NewReader(bytes.NewReader(b)), 50, nil)
	var tl *FrameTooLargeError
	require.True(t, errors.As(err, &tl))
	assert.Equal(t, uint64(100), tl.Length)
	assert.Equal(t, 50, tl.Max)
}

// A peer that announces a big frame and sends little costs at most one
// growth step of buffer, not the announced size.
func TestReadFrameGrowsWithData(t *testing.T) {
	hdr := []byte{magic0, magic1, frameVersionV1, 0}
	hdr = binary.LittleEndian.AppendUint32(hdr, 8<<20)
	hdr = append(hdr, make([]byte, 100)...)
	payload, err := ReadFrame(bufio.NewReader(bytes.NewReader(hdr)), DefaultMaxFrameBytes, nil)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.LessOrEqual(t, cap(payload), 2*growStep)

	// And a real large frame still reads whole.
	big := bytes.Repeat([]byte{7}, 3*growStep+5)
	got, err := ReadFrame(bufio.NewReader(bytes.NewReader(AppendFrame(nil, big))), DefaultMaxFrameBytes, make([]byte, 10))
	require.NoError(t, err)
	assert.Equal(t, big, got)
}

func TestReadFrameReusesBuffer(t *testing.T) {
	f := validFrame(t)
	stream := bytes.Repeat(f, 3)
	r := bufio.NewReader(bytes.NewReader(stream))
	buf := make([]byte, 0, 256)
	for range 3 {
		p, err := ReadFrame(r, DefaultMaxFrameBytes, buf)
		require.NoError(t, err)
		assert.Equal(t, &buf[:1][0], &p[:1][0], "payload must reuse buf")
	}
}

func BenchmarkReadFrame(b *testing.B) {
	m := benchMessage(caspaxos.MsgAcceptReply, 64, 0)
	f, _ := AppendMessageFrame(nil, m)
	stream := bytes.Repeat(f, 1024)
	br := bytes.NewReader(stream)
	r := bufio.NewReaderSize(br, 64<<10)
	var buf []byte
	b.SetBytes(int64(len(f)))
	b.ReportAllocs()
	for b.Loop() {
		p, err := ReadFrame(r, DefaultMaxFrameBytes, buf)
		if errors.Is(err, io.EOF) {
			br.Reset(stream)
			r.Reset(br)
			continue
		}
		if err != nil {
			b.Fatal(err)
		}
		buf = p
	}
}
