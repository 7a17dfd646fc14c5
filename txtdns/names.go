package txtdns

import (
	"fmt"
	"strconv"
	"strings"
)

// NameKind classifies a name of the zone.
type NameKind uint8

// Kinds of names in a zone.
const (
	// NameOther is a name in the zone that the format does not define.
	NameOther NameKind = iota
	// NameApex is the zone itself; it holds the Meta record (and the SOA).
	NameApex
	// NamePartition is p-<partition>: the run containing the partition.
	NamePartition
	// NameBlock is b-<block>: every run of partitions block*bs .. block*bs+bs-1.
	NameBlock
	// NameRegion is r-<region>: the region's endpoints.
	NameRegion
)

func (k NameKind) String() string {
	switch k {
	case NameApex:
		return "apex"
	case NamePartition:
		return "partition"
	case NameBlock:
		return "block"
	case NameRegion:
		return "region"
	default:
		return "other"
	}
}

// Name is a parsed query name.
type Name struct {
	Kind NameKind
	// ID is the partition (NamePartition) or block (NameBlock) number.
	ID uint32
	// Region is the region of a NameRegion, lower case.
	Region string
}

// CanonicalZone returns zone in canonical form (lower case, with the final
// dot) after checking it: one or more labels of [a-z0-9_-], each 1..63
// bytes, at most MaxZoneLen bytes in all. The root zone is refused.
func CanonicalZone(zone string) (string, error) {
	z := strings.ToLower(strings.TrimSpace(zone))
	if !strings.HasSuffix(z, ".") {
		z += "."
	}
	if z == "." {
		return "", fmt.Errorf("%w: zone %q: the root zone cannot be served", ErrMalformed, zone)
	}
	if len(z) > MaxZoneLen {
		return "", fmt.Errorf("%w: zone %q: %d bytes, at most %d", ErrTooLarge, zone, len(z), MaxZoneLen)
	}
	for _, label := range strings.Split(z[:len(z)-1], ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("%w: zone %q: empty or over-long label", ErrMalformed, zone)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("%w: zone %q: byte %q not allowed in a label", ErrMalformed, zone, c)
			}
		}
	}
	return z, nil
}

// PartitionName is the name of partition p's record in the canonical zone.
func PartitionName(zone string, p uint32) string {
	return "p-" + strconv.FormatUint(uint64(p), 10) + "." + zone
}

// BlockName is the name of block b's records in the canonical zone.
func BlockName(zone string, b uint32) string {
	return "b-" + strconv.FormatUint(uint64(b), 10) + "." + zone
}

// RegionName is the name of a region's record in the canonical zone.
func RegionName(zone, region string) string {
	return "r-" + region + "." + zone
}

// ParseName classifies qname against the canonical zone. Matching is case
// insensitive and allocates nothing unless a region label has upper case.
// A name outside the zone returns ErrRefused. A name inside the zone that
// the format does not define is NameOther (the server answers NXDOMAIN).
func ParseName(zone, qname string) (Name, error) {
	if !strings.HasSuffix(qname, ".") {
		qname += "."
	}
	if len(qname) < len(zone) || !strings.EqualFold(qname[len(qname)-len(zone):], zone) {
		return Name{}, ErrRefused
	}
	if len(qname) == len(zone) {
		return Name{Kind: NameApex}, nil
	}
	prefix := qname[:len(qname)-len(zone)]
	if prefix[len(prefix)-1] != '.' {
		return Name{}, ErrRefused // e.g. "xfm.example." against "fm.example."
	}
	label := prefix[:len(prefix)-1]
	if len(label) < 3 || label[1] != '-' || strings.IndexByte(label, '.') >= 0 {
		return Name{Kind: NameOther}, nil
	}
	switch label[0] {
	case 'p', 'P':
		if id, ok := parseID(label[2:]); ok {
			return Name{Kind: NamePartition, ID: id}, nil
		}
	case 'b', 'B':
		if id, ok := parseID(label[2:]); ok {
			return Name{Kind: NameBlock, ID: id}, nil
		}
	case 'r', 'R':
		r := label[2:]
		if hasUpper(r) {
			r = strings.ToLower(r)
		}
		if regionOK(r) {
			return Name{Kind: NameRegion, Region: r}, nil
		}
	}
	return Name{Kind: NameOther}, nil
}

// parseID parses a canonical decimal uint32 (no sign, no leading zero).
func parseID(s string) (uint32, bool) {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if n > 1<<32-1 {
		return 0, false
	}
	return uint32(n), true
}

// regionOK is ValidateRegion without building an error.
func regionOK(r string) bool {
	if r == "" || len(r) > MaxRegionLen || r[0] == '-' || r[len(r)-1] == '-' {
		return false
	}
	for i := 0; i < len(r); i++ {
		c := r[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 'A' && s[i] <= 'Z' {
			return true
		}
	}
	return false
}
