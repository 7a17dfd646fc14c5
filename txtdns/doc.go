// Package txtdns publishes every partition's failover state (its epoch,
// write region, region priority list and config version) as DNS TXT
// records, and serves them from an authoritative DNS server built on
// github.com/miekg/dns over UDP and TCP. Package txtdns/routing is the
// client side: the SDK applications use to find write regions.
// docs/TXT-RECORDS.md is the format's reference.
//
// # Records
//
// Names live under one zone (say "fm.example."):
//
//	p-<partition>   the run of partitions containing the partition
//	b-<block>       every run of partitions block*bs .. block*bs+bs-1
//	r-<region>      the region's data-plane endpoints
//	<apex>          meta: format version, block size, partition count, regions
//
// A record is a list of RFC 6763 key=value strings, version first:
//
//	"v=1" "lo=0" "hi=255" "e=7" "w=eastus" "pr=eastus,westus,northeu" "cv=3"
//
// A run is a maximal range of consecutive partitions, within one block of
// BlockSize (default 256) partitions, that share a route. A partition
// lookup thus caches its whole run, and a client warms a cache of 100,000
// partitions with one block lookup per 256 partitions (391), not 100,000.
// Every record is at most MaxRecordBytes (400) bytes, each string at most
// 255, so a partition or region answer fits one 512-byte UDP response; a
// block answer that does not is truncated (TC) and the client retries over
// TCP. EncodeRun/DecodeRun and friends are pure and fuzzed; decoding
// rejects malformed, duplicated, oversized or unknown-version records with
// a *RecordError naming the key.
//
// # Publisher
//
// Publisher consumes Routes (what the failover layer's register watch
// yields) through Apply, or a RouteFeed through Follow, and RegionInfo
// through SetRegions. Updates are monotonic: a partition's route changes
// only to a greater (Epoch, ConfigVersion), a region's only to a greater
// ConfigVersion, so feeding it from several sources or replaying a watch is
// safe. State is kept as sorted runs per block with every record encoded at
// update time; a lookup is a map access and a binary search under a read
// lock, allocation-free. An update touches one block (O(BlockSize)) and is
// visible when Apply returns; the publish lag (commit to visibility,
// Route.CommittedAt) is a histogram.
//
// # Server
//
// Server answers TXT and ANY queries authoritatively (AA), NXDOMAIN with
// the SOA (negative caching TTL = record TTL) for names of the zone that do
// not exist, NODATA for other types, the SOA at the apex and REFUSED outside
// the zone; the TTL is configurable (default 5 s). miekg/dns runs the
// sockets; Respond is the pure request-to-response function, fuzzed. TCP
// connections are bounded (MaxTCPConns, MaxTCPQueries, timeouts); the UDP
// handler never blocks, so miekg/dns's per-packet goroutines are short, and
// queries beyond MaxInFlight being answered at once are dropped.
//
// # Time
//
// Clock is the only time source (SystemClock; ManualClock for tests and
// the simulator; CoarseClock where a clock read per call is too dear).
package txtdns
