package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/fmnode/fmnode/caspaxos"
)

// FuzzDecodeMessage: decoding never panics; whatever decodes re-encodes to
// the same bytes (the encoding is canonical) and decodes again to the same
// message, with and without key interning.
func FuzzDecodeMessage(f *testing.F) {
	for _, m := range sampleMessages() {
		if len(m.Items) > 0 && len(m.Items[0].Value.Data) > 4096 {
			continue // keep the seed corpus small
		}
		b, err := AppendMessage(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{1, 1, 0x81, 0x00, 2, 0, 0})
	f.Add([]byte{1, 4, 1, 2, 0, 1, 0xff, 1, 'k', 1, 1, 2, 2})
	d := NewDecoder(8)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		m2, err2 := d.Decode(b)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("interning changed the verdict: %v vs %v", err, err2)
		}
		if err != nil {
			if !errors.Is(err, caspaxos.ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		enc, err := AppendMessage(nil, m)
		if err != nil {
			t.Fatalf("decoded message does not encode: %v", err)
		}
		if !bytes.Equal(enc, b) {
			t.Fatalf("not canonical:\n in  %x\n out %x", b, enc)
		}
		enc2, err := AppendMessage(nil, m2)
		if err != nil || !bytes.Equal(enc2, b) {
			t.Fatalf("interned decode differs: %v", err)
		}
	})
}

// FuzzReadFrame: reading frames from arbitrary bytes never panics, never
// returns a payload above the bound, and every frame it accepts re-frames
// to exactly the bytes it consumed.
func FuzzReadFrame(f *testing.F) {
	for _, m := range sampleMessages() {
		if len(m.Items) > 0 && len(m.Items[0].Value.Data) > 4096 {
			continue
		}
		b, err := AppendMessageFrame(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(append(b, b...))
	}
	f.Add([]byte{magic0, magic1, frameVersionV1, 0, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	const max = 1 << 16
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		consumed := 0
		var buf []byte
		for {
			p, err := ReadFrame(r, max, buf)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, caspaxos.ErrCorrupt) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				return
			}
			if len(p) > max {
				t.Fatalf("payload of %d bytes above bound %d", len(p), max)
			}
			n := len(p) + FrameOverheadBytes
			if !bytes.Equal(AppendFrame(nil, p), b[consumed:consumed+n]) {
				t.Fatalf("frame does not round-trip at offset %d", consumed)
			}
			consumed += n
			if m, err := DecodeMessage(p); err == nil {
				if _, err := AppendMessageFrame(nil, m); err != nil {
					t.Fatalf("decoded message does not re-encode: %v", err)
				}
			}
			buf = p
		}
	})
}
