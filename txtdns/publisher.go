package txtdns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Publisher defaults and bounds.
const (
	DefaultTTL           = 5 * time.Second
	MinTTL               = time.Second
	MaxTTL               = time.Hour
	DefaultBlockSize     = 256
	MaxBlockSize         = 4096
	DefaultMaxPartitions = 1 << 20
	MaxMaxPartitions     = 1 << 24
)

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Zone is the DNS zone the records live in, e.g. "routes.example.".
	Zone string
	// TTL of every record (and the negative-caching TTL). Default 5 s.
	TTL time.Duration
	// BlockSize is the number of partitions per block name b-<n>, and the
	// longest run a partition record describes. Default 256, at most 4096.
	BlockSize uint32
	// MaxPartitions bounds the partitions published. Default 1<<20.
	MaxPartitions int
	// Clock measures the publish lag. Default SystemClock.
	Clock Clock
	// Logger; default discards.
	Logger *slog.Logger
	// Registerer receives the publisher's metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

func (c *PublisherConfig) setDefaults() error {
	z, err := CanonicalZone(c.Zone)
	if err != nil {
		return configErr("Zone", "%v", err)
	}
	c.Zone = z
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.TTL < MinTTL || c.TTL > MaxTTL || c.TTL%time.Second != 0 {
		return configErr("TTL", "%v: must be whole seconds in [%v, %v]", c.TTL, MinTTL, MaxTTL)
	}
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.BlockSize > MaxBlockSize {
		return configErr("BlockSize", "%d: at most %d", c.BlockSize, MaxBlockSize)
	}
	if c.MaxPartitions == 0 {
		c.MaxPartitions = DefaultMaxPartitions
	}
	if c.MaxPartitions < 1 || c.MaxPartitions > MaxMaxPartitions {
		return configErr("MaxPartitions", "%d: must be in [1, %d]", c.MaxPartitions, MaxMaxPartitions)
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// TXTAnswer is what a name holds: one TXT record (a list of strings) per
// element of Records. Records and their strings are shared and immutable.
type TXTAnswer struct {
	Name    Name
	Records [][]string
	TTL     time.Duration
}

// Authority is what the DNS server serves: a zone of TXT records.
// Publisher is the implementation; it is in memory.
type Authority interface {
	Zone() string
	TTL() time.Duration
	// Serial changes whenever the zone changes (the SOA serial).
	Serial() uint32
	// LookupTXT returns the records of qname, ErrNXDomain for a name of the
	// zone that does not exist, ErrRefused for a name outside the zone.
	LookupTXT(qname string) (TXTAnswer, error)
}

// ApplyResult counts what Apply did with its routes.
type ApplyResult struct {
	// Applied routes changed the published state.
	Applied int
	// Unchanged routes equal the published ones.
	Unchanged int
	// Stale routes are older than (or conflict at the same epoch and
	// config version with) the published ones and were ignored.
	Stale int
}

// Publisher holds the published failover state of every partition as runs
// of consecutive partitions sharing a route, grouped in blocks of BlockSize
// partitions, with every record pre-encoded, so a lookup is a map access and
// a binary search under a read lock. Updates are monotonic per partition
// and per region. Safe for concurrent use.
type Publisher struct {
	zone      string
	ttl       time.Duration
	blockSize uint32
	maxParts  int
	clock     Clock
	log       *slog.Logger
	m         *publisherMetrics

	mu         sync.RWMutex
	blocks     map[uint32]*block
	partitions int
	runs       int
	regions    map[string]pubRegion
	meta       [][]string
	serial     uint32
}

type block struct {
	runs []pubRun // sorted by Lo, disjoint, adjacent runs with the same route merged
	recs [][]string
}

type pubRun struct {
	Run
	txt   []string
	dirty bool
}

type pubRegion struct {
	info RegionInfo
	recs [][]string
}

// NewPublisher validates cfg and returns an empty publisher.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	p := &Publisher{
		zone:      cfg.Zone,
		ttl:       cfg.TTL,
		blockSize: cfg.BlockSize,
		maxParts:  cfg.MaxPartitions,
		clock:     cfg.Clock,
		log:       cfg.Logger,
		m:         newPublisherMetrics(cfg.Registerer),
		blocks:    make(map[uint32]*block),
		regions:   make(map[string]pubRegion),
		serial:    1,
	}
	p.rebuildMetaLocked()
	return p, nil
}

// Zone returns the canonical zone.
func (p *Publisher) Zone() string { return p.zone }

// TTL returns the record TTL.
func (p *Publisher) TTL() time.Duration { return p.ttl }

// BlockSize returns the partitions per block.
func (p *Publisher) BlockSize() uint32 { return p.blockSize }

// Serial returns the zone serial.
func (p *Publisher) Serial() uint32 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.serial
}

// Partitions returns how many partitions are published.
func (p *Publisher) Partitions() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.partitions
}

// Route returns the published route of partition part.
func (p *Publisher) Route(part uint32) (Route, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	b := p.blocks[part/p.blockSize]
	if b == nil {
		return Route{}, false
	}
	i, ok := b.find(part)
	if !ok {
		return Route{}, false
	}
	return b.runs[i].Route(part), true
}

// Apply publishes routes. Each is applied only if it is newer, by (Epoch,
// ConfigVersion), than the partition's published route; a route equal to
// the published one is a no-op. Invalid routes are skipped and reported in
// the returned error (wrapping ErrInvalidRoute, or ErrFull when the
// partition bound is reached); the valid ones are applied regardless. The
// change is visible to lookups when Apply returns.
func (p *Publisher) Apply(routes ...Route) (ApplyResult, error) {
	var res ApplyResult
	var errs []error
	valid := make([]bool, len(routes))
	for i, r := range routes {
		if err := r.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%w: partition %d: %w", ErrInvalidRoute, r.Partition, err))
			p.m.routes[routeInvalid].Inc()
			continue
		}
		// The largest encoding of this route (widest lo/hi) must fit.
		if _, err := EncodeRun(Run{Lo: math.MaxUint32, Hi: math.MaxUint32, Epoch: r.Epoch, WriteRegion: r.WriteRegion, Priority: r.Priority, ConfigVersion: r.ConfigVersion}); err != nil {
			errs = append(errs, fmt.Errorf("%w: partition %d: %w", ErrInvalidRoute, r.Partition, err))
			p.m.routes[routeInvalid].Inc()
			continue
		}
		valid[i] = true
	}

	p.mu.Lock()
	touched := make(map[uint32]struct{})
	for i, r := range routes {
		if !valid[i] {
			continue
		}
		outcome, err := p.setLocked(r)
		if err != nil {
			errs = append(errs, err)
			p.m.routes[routeFull].Inc()
			continue
		}
		p.m.routes[outcome].Inc()
		switch outcome {
		case routeApplied:
			res.Applied++
			touched[r.Partition/p.blockSize] = struct{}{}
		case routeUnchanged:
			res.Unchanged++
		case routeStale:
			res.Stale++
			p.log.Debug("stale route ignored", "partition", r.Partition, "epoch", r.Epoch, "config_version", r.ConfigVersion)
		}
	}
	for blk := range touched {
		p.blocks[blk].finish()
	}
	if res.Applied > 0 {
		p.serial++
		p.rebuildMetaLocked()
		p.m.partitions.Set(float64(p.partitions))
		p.m.runs.Set(float64(p.runs))
		p.m.serial.Set(float64(p.serial))
	}
	p.mu.Unlock()

	if res.Applied > 0 {
		now := p.clock.Now()
		for i, r := range routes {
			if valid[i] && !r.CommittedAt.IsZero() {
				p.m.lag.Observe(now.Sub(r.CommittedAt).Seconds())
			}
		}
	}
	return res, errors.Join(errs...)
}

// route outcomes, indexes into publisherMetrics.routes.
const (
	routeApplied = iota
	routeUnchanged
	routeStale
	routeInvalid
	routeFull
	numRouteOutcomes
)

func routeOutcomeName(i int) string {
	return [numRouteOutcomes]string{"applied", "unchanged", "stale", "invalid", "full"}[i]
}

// setLocked sets one partition's route inside its block, splitting the run
// that held it and merging with equal neighbours. Encoding happens in finish.
func (p *Publisher) setLocked(r Route) (int, error) {
	blkNo := r.Partition / p.blockSize
	b := p.blocks[blkNo]
	mid := pubRun{Run: Run{Lo: r.Partition, Hi: r.Partition, Epoch: r.Epoch, WriteRegion: r.WriteRegion,
		Priority: slices.Clone(r.Priority), ConfigVersion: r.ConfigVersion}, dirty: true}
	if b == nil {
		if p.partitions >= p.maxParts {
			return 0, fmt.Errorf("%w: partition %d: %d partitions published", ErrFull, r.Partition, p.partitions)
		}
		b = &block{}
		p.blocks[blkNo] = b
	}
	i, found := b.find(r.Partition)
	if !found {
		if p.partitions >= p.maxParts {
			return 0, fmt.Errorf("%w: partition %d: %d partitions published", ErrFull, r.Partition, p.partitions)
		}
		b.runs = slices.Insert(b.runs, i, mid)
		p.partitions++
		p.runs++
	} else {
		cur := b.runs[i]
		if cur.SameRoute(mid.Run) {
			return routeUnchanged, nil
		}
		if !r.Newer(cur.Route(r.Partition)) {
			return routeStale, nil
		}
		pieces := make([]pubRun, 0, 3)
		if cur.Lo < r.Partition {
			left := cur
			left.Hi, left.dirty = r.Partition-1, true
			pieces = append(pieces, left)
		}
		pieces = append(pieces, mid)
		if r.Partition < cur.Hi {
			right := cur
			right.Lo, right.dirty = r.Partition+1, true
			pieces = append(pieces, right)
		}
		b.runs = slices.Replace(b.runs, i, i+1, pieces...)
		p.runs += len(pieces) - 1
	}
	p.runs -= b.coalesce()
	return routeApplied, nil
}

// find returns the index of the run containing part, or where a run
// starting at part would be inserted.
func (b *block) find(part uint32) (int, bool) {
	i := sort.Search(len(b.runs), func(i int) bool { return b.runs[i].Hi >= part })
	return i, i < len(b.runs) && b.runs[i].Lo <= part
}

// coalesce merges adjacent runs with the same route and returns how many
// runs disappeared.
func (b *block) coalesce() int {
	if len(b.runs) < 2 {
		return 0
	}
	out := b.runs[:1]
	for _, r := range b.runs[1:] {
		last := &out[len(out)-1]
		if last.Hi != math.MaxUint32 && last.Hi+1 == r.Lo && last.SameRoute(r.Run) {
			last.Hi, last.dirty = r.Hi, true
			continue
		}
		out = append(out, r)
	}
	removed := len(b.runs) - len(out)
	clear(b.runs[len(out):])
	b.runs = out
	return removed
}

// finish encodes the runs that changed and rebuilds the block's answer.
func (b *block) finish() {
	recs := make([][]string, len(b.runs))
	for i := range b.runs {
		r := &b.runs[i]
		if r.dirty {
			txt, err := EncodeRun(r.Run)
			if err != nil {
				// Apply encoded the widest form of this route already.
				panic(fmt.Sprintf("txtdns: encoding a validated run failed: %v", err))
			}
			r.txt, r.dirty = txt, false
		}
		recs[i] = r.txt
	}
	b.recs = recs
}

// SetRegions publishes region records. Each replaces the region's record
// only if its ConfigVersion is newer (an equal version with the same
// content is a no-op). Invalid records are skipped and reported.
func (p *Publisher) SetRegions(regions ...RegionInfo) (ApplyResult, error) {
	var res ApplyResult
	var errs []error
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ri := range regions {
		txt, err := EncodeRegion(ri)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: region %q: %w", ErrInvalidRoute, ri.Region, err))
			p.m.regions[routeInvalid].Inc()
			continue
		}
		cur, ok := p.regions[ri.Region]
		switch {
		case !ok && len(p.regions) >= MaxRegions:
			errs = append(errs, fmt.Errorf("%w: region %q: %d regions published", ErrFull, ri.Region, len(p.regions)))
			p.m.regions[routeFull].Inc()
			continue
		case ok && cur.info.ConfigVersion == ri.ConfigVersion && slices.Equal(cur.info.Endpoints, ri.Endpoints):
			res.Unchanged++
			p.m.regions[routeUnchanged].Inc()
			continue
		case ok && cur.info.ConfigVersion >= ri.ConfigVersion:
			res.Stale++
			p.m.regions[routeStale].Inc()
			continue
		}
		ri.Endpoints = slices.Clone(ri.Endpoints)
		p.regions[ri.Region] = pubRegion{info: ri, recs: [][]string{txt}}
		res.Applied++
		p.m.regions[routeApplied].Inc()
	}
	if res.Applied > 0 {
		p.serial++
		p.rebuildMetaLocked()
		p.m.serial.Set(float64(p.serial))
	}
	return res, errors.Join(errs...)
}

// Region returns a region's published record.
func (p *Publisher) Region(name string) (RegionInfo, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	r, ok := p.regions[name]
	return r.info, ok
}

func (p *Publisher) rebuildMetaLocked() {
	names := make([]string, 0, len(p.regions))
	for n := range p.regions {
		names = append(names, n)
	}
	sort.Strings(names)
	txt, err := EncodeMeta(Meta{BlockSize: p.blockSize, Partitions: uint64(p.partitions), Regions: names})
	if err != nil {
		panic(fmt.Sprintf("txtdns: encoding the meta record failed: %v", err))
	}
	p.meta = [][]string{txt}
}

// LookupTXT implements Authority. It allocates nothing for partition,
// block and apex names; the errors are the bare sentinels.
func (p *Publisher) LookupTXT(qname string) (TXTAnswer, error) {
	n, err := ParseName(p.zone, qname)
	if err != nil {
		return TXTAnswer{}, err
	}
	ans := TXTAnswer{Name: n, TTL: p.ttl}
	p.mu.RLock()
	defer p.mu.RUnlock()
	switch n.Kind {
	case NameApex:
		ans.Records = p.meta
	case NamePartition:
		if b := p.blocks[n.ID/p.blockSize]; b != nil {
			if i, ok := b.find(n.ID); ok {
				ans.Records = b.recs[i : i+1]
			}
		}
	case NameBlock:
		if b := p.blocks[n.ID]; b != nil && len(b.recs) > 0 {
			ans.Records = b.recs
		}
	case NameRegion:
		if r, ok := p.regions[n.Region]; ok {
			ans.Records = r.recs
		}
	}
	if ans.Records == nil {
		return TXTAnswer{Name: n}, ErrNXDomain
	}
	return ans, nil
}

// RouteFeed is where the publisher's routes come from: the register watch
// (through the failover layer) in production, ChanFeed in tests and tools.
type RouteFeed interface {
	// Next blocks until routes are available or ctx is done. An error ends
	// the feed.
	Next(ctx context.Context) ([]Route, error)
}

// Follow applies every batch of routes from feed until ctx is done (it
// returns nil then) or the feed fails (it returns the feed's error).
// Invalid routes are logged and skipped.
func (p *Publisher) Follow(ctx context.Context, feed RouteFeed) error {
	for {
		routes, err := feed.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("txtdns: route feed: %w", err)
		}
		if _, err := p.Apply(routes...); err != nil {
			p.log.Warn("routes skipped", "err", err)
		}
	}
}

// ChanFeed is an in-memory RouteFeed: a bounded queue of route batches.
type ChanFeed struct {
	ch     chan []Route
	closed chan struct{}
	once   sync.Once
}

// NewChanFeed returns a feed queueing up to capacity batches.
func NewChanFeed(capacity int) (*ChanFeed, error) {
	if capacity < 1 {
		return nil, configErr("capacity", "%d: must be at least 1", capacity)
	}
	return &ChanFeed{ch: make(chan []Route, capacity), closed: make(chan struct{})}, nil
}

// Send queues a batch, blocking while the queue is full.
func (f *ChanFeed) Send(ctx context.Context, routes ...Route) error {
	select {
	case <-f.closed:
		return ErrFeedClosed
	default:
	}
	select {
	case f.ch <- routes:
		return nil
	case <-f.closed:
		return ErrFeedClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close ends the feed; Next returns ErrFeedClosed once the queue is drained.
func (f *ChanFeed) Close() { f.once.Do(func() { close(f.closed) }) }

// Next implements RouteFeed.
func (f *ChanFeed) Next(ctx context.Context) ([]Route, error) {
	select {
	case rs := <-f.ch:
		return rs, nil
	default:
	}
	select {
	case rs := <-f.ch:
		return rs, nil
	case <-f.closed:
		return nil, ErrFeedClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
