// Package wire is the binary encoding of CASPaxos messages and the framing
// that carries them over a byte stream. It is pure: no IO beyond the
// *bufio.Reader handed to ReadFrame, no goroutines, no package state.
//
// Message encoding, format version 1. Integers are uvarints in their
// shortest form (a longer encoding of the same number is refused, so every
// message has exactly one encoding and a decoded message re-encodes to the
// same bytes):
//
//	format   byte     (messageFormatV1)
//	type     byte     (caspaxos.MsgType, must be known)
//	from     uvarint
//	to       uvarint
//	age      uvarint
//	count    uvarint  (number of items, at most MaxItems)
//	items    count times:
//	  flags    byte   (which fields follow; all eight bits are defined)
//	  key      uvarint length (at most caspaxos.MaxKeyBytes), bytes
//	  ballot   uvarint Counter, uvarint Proposer   if flagBallot
//	  next     uvarint Counter, uvarint Proposer   if flagNext
//	  accepted uvarint Counter, uvarint Proposer   if flagAccepted
//	  conflict uvarint Counter, uvarint Proposer   if flagConflict
//	  version  uvarint                             if flagVersion
//	  data     uvarint length (1..caspaxos.MaxValueBytes), bytes  if flagData
//	  reject   byte (a known, non-zero caspaxos.Reject)            if flagReject
//
// A field is present exactly when it is non-zero (a zero ballot, version or
// reject and empty data are left out), which is both what makes the
// encoding compact (a typical accept item with a small key is about 12
// bytes) and what makes it canonical. Empty data decodes as nil.
package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/fmnode/fmnode/caspaxos"
)

// MaxItems bounds the items of one message. The proposer batches at most
// caspaxos.DefaultMaxBatchItems (512) by default; the bound leaves room for
// larger configured batches while keeping a hostile count from driving a
// huge allocation (the decoder also checks the count against the bytes left).
const MaxItems = 1 << 16

const (
	messageFormatV1 byte = 1

	flagBallot   byte = 1 << 0
	flagNext     byte = 1 << 1
	flagAccepted byte = 1 << 2
	flagConflict byte = 1 << 3
	flagVersion  byte = 1 << 4
	flagData     byte = 1 << 5
	flagTomb     byte = 1 << 6
	flagReject   byte = 1 << 7

	// minItemBytes: flags and a key length.
	minItemBytes = 2
	// maxReject is the greatest Reject the codec knows.
	maxReject = caspaxos.RejectNotTombstone
)

// AppendMessage appends the encoding of m to dst and returns the extended
// slice. It allocates only when dst lacks capacity. It refuses messages the
// decoder would refuse (unknown type, too many items, oversized keys or
// values), so a peer is never sent something it must reject.
func AppendMessage(dst []byte, m caspaxos.Message) ([]byte, error) {
	if !m.Type.Valid() {
		return dst, fmt.Errorf("wire: encode: unknown message type %d", uint8(m.Type))
	}
	if len(m.Items) > MaxItems {
		return dst, fmt.Errorf("wire: encode: %d items exceed %d", len(m.Items), MaxItems)
	}
	start := len(dst)
	dst = append(dst, messageFormatV1, byte(m.Type))
	dst = binary.AppendUvarint(dst, uint64(m.From))
	dst = binary.AppendUvarint(dst, uint64(m.To))
	dst = binary.AppendUvarint(dst, m.Age)
	dst = binary.AppendUvarint(dst, uint64(len(m.Items)))
	for i := range m.Items {
		var err error
		dst, err = appendItem(dst, &m.Items[i])
		if err != nil {
			return dst[:start], fmt.Errorf("wire: encode: item %d: %w", i, err)
		}
	}
	return dst, nil
}

func appendItem(dst []byte, it *caspaxos.Item) ([]byte, error) {
	if len(it.Key) > caspaxos.MaxKeyBytes {
		return dst, fmt.Errorf("%w: key of %d bytes (max %d)", caspaxos.ErrKeyTooLarge, len(it.Key), caspaxos.MaxKeyBytes)
	}
	if len(it.Value.Data) > caspaxos.MaxValueBytes {
		return dst, fmt.Errorf("%w: value of %d bytes (max %d)", caspaxos.ErrValueTooLarge, len(it.Value.Data), caspaxos.MaxValueBytes)
	}
	if it.Reject > maxReject {
		return dst, fmt.Errorf("wire: unknown reject %d", uint8(it.Reject))
	}
	var flags byte
	if !it.Ballot.IsZero() {
		flags |= flagBallot
	}
	if !it.Next.IsZero() {
		flags |= flagNext
	}
	if !it.Accepted.IsZero() {
		flags |= flagAccepted
	}
	if !it.Conflict.IsZero() {
		flags |= flagConflict
	}
	if it.Value.Version != 0 {
		flags |= flagVersion
	}
	if len(it.Value.Data) > 0 {
		flags |= flagData
	}
	if it.Value.Tombstone {
		flags |= flagTomb
	}
	if it.Reject != caspaxos.RejectNone {
		flags |= flagReject
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(len(it.Key)))
	dst = append(dst, it.Key...)
	if flags&flagBallot != 0 {
		dst = appendBallot(dst, it.Ballot)
	}
	if flags&flagNext != 0 {
		dst = appendBallot(dst, it.Next)
	}
	if flags&flagAccepted != 0 {
		dst = appendBallot(dst, it.Accepted)
	}
	if flags&flagConflict != 0 {
		dst = appendBallot(dst, it.Conflict)
	}
	if flags&flagVersion != 0 {
		dst = binary.AppendUvarint(dst, it.Value.Version)
	}
	if flags&flagData != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(it.Value.Data)))
		dst = append(dst, it.Value.Data...)
	}
	if flags&flagReject != 0 {
		dst = append(dst, byte(it.Reject))
	}
	return dst, nil
}

func appendBallot(dst []byte, b caspaxos.Ballot) []byte {
	dst = binary.AppendUvarint(dst, b.Counter)
	return binary.AppendUvarint(dst, uint64(b.Proposer))
}

// DecodeMessage decodes one message produced by AppendMessage. The result
// shares no memory with b. Every failure wraps caspaxos.ErrCorrupt and says
// what is wrong and where.
func DecodeMessage(b []byte) (caspaxos.Message, error) {
	var d Decoder
	return d.Decode(b)
}

// Decoder decodes messages like DecodeMessage, interning keys: a key seen
// before is returned as the same string instead of a new allocation, which
// removes most per-item allocations on a connection that serves the same
// registers over and over. Interned strings are separate allocations, so a
// decoded message never pins the memory of another one. A Decoder is not
// safe for concurrent use; keep one per connection. The zero value decodes
// without interning.
type Decoder struct {
	keys    map[string]string
	maxKeys int
}

// NewDecoder returns a decoder that interns up to maxKeys keys (the table
// is cleared when it fills, which bounds its memory).
func NewDecoder(maxKeys int) *Decoder {
	if maxKeys <= 0 {
		return &Decoder{}
	}
	return &Decoder{keys: make(map[string]string, min(maxKeys, 1024)), maxKeys: maxKeys}
}

// Decode decodes one message. See DecodeMessage.
func (d *Decoder) Decode(b []byte) (caspaxos.Message, error) {
	r := reader{b: b}
	format := r.byte1("format")
	typ := caspaxos.MsgType(r.byte1("type"))
	var m caspaxos.Message
	m.From = caspaxos.NodeID(r.uvarint("from"))
	m.To = caspaxos.NodeID(r.uvarint("to"))
	m.Age = r.uvarint("age")
	count := r.uvarint("item count")
	if r.err != nil {
		return caspaxos.Message{}, r.err
	}
	if format != messageFormatV1 {
		return caspaxos.Message{}, fmt.Errorf("%w: message: unknown format version %d", caspaxos.ErrCorrupt, format)
	}
	if !typ.Valid() {
		return caspaxos.Message{}, fmt.Errorf("%w: message: unknown type %d", caspaxos.ErrCorrupt, uint8(typ))
	}
	m.Type = typ
	if count > MaxItems {
		return caspaxos.Message{}, fmt.Errorf("%w: message: %d items exceed %d", caspaxos.ErrCorrupt, count, MaxItems)
	}
	if count > uint64(r.left()/minItemBytes) {
		return caspaxos.Message{}, fmt.Errorf("%w: message: %d items cannot fit in %d bytes", caspaxos.ErrCorrupt, count, r.left())
	}
	if count > 0 {
		m.Items = make([]caspaxos.Item, count)
		for i := range m.Items {
			d.item(&r, &m.Items[i])
			if r.err != nil {
				return caspaxos.Message{}, fmt.Errorf("item %d: %w", i, r.err)
			}
		}
	}
	if r.left() != 0 {
		return caspaxos.Message{}, fmt.Errorf("%w: message: %d trailing bytes", caspaxos.ErrCorrupt, r.left())
	}
	return m, nil
}

func (d *Decoder) item(r *reader, it *caspaxos.Item) {
	flags := r.byte1("flags")
	key := r.bytes("key length", caspaxos.MaxKeyBytes)
	if r.err != nil {
		return
	}
	it.Key = d.intern(key)
	if flags&flagBallot != 0 {
		it.Ballot = r.ballot("ballot counter", "ballot proposer")
	}
	if flags&flagNext != 0 {
		it.Next = r.ballot("next counter", "next proposer")
	}
	if flags&flagAccepted != 0 {
		it.Accepted = r.ballot("accepted counter", "accepted proposer")
	}
	if flags&flagConflict != 0 {
		it.Conflict = r.ballot("conflict counter", "conflict proposer")
	}
	if flags&flagVersion != 0 {
		it.Value.Version = r.uvarint("version")
		if r.err == nil && it.Value.Version == 0 {
			r.fail("version flagged but zero")
		}
	}
	if flags&flagData != 0 {
		data := r.bytes("data length", caspaxos.MaxValueBytes)
		if r.err == nil && len(data) == 0 {
			r.fail("data flagged but empty")
		}
		if r.err == nil {
			it.Value.Data = append([]byte(nil), data...)
		}
	}
	it.Value.Tombstone = flags&flagTomb != 0
	if flags&flagReject != 0 {
		rej := caspaxos.Reject(r.byte1("reject"))
		if r.err == nil && (rej == caspaxos.RejectNone || rej > maxReject) {
			r.fail(fmt.Sprintf("unknown reject %d", uint8(rej)))
		}
		it.Reject = rej
	}
}

// intern returns key as a string, reusing an earlier allocation when the
// decoder has seen it. The map lookup with string(key) does not allocate.
func (d *Decoder) intern(key []byte) string {
	if d.keys == nil {
		return string(key)
	}
	if s, ok := d.keys[string(key)]; ok {
		return s
	}
	if len(d.keys) >= d.maxKeys {
		clear(d.keys)
	}
	s := string(key)
	d.keys[s] = s
	return s
}

// reader reads fields from a message. The first failure sticks, so callers
// read straight through and check once.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: message: %s at offset %d", caspaxos.ErrCorrupt, what, r.off)
	}
}

func (r *reader) byte1(field string) byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail(field + " truncated")
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

// uvarint reads a uvarint in its shortest form.
func (r *reader) uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	b := r.b[r.off:]
	if len(b) > 0 && b[0] < 0x80 { // one byte: the common case
		r.off++
		return uint64(b[0])
	}
	v, n := binary.Uvarint(b)
	switch {
	case n == 0:
		r.fail(field + " truncated")
		return 0
	case n < 0:
		r.fail(field + " overflows 64 bits")
		return 0
	case b[n-1] == 0:
		r.fail(field + " not in shortest form")
		return 0
	}
	r.off += n
	return v
}

// ballot reads a ballot; the field names are constants so that the hot
// path builds no strings.
func (r *reader) ballot(counterField, proposerField string) caspaxos.Ballot {
	b := caspaxos.Ballot{Counter: r.uvarint(counterField), Proposer: caspaxos.NodeID(r.uvarint(proposerField))}
	if r.err == nil && b.IsZero() {
		r.fail(counterField + ": ballot flagged but zero")
	}
	return b
}

// bytes reads a length-prefixed field (lenField names the length),
// refusing lengths beyond limit before slicing. The result aliases the input.
func (r *reader) bytes(lenField string, limit int) []byte {
	n := r.uvarint(lenField)
	if r.err != nil {
		return nil
	}
	if n > uint64(limit) {
		r.fail(fmt.Sprintf("%s %d exceeds %d", lenField, n, limit))
		return nil
	}
	if n > uint64(r.left()) {
		r.fail(fmt.Sprintf("%s %d but %d bytes left", lenField, n, r.left()))
		return nil
	}
	v := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return v
}
