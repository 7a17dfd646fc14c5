package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/txtdns"
	"github.com/fmnode/fmnode/txtdns/routing"
)

// The simulated DNS path of the failover scenarios: the register watch
// (fed every committed value the world learns) drives one txtdns.Publisher
// per data region over the simulated network; each client region has a
// caching resolver that queries the publishers and may serve an answer
// past its TTL (a stale epoch); the clients of a region share one
// routing.Router (the application's SDK in that region), the same core
// the runtime routing.Client drives.
const (
	// DefaultDNSTTL is the records' TTL, the real server's default.
	DefaultDNSTTL = txtdns.DefaultTTL
	// DefaultDNSStale is how long past its TTL a resolver keeps serving
	// an answer while it refreshes it (serve-stale).
	DefaultDNSStale = 10 * time.Second
	foDNSZone       = "fm.sim."
	// foDNSTimeout bounds a client's query and a resolver's fetch from
	// one publisher (then it asks the next region's).
	foDNSTimeout = time.Second
	// foDNSMaxPending bounds the DNS messages in flight.
	foDNSMaxPending = 1 << 20
	foDNSMaxStale   = time.Hour
)

// foTimeBase maps virtual time to the time.Time the routing core and the
// publisher take.
var foTimeBase = time.Unix(1_700_000_000, 0).UTC()

func foTime(d time.Duration) time.Time { return foTimeBase.Add(d) }

// foClock is the virtual clock as a txtdns.Clock (the publisher's lag).
type foClock struct{ fw *foWorld }

func (c foClock) Now() time.Time { return foTime(c.fw.now()) }

func (c foClock) Sleep(context.Context, time.Duration) error {
	return fmt.Errorf("sim: the virtual clock does not sleep")
}

type foDNSKind uint8

const (
	dnsFeed      foDNSKind = iota + 1 // a route to publisher `pub`
	dnsQuery                          // client -> its resolver
	dnsFetch                          // resolver -> publisher `pub`
	dnsFetchBack                      // publisher -> resolver, with the answer
	dnsFetchTimeout
	dnsAnswer // resolver -> client
	dnsClientTimeout
)

// foDNSMsg is one DNS event in flight.
type foDNSMsg struct {
	kind   foDNSKind
	pub    int   // publisher region
	res    int32 // resolver node
	part   int
	client int32 // -1: a resolver's background refresh
	tag    uint64
	route  txtdns.Route
	ans    txtdns.TXTAnswer
	err    error
	tries  int
}

type foResEntry struct {
	ans        txtdns.TXTAnswer
	expires    time.Duration
	fetchGen   uint64
	refreshing bool
	have       bool
	// fto is the latest fetch's timeout: a fetch's answer due before it
	// takes its event over (see takeOverFetch).
	fto foQueryTimeout
}

// foResolver is the caching resolver on one node (the clients standing on
// the node use it).
type foResolver struct {
	cache []foResEntry // by partition, allocated on first use
}

// foDNSStats counts what the DNS path did.
type foDNSStats struct {
	Queries       uint64 `json:"queries"`
	ResolverHits  uint64 `json:"resolver_hits"`
	StaleServed   uint64 `json:"stale_served"`
	Fetches       uint64 `json:"fetches"`
	RefusedOlder  uint64 `json:"answers_refused_older"`
	ClientTimeout uint64 `json:"client_timeouts"`
}

type foDNS struct {
	fw         *foWorld
	ttl, stale time.Duration
	pubs       []*txtdns.Publisher
	pubMissed  []bool // a feed was lost while the publisher was down
	res        []foResolver
	routers    []*routing.Router
	msgs       []foDNSMsg
	free       []int32
	stats      foDNSStats
	// epochSeen is the newest epoch each router has cached per partition:
	// the check that no answer ever moves a client back.
	epochSeen [][]uint64
	// runs caches decoded records by the record's first string: every
	// client's answer used to decode its record again, while a publisher
	// encodes each record once into a fresh slice it never writes to
	// after (txtdns block.finish), so the slice's first element names the
	// content. The key pins the record, so an address is never reused
	// while cached. Cleared when full.
	runs map[foRecKey]foDecoded
	// qto is each client's pending query timeout (by client index): an
	// answer due before it takes its event over (see takeOver).
	qto []foQueryTimeout
}

// foQueryTimeout is a client's query timeout event, due at at, whose
// message is in msgs[slot].
type foQueryTimeout struct {
	ev   EventID
	at   time.Duration
	slot int32
}

// foRecKey names a record by its first string's address and its length.
type foRecKey struct {
	first *string
	n     int
}

// foDecoded is a record's decoding.
type foDecoded struct {
	run txtdns.Run
	err error
}

// foDNSRunCache bounds foDNS.runs.
const foDNSRunCache = 1 << 15

// decodeRun is txtdns.DecodeRun(rec), cached.
func (d *foDNS) decodeRun(rec []string) (txtdns.Run, error) {
	if len(rec) == 0 {
		return txtdns.DecodeRun(rec)
	}
	k := foRecKey{&rec[0], len(rec)}
	if x, ok := d.runs[k]; ok {
		return x.run, x.err
	}
	run, err := txtdns.DecodeRun(rec)
	if d.runs == nil || len(d.runs) >= foDNSRunCache {
		d.runs = make(map[foRecKey]foDecoded)
	}
	d.runs[k] = foDecoded{run: run, err: err}
	return run, err
}

func newFoDNS(fw *foWorld, ttl, stale time.Duration) (*foDNS, error) {
	if ttl == 0 {
		ttl = DefaultDNSTTL
	}
	if ttl < time.Second || ttl > txtdns.MaxTTL || ttl%time.Second != 0 {
		return nil, fmt.Errorf("%w: DNSTTL %v: whole seconds in [1s, %v]", ErrConfig, ttl, txtdns.MaxTTL)
	}
	if stale == 0 {
		stale = DefaultDNSStale
	}
	if stale < 0 || stale > foDNSMaxStale {
		return nil, fmt.Errorf("%w: DNSStale %v: in [0, %v]", ErrConfig, stale, foDNSMaxStale)
	}
	d := &foDNS{fw: fw, ttl: ttl, stale: stale}
	nr := len(fw.regions)
	for r := 0; r < nr; r++ {
		pub, err := txtdns.NewPublisher(txtdns.PublisherConfig{Zone: foDNSZone, TTL: ttl, MaxPartitions: len(fw.parts) + 1, Clock: foClock{fw}})
		if err != nil {
			return nil, fmt.Errorf("sim: dns publisher: %w", err)
		}
		d.pubs = append(d.pubs, pub)
		// Routers and publishers number partitions by partition.ID (from
		// 1), as the data plane's redirects do.
		// One breaker per (partition, region) pair may be open at once in
		// a region outage: the default bound (65,536) is below that with
		// 100k partitions.
		rt, err := routing.NewRouter(routing.RouterConfig{Partitions: uint32(len(fw.parts)) + 1, Rand: fw.rng, NoPollWait: fw.spec.noPollWait,
			Breaker: routing.BreakerConfig{MaxBreakers: max(65536, len(fw.parts)*nr)}})
		if err != nil {
			return nil, fmt.Errorf("sim: router: %w", err)
		}
		d.routers = append(d.routers, rt)
		d.epochSeen = append(d.epochSeen, make([]uint64, len(fw.parts)))
	}
	d.pubMissed = make([]bool, nr)
	d.res = make([]foResolver, len(fw.nodes))
	return d, nil
}

// rp is partition i's number in DNS and in the routers: its partition.ID.
func (fw *foWorld) rp(i int) uint32 { return uint32(fw.parts[i].id) }

// routes ships the routes a node learned (its register watch: its own
// commits and reads, and its peers' learns) to the publisher of its
// region, on the region's first node.
func (d *foDNS) routes(n *foNode, rs []txtdns.Route) {
	if d == nil || len(rs) == 0 {
		return
	}
	r := d.fw.regionIndex(n.region)
	if r < 0 {
		return // the witness publishes nothing
	}
	for _, rt := range rs {
		i := int(rt.Partition) - 1
		if i < 0 || i >= len(d.fw.parts) {
			continue
		}
		rt.CommittedAt = foTime(d.fw.now())
		d.send(n.idx, int32(r), foDNSMsg{kind: dnsFeed, pub: r, part: i, client: -1, route: rt})
	}
}

// send carries a DNS message between nodes (lost if either end is down
// or the link is cut); a message to the same node takes a loopback hop.
func (d *foDNS) send(from, to int32, m foDNSMsg) {
	w := d.fw.e.w
	if !w.Live(from) || !w.Live(to) || w.Links.Cut(from, to) {
		if m.kind == dnsFeed {
			d.pubMissed[m.pub] = true
		}
		return
	}
	delay := d.fw.oneWay(from, to)
	if q := d.timeoutOf(m); q != nil && d.takeOver(q, delay, m) {
		return
	}
	d.after(delay, m)
}

// timeoutOf returns the pending timeout an answer m would end: a client's
// query timeout for a DNS answer, a resolver entry's fetch timeout for a
// publisher's answer (nil for other messages).
func (d *foDNS) timeoutOf(m foDNSMsg) *foQueryTimeout {
	switch {
	case m.kind == dnsAnswer && m.client >= 0 && int(m.client) < len(d.qto):
		return &d.qto[m.client]
	case m.kind == dnsFetchBack:
		return &d.entry(m.res, m.part).fto
	}
	return nil
}

// endsTimeout reports whether answer m ends timeout t: the client's query
// of the same tag, or a fetch of the same resolver entry (once any answer
// for the entry arrives, resolverFetched clears refreshing, and every
// fetch timeout of the entry pending then would do nothing: a newer fetch
// bumps fetchGen, which they no longer match).
func (t *foDNSMsg) endsTimeout(m *foDNSMsg) bool {
	switch m.kind {
	case dnsAnswer:
		return t.kind == dnsClientTimeout && t.client == m.client && t.tag == m.tag
	case dnsFetchBack:
		return t.kind == dnsFetchTimeout && t.res == m.res && t.part == m.part
	}
	return false
}

// takeOver moves the pending timeout q to answer m when the answer is due
// first: the timeout would then find its query answered and do nothing,
// one stale event per query. Rescheduling takes a new sequence number as
// scheduling would, so the order is the same.
func (d *foDNS) takeOver(q *foQueryTimeout, delay time.Duration, m foDNSMsg) bool {
	w := d.fw.e.w
	at := w.Now() + delay
	if at >= q.at || !w.Sched.Pending(q.ev) {
		return false
	}
	t := &d.msgs[q.slot]
	if !t.endsTimeout(&m) {
		return false
	}
	*t = m
	w.Sched.Reschedule(q.ev, at, NoNode, foDNSH{d}, uint64(q.slot))
	*q = foQueryTimeout{}
	return true
}

// after schedules m after delay; it returns the event and m's slot (slot
// -1 when too many messages are pending: m is dropped).
func (d *foDNS) after(delay time.Duration, m foDNSMsg) (EventID, int32) {
	if len(d.msgs)-len(d.free) >= foDNSMaxPending {
		return EventID{}, -1
	}
	var slot int32
	if n := len(d.free); n > 0 {
		slot = d.free[n-1]
		d.free = d.free[:n-1]
		d.msgs[slot] = m
	} else {
		slot = int32(len(d.msgs))
		d.msgs = append(d.msgs, m)
	}
	return d.fw.e.w.Sched.After(delay, NoNode, foDNSH{d}, uint64(slot)), slot
}

type foDNSH struct{ d *foDNS }

func (h foDNSH) Fire(now time.Duration, arg uint64) {
	d := h.d
	m := d.msgs[arg]
	d.msgs[arg] = foDNSMsg{}
	d.free = append(d.free, int32(arg))
	switch m.kind {
	case dnsFeed:
		if d.pubLive(m.pub) {
			d.apply(m.pub, m.route)
		} else {
			d.pubMissed[m.pub] = true
		}
	case dnsQuery:
		d.resolverQuery(m)
	case dnsFetch:
		if !d.pubLive(m.pub) {
			return // the resolver's fetch timeout moves on
		}
		m.ans, m.err = d.pubs[m.pub].LookupTXT(txtdns.PartitionName(foDNSZone, d.fw.rp(m.part)))
		m.kind = dnsFetchBack
		d.send(int32(m.pub), m.res, m)
	case dnsFetchBack:
		d.resolverFetched(m)
	case dnsFetchTimeout:
		if e := d.entry(m.res, m.part); e.refreshing && e.fetchGen == m.tag {
			d.fetch(m, m.tries+1)
		}
	case dnsAnswer:
		d.fw.clientDNSAnswer(m)
	case dnsClientTimeout:
		d.fw.clientDNSTimeout(m)
	}
}

// pubLive reports whether region r's publisher runs; one that comes back
// after missing updates first catches up from what the nodes of its region
// know (as a publisher resubscribing to its local nodes' watch would).
func (d *foDNS) pubLive(r int) bool {
	if !d.fw.e.w.Live(int32(r)) {
		return false
	}
	if d.pubMissed[r] {
		d.pubMissed[r] = false
		for _, n := range d.fw.nodes {
			if n.mgr == nil || d.fw.regionIndex(n.region) != r {
				continue
			}
			for i := range d.fw.parts {
				if st, _, ok := n.mgr.State(d.fw.parts[i].name); ok {
					rt := node.RouteOf(d.fw.parts[i].id, st, 0)
					rt.CommittedAt = foTime(d.fw.now())
					d.apply(r, rt)
				}
			}
		}
	}
	return true
}

func (d *foDNS) apply(r int, rt txtdns.Route) {
	if _, err := d.pubs[r].Apply(rt); err != nil {
		d.fw.e.viol.add(d.fw.now(), ViolationProtocol, "dns publisher %d: partition %d: %v", r, rt.Partition, err)
	}
}

// query sends client c's lookup of its partition to its region's resolver.
func (d *foDNS) query(c *foClient) {
	d.stats.Queries++
	m := foDNSMsg{kind: dnsQuery, res: c.node, part: c.part, client: int32(c.idx), tag: c.attempt}
	d.send(c.node, c.node, m)
	ev, slot := d.after(foDNSTimeout, foDNSMsg{kind: dnsClientTimeout, client: int32(c.idx), tag: c.attempt})
	if d.qto == nil {
		d.qto = make([]foQueryTimeout, len(d.fw.clients))
	}
	if slot >= 0 && c.idx < len(d.qto) {
		d.qto[c.idx] = foQueryTimeout{ev: ev, at: d.fw.now() + foDNSTimeout, slot: slot}
	}
}

// resolverQuery answers from the cache while fresh, or stale within the
// serve-stale window (refreshing in the background), else fetches.
func (d *foDNS) resolverQuery(m foDNSMsg) {
	now := d.fw.now()
	e := d.entry(m.res, m.part)
	fresh := e.have && now < e.expires
	if fresh || e.have && now < e.expires+d.stale {
		if fresh {
			d.stats.ResolverHits++
		} else {
			d.stats.StaleServed++
			if !e.refreshing {
				d.fetch(foDNSMsg{res: m.res, part: m.part, client: -1}, 0)
			}
		}
		a := m
		a.kind, a.ans, a.err = dnsAnswer, e.ans, nil
		a.ans.TTL = max(time.Second, e.expires-now)
		d.send(m.res, d.fw.clients[m.client].node, a)
		return
	}
	d.fetch(m, 0)
}

// entry is resolver node's cache entry of partition i.
func (d *foDNS) entry(node int32, i int) *foResEntry {
	res := &d.res[node]
	if res.cache == nil {
		res.cache = make([]foResEntry, len(d.fw.parts))
	}
	return &res.cache[i]
}

// fetch asks the publishers, the resolver's own region first, then the
// others in order, each within foDNSTimeout.
func (d *foDNS) fetch(m foDNSMsg, try int) {
	nr := len(d.pubs)
	e := d.entry(m.res, m.part)
	if try >= nr {
		e.refreshing = false
		return // every publisher failed: the client's query times out
	}
	d.stats.Fetches++
	e.fetchGen++
	e.refreshing = true
	home := max(0, d.fw.e.w.Nodes[m.res].Region) % nr
	m.kind, m.pub, m.tries = dnsFetch, (home+try)%nr, try
	d.send(m.res, int32(m.pub), m)
	t := m
	t.kind, t.tag = dnsFetchTimeout, e.fetchGen
	if ev, slot := d.after(foDNSTimeout, t); slot >= 0 {
		e.fto = foQueryTimeout{ev: ev, at: d.fw.now() + foDNSTimeout, slot: slot}
	}
}

func (d *foDNS) resolverFetched(m foDNSMsg) {
	now := d.fw.now()
	e := d.entry(m.res, m.part)
	e.refreshing = false
	if m.err == nil {
		// A resolver caches what it is told, newer or not.
		e.ans, e.expires, e.have = m.ans, now+m.ans.TTL, true
	}
	if m.client >= 0 {
		m.kind = dnsAnswer
		d.send(m.res, d.fw.clients[m.client].node, m)
	}
}

// offer hands a DNS answer to router r for partition i and checks that no
// answer moves the router's route back to an older epoch. It returns the
// route now in force (nil if the answer held none).
func (d *foDNS) offer(r, i int, ans txtdns.TXTAnswer, err error) (*routing.Entry, error) {
	fw := d.fw
	rt := d.routers[r]
	now := foTime(fw.now())
	if err != nil {
		return nil, fmt.Errorf("sim: resolve partition %d: %w", i, err)
	}
	p := fw.rp(i)
	for _, rec := range ans.Records {
		run, err := d.decodeRun(rec)
		if err != nil || !run.Contains(p) {
			continue
		}
		if rt.OfferRun(run, ans.TTL, now, p) == routing.RejectedOlder {
			d.stats.RefusedOlder++
		}
		d.checkEpochs(r, run)
		if e, ok := rt.Cache().Get(p); ok {
			return e, nil
		}
	}
	return nil, fmt.Errorf("sim: no route for partition %d: %w", i, routing.ErrBadAnswer)
}

// checkEpochs asserts the routes of a run's partitions never went back.
func (d *foDNS) checkEpochs(r int, run txtdns.Run) {
	rt := d.routers[r]
	hi := min(int(run.Hi), len(d.epochSeen[r]))
	for q := max(int(run.Lo), 1); q <= hi; q++ { // partition.ID q is partition q-1
		if e, ok := rt.Cache().Get(uint32(q)); ok {
			d.noteEpoch(r, q-1, e.Epoch)
		}
	}
}

func (d *foDNS) noteEpoch(r, i int, epoch uint64) {
	if epoch < d.epochSeen[r][i] {
		d.fw.e.viol.add(d.fw.now(), ViolationInvariant, "region %s clients moved partition %s back from epoch %d to %d",
			d.fw.regions[r], d.fw.parts[i].name, d.epochSeen[r][i], epoch)
	}
	d.epochSeen[r][i] = max(d.epochSeen[r][i], epoch)
}
