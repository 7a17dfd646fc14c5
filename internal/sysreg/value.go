package sysreg

import (
	"encoding/binary"
	"fmt"

	"github.com/fmnode/fmnode/caspaxos"
)

// Register value encoding, inside caspaxos.Value.Data (the version is
// caspaxos.Value.Version, which the caspaxos codecs already carry):
//
//	format  byte     (valueFormatV1)
//	writer  uvarint  (the writing Client's ProposerID, non-zero)
//	seq     uvarint  (the write's number within that Client, non-zero)
//	spec    bytes    (the rest: the caller's value, 1..MaxValueBytes)
//
// Uvarints must be in their shortest form, so a value has one encoding.
// The (writer, seq) tag names the write uniquely (ProposerID is unique
// per incarnation), which lets a write that finds its own value after a
// retry know it committed, instead of reporting an unknown outcome.
const (
	valueFormatV1 byte = 1
	// maxEncodedValue bounds caspaxos.Value.Data: the spec and its header.
	maxEncodedValue = MaxValueBytes + 1 + 2*binary.MaxVarintLen64
)

// writeTag identifies one write.
type writeTag struct {
	writer uint64
	seq    uint64
}

func encodeValue(tag writeTag, spec []byte) []byte {
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(spec))
	b = append(b, valueFormatV1)
	b = binary.AppendUvarint(b, tag.writer)
	b = binary.AppendUvarint(b, tag.seq)
	return append(b, spec...)
}

// decodeValue splits a stored value into its tag and spec. The spec
// aliases data.
func decodeValue(data []byte) (writeTag, []byte, error) {
	if len(data) == 0 {
		return writeTag{}, nil, fmt.Errorf("%w: sysreg value: empty", caspaxos.ErrCorrupt)
	}
	if len(data) > maxEncodedValue {
		return writeTag{}, nil, fmt.Errorf("%w: sysreg value: %d bytes exceed %d", caspaxos.ErrCorrupt, len(data), maxEncodedValue)
	}
	if data[0] != valueFormatV1 {
		return writeTag{}, nil, fmt.Errorf("%w: sysreg value: unknown format %d", caspaxos.ErrCorrupt, data[0])
	}
	rest := data[1:]
	var tag writeTag
	for _, f := range []struct {
		name string
		dst  *uint64
	}{{"writer", &tag.writer}, {"seq", &tag.seq}} {
		v, n := binary.Uvarint(rest)
		switch {
		case n <= 0:
			return writeTag{}, nil, fmt.Errorf("%w: sysreg value: bad %s", caspaxos.ErrCorrupt, f.name)
		case n != uvarintLen(v):
			return writeTag{}, nil, fmt.Errorf("%w: sysreg value: %s not in shortest form", caspaxos.ErrCorrupt, f.name)
		case v == 0:
			return writeTag{}, nil, fmt.Errorf("%w: sysreg value: zero %s", caspaxos.ErrCorrupt, f.name)
		}
		*f.dst = v
		rest = rest[n:]
	}
	if len(rest) == 0 {
		return writeTag{}, nil, fmt.Errorf("%w: sysreg value: no spec", caspaxos.ErrCorrupt)
	}
	if len(rest) > MaxValueBytes {
		return writeTag{}, nil, fmt.Errorf("%w: sysreg value: spec of %d bytes exceeds %d", caspaxos.ErrCorrupt, len(rest), MaxValueBytes)
	}
	return tag, rest, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// liveSpec returns the spec of a live register value (a copy).
func liveSpec(v caspaxos.Value) ([]byte, error) {
	_, spec, err := decodeValue(v.Data)
	if err != nil {
		return nil, fmt.Errorf("at version %d: %w", v.Version, err)
	}
	return append([]byte(nil), spec...), nil
}
