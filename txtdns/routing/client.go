package routing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fmnode/fmnode/txtdns"
)

// Client defaults.
const (
	DefaultMaxAttempts        = 5
	DefaultMaxRedirects       = 3
	DefaultBackoffBase        = 100 * time.Millisecond
	DefaultBackoffMax         = 2 * time.Second
	DefaultMinTTL             = time.Second
	DefaultMaxTTL             = 30 * time.Second
	DefaultRedirectTTL        = 5 * time.Second
	DefaultMaxStale           = 5 * time.Minute
	DefaultMinRefreshInterval = 250 * time.Millisecond
	DefaultMaxRunOffer        = 4096
	maxCachedRegions          = 64
)

// Config configures a Client. Zone and Resolver are required, and one of
// Partitioner or PartitionCount.
type Config struct {
	// Zone is the DNS zone the publisher serves.
	Zone string
	// Resolver looks up TXT records: a DNSResolver, or an in-memory twin.
	Resolver TXTResolver
	// Partitioner maps keys to partitions; if nil, a HashPartitioner over
	// PartitionCount partitions.
	Partitioner    Partitioner
	PartitionCount uint32
	// PreferredRegions are the regions reads should use first, nearest
	// first (usually the application's own region).
	PreferredRegions []string

	// MaxAttempts bounds the failed attempts of one operation. Default 5.
	MaxAttempts int
	// MaxRedirects bounds the redirects followed by one operation. Default 3.
	MaxRedirects int
	// BackoffBase and BackoffMax shape the wait after a failed attempt.
	// Defaults 100 ms and 2 s.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// RedirectPoll caps the wait after a redirect that tells nothing new
	// (a live replica still names the write region that failed): the
	// client polls live replicas at most this far apart until one knows
	// the new epoch. Default 500 ms.
	RedirectPoll time.Duration
	// PollWait is how long a poll asks the live replica to hold it until
	// the partition's route moves (RouterConfig.PollWait). Default 1 s;
	// NoPollWait turns it off.
	PollWait   time.Duration
	NoPollWait bool
	// AttemptTimeout, if set, bounds each call of the operation (a held
	// poll's by AttemptTimeout + PollWait).
	AttemptTimeout time.Duration
	// NoPollSharing makes every operation Exec runs send its own polls
	// while a failover is pending. By default concurrent operations of
	// one partition share them (one poll per 3/4 RedirectPoll, see
	// Target.Poll).
	NoPollSharing bool

	// MinTTL and MaxTTL clamp the TTL of DNS answers. Defaults 1 s, 30 s.
	MinTTL time.Duration
	MaxTTL time.Duration
	// RedirectTTL is how long a route learnt from a redirect is trusted
	// before a DNS refresh. Default 5 s.
	RedirectTTL time.Duration
	// MaxStale is how long past expiry a cached route is still used when
	// DNS fails. Default 5 min.
	MaxStale time.Duration
	// MinRefreshInterval spaces the DNS refreshes forced by failures for
	// one partition. Default 250 ms.
	MinRefreshInterval time.Duration
	// MaxRunOffer bounds the partitions one run record may fill in the
	// cache; longer runs fill only the partition asked. Default 4096.
	// (The cache itself is bounded by the partition count.)
	MaxRunOffer int

	// Breaker configures the per partition-region circuit breakers.
	Breaker BreakerConfig

	// Retryable, if set, classifies operation errors that are neither
	// redirects, stale reads nor Permanent: false returns them at once.
	// By default every other error is retried.
	Retryable func(error) bool
	// IsStaleRead, if set, also classifies errors as stale reads (for a
	// data plane that reports them with sentinels rather than the
	// StaleRead interface).
	IsStaleRead func(error) bool

	// Clock is the time source (default txtdns.SystemClock); Rand the
	// jitter source (default NewRand(Seed), Seed default from the clock).
	Clock txtdns.Clock
	Rand  Rand
	Seed  uint64

	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

func (c *Config) setDefaults() error {
	z, err := txtdns.CanonicalZone(c.Zone)
	if err != nil {
		return configErr("Zone", "%v", err)
	}
	c.Zone = z
	if c.Resolver == nil {
		return configErr("Resolver", "required")
	}
	if c.Partitioner == nil {
		hp, err := NewHashPartitioner(c.PartitionCount)
		if err != nil {
			return configErr("PartitionCount", "must be at least 1 when Partitioner is nil")
		}
		c.Partitioner = hp
	}
	if c.AttemptTimeout < 0 || c.AttemptTimeout > time.Hour {
		return configErr("AttemptTimeout", "%v: must be in [0, 1h]", c.AttemptTimeout)
	}
	if c.Clock == nil {
		c.Clock = txtdns.SystemClock{}
	}
	if c.Rand == nil {
		if c.Seed == 0 {
			c.Seed = uint64(c.Clock.Now().UnixNano())
		}
		c.Rand = NewRand(c.Seed)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	rc := c.routerConfig()
	if err := rc.setDefaults(); err != nil {
		return err
	}
	c.MaxAttempts, c.MaxRedirects, c.MaxRunOffer = rc.MaxAttempts, rc.MaxRedirects, rc.MaxRunOffer
	c.BackoffBase, c.BackoffMax, c.RedirectPoll, c.PollWait = rc.BackoffBase, rc.BackoffMax, rc.RedirectPoll, rc.PollWait
	c.MinTTL, c.MaxTTL, c.RedirectTTL = rc.MinTTL, rc.MaxTTL, rc.RedirectTTL
	c.MaxStale, c.MinRefreshInterval, c.Breaker = rc.MaxStale, rc.MinRefreshInterval, rc.Breaker
	return nil
}

// routerConfig is the part of the configuration the Router applies.
func (c *Config) routerConfig() RouterConfig {
	return RouterConfig{
		Partitions: c.Partitioner.Partitions(), PreferredRegions: c.PreferredRegions,
		MaxAttempts: c.MaxAttempts, MaxRedirects: c.MaxRedirects,
		BackoffBase: c.BackoffBase, BackoffMax: c.BackoffMax, RedirectPoll: c.RedirectPoll,
		PollWait: c.PollWait, NoPollWait: c.NoPollWait,
		MinTTL: c.MinTTL, MaxTTL: c.MaxTTL, RedirectTTL: c.RedirectTTL, MaxStale: c.MaxStale,
		MinRefreshInterval: c.MinRefreshInterval, MaxRunOffer: c.MaxRunOffer, Breaker: c.Breaker,
		Retryable: c.Retryable, IsStaleRead: c.IsStaleRead, Rand: c.Rand,
	}
}

// Target is where one attempt of an operation goes.
type Target struct {
	Partition uint32
	Region    string
	// Endpoint is the region's endpoint chosen for the partition;
	// Endpoints are all of them (shared, read-only).
	Endpoint  string
	Endpoints []string
	// Epoch is the partition's epoch as the client knows it; send it with
	// the request so a replica with a newer epoch fences it and redirects.
	Epoch uint64
	Write bool
	// Consistency, Session and MaxStaleness describe a read.
	Consistency  Consistency
	Session      SessionToken
	MaxStaleness time.Duration
	// Attempt counts from 1.
	Attempt int
	// Timeout, if non-zero, is how long this attempt may take: a quick
	// half-open probe of a region whose failover is pending (see
	// BreakerConfig.ProbeDeadline). Exec bounds the attempt's context
	// with it; an Op driven by hand should too.
	Timeout time.Duration
	// Poll: the attempt asks a live region whether the partition's
	// pending failover committed (Decision.Poll). Exec shares such polls
	// among the concurrent operations of the partition.
	Poll bool
	// PollWait, on a Poll, is how long the replica may hold it until the
	// route moves (Decision.PollWait): send it with the request.
	PollWait time.Duration
}

// Op performs one attempt of an operation at t. It returns the session
// token the data plane reported (zero if none) and an error: nil, a
// Redirect, a StaleRead, a Permanent error, or any other (retried).
type Op func(ctx context.Context, t Target) (SessionToken, error)

// Client routes an application's operations to the write region (or a
// suitable read region) of each partition. It caches routes from DNS TXT
// records without ever moving a partition to an older epoch, follows the
// data plane's redirects at once, retries across regions in priority order
// with bounded attempts and backoff, and keeps a circuit breaker per
// partition and region. Safe for concurrent use; it starts no goroutines.
type Client struct {
	cfg      Config
	zone     string
	res      TXTResolver
	part     Partitioner
	clock    txtdns.Clock
	router   *Router
	cache    *Cache
	breakers *Breakers
	log      *slog.Logger
	m        *clientMetrics

	// regions is an immutable snapshot (copy on write under regionMu):
	// lookups scan it without locking.
	regionMu sync.Mutex
	regions  atomic.Pointer[[]regionRec]

	// names interns region names, so the hot path compares them by
	// pointer (bounded: names beyond maxInterned are used as they come).
	namesMu sync.Mutex
	names   map[string]string

	pflight *flight[uint32, *Entry]
	rflight *flight[string, txtdns.RegionInfo]
	polls   *pollBoard
}

type regionRec struct {
	info    txtdns.RegionInfo
	expires time.Time
}

// New validates cfg and returns a client with an empty cache.
func New(cfg Config) (*Client, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	c := &Client{
		zone:    cfg.Zone,
		res:     cfg.Resolver,
		part:    cfg.Partitioner,
		clock:   cfg.Clock,
		log:     cfg.Logger,
		m:       newClientMetrics(cfg.Registerer),
		names:   make(map[string]string),
		pflight: newFlight[uint32, *Entry](),
		rflight: newFlight[string, txtdns.RegionInfo](),
	}
	userHook := cfg.Breaker.OnTransition
	cfg.Breaker.OnTransition = func(p uint32, region string, from, to BreakerState) {
		c.m.transitions[to].Inc()
		if from != Closed {
			c.m.breakers[from].Dec()
		}
		if to != Closed {
			c.m.breakers[to].Inc()
		}
		c.log.Debug("breaker", "partition", p, "region", region, "from", from.String(), "to", to.String())
		if userHook != nil {
			userHook(p, region, from, to)
		}
	}
	rc := cfg.routerConfig()
	rc.Observer = c.m
	router, err := NewRouter(rc)
	if err != nil {
		return nil, err
	}
	c.router, c.cache, c.breakers = router, router.Cache(), router.Breakers()
	c.polls = newPollBoard(router.Config().RedirectPoll * 3 / 4)
	c.cfg = cfg
	return c, nil
}

// Partition returns the partition of key.
func (c *Client) Partition(key string) uint32 { return c.part.Partition(key) }

// Cache exposes the route cache (read it; offers go through the client).
func (c *Client) Cache() *Cache { return c.cache }

// Breakers exposes the circuit breakers.
func (c *Client) Breakers() *Breakers { return c.breakers }

// Router exposes the routing core the client drives.
func (c *Client) Router() *Router { return c.router }

// Route returns the route of key's partition, from the cache when fresh.
func (c *Client) Route(ctx context.Context, key string) (Entry, error) {
	e, err := c.route(ctx, c.part.Partition(key), false)
	if err != nil {
		return Entry{}, err
	}
	return *e, nil
}

// WriteEndpoint returns where a write of key goes now: the partition's
// write region and one of its endpoints. With a warm cache it allocates
// nothing and does no I/O.
func (c *Client) WriteEndpoint(ctx context.Context, key string) (Target, error) {
	p := c.part.Partition(key)
	now := c.clock.Now()
	e, ok := c.cache.Get(p)
	if ok && e.Fresh(now) {
		c.m.hits.inc(p)
	} else {
		var err error
		if e, err = c.route(ctx, p, false); err != nil {
			return Target{}, err
		}
	}
	return c.target(ctx, p, e, e.WriteRegion, Request{Write: true}, 1, now)
}

// ObserveRedirect applies a redirect the application got outside Do (for
// example after calling WriteEndpoint itself). It reports whether err is a
// Redirect that moved the cached route.
func (c *Client) ObserveRedirect(err error) bool {
	var rd Redirect
	if !errors.As(err, &rd) {
		return false
	}
	p, epoch, region := rd.RedirectTo()
	return c.router.Redirect(p, epoch, c.intern(region), c.clock.Now()).Accepted()
}

// Do runs a write of key: op is called with the partition's write region,
// following redirects and retrying as Exec describes.
func (c *Client) Do(ctx context.Context, key string, op Op) error {
	return c.Exec(ctx, key, Request{Write: true}, op)
}

// Read runs a read of key at the given consistency.
func (c *Client) Read(ctx context.Context, key string, o ReadOptions, op Op) error {
	return c.Exec(ctx, key, Request{Consistency: o.Consistency, Session: o.Session, MaxStaleness: o.MaxStaleness}, op)
}

// Exec runs op for key's partition until it succeeds or fails for good:
//
//   - success: the region's breaker closes; the returned session token is
//     merged into req.Session;
//   - a Redirect to a newer epoch: the cache moves at once and the next
//     attempt goes to the new write region without waiting (at most
//     MaxRedirects times); a redirect that tells nothing new counts as a
//     failed attempt and waits at most RedirectPoll;
//   - a StaleRead: the next candidate region is tried at once;
//   - a Permanent error (or one Retryable rejects), or the end of ctx:
//     returned as is;
//   - any other error: a breaker failure for the region, a forced DNS
//     refresh, a backoff, and the next attempt goes to the next candidate
//     region (Candidates) whose breaker allows it.
//
// After MaxAttempts failed attempts it returns an *ExhaustedError.
func (c *Client) Exec(ctx context.Context, key string, req Request, op Op) error {
	if op == nil {
		return errors.New("routing: nil op")
	}
	call := c.NewCall(key, req)
	polling := false
	defer func() {
		if polling {
			c.polls.leave(call.Partition())
		}
	}()
	for {
		st := call.Next(ctx)
		if st.Done {
			return st.Err
		}
		if st.Target.Poll && !polling && !c.cfg.NoPollSharing {
			polling = true
			c.polls.enter(call.Partition())
		}
		if st.Wait > 0 {
			if err := c.clock.Sleep(ctx, st.Wait); err != nil {
				return err
			}
			continue
		}
		tok, opErr := c.attempt(ctx, op, st.Target)
		wait, done, err := call.Report(ctx, tok, opErr)
		if done {
			return err
		}
		if wait > 0 {
			if err := c.clock.Sleep(ctx, wait); err != nil {
				return err
			}
		}
	}
}

// Step is what Call.Next asks of its driver.
type Step struct {
	// Target is where to send the next attempt (unless Wait or Done).
	Target Target
	// Wait > 0: wait this long, then call Next again.
	Wait time.Duration
	// Done: the operation is over; Err is its result (nil: it succeeded).
	Done bool
	Err  error
}

// Call is the routing state of one operation as the Client drives it: the
// router's Operation plus the I/O it asks for (DNS resolutions and region
// endpoints through the client's resolver). Next says where the next
// attempt goes (or how long to wait, or that the operation is over);
// Report feeds back the attempt's result and says how long to back off
// and whether the operation is over. It starts no goroutines, never
// sleeps and reads time only through the client's clock. Exec drives a
// Call with sleeps; a driver with its own event loop (the simulator)
// drives a Router's Operation directly. A Call is not safe for concurrent
// use.
type Call struct {
	c   *Client
	req Request
	op  Operation
}

// NewCall starts routing one operation of key.
func (c *Client) NewCall(key string, req Request) *Call {
	return &Call{c: c, req: req, op: c.router.Begin(c.part.Partition(key), req)}
}

// Partition returns the operation's partition.
func (call *Call) Partition() uint32 { return call.op.Partition() }

// Next returns the next step. ctx bounds a DNS resolution it may need.
func (call *Call) Next(ctx context.Context) Step {
	c, p := call.c, call.op.Partition()
	if done, err := call.op.Finished(); done {
		return Step{Done: true, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return stepOf(call.op.Cancel(err))
	}
	d := call.op.Next(c.clock.Now())
	// At most three rounds: a resolution, then a send that may fail.
	for range 3 {
		switch d.Action {
		case ActResolve:
			e, err := c.pflight.do(ctx, p, c.resolvePartition)
			if ctx.Err() != nil {
				return stepOf(call.op.Cancel(ctx.Err()))
			}
			d = call.op.Resolved(c.clock.Now(), e, err)
		case ActSend:
			now := c.clock.Now()
			t, err := c.target(ctx, p, d.Entry, d.Region, call.req, d.Attempt, now)
			if err == nil {
				t.Timeout, t.Poll, t.PollWait = d.Timeout, d.Poll, d.PollWait
				return Step{Target: t}
			}
			if ctx.Err() != nil {
				return stepOf(call.op.Cancel(ctx.Err()))
			}
			d = call.op.Unsent(now, err)
		default:
			return stepOf(d)
		}
	}
	return stepOf(call.op.Cancel(errors.New("routing: Call.Next did not settle")))
}

func stepOf(d Decision) Step {
	if d.Action == ActDone {
		return Step{Done: true, Err: d.Err}
	}
	return Step{Wait: d.Wait}
}

// Report feeds back the result of the attempt Next returned: the session
// token the data plane reported and the error. It returns how long to wait
// before the next Next, or done with the operation's final error (nil on
// success). ctx is the operation's context (its end is not a region's
// failure).
//
//   - success: the region's breaker closes; the token joins req.Session;
//     a write's token of a newer epoch than the route's moves the route
//     to the region that acknowledged it (Operation.Acked);
//   - a Redirect to a newer epoch: the cache moves at once and the next
//     attempt goes to the new write region without waiting (at most
//     MaxRedirects times); a redirect that tells nothing new counts as a
//     failed attempt and waits at most RedirectPoll;
//   - a StaleRead: the next candidate region at once (a backoff once all
//     were tried);
//   - a Permanent error (or one Retryable rejects), or the end of ctx: done;
//   - any other error: a breaker failure for the region, a forced DNS
//     refresh, a backoff, and the next candidate region.
func (call *Call) Report(ctx context.Context, tok SessionToken, opErr error) (wait time.Duration, done bool, err error) {
	c := call.c
	if fin, err := call.op.Finished(); fin {
		return 0, true, err
	}
	if cls := c.router.Classify(opErr); ctx.Err() != nil && (cls == AttemptFailure || cls == AttemptPermanent) {
		call.op.Cancel(opErr)
		return 0, true, opErr
	}
	now := c.clock.Now()
	v := call.op.Report(now, opErr)
	if v.Class == AttemptOK && v.Done && v.Err == nil {
		call.op.Acked(now, tok.Epoch)
	}
	if v.Class == AttemptOK && v.Done && v.Err == nil && call.req.Session != nil {
		if err := call.req.Session.Observe(call.op.Partition(), tok); err != nil {
			c.log.Warn("session token dropped", "partition", call.op.Partition(), "err", err)
		}
	}
	return v.Wait, v.Done, v.Err
}

// attempt is one attempt of op at t, unless t is a poll of a pending
// failover that another operation of the partition is making (or made a
// moment ago): then that poll's redirect answers this one too (pollBoard).
func (c *Client) attempt(ctx context.Context, op Op, t Target) (SessionToken, error) {
	if !t.Poll || c.cfg.NoPollSharing {
		return c.call(ctx, op, t)
	}
	slot, ans := c.polls.join(ctx, c.clock, t)
	if slot == nil {
		c.m.pollsShared.Inc()
		return SessionToken{}, ans
	}
	err := errPollAbandoned // if op panics, the waiters poll themselves
	defer func() { c.polls.answered(t, slot, err) }()
	var tok SessionToken
	tok, err = c.call(ctx, op, t)
	return tok, err
}

var errPollAbandoned = errors.New("routing: poll abandoned")

func (c *Client) call(ctx context.Context, op Op, t Target) (SessionToken, error) {
	timeout := c.cfg.AttemptTimeout
	if timeout > 0 {
		timeout += t.PollWait
	}
	if t.Timeout > 0 && (timeout <= 0 || t.Timeout < timeout) {
		timeout = t.Timeout
	}
	if timeout <= 0 {
		return op(ctx, t)
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return op(actx, t)
}

// route returns partition p's route: from the cache if fresh (and not
// forced), else from DNS; if DNS fails, a cached route up to MaxStale past
// its expiry.
func (c *Client) route(ctx context.Context, p uint32, force bool) (*Entry, error) {
	now := c.clock.Now()
	if e, ok := c.router.Lookup(p, force, now); ok {
		return e, nil
	}
	fresh, err := c.pflight.do(ctx, p, c.resolvePartition)
	if err == nil {
		return fresh, nil
	}
	e, err := c.router.Fallback(p, err, now)
	if err == nil {
		c.log.Debug("serving stale route", "partition", p)
	}
	return e, err
}

func (c *Client) resolvePartition(ctx context.Context, p uint32) (*Entry, error) {
	name := txtdns.PartitionName(c.zone, p)
	res, err := c.res.LookupTXT(ctx, name)
	if err != nil {
		if errors.Is(err, txtdns.ErrNXDomain) {
			c.m.resolves[kindPartition][resolveNXDomain].Inc()
			// A stale resolver may not know a new partition: never forget one.
			if e, ok := c.cache.Get(p); ok {
				return e, nil
			}
			return nil, fmt.Errorf("%w: %d: %w", ErrUnknownPartition, p, err)
		}
		c.m.resolves[kindPartition][resolveError].Inc()
		return nil, fmt.Errorf("routing: resolve partition %d: %w", p, err)
	}
	now := c.clock.Now()
	for _, rec := range res.Records {
		run, err := txtdns.DecodeRun(rec)
		if err != nil {
			c.m.resolves[kindPartition][resolveBadRecord].Inc()
			c.log.Debug("bad partition record", "partition", p, "err", err)
			continue
		}
		if !run.Contains(p) {
			continue
		}
		c.m.resolves[kindPartition][resolveOK].Inc()
		out := c.offerRun(run, res.TTL, now, p)
		if e, ok := c.cache.Get(p); ok {
			return e, nil
		}
		if out == RejectedFull { // the cache is full: use the answer uncached
			return &Entry{Partition: p, Epoch: run.Epoch, ConfigVersion: run.ConfigVersion, WriteRegion: run.WriteRegion,
				Priority: run.Priority, Expires: now, Checked: now}, nil
		}
	}
	c.m.resolves[kindPartition][resolveBadRecord].Inc()
	return nil, fmt.Errorf("%w: %s has no valid record for partition %d", ErrBadAnswer, name, p)
}

// offerRun interns the run's region names and offers it to the router.
func (c *Client) offerRun(run txtdns.Run, ttl time.Duration, now time.Time, p uint32) Outcome {
	run.WriteRegion = c.intern(run.WriteRegion)
	for i, r := range run.Priority {
		run.Priority[i] = c.intern(r)
	}
	return c.router.OfferRun(run, ttl, now, p)
}

// target builds the Target for an attempt at region.
func (c *Client) target(ctx context.Context, p uint32, e *Entry, region string, req Request, attempt int, now time.Time) (Target, error) {
	info, err := c.region(ctx, region, now)
	if err != nil {
		return Target{}, err
	}
	t := Target{
		Partition: p,
		Region:    region,
		Endpoint:  info.Endpoints[p%uint32(len(info.Endpoints))],
		Endpoints: info.Endpoints,
		Epoch:     e.Epoch,
		Write:     req.Write,
		Attempt:   attempt,
	}
	if !req.Write {
		t.Consistency, t.MaxStaleness = req.Consistency, req.MaxStaleness
		if req.Session != nil {
			t.Session = req.Session.Token(p)
		}
	}
	return t, nil
}

// region returns a region's endpoints, from the cache when fresh.
func (c *Client) region(ctx context.Context, name string, now time.Time) (txtdns.RegionInfo, error) {
	rec, ok := c.cachedRegion(name)
	if ok && now.Before(rec.expires) {
		return rec.info, nil
	}
	info, err := c.rflight.do(ctx, name, c.resolveRegion)
	if err == nil {
		return info, nil
	}
	if ok && !errors.Is(err, ErrNoEndpoint) && now.Before(rec.expires.Add(c.cfg.MaxStale)) {
		return rec.info, nil
	}
	return txtdns.RegionInfo{}, err
}

func (c *Client) resolveRegion(ctx context.Context, name string) (txtdns.RegionInfo, error) {
	qname := txtdns.RegionName(c.zone, name)
	res, err := c.res.LookupTXT(ctx, qname)
	if err != nil {
		if errors.Is(err, txtdns.ErrNXDomain) {
			c.m.resolves[kindRegion][resolveNXDomain].Inc()
			return txtdns.RegionInfo{}, fmt.Errorf("%w: %s: %w", ErrNoEndpoint, name, err)
		}
		c.m.resolves[kindRegion][resolveError].Inc()
		return txtdns.RegionInfo{}, fmt.Errorf("routing: resolve region %s: %w", name, err)
	}
	now := c.clock.Now()
	for _, rec := range res.Records {
		info, err := txtdns.DecodeRegion(rec)
		if err != nil || info.Region != name {
			c.m.resolves[kindRegion][resolveBadRecord].Inc()
			continue
		}
		c.m.resolves[kindRegion][resolveOK].Inc()
		info.Region = c.intern(info.Region)
		return c.offerRegion(info, res.TTL, now), nil
	}
	return txtdns.RegionInfo{}, fmt.Errorf("%w: %s has no valid region record", ErrBadAnswer, qname)
}

// offerRegion caches info unless an entry with a newer config version is
// cached; it returns the region record now in force.
func (c *Client) offerRegion(info txtdns.RegionInfo, ttl time.Duration, now time.Time) txtdns.RegionInfo {
	expires := now.Add(min(max(ttl, c.cfg.MinTTL), c.cfg.MaxTTL))
	c.regionMu.Lock()
	defer c.regionMu.Unlock()
	var cur []regionRec
	if rs := c.regions.Load(); rs != nil {
		cur = *rs
	}
	idx := slices.IndexFunc(cur, func(r regionRec) bool { return r.info.Region == info.Region })
	if idx >= 0 && cur[idx].info.ConfigVersion > info.ConfigVersion {
		info = cur[idx].info // ours is newer: keep it (and trust it for another TTL)
	}
	next := make([]regionRec, 0, len(cur)+1)
	for i, r := range cur {
		if i == idx || len(cur) >= maxCachedRegions && !now.Before(r.expires) {
			continue // replaced, or expired and evicted because the cache is full
		}
		next = append(next, r)
	}
	if len(next) >= maxCachedRegions {
		return info // full of live regions: use it uncached
	}
	next = append(next, regionRec{info: info, expires: expires})
	c.regions.Store(&next)
	return info
}

// cachedRegion scans the region snapshot; the result is shared, read-only.
func (c *Client) cachedRegion(name string) (*regionRec, bool) {
	rs := c.regions.Load()
	if rs == nil {
		return nil, false
	}
	for i := range *rs {
		if (*rs)[i].info.Region == name {
			return &(*rs)[i], true
		}
	}
	return nil, false
}

// Warm fills the cache for every partition with block look-ups (one per
// BlockSize partitions, as the zone's meta record says) and fetches every
// region record. It returns how many partitions are cached.
func (c *Client) Warm(ctx context.Context) (int, error) {
	res, err := c.res.LookupTXT(ctx, c.zone)
	if err != nil {
		c.m.resolves[kindMeta][resolveError].Inc()
		return c.cache.Len(), fmt.Errorf("routing: warm: meta record: %w", err)
	}
	var meta txtdns.Meta
	found := false
	for _, rec := range res.Records {
		if meta, err = txtdns.DecodeMeta(rec); err == nil {
			found = true
			break
		}
	}
	if !found {
		c.m.resolves[kindMeta][resolveBadRecord].Inc()
		return c.cache.Len(), fmt.Errorf("%w: no valid meta record at %s", ErrBadAnswer, c.zone)
	}
	c.m.resolves[kindMeta][resolveOK].Inc()
	var errs []error
	for _, r := range meta.Regions {
		if _, err := c.rflight.do(ctx, r, c.resolveRegion); err != nil {
			errs = append(errs, err)
		}
	}
	n := uint64(c.part.Partitions())
	blocks := (n + uint64(meta.BlockSize) - 1) / uint64(meta.BlockSize)
	for b := uint64(0); b < blocks; b++ {
		if err := ctx.Err(); err != nil {
			return c.cache.Len(), err
		}
		res, err := c.res.LookupTXT(ctx, txtdns.BlockName(c.zone, uint32(b)))
		if err != nil {
			if errors.Is(err, txtdns.ErrNXDomain) {
				c.m.resolves[kindBlock][resolveNXDomain].Inc()
				continue
			}
			c.m.resolves[kindBlock][resolveError].Inc()
			errs = append(errs, err)
			continue
		}
		now := c.clock.Now()
		bLo, bHi := b*uint64(meta.BlockSize), (b+1)*uint64(meta.BlockSize)-1
		for _, rec := range res.Records {
			run, err := txtdns.DecodeRun(rec)
			if err != nil || uint64(run.Hi) < bLo || uint64(run.Lo) > bHi {
				c.m.resolves[kindBlock][resolveBadRecord].Inc()
				continue
			}
			c.m.resolves[kindBlock][resolveOK].Inc()
			c.offerRun(run, res.TTL, now, run.Lo)
		}
	}
	return c.cache.Len(), errors.Join(errs...)
}

const maxInterned = 256

// intern returns the canonical copy of a region name.
func (c *Client) intern(s string) string {
	c.namesMu.Lock()
	defer c.namesMu.Unlock()
	if v, ok := c.names[s]; ok {
		return v
	}
	if len(c.names) < maxInterned {
		c.names[s] = s
	}
	return s
}
