package agent

import (
	"encoding/binary"
	"errors"
	"hash/crc32"

	"github.com/fmnode/fmnode/internal/clusterspec"
)

// The spec cache file: magic, the register version (8 bytes, big
// endian), a CRC-32C of everything after it, then the encoded spec. A torn
// or edited file fails the checksum and the agent refuses it rather than
// run under a spec nobody committed.
const cacheMagic = "fmspec01"

func crc(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

func encodeCache(c committed) ([]byte, error) {
	spec, err := clusterspec.Encode(c.spec)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(cacheMagic)+12+len(spec))
	b = append(b, cacheMagic...)
	b = binary.BigEndian.AppendUint64(b, c.version)
	b = binary.BigEndian.AppendUint32(b, crc(spec))
	return append(b, spec...), nil
}

func decodeCache(b []byte) (committed, error) {
	if len(b) < len(cacheMagic)+12 || string(b[:len(cacheMagic)]) != cacheMagic {
		return committed{}, errors.New("not a spec cache (bad magic or too short)")
	}
	b = b[len(cacheMagic):]
	ver, sum, spec := binary.BigEndian.Uint64(b), binary.BigEndian.Uint32(b[8:]), b[12:]
	if crc(spec) != sum {
		return committed{}, errors.New("checksum mismatch")
	}
	if ver == 0 {
		return committed{}, errors.New("version 0")
	}
	s, err := clusterspec.Decode(spec)
	if err != nil {
		return committed{}, err
	}
	return committed{spec: s, version: ver}, nil
}
