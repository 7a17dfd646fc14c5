package nodewire

import (
	"bufio"
	"errors"
	"fmt"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/wire"
)

// AppendFrame appends a caspaxos/wire frame carrying the encoding of b to
// dst. On error dst is returned unchanged. The payload is encoded into a
// scratch buffer first (wire frames only whole payloads); the peer's frame
// bound is the transport's to respect, since the batch size is its choice.
func AppendFrame(dst []byte, b *Batch) ([]byte, error) {
	payload, err := Encode(nil, b)
	if err != nil {
		return dst, err
	}
	return wire.AppendFrame(dst, payload), nil
}

// ReadFrame reads one frame from r (payload at most maxFrame bytes, see
// wire.ReadFrame) and decodes its batch. buf is the read buffer, grown as
// needed and returned for reuse; the batch shares no memory with it.
//
// A clean end of stream between frames is io.EOF, one inside a frame
// io.ErrUnexpectedEOF. Bad framing (magic, version, checksum, a length over
// maxFrame: a *wire.FrameTooLargeError) and a payload that does not decode
// wrap ErrCorrupt; the stream cannot be resynchronised, so the caller
// closes it.
func ReadFrame(r *bufio.Reader, maxFrame int, buf []byte) (Batch, []byte, error) {
	payload, err := wire.ReadFrame(r, maxFrame, buf)
	if err != nil {
		if errors.Is(err, caspaxos.ErrCorrupt) {
			err = fmt.Errorf("%w: frame: %w", ErrCorrupt, err)
		}
		return Batch{}, payload, err
	}
	b, err := Decode(payload)
	return b, payload, err
}

// Codec is the frame codec as a value, for transports that take one
// (nodenet.Codec): AppendFrame and ReadFrame of this package.
type Codec struct{}

// AppendFrame is AppendFrame.
func (Codec) AppendFrame(dst []byte, b *Batch) ([]byte, error) { return AppendFrame(dst, b) }

// ReadFrame is ReadFrame.
func (Codec) ReadFrame(r *bufio.Reader, maxFrame int, buf []byte) (Batch, []byte, error) {
	return ReadFrame(r, maxFrame, buf)
}
