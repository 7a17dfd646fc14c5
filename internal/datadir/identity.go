package datadir

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Identity names the node a data directory belongs to. Every field must
// match on every Open after the first.
type Identity struct {
	// Cluster is the cluster's name (1..255 bytes of UTF-8).
	Cluster string
	// NodeID is the node's id in the cluster.
	NodeID uint16
	// Name is the node's name (1..255 bytes of UTF-8).
	Name string
	// Region is the node's region (0..255 bytes of UTF-8).
	Region string
}

// Format constants of the identity file (see the package doc).
const (
	identityMagic   = "fmnodeID"
	identityVersion = 1
	// maxFieldBytes bounds each string field (its length is one byte).
	maxFieldBytes = 255
	// identityFixedBytes: magic, version, node id, boot, three length
	// bytes and the checksum.
	identityFixedBytes = len(identityMagic) + 1 + 2 + 8 + 3 + 4
	// MaxIdentityBytes bounds the identity file; Open reads no more.
	MaxIdentityBytes = identityFixedBytes + 3*maxFieldBytes
	// MaxBoot is the largest boot counter: node.MaxBoot, the incarnation
	// number a proposer id packs above the node id.
	MaxBoot = 1<<47 - 1
)

// crcTable is a constant in all but name: crc32.MakeTable returns the
// same shared table on every call, so it is built where it is used.
func crcTable() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// validate reports the first unusable field of id, wrapping ErrInvalid.
func (id Identity) validate() error {
	if p := id.problem(); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalid, p)
	}
	return nil
}

// problem describes the first unusable field of id, "" when there is none.
func (id Identity) problem() string {
	if p := fieldProblem("Cluster", id.Cluster, false); p != "" {
		return p
	}
	if p := fieldProblem("Name", id.Name, false); p != "" {
		return p
	}
	return fieldProblem("Region", id.Region, true)
}

func fieldProblem(field, v string, mayBeEmpty bool) string {
	switch {
	case v == "" && !mayBeEmpty:
		return fmt.Sprintf("Identity.%s is empty", field)
	case len(v) > maxFieldBytes:
		return fmt.Sprintf("Identity.%s is %d bytes, the limit is %d", field, len(v), maxFieldBytes)
	case !utf8.ValidString(v):
		return fmt.Sprintf("Identity.%s %q is not valid UTF-8", field, v)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return fmt.Sprintf("Identity.%s %q holds a control character", field, v)
		}
	}
	return ""
}

// mismatch returns the first field in which stored differs from want, as
// the field's name and both values quoted for an operator; ok is false
// when they are equal.
func mismatch(stored, want Identity) (field, s, w string, ok bool) {
	switch {
	case stored.Cluster != want.Cluster:
		return "cluster", strconv.Quote(stored.Cluster), strconv.Quote(want.Cluster), true
	case stored.NodeID != want.NodeID:
		return "node id", strconv.Itoa(int(stored.NodeID)), strconv.Itoa(int(want.NodeID)), true
	case stored.Name != want.Name:
		return "name", strconv.Quote(stored.Name), strconv.Quote(want.Name), true
	case stored.Region != want.Region:
		return "region", strconv.Quote(stored.Region), strconv.Quote(want.Region), true
	}
	return "", "", "", false
}

// encodeIdentity returns the identity file holding id and boot.
func encodeIdentity(id Identity, boot uint64) ([]byte, error) {
	if err := id.validate(); err != nil {
		return nil, err
	}
	if boot == 0 || boot > MaxBoot {
		return nil, fmt.Errorf("%w: boot %d outside 1..%d", ErrInvalid, boot, uint64(MaxBoot))
	}
	b := make([]byte, 0, identityFixedBytes+len(id.Cluster)+len(id.Name)+len(id.Region))
	b = append(b, identityMagic...)
	b = append(b, identityVersion)
	b = binary.BigEndian.AppendUint16(b, id.NodeID)
	b = binary.BigEndian.AppendUint64(b, boot)
	for _, s := range []string{id.Cluster, id.Name, id.Region} {
		b = append(b, byte(len(s)))
		b = append(b, s...)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crcTable())), nil
}

// decodeIdentity parses an identity file. It accepts exactly the outputs
// of encodeIdentity; the error is the reason for a CorruptError.
func decodeIdentity(b []byte) (Identity, uint64, error) {
	const head = len(identityMagic) + 1
	switch {
	case len(b) == 0:
		return Identity{}, 0, fmt.Errorf("empty file (it is only ever replaced whole, so this is damage)")
	case len(b) > MaxIdentityBytes:
		return Identity{}, 0, fmt.Errorf("%d bytes or more, the format's bound is %d", len(b), MaxIdentityBytes)
	case len(b) < head:
		return Identity{}, 0, fmt.Errorf("truncated: %d bytes, shorter than the %d-byte header", len(b), head)
	case string(b[:len(identityMagic)]) != identityMagic:
		return Identity{}, 0, fmt.Errorf("not an fmnode identity file (magic %q, want %q)", b[:len(identityMagic)], identityMagic)
	case b[len(identityMagic)] != identityVersion:
		return Identity{}, 0, fmt.Errorf("unknown format version %d (this build reads version %d)", b[len(identityMagic)], identityVersion)
	case len(b) < identityFixedBytes:
		return Identity{}, 0, fmt.Errorf("truncated: %d bytes, a version %d file has at least %d", len(b), identityVersion, identityFixedBytes)
	}
	var id Identity
	off := head
	id.NodeID = binary.BigEndian.Uint16(b[off:])
	off += 2
	boot := binary.BigEndian.Uint64(b[off:])
	off += 8
	var fields [3]string
	for i := range fields {
		if off >= len(b) {
			return Identity{}, 0, fmt.Errorf("truncated: %d bytes, ends before string field %d", len(b), i+1)
		}
		n := int(b[off])
		off++
		if off+n > len(b) {
			return Identity{}, 0, fmt.Errorf("truncated: %d bytes, string field %d needs %d", len(b), i+1, off+n)
		}
		fields[i] = string(b[off : off+n])
		off += n
	}
	id.Cluster, id.Name, id.Region = fields[0], fields[1], fields[2]
	switch {
	case off+4 > len(b):
		return Identity{}, 0, fmt.Errorf("truncated: %d bytes, the checksum needs %d", len(b), off+4)
	case off+4 < len(b):
		return Identity{}, 0, fmt.Errorf("%d bytes after the checksum", len(b)-off-4)
	}
	if got, want := binary.BigEndian.Uint32(b[off:]), crc32.Checksum(b[:off], crcTable()); got != want {
		return Identity{}, 0, fmt.Errorf("checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	// The checksum holds, so what follows means the writer was wrong, not
	// the disk; it is refused all the same.
	if p := id.problem(); p != "" {
		return Identity{}, 0, fmt.Errorf("checksum holds but %s", p)
	}
	if boot == 0 || boot > MaxBoot {
		return Identity{}, 0, fmt.Errorf("checksum holds but boot counter %d is outside 1..%d", boot, uint64(MaxBoot))
	}
	return id, boot, nil
}
