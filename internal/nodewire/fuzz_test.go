package nodewire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// seedPayloads are valid encodings of random batches plus a few edge cases.
func seedPayloads(tb testing.TB) [][]byte {
	g := newGen(7)
	seeds := [][]byte{nil, cat(hdr(), noSections())}
	for range 16 {
		b := g.batch()
		enc, err := Encode(nil, &b)
		require.NoError(tb, err)
		seeds = append(seeds, enc)
	}
	return seeds
}

// checkDecoded: a payload either is refused with ErrCorrupt or decodes to
// a batch that re-encodes to the same bytes (the encoding is canonical,
// so Encode accepts all Decode accepts) and decodes again to the same
// value.
func checkDecoded(t *testing.T, payload []byte, b Batch, err error) {
	if err != nil {
		require.ErrorIs(t, err, ErrCorrupt)
		return
	}
	enc, err := Encode(nil, &b)
	require.NoError(t, err, "decoded batch does not encode")
	require.Equal(t, payload, enc, "re-encoding differs")
	again, err := Decode(enc)
	require.NoError(t, err)
	require.Equal(t, b, again)
}

func FuzzDecode(f *testing.F) {
	for _, s := range seedPayloads(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		b, err := Decode(payload)
		checkDecoded(t, payload, b, err)
	})
}

// FuzzReadFrame feeds ReadFrame arbitrary streams: it never panics, a
// refusal is ErrCorrupt or an end of stream, and a frame it accepts holds
// a canonical payload.
func FuzzReadFrame(f *testing.F) {
	for _, s := range seedPayloads(f) {
		f.Add(append(appendRawFrame(s), appendRawFrame(s)...))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := bufio.NewReaderSize(bytes.NewReader(stream), 16)
		var buf []byte
		for {
			var b Batch
			var err error
			b, buf, err = ReadFrame(r, 1<<16, buf)
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return
			}
			if err != nil {
				require.ErrorIs(t, err, ErrCorrupt)
				return
			}
			checkDecoded(t, buf, b, nil)
		}
	})
}
