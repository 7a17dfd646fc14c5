package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/fmnode/fmnode/caspaxos"
)

// Framing, version 1. A frame is
//
//	magic    2 bytes  0xC5 0xA9
//	version  byte     (frameVersionV1)
//	flags    byte     (must be zero; reserved)
//	length   uint32   little-endian payload length, at most the reader's max
//	payload  length bytes (one encoded message)
//	checksum uint32   little-endian CRC-32C (Castagnoli) of header and payload
//
// The magic catches a peer that speaks another protocol (or a TLS client
// talking to a plain listener) at the first bytes; the checksum catches
// corruption that TCP's weak checksum lets through and, more usefully,
// framing bugs. The length is checked against the bound before anything is
// allocated.
const (
	// FrameHeaderBytes is the size of the frame header.
	FrameHeaderBytes = 8
	// FrameTrailerBytes is the size of the checksum after the payload.
	FrameTrailerBytes = 4
	// FrameOverheadBytes is what framing adds to a payload.
	FrameOverheadBytes = FrameHeaderBytes + FrameTrailerBytes
	// DefaultMaxFrameBytes bounds a frame's payload unless configured otherwise.
	DefaultMaxFrameBytes = 16 << 20
	// MaxFrameBytesLimit is the largest payload bound a reader may use: the
	// length field is 32 bits, and a bound above 1 GiB is certainly a mistake.
	MaxFrameBytesLimit = 1 << 30

	magic0         byte = 0xC5
	magic1         byte = 0xA9
	frameVersionV1 byte = 1

	// growStep bounds how far ReadFrame grows its buffer ahead of the bytes
	// that actually arrived, so a peer that announces a 16 MiB frame and
	// sends 10 bytes costs 1 MiB, not 16.
	growStep = 1 << 20
)

// FrameTooLargeError reports a frame whose announced length exceeds the
// bound. It matches caspaxos.ErrCorrupt with errors.Is.
type FrameTooLargeError struct {
	Length uint64
	Max    int
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("wire: frame of %d bytes exceeds the bound %d: %v", e.Length, e.Max, caspaxos.ErrCorrupt)
}

// Is makes errors.Is(err, caspaxos.ErrCorrupt) hold.
func (e *FrameTooLargeError) Is(target error) bool { return target == caspaxos.ErrCorrupt }

func castagnoli() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// AppendFrame appends a frame carrying payload to dst.
func AppendFrame(dst, payload []byte) []byte {
	start := len(dst)
	dst = appendHeader(dst, len(payload))
	dst = append(dst, payload...)
	return appendChecksum(dst, start)
}

// AppendMessageFrame encodes m straight into a frame appended to dst, with
// no intermediate copy. On error dst is returned unchanged.
func AppendMessageFrame(dst []byte, m caspaxos.Message) ([]byte, error) {
	start := len(dst)
	dst = appendHeader(dst, 0)
	dst, err := AppendMessage(dst, m)
	if err != nil {
		return dst[:start], err
	}
	n := len(dst) - start - FrameHeaderBytes
	if uint64(n) > MaxFrameBytesLimit {
		return dst[:start], fmt.Errorf("wire: encode: message of %d bytes exceeds the frame limit %d", n, MaxFrameBytesLimit)
	}
	binary.LittleEndian.PutUint32(dst[start+4:], uint32(n))
	return appendChecksum(dst, start), nil
}

func appendHeader(dst []byte, n int) []byte {
	dst = append(dst, magic0, magic1, frameVersionV1, 0)
	return binary.LittleEndian.AppendUint32(dst, uint32(n))
}

func appendChecksum(dst []byte, start int) []byte {
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli()))
}

// ReadFrame reads one frame from r and returns its payload, stored in buf
// (grown when too small; pass the returned slice back as buf to reuse it).
// The payload is only valid until the next call with the same buffer.
//
// It returns io.EOF when r ends cleanly between frames and
// io.ErrUnexpectedEOF when it ends inside one. A bad magic, version,
// flags or checksum, or a length above max, is an error wrapping
// caspaxos.ErrCorrupt (a *FrameTooLargeError for the length); the stream
// cannot be resynchronised after one, so the caller closes it.
func ReadFrame(r *bufio.Reader, max int, buf []byte) ([]byte, error) {
	if max <= 0 || max > MaxFrameBytesLimit {
		return buf[:0], fmt.Errorf("wire: frame bound %d out of range (1..%d)", max, MaxFrameBytesLimit)
	}
	// The header is parsed and checksummed in place in r's buffer (a copy
	// on the stack would escape through crc32's indirect call).
	hdr, err := r.Peek(FrameHeaderBytes)
	if len(hdr) < FrameHeaderBytes {
		if len(hdr) > 0 && errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return buf[:0], err
	}
	if hdr[0] != magic0 || hdr[1] != magic1 {
		return buf[:0], fmt.Errorf("%w: frame: bad magic %02x%02x", caspaxos.ErrCorrupt, hdr[0], hdr[1])
	}
	if hdr[2] != frameVersionV1 {
		return buf[:0], fmt.Errorf("%w: frame: unknown version %d", caspaxos.ErrCorrupt, hdr[2])
	}
	if hdr[3] != 0 {
		return buf[:0], fmt.Errorf("%w: frame: unknown flags %#x", caspaxos.ErrCorrupt, hdr[3])
	}
	n := binary.LittleEndian.Uint32(hdr[4:])
	if uint64(n) > uint64(max) {
		return buf[:0], &FrameTooLargeError{Length: uint64(n), Max: max}
	}
	crc := crc32.Checksum(hdr, castagnoli())
	if _, err := r.Discard(FrameHeaderBytes); err != nil {
		return buf[:0], err
	}
	payload, err := readPayload(r, int(n), buf[:0])
	if err != nil {
		return payload[:0], err
	}
	tail, err := r.Peek(FrameTrailerBytes)
	if len(tail) < FrameTrailerBytes {
		return payload[:0], unexpected(err)
	}
	stored := binary.LittleEndian.Uint32(tail)
	if _, err := r.Discard(FrameTrailerBytes); err != nil {
		return payload[:0], err
	}
	crc = crc32.Update(crc, castagnoli(), payload)
	if stored != crc {
		return payload[:0], fmt.Errorf("%w: frame: checksum mismatch: stored %08x, computed %08x", caspaxos.ErrCorrupt, stored, crc)
	}
	return payload, nil
}

// readPayload reads n bytes into buf, growing it at most growStep ahead of
// the bytes received.
func readPayload(r io.Reader, n int, buf []byte) ([]byte, error) {
	if n <= cap(buf) {
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return buf, unexpected(err)
		}
		return buf, nil
	}
	for len(buf) < n {
		step := min(n-len(buf), growStep)
		buf = growTo(buf, len(buf)+step)
		if _, err := io.ReadFull(r, buf[len(buf)-step:]); err != nil {
			return buf, unexpected(err)
		}
	}
	return buf, nil
}

// growTo returns buf extended to length n, reallocating (with the usual
// amortised growth, but never beyond what is asked plus one step) when
// the capacity is short.
func growTo(buf []byte, n int) []byte {
	if n <= cap(buf) {
		return buf[:n]
	}
	c := max(n, min(2*cap(buf), n+growStep))
	nb := make([]byte, n, c)
	copy(nb, buf)
	return nb
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
