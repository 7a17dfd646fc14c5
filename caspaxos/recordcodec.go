package caspaxos

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Bounds on what one register holds. Stores refuse to write beyond them and
// decoders refuse to read beyond them, so a corrupt length prefix can never
// make a decoder allocate gigabytes, and a store never writes a record that
// it could not read back (which would make the acceptor unable to restart).
const (
	// MaxKeyBytes bounds a register key.
	MaxKeyBytes = 1024
	// MaxValueBytes bounds a register's data (1 MiB).
	MaxValueBytes = 1 << 20
)

// Record encoding, format version 1. Integers are uvarints so that the
// common small ballots and versions cost a byte or two each:
//
//	version      byte   (recordFormatV1)
//	promised     uvarint Counter, uvarint Proposer
//	accepted     uvarint Counter, uvarint Proposer
//	value        uvarint Version
//	flags        byte   (bit 0: tombstone; other bits must be zero)
//	key          uvarint length, bytes
//	data         uvarint length, bytes
//	checksum     4 bytes little-endian CRC-32C (Castagnoli) of all the above
//
// The checksum covers the version byte too, so a flipped version byte is
// reported as corruption rather than as an unknown format. The checksum
// is what turns a torn or bit-rotted record into ErrCorrupt instead of a
// plausible but never-written ballot, which would silently break Paxos.
const (
	// The two encodings start with different format bytes so that one can
	// never be mistaken for the other (a zero record and an age floor are
	// both 13 bytes long).
	recordFormatV1   byte = 0x01
	ageFloorFormatV1 byte = 0xa1

	flagTombstone byte = 1 << 0
	knownFlags         = flagTombstone

	checksumLen = 4
	// minRecordLen: version, 5 one-byte uvarints, flags, two zero lengths, checksum.
	minRecordLen = 1 + 5 + 1 + 2 + checksumLen
	// ageFloorLen: version, fixed 8-byte floor, checksum.
	ageFloorLen = 1 + 8 + checksumLen
)

// castagnoli returns the CRC-32C table. crc32.MakeTable caches this table
// inside the standard library (and uses the SSE4.2/ARM CRC instructions),
// so calling it per record costs nothing and needs no package variable.
func castagnoli() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// CheckRecord reports whether r fits the bounds a store can persist and a
// decoder will read back. Stores call it before writing anything.
func CheckRecord(r Record) error {
	if len(r.Key) > MaxKeyBytes {
		return fmt.Errorf("%w: key of %d bytes exceeds %d", ErrKeyTooLarge, len(r.Key), MaxKeyBytes)
	}
	if len(r.Value.Data) > MaxValueBytes {
		return fmt.Errorf("%w: key %.64q: value of %d bytes exceeds %d",
			ErrValueTooLarge, r.Key, len(r.Value.Data), MaxValueBytes)
	}
	return nil
}

// CheckBatch reports whether every write in b is within the bounds a store
// can persist and read back (see CheckRecord). Stores check the whole batch
// before writing any of it, so an out-of-bounds record fails its batch
// instead of leaving a record that would make the store unreadable.
func CheckBatch(b Batch) error {
	for _, r := range b.Put {
		if err := CheckRecord(r); err != nil {
			return err
		}
	}
	for _, k := range b.Delete {
		if len(k) > MaxKeyBytes {
			return fmt.Errorf("%w: delete of a key of %d bytes exceeds %d", ErrKeyTooLarge, len(k), MaxKeyBytes)
		}
	}
	return nil
}

// EncodeRecord appends the encoding of r to dst and returns the extended
// slice. It allocates only when dst lacks capacity, so stores can reuse one
// buffer per commit. It does not check bounds (see CheckRecord): a record
// beyond them encodes, but DecodeRecord refuses it.
func EncodeRecord(dst []byte, r Record) []byte {
	start := len(dst)
	dst = append(dst, recordFormatV1)
	dst = binary.AppendUvarint(dst, r.Promised.Counter)
	dst = binary.AppendUvarint(dst, uint64(r.Promised.Proposer))
	dst = binary.AppendUvarint(dst, r.Accepted.Counter)
	dst = binary.AppendUvarint(dst, uint64(r.Accepted.Proposer))
	dst = binary.AppendUvarint(dst, r.Value.Version)
	var flags byte
	if r.Value.Tombstone {
		flags |= flagTombstone
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(len(r.Key)))
	dst = append(dst, r.Key...)
	dst = binary.AppendUvarint(dst, uint64(len(r.Value.Data)))
	dst = append(dst, r.Value.Data...)
	sum := crc32.Checksum(dst[start:], castagnoli())
	return binary.LittleEndian.AppendUint32(dst, sum)
}

// DecodeRecord decodes one record produced by EncodeRecord. The result
// shares no memory with b (bbolt and pebble hand out buffers that are only
// valid briefly). An empty Data decodes as nil. Every failure wraps
// ErrCorrupt and says what is wrong.
func DecodeRecord(b []byte) (Record, error) {
	payload, err := verifyChecksum("record", b, minRecordLen)
	if err != nil {
		return Record{}, err
	}
	if payload[0] != recordFormatV1 {
		return Record{}, fmt.Errorf("%w: record: unknown format version %d", ErrCorrupt, payload[0])
	}
	d := recordDecoder{b: payload[1:]}
	var r Record
	r.Promised.Counter = d.uvarint("promised counter")
	r.Promised.Proposer = NodeID(d.uvarint("promised proposer"))
	r.Accepted.Counter = d.uvarint("accepted counter")
	r.Accepted.Proposer = NodeID(d.uvarint("accepted proposer"))
	r.Value.Version = d.uvarint("value version")
	flags := d.byte1("flags")
	key := d.bytes("key", MaxKeyBytes)
	data := d.bytes("data", MaxValueBytes)
	if d.err != nil {
		return Record{}, d.err
	}
	if flags&^knownFlags != 0 {
		return Record{}, fmt.Errorf("%w: record: unknown flags %#x", ErrCorrupt, flags)
	}
	if len(d.b) != 0 {
		return Record{}, fmt.Errorf("%w: record: %d trailing bytes", ErrCorrupt, len(d.b))
	}
	r.Value.Tombstone = flags&flagTombstone != 0
	r.Key = string(key)
	if len(data) > 0 {
		r.Value.Data = append([]byte(nil), data...)
	}
	return r, nil
}

// EncodeAgeFloor appends the encoding of an acceptor's age floor to dst. The
// floor fences stale proposers after a GC pass, so it gets the same
// checksum protection as a record: a corrupt floor read as a smaller number
// would readmit fenced proposers.
func EncodeAgeFloor(dst []byte, floor uint64) []byte {
	start := len(dst)
	dst = append(dst, ageFloorFormatV1)
	dst = binary.BigEndian.AppendUint64(dst, floor)
	sum := crc32.Checksum(dst[start:], castagnoli())
	return binary.LittleEndian.AppendUint32(dst, sum)
}

// DecodeAgeFloor decodes what EncodeAgeFloor wrote. Failures wrap ErrCorrupt.
func DecodeAgeFloor(b []byte) (uint64, error) {
	if len(b) != ageFloorLen {
		return 0, fmt.Errorf("%w: age floor: %d bytes, want %d", ErrCorrupt, len(b), ageFloorLen)
	}
	payload, err := verifyChecksum("age floor", b, ageFloorLen)
	if err != nil {
		return 0, err
	}
	if payload[0] != ageFloorFormatV1 {
		return 0, fmt.Errorf("%w: age floor: unknown format version %d", ErrCorrupt, payload[0])
	}
	return binary.BigEndian.Uint64(payload[1:]), nil
}

// verifyChecksum checks the trailing CRC-32C of b and returns the payload
// before it. It runs before any field is parsed, so no decoder logic ever
// sees unverified bytes.
func verifyChecksum(what string, b []byte, minLen int) ([]byte, error) {
	if len(b) < minLen {
		return nil, fmt.Errorf("%w: %s: %d bytes, shorter than the minimum %d", ErrCorrupt, what, len(b), minLen)
	}
	payload, tail := b[:len(b)-checksumLen], b[len(b)-checksumLen:]
	stored := binary.LittleEndian.Uint32(tail)
	if computed := crc32.Checksum(payload, castagnoli()); stored != computed {
		return nil, fmt.Errorf("%w: %s: checksum mismatch: stored %08x, computed %08x", ErrCorrupt, what, stored, computed)
	}
	return payload, nil
}

// recordDecoder reads fields from a checksummed payload. The first failure
// sticks, so DecodeRecord reads straight through and checks once.
type recordDecoder struct {
	b   []byte
	err error
}

func (d *recordDecoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		if n == 0 {
			d.err = fmt.Errorf("%w: record: %s truncated", ErrCorrupt, field)
		} else {
			d.err = fmt.Errorf("%w: record: %s overflows 64 bits", ErrCorrupt, field)
		}
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *recordDecoder) byte1(field string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.err = fmt.Errorf("%w: record: %s truncated", ErrCorrupt, field)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

// bytes reads a length-prefixed field, refusing lengths beyond limit before
// slicing, so a hostile length never drives an allocation.
func (d *recordDecoder) bytes(field string, limit int) []byte {
	n := d.uvarint(field + " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(limit) {
		d.err = fmt.Errorf("%w: record: %s length %d exceeds %d", ErrCorrupt, field, n, limit)
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = fmt.Errorf("%w: record: %s length %d but %d bytes left", ErrCorrupt, field, n, len(d.b))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}
