package membership

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/hashicorp/memberlist"
)

// Node meta wire format, version 2 (all of it, in this order):
//
//	version  1 byte  (MetaVersion)
//	node id  2 bytes (big endian, not zero)
//	flags    1 byte  (bit 0: leaving; the other bits must be zero)
//	then eight strings, each a 1-byte length and that many bytes of UTF-8:
//	cluster, name, region, zone, node address, API address, version,
//	DNS address
//
// Version 2 added the DNS address: the agents that serve DNS watch every
// partition's register, so the others must know which they are.
//
// The lengths are single bytes so every value has exactly one encoding:
// what decodes re-encodes to the same bytes. Each string has its own bound
// (the Max*Bytes constants); the bounds add up to MaxMetaBytes, below
// memberlist's meta limit, so a valid Meta always fits.
const (
	// MetaVersion is the version byte this package writes and the only
	// one it reads.
	MetaVersion = 2

	// MaxClusterBytes bounds Meta.Cluster (and Config.Cluster, which is
	// also memberlist's label).
	MaxClusterBytes = 64
	// MaxNameBytes bounds Meta.Name (memberlist's node name).
	MaxNameBytes = 64
	// MaxRegionBytes bounds Meta.Region and Meta.Zone.
	MaxRegionBytes = 64
	// MaxAddrBytes bounds Meta.NodeAddr, APIAddr and DNSAddr (host:port):
	// three of them must fit memberlist's 512-byte meta with the rest.
	MaxAddrBytes = 72
	// MaxVersionBytes bounds Meta.Version.
	MaxVersionBytes = 24

	metaFixedBytes = 1 + 2 + 1 + 8 // version, node id, flags, eight length bytes

	metaFlagLeaving = 1 << 0
	metaFlagsKnown  = metaFlagLeaving

	// MaxMetaBytes is the largest encoded Meta.
	MaxMetaBytes = metaFixedBytes + MaxClusterBytes + MaxNameBytes +
		2*MaxRegionBytes + 3*MaxAddrBytes + MaxVersionBytes
)

// A valid Meta always fits memberlist's meta limit: this fails to compile
// if the bounds above outgrow it.
const _ = uint(memberlist.MetaMaxSize - MaxMetaBytes)

// ErrInvalidMeta: node meta failed to encode or decode; the message says
// which field and why.
var ErrInvalidMeta = errors.New("membership: invalid node meta")

// Meta is what a node tells the others about itself through gossip: who it
// is and where its node transport and API listen. It is outside bytes on
// the receiving side, so DecodeMeta is strict.
type Meta struct {
	// Cluster must equal the receiver's Config.Cluster or the node is
	// refused.
	Cluster string
	// Name is the memberlist node name; it must equal the name the node
	// gossips under.
	Name string
	// NodeID is the failover core's node id (not zero); one id belongs to
	// one name at a time.
	NodeID uint16
	// Region and Zone place the node.
	Region, Zone string
	// NodeAddr is the node transport's host:port; APIAddr the client
	// API's (may be empty).
	NodeAddr, APIAddr string
	// DNSAddr is the DNS server's host:port (empty: the node serves no
	// DNS).
	DNSAddr string
	// Version is the fmnode version the node runs (may be empty).
	Version string
	// Leaving is set by Leave just before the node's leave broadcast, so
	// that the others can tell a graceful leave from a death (memberlist
	// does not tell its event delegate which it was).
	Leaving bool
}

type metaField struct {
	name  string
	value *string
	max   int
	need  bool
}

func (m *Meta) fields() [8]metaField {
	return [8]metaField{
		{"Cluster", &m.Cluster, MaxClusterBytes, true},
		{"Name", &m.Name, MaxNameBytes, true},
		{"Region", &m.Region, MaxRegionBytes, true},
		{"Zone", &m.Zone, MaxRegionBytes, false},
		{"NodeAddr", &m.NodeAddr, MaxAddrBytes, true},
		{"APIAddr", &m.APIAddr, MaxAddrBytes, false},
		{"Version", &m.Version, MaxVersionBytes, false},
		{"DNSAddr", &m.DNSAddr, MaxAddrBytes, false},
	}
}

func metaErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidMeta, field, fmt.Sprintf(format, args...))
}

func checkMetaString(f metaField) error {
	v := *f.value
	switch {
	case len(v) > f.max:
		return metaErr(f.name, "%d bytes exceed %d", len(v), f.max)
	case f.need && v == "":
		return metaErr(f.name, "required")
	case !utf8.ValidString(v):
		return metaErr(f.name, "not valid UTF-8")
	}
	return nil
}

// Validate checks m against the rules DecodeMeta enforces.
func (m Meta) Validate() error {
	if m.NodeID == 0 {
		return metaErr("NodeID", "must not be zero")
	}
	for _, f := range m.fields() {
		if err := checkMetaString(f); err != nil {
			return err
		}
	}
	return nil
}

// MarshalBinary encodes m (version MetaVersion); it fails on a Meta that
// DecodeMeta would refuse.
func (m Meta) MarshalBinary() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	n := metaFixedBytes
	fs := m.fields()
	for _, f := range fs {
		n += len(*f.value)
	}
	b := make([]byte, 0, n)
	var flags byte
	if m.Leaving {
		flags |= metaFlagLeaving
	}
	b = append(b, MetaVersion, byte(m.NodeID>>8), byte(m.NodeID), flags)
	for _, f := range fs {
		b = append(b, byte(len(*f.value)))
		b = append(b, *f.value...)
	}
	return b, nil
}

// DecodeMeta decodes node meta received from another node. It refuses an
// unknown version, unknown flags, a zero node id, a missing required field, a field over
// its bound, invalid UTF-8, a short buffer and trailing bytes, so what it
// accepts re-encodes (MarshalBinary) to the same bytes.
func DecodeMeta(b []byte) (Meta, error) {
	var m Meta
	if len(b) > MaxMetaBytes {
		return Meta{}, metaErr("meta", "%d bytes exceed %d", len(b), MaxMetaBytes)
	}
	if len(b) < 4 {
		return Meta{}, metaErr("meta", "%d bytes is too short", len(b))
	}
	if b[0] != MetaVersion {
		return Meta{}, metaErr("version", "unknown version %d (want %d)", b[0], MetaVersion)
	}
	m.NodeID = uint16(b[1])<<8 | uint16(b[2])
	if b[3]&^metaFlagsKnown != 0 {
		return Meta{}, metaErr("flags", "unknown flags %#x", b[3]&^metaFlagsKnown)
	}
	m.Leaving = b[3]&metaFlagLeaving != 0
	b = b[4:]
	for _, f := range m.fields() {
		if len(b) < 1 {
			return Meta{}, metaErr(f.name, "missing")
		}
		n := int(b[0])
		b = b[1:]
		if n > f.max {
			return Meta{}, metaErr(f.name, "%d bytes exceed %d", n, f.max)
		}
		if len(b) < n {
			return Meta{}, metaErr(f.name, "truncated: %d of %d bytes", len(b), n)
		}
		*f.value = string(b[:n])
		b = b[n:]
	}
	if len(b) != 0 {
		return Meta{}, metaErr("meta", "%d trailing bytes", len(b))
	}
	if err := m.Validate(); err != nil {
		return Meta{}, err
	}
	return m, nil
}
