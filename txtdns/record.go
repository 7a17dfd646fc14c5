package txtdns

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Format bounds. A record's wire size (every string plus its length byte)
// is at most MaxRecordBytes, so a partition or region answer, with its
// header, question and a zone name of at most MaxZoneLen characters, fits in
// one 512-byte UDP response without EDNS.
const (
	// FormatVersion is the value of the "v" key this code writes and reads.
	FormatVersion = "1"
	// MaxStringLen is the DNS limit on one TXT character-string.
	MaxStringLen = 255
	// MaxRecordBytes bounds the TXT RDATA of one record.
	MaxRecordBytes = 400
	// MaxRecordStrings bounds the strings of one record.
	MaxRecordStrings = 16
	// MaxRegionLen bounds a region name: [a-z0-9-], 1..30 characters.
	MaxRegionLen = 30
	// MaxRegions bounds a priority list and the regions a zone publishes.
	MaxRegions = 8
	// MaxEndpointLen bounds one endpoint ("host:port").
	MaxEndpointLen = 100
	// MaxEndpoints bounds the endpoints of one region.
	MaxEndpoints = 8
	// MaxZoneLen bounds the zone name (presentation form, with the final dot).
	MaxZoneLen = 63
)

// Keys of the record format (RFC 6763 section 6 key=value strings).
const (
	keyVersion   = "v"
	keyLo        = "lo"
	keyHi        = "hi"
	keyEpoch     = "e"
	keyWrite     = "w"
	keyPriority  = "pr"
	keyConfig    = "cv"
	keyRegion    = "r"
	keyEndpoints = "ep"
	keyBlockSize = "bs"
	keyCount     = "np"
	keyRegions   = "rg"
)

// Route is the failover state of one partition that the publisher consumes:
// the register watch (or anything else) produces Routes and hands them to
// Publisher.Apply. Routes are ordered by (Epoch, ConfigVersion); an older
// one never replaces a newer one.
type Route struct {
	Partition uint32
	// Epoch is the partition's failover epoch; it grows with every change
	// of write region.
	Epoch uint64
	// WriteRegion is the only region that accepts writes in this epoch.
	WriteRegion string
	// Priority is the failover priority list, most preferred first; it
	// contains WriteRegion.
	Priority []string
	// ConfigVersion is the version of the partition's region configuration.
	ConfigVersion uint64
	// CommittedAt is when the change committed, if known; the publisher
	// measures its publish lag from it. It is not published.
	CommittedAt time.Time
}

// Newer reports whether r orders after o: a greater epoch, or the same
// epoch with a greater config version.
func (r Route) Newer(o Route) bool {
	if r.Epoch != o.Epoch {
		return r.Epoch > o.Epoch
	}
	return r.ConfigVersion > o.ConfigVersion
}

// Validate checks the route against the format's bounds.
func (r Route) Validate() error {
	return validateBody(r.Epoch, r.WriteRegion, r.Priority)
}

// Run is the published form of a run of consecutive partitions Lo..Hi that
// share one route (epoch, write region, priority list, config version). A
// single partition is the run Lo == Hi.
type Run struct {
	Lo, Hi        uint32
	Epoch         uint64
	WriteRegion   string
	Priority      []string
	ConfigVersion uint64
}

// Contains reports whether p is in Lo..Hi.
func (r Run) Contains(p uint32) bool { return r.Lo <= p && p <= r.Hi }

// Len is the number of partitions in the run.
func (r Run) Len() uint64 { return uint64(r.Hi) - uint64(r.Lo) + 1 }

// Route returns the route of partition p of the run.
func (r Run) Route(p uint32) Route {
	return Route{Partition: p, Epoch: r.Epoch, WriteRegion: r.WriteRegion, Priority: r.Priority, ConfigVersion: r.ConfigVersion}
}

// SameRoute reports whether r and o carry the same route (ignoring Lo, Hi).
func (r Run) SameRoute(o Run) bool {
	return r.Epoch == o.Epoch && r.ConfigVersion == o.ConfigVersion &&
		r.WriteRegion == o.WriteRegion && slices.Equal(r.Priority, o.Priority)
}

// Validate checks the run against the format's bounds.
func (r Run) Validate() error {
	if r.Lo > r.Hi {
		return malformed(keyLo, "lo %d above hi %d", r.Lo, r.Hi)
	}
	return validateBody(r.Epoch, r.WriteRegion, r.Priority)
}

// RegionInfo is one region's published record: its data-plane endpoints.
// Records are ordered by ConfigVersion; an older one never replaces a newer.
type RegionInfo struct {
	Region        string
	Endpoints     []string
	ConfigVersion uint64
}

// Validate checks the region record against the format's bounds.
func (ri RegionInfo) Validate() error {
	if err := ValidateRegion(ri.Region); err != nil {
		return err
	}
	if len(ri.Endpoints) == 0 {
		return malformed(keyEndpoints, "no endpoints")
	}
	if len(ri.Endpoints) > MaxEndpoints {
		return tooLarge(keyEndpoints, "%d endpoints, at most %d", len(ri.Endpoints), MaxEndpoints)
	}
	for _, ep := range ri.Endpoints {
		if err := validateEndpoint(ep); err != nil {
			return err
		}
	}
	return nil
}

// Meta is the zone apex record: what a client needs to warm its cache.
type Meta struct {
	// BlockSize is the number of partitions per block name b-<n>.
	BlockSize uint32
	// Partitions is the number of partitions published.
	Partitions uint64
	// Regions are the regions with a region record, sorted.
	Regions []string
}

// Validate checks the meta record against the format's bounds.
func (m Meta) Validate() error {
	if m.BlockSize == 0 {
		return malformed(keyBlockSize, "block size 0")
	}
	if len(m.Regions) > MaxRegions {
		return tooLarge(keyRegions, "%d regions, at most %d", len(m.Regions), MaxRegions)
	}
	for _, r := range m.Regions {
		if err := validateRegionKey(keyRegions, r); err != nil {
			return err
		}
	}
	return nil
}

// ValidateRegion checks a region name: 1..MaxRegionLen characters of
// [a-z0-9-], not starting or ending with '-', so "r-<region>" is a DNS label.
func ValidateRegion(r string) error { return validateRegionKey(keyRegion, r) }

func validateRegionKey(key, r string) error {
	if r == "" {
		return malformed(key, "empty region name")
	}
	if len(r) > MaxRegionLen {
		return tooLarge(key, "region name of %d bytes, at most %d", len(r), MaxRegionLen)
	}
	if r[0] == '-' || r[len(r)-1] == '-' {
		return malformed(key, "region %q starts or ends with '-'", r)
	}
	for i := 0; i < len(r); i++ {
		c := r[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return malformed(key, "region %q: byte %q not in [a-z0-9-]", r, c)
		}
	}
	return nil
}

func validateEndpoint(ep string) error {
	if ep == "" {
		return malformed(keyEndpoints, "empty endpoint")
	}
	if len(ep) > MaxEndpointLen {
		return tooLarge(keyEndpoints, "endpoint of %d bytes, at most %d", len(ep), MaxEndpointLen)
	}
	for i := 0; i < len(ep); i++ {
		c := ep[i]
		if c <= ' ' || c >= 0x7f || c == ',' || c == '"' || c == '\\' || c == ';' {
			return malformed(keyEndpoints, "endpoint %q: byte %q not allowed", ep, c)
		}
	}
	return nil
}

func validateBody(epoch uint64, write string, priority []string) error {
	if epoch == 0 {
		return malformed(keyEpoch, "epoch 0 (epochs start at 1)")
	}
	if err := validateRegionKey(keyWrite, write); err != nil {
		return err
	}
	if len(priority) == 0 {
		return malformed(keyPriority, "empty priority list")
	}
	if len(priority) > MaxRegions {
		return tooLarge(keyPriority, "%d regions, at most %d", len(priority), MaxRegions)
	}
	found := false
	for i, r := range priority {
		if err := validateRegionKey(keyPriority, r); err != nil {
			return err
		}
		if slices.Contains(priority[:i], r) {
			return malformed(keyPriority, "region %q listed twice", r)
		}
		if r == write {
			found = true
		}
	}
	if !found {
		return malformed(keyPriority, "write region %q not in priority list", write)
	}
	return nil
}

// EncodeRun encodes a run as TXT strings:
//
//	v=1 lo=<first> hi=<last> e=<epoch> w=<write region> pr=<r1,r2,...> cv=<config version>
func EncodeRun(r Run) ([]string, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	out := []string{
		keyVersion + "=" + FormatVersion,
		keyLo + "=" + strconv.FormatUint(uint64(r.Lo), 10),
		keyHi + "=" + strconv.FormatUint(uint64(r.Hi), 10),
		keyEpoch + "=" + strconv.FormatUint(r.Epoch, 10),
		keyWrite + "=" + r.WriteRegion,
		keyPriority + "=" + strings.Join(r.Priority, ","),
		keyConfig + "=" + strconv.FormatUint(r.ConfigVersion, 10),
	}
	return out, checkSize(out)
}

// EncodeRegion encodes a region record:
//
//	v=1 r=<region> cv=<config version> ep=<endpoint>[,<endpoint>...] [ep=...]
//
// Endpoints are packed into as few "ep" strings of at most MaxStringLen bytes
// as they fit in.
func EncodeRegion(ri RegionInfo) ([]string, error) {
	if err := ri.Validate(); err != nil {
		return nil, err
	}
	out := []string{
		keyVersion + "=" + FormatVersion,
		keyRegion + "=" + ri.Region,
		keyConfig + "=" + strconv.FormatUint(ri.ConfigVersion, 10),
	}
	out = appendList(out, keyEndpoints, ri.Endpoints)
	return out, checkSize(out)
}

// EncodeMeta encodes the zone apex record:
//
//	v=1 bs=<block size> np=<partitions> [rg=<r1,r2,...>]
func EncodeMeta(m Meta) ([]string, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	out := []string{
		keyVersion + "=" + FormatVersion,
		keyBlockSize + "=" + strconv.FormatUint(uint64(m.BlockSize), 10),
		keyCount + "=" + strconv.FormatUint(m.Partitions, 10),
	}
	if len(m.Regions) > 0 {
		out = appendList(out, keyRegions, m.Regions)
	}
	return out, checkSize(out)
}

// appendList appends key=a,b,c strings, starting a new string whenever the
// next item would push one past MaxStringLen. Items are at most
// MaxEndpointLen bytes, so each fits.
func appendList(out []string, key string, items []string) []string {
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			out = append(out, b.String())
			b.Reset()
		}
	}
	for _, it := range items {
		if b.Len() > 0 && b.Len()+1+len(it) > MaxStringLen {
			flush()
		}
		if b.Len() == 0 {
			b.WriteString(key)
			b.WriteByte('=')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(it)
	}
	flush()
	return out
}

// RecordSize is the wire size of a TXT RDATA made of strs.
func RecordSize(strs []string) int {
	n := 0
	for _, s := range strs {
		n += 1 + len(s)
	}
	return n
}

func checkSize(strs []string) error {
	if len(strs) > MaxRecordStrings {
		return tooLarge("", "%d strings, at most %d", len(strs), MaxRecordStrings)
	}
	for _, s := range strs {
		if len(s) > MaxStringLen {
			k, _, _ := strings.Cut(s, "=")
			return tooLarge(k, "string of %d bytes, at most %d", len(s), MaxStringLen)
		}
	}
	if n := RecordSize(strs); n > MaxRecordBytes {
		return tooLarge("", "record of %d bytes, at most %d", n, MaxRecordBytes)
	}
	return nil
}

// kv is one parsed key=value string. hasValue is false for a boolean
// attribute (a string without '=').
type kv struct {
	key, value string
	hasValue   bool
}

// parseRecord splits a record into key=value pairs following RFC 6763:
// keys are case-insensitive printable ASCII without '='; the first string
// must be the version. Known keys must not repeat unless listed in repeatable.
func parseRecord(strs []string, known, repeatable []string) ([]kv, error) {
	if len(strs) == 0 {
		return nil, malformed("", "empty record")
	}
	if err := checkSize(strs); err != nil {
		return nil, err
	}
	out := make([]kv, 0, len(strs))
	for i, s := range strs {
		k, v, has := strings.Cut(s, "=")
		if k == "" {
			return nil, malformed("", "string %d has an empty key", i)
		}
		for j := 0; j < len(k); j++ {
			if k[j] < 0x20 || k[j] > 0x7e {
				return nil, malformed("", "string %d: key byte %q is not printable ASCII", i, k[j])
			}
		}
		k = strings.ToLower(k)
		if i == 0 {
			if k != keyVersion || !has {
				return nil, malformed(keyVersion, "first string must be the version, got %q", s)
			}
			if v != FormatVersion {
				return nil, &RecordError{Key: keyVersion, Reason: "version " + strconv.Quote(v) + ", want " + FormatVersion, Err: ErrUnsupportedVersion}
			}
			continue
		}
		if k == keyVersion {
			return nil, malformed(keyVersion, "version repeated")
		}
		if !slices.Contains(known, k) {
			continue // unknown keys are ignored (forward compatibility)
		}
		if !has {
			return nil, malformed(k, "key without value")
		}
		if !slices.Contains(repeatable, k) && slices.ContainsFunc(out, func(x kv) bool { return x.key == k }) {
			return nil, malformed(k, "key repeated")
		}
		out = append(out, kv{key: k, value: v, hasValue: has})
	}
	return out, nil
}

func parseUint(key, v string, bits int) (uint64, error) {
	if v == "" {
		return 0, malformed(key, "empty number")
	}
	if len(v) > 1 && v[0] == '0' {
		return 0, malformed(key, "number %q has a leading zero", v)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, malformed(key, "%q is not a decimal number", v)
		}
	}
	n, err := strconv.ParseUint(v, 10, bits)
	if err != nil {
		return 0, malformed(key, "%q out of range", v)
	}
	return n, nil
}

func parseList(key, v string, max int) ([]string, error) {
	if v == "" {
		return nil, malformed(key, "empty list")
	}
	items := strings.Split(v, ",")
	if len(items) > max {
		return nil, tooLarge(key, "%d items, at most %d", len(items), max)
	}
	return items, nil
}

// DecodeRun decodes a partition run record. It rejects missing or repeated
// keys, bad numbers, invalid regions, oversized strings or records and any
// version but FormatVersion; unknown keys are ignored.
func DecodeRun(strs []string) (Run, error) {
	kvs, err := parseRecord(strs, []string{keyLo, keyHi, keyEpoch, keyWrite, keyPriority, keyConfig}, nil)
	if err != nil {
		return Run{}, err
	}
	var r Run
	var seen [6]bool
	for _, x := range kvs {
		var n uint64
		switch x.key {
		case keyLo:
			n, err = parseUint(x.key, x.value, 32)
			r.Lo, seen[0] = uint32(n), true
		case keyHi:
			n, err = parseUint(x.key, x.value, 32)
			r.Hi, seen[1] = uint32(n), true
		case keyEpoch:
			r.Epoch, err = parseUint(x.key, x.value, 64)
			seen[2] = true
		case keyWrite:
			r.WriteRegion, seen[3] = x.value, true
		case keyPriority:
			r.Priority, err = parseList(x.key, x.value, MaxRegions)
			seen[4] = true
		case keyConfig:
			r.ConfigVersion, err = parseUint(x.key, x.value, 64)
			seen[5] = true
		}
		if err != nil {
			return Run{}, err
		}
	}
	for i, k := range []string{keyLo, keyHi, keyEpoch, keyWrite, keyPriority, keyConfig} {
		if !seen[i] {
			return Run{}, malformed(k, "missing")
		}
	}
	if err := r.Validate(); err != nil {
		return Run{}, err
	}
	return r, nil
}

// DecodeRegion decodes a region record. "ep" may repeat; the lists concatenate.
func DecodeRegion(strs []string) (RegionInfo, error) {
	kvs, err := parseRecord(strs, []string{keyRegion, keyConfig, keyEndpoints}, []string{keyEndpoints})
	if err != nil {
		return RegionInfo{}, err
	}
	var ri RegionInfo
	var seenRegion, seenConfig bool
	for _, x := range kvs {
		switch x.key {
		case keyRegion:
			ri.Region, seenRegion = x.value, true
		case keyConfig:
			ri.ConfigVersion, err = parseUint(x.key, x.value, 64)
			seenConfig = true
		case keyEndpoints:
			var eps []string
			eps, err = parseList(x.key, x.value, MaxEndpoints)
			if err == nil && len(ri.Endpoints)+len(eps) > MaxEndpoints {
				err = tooLarge(x.key, "more than %d endpoints", MaxEndpoints)
			}
			ri.Endpoints = append(ri.Endpoints, eps...)
		}
		if err != nil {
			return RegionInfo{}, err
		}
	}
	if !seenRegion {
		return RegionInfo{}, malformed(keyRegion, "missing")
	}
	if !seenConfig {
		return RegionInfo{}, malformed(keyConfig, "missing")
	}
	if err := ri.Validate(); err != nil {
		return RegionInfo{}, err
	}
	return ri, nil
}

// DecodeMeta decodes the zone apex record. "rg" may repeat.
func DecodeMeta(strs []string) (Meta, error) {
	kvs, err := parseRecord(strs, []string{keyBlockSize, keyCount, keyRegions}, []string{keyRegions})
	if err != nil {
		return Meta{}, err
	}
	var m Meta
	var seenBS, seenNP bool
	for _, x := range kvs {
		switch x.key {
		case keyBlockSize:
			var n uint64
			n, err = parseUint(x.key, x.value, 32)
			m.BlockSize, seenBS = uint32(n), true
		case keyCount:
			m.Partitions, err = parseUint(x.key, x.value, 64)
			seenNP = true
		case keyRegions:
			var rs []string
			rs, err = parseList(x.key, x.value, MaxRegions)
			if err == nil && len(m.Regions)+len(rs) > MaxRegions {
				err = tooLarge(x.key, "more than %d regions", MaxRegions)
			}
			m.Regions = append(m.Regions, rs...)
		}
		if err != nil {
			return Meta{}, err
		}
	}
	if !seenBS {
		return Meta{}, malformed(keyBlockSize, "missing")
	}
	if !seenNP {
		return Meta{}, malformed(keyCount, "missing")
	}
	if err := m.Validate(); err != nil {
		return Meta{}, err
	}
	return m, nil
}
