package boltstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"hash/crc64"

	"github.com/fmnode/fmnode/caspaxos"
)

// digest summarises the records bucket: how many records it holds and the
// XOR of a 64-bit hash of each stored value. bbolt pages carry no checksum,
// so a damaged page count or a branch pointer into an old copy of a leaf
// can make records silently vanish or roll back, each record still
// checksumming fine on its own. For an acceptor that is a forgotten promise:
// a Paxos safety violation. The committer keeps the digest current in the
// same transaction, and Load recomputes it, so such damage fails Open
// instead of yielding a state the store never held.
type digest struct {
	count uint64
	xor   uint64
}

const (
	digestFormatV1 byte = 0xd1
	digestLen           = 1 + 8 + 8 + 4
)

// valueHash hashes one stored record value (its encoding includes the key).
func valueHash(v []byte) uint64 { return crc64.Checksum(v, crc64.MakeTable(crc64.ECMA)) }

func (d *digest) add(v []byte)    { d.count++; d.xor ^= valueHash(v) }
func (d *digest) remove(v []byte) { d.count--; d.xor ^= valueHash(v) }

func (d digest) encode() []byte {
	b := make([]byte, 0, digestLen)
	b = append(b, digestFormatV1)
	b = binary.BigEndian.AppendUint64(b, d.count)
	b = binary.BigEndian.AppendUint64(b, d.xor)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

func decodeDigest(b []byte) (digest, error) {
	if len(b) != digestLen {
		return digest{}, fmt.Errorf("%w: digest: %d bytes, want %d", caspaxos.ErrCorrupt, len(b), digestLen)
	}
	body, sum := b[:digestLen-4], binary.LittleEndian.Uint32(b[digestLen-4:])
	if got := crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)); got != sum {
		return digest{}, fmt.Errorf("%w: digest: checksum mismatch: stored %08x, computed %08x", caspaxos.ErrCorrupt, sum, got)
	}
	if body[0] != digestFormatV1 {
		return digest{}, fmt.Errorf("%w: digest: unknown format version %d", caspaxos.ErrCorrupt, body[0])
	}
	return digest{count: binary.BigEndian.Uint64(body[1:]), xor: binary.BigEndian.Uint64(body[9:])}, nil
}
