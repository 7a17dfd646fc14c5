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
	// AttemptTimeout, if set, bounds each call of the operation.
	AttemptTimeout time.Duration

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
	if len(c.PreferredRegions) > txtdns.MaxRegions {
		return configErr("PreferredRegions", "%d regions, at most %d", len(c.PreferredRegions), txtdns.MaxRegions)
	}
	for _, r := range c.PreferredRegions {
		if err := txtdns.ValidateRegion(r); err != nil {
			return configErr("PreferredRegions", "%v", err)
		}
	}
	ints := []struct {
		name     string
		v        *int
		def, max int
	}{
		{"MaxAttempts", &c.MaxAttempts, DefaultMaxAttempts, 100},
		{"MaxRedirects", &c.MaxRedirects, DefaultMaxRedirects, 100},
		{"MaxRunOffer", &c.MaxRunOffer, DefaultMaxRunOffer, 1 << 16},
	}
	for _, f := range ints {
		if *f.v == 0 {
			*f.v = f.def
		}
		if *f.v < 1 || *f.v > f.max {
			return configErr(f.name, "%d: must be in [1, %d]", *f.v, f.max)
		}
	}
	durs := []struct {
		name     string
		v        *time.Duration
		def, max time.Duration
	}{
		{"BackoffBase", &c.BackoffBase, DefaultBackoffBase, time.Minute},
		{"BackoffMax", &c.BackoffMax, DefaultBackoffMax, time.Hour},
		{"MinTTL", &c.MinTTL, DefaultMinTTL, time.Hour},
		{"MaxTTL", &c.MaxTTL, DefaultMaxTTL, 24 * time.Hour},
		{"RedirectTTL", &c.RedirectTTL, DefaultRedirectTTL, time.Hour},
		{"MaxStale", &c.MaxStale, DefaultMaxStale, 24 * time.Hour},
		{"MinRefreshInterval", &c.MinRefreshInterval, DefaultMinRefreshInterval, time.Minute},
	}
	for _, f := range durs {
		if *f.v == 0 {
			*f.v = f.def
		}
		if *f.v < time.Millisecond || *f.v > f.max {
			return configErr(f.name, "%v: must be in [1ms, %v]", *f.v, f.max)
		}
	}
	if c.BackoffMax < c.BackoffBase {
		return configErr("BackoffMax", "%v is below BackoffBase %v", c.BackoffMax, c.BackoffBase)
	}
	if c.MaxTTL < c.MinTTL {
		return configErr("MaxTTL", "%v is below MinTTL %v", c.MaxTTL, c.MinTTL)
	}
	if c.AttemptTimeout < 0 || c.AttemptTimeout > time.Hour {
		return configErr("AttemptTimeout", "%v: must be in [0, 1h]", c.AttemptTimeout)
	}
	if err := c.Breaker.setDefaults(); err != nil {
		return err
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
	return nil
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
	backoff  Backoff
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
	cache, err := NewCache(cfg.Partitioner.Partitions())
	if err != nil {
		return nil, err
	}
	c := &Client{
		zone:    cfg.Zone,
		res:     cfg.Resolver,
		part:    cfg.Partitioner,
		clock:   cfg.Clock,
		backoff: Backoff{Base: cfg.BackoffBase, Max: cfg.BackoffMax, Rand: cfg.Rand},
		cache:   cache,
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
	c.breakers, err = NewBreakers(cfg.Breaker)
	if err != nil {
		return nil, err
	}
	c.cfg = cfg
	return c, nil
}

// Partition returns the partition of key.
func (c *Client) Partition(key string) uint32 { return c.part.Partition(key) }

// Cache exposes the route cache (read it; offers go through the client).
func (c *Client) Cache() *Cache { return c.cache }

// Breakers exposes the circuit breakers.
func (c *Client) Breakers() *Breakers { return c.breakers }

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
		if e, err = c.resolveRoute(ctx, p, e, ok, now); err != nil {
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
	return c.applyRedirect(p, epoch, region).Accepted()
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
//     failed attempt;
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
	for {
		st := call.Next(ctx)
		if st.Done {
			return st.Err
		}
		if st.Wait > 0 {
			if err := c.clock.Sleep(ctx, st.Wait); err != nil {
				return err
			}
			continue
		}
		tok, opErr := c.call(ctx, op, st.Target)
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

// Call is the routing state of one operation, a state machine its driver
// steps: Next says where the next attempt goes (or how long to wait, or
// that the operation failed); Report feeds back the attempt's result and
// says how long to back off and whether the operation is over. It starts
// no goroutines, never sleeps and reads time only through the client's
// clock; it does I/O only when Next must resolve a route from DNS (none with
// an in-memory resolver). Exec drives a Call with real sleeps; the
// simulator drives it from its event loop. A Call is not safe for
// concurrent use.
type Call struct {
	c         *Client
	p         uint32
	req       Request
	tried     triedSet
	candBuf   [maxCandidates]string
	attempts  int
	redirects int
	steps     int
	force     bool
	last      error
	region    string // the region of the attempt in flight
	inFlight  bool
	done      bool
	final     error
}

// NewCall starts routing one operation of key.
func (c *Client) NewCall(key string, req Request) *Call {
	return &Call{c: c, p: c.part.Partition(key), req: req}
}

// Partition returns the operation's partition.
func (call *Call) Partition() uint32 { return call.p }

// finish ends the call with err.
func (call *Call) finish(err error) Step {
	call.done, call.final = true, err
	return Step{Done: true, Err: err}
}

func (call *Call) exhausted(last error) error {
	call.c.m.exhausted.Inc()
	return &ExhaustedError{Partition: call.p, Attempts: call.attempts, Redirects: call.redirects, Last: last}
}

// fail records a failed attempt (or a failure to make one) and returns
// the backoff, or the final error when the attempts are spent.
func (call *Call) fail(err error) (time.Duration, error) {
	call.last = err
	call.attempts++
	if call.attempts >= call.c.cfg.MaxAttempts {
		return 0, call.exhausted(err)
	}
	call.c.m.retries.Inc()
	return call.c.backoff.Delay(call.attempts), nil
}

// Next returns the next step. ctx bounds a DNS resolution it may need.
func (call *Call) Next(ctx context.Context) Step {
	c := call.c
	if call.done {
		return Step{Done: true, Err: call.final}
	}
	if call.inFlight {
		return call.finish(errors.New("routing: Call.Next before Report"))
	}
	if err := ctx.Err(); err != nil {
		return call.finish(err)
	}
	// An absolute bound: every step counts an attempt, a redirect, or a
	// stale read that marks one more region tried.
	call.steps++
	if call.steps > (c.cfg.MaxAttempts+c.cfg.MaxRedirects+1)*(maxCandidates+1) {
		return call.finish(call.exhausted(call.last))
	}
	e, err := c.route(ctx, call.p, call.force)
	call.force = false
	if err != nil {
		if ctx.Err() != nil {
			return call.finish(ctx.Err())
		}
		if errors.Is(err, ErrUnknownPartition) {
			return call.finish(err)
		}
		return call.waitOrFinish(call.fail(err))
	}
	cands := Candidates(call.candBuf[:], *e, call.req, c.cfg.PreferredRegions)
	region, ok := c.pick(call.p, cands, &call.tried)
	if !ok {
		return call.waitOrFinish(call.fail(fmt.Errorf("%w: partition %d", ErrCircuitOpen, call.p)))
	}
	now := c.clock.Now()
	t, err := c.target(ctx, call.p, e, region, call.req, call.attempts+call.redirects+1, now)
	if err != nil {
		c.breakers.Release(call.p, region)
		if ctx.Err() != nil {
			return call.finish(ctx.Err())
		}
		call.tried.add(region)
		return call.waitOrFinish(call.fail(err))
	}
	call.region, call.inFlight = region, true
	return Step{Target: t}
}

func (call *Call) waitOrFinish(wait time.Duration, err error) Step {
	if err != nil {
		return call.finish(err)
	}
	return Step{Wait: wait}
}

// Report feeds back the result of the attempt Next returned: the session
// token the data plane reported and the error. It returns how long to wait
// before the next Next, or done with the operation's final error (nil on
// success). ctx is the operation's context (its end is not a region's
// failure).
//
//   - success: the region's breaker closes; the token joins req.Session;
//   - a Redirect to a newer epoch: the cache moves at once and the next
//     attempt goes to the new write region without waiting (at most
//     MaxRedirects times); a redirect that tells nothing new counts as a
//     failed attempt;
//   - a StaleRead: the next candidate region at once (a backoff once all
//     were tried);
//   - a Permanent error (or one Retryable rejects), or the end of ctx: done;
//   - any other error: a breaker failure for the region, a forced DNS
//     refresh, a backoff, and the next candidate region.
func (call *Call) Report(ctx context.Context, tok SessionToken, opErr error) (wait time.Duration, done bool, err error) {
	c := call.c
	if call.done {
		return 0, true, call.final
	}
	if !call.inFlight {
		return 0, true, call.finish(errors.New("routing: Call.Report without an attempt")).Err
	}
	call.inFlight = false
	p, region := call.p, call.region
	result := func(wait time.Duration, err error) (time.Duration, bool, error) {
		if err != nil {
			call.finish(err)
			return 0, true, err
		}
		return wait, false, nil
	}
	switch c.classify(ctx, opErr) {
	case attemptOK:
		c.m.attempts[attemptOK].Inc()
		c.breakers.Success(p, region)
		if call.req.Session != nil {
			if err := call.req.Session.Observe(p, tok); err != nil {
				c.log.Warn("session token dropped", "partition", p, "err", err)
			}
		}
		call.finish(nil)
		return 0, true, nil
	case attemptRedirect:
		c.m.attempts[attemptRedirect].Inc()
		c.breakers.Success(p, region)
		var rd Redirect
		errors.As(opErr, &rd)
		rp, epoch, to := rd.RedirectTo()
		out := RejectedOlder
		if rp == p {
			out = c.applyRedirect(rp, epoch, to)
		}
		call.last = opErr
		if out == Inserted || out == Updated {
			call.redirects++
			if call.redirects > c.cfg.MaxRedirects {
				return result(0, call.exhausted(fmt.Errorf("%w: %w", ErrTooManyRedirects, opErr)))
			}
			call.tried = triedSet{}
			return 0, false, nil
		}
		// Nothing new (the failover has not happened yet): wait.
		call.tried.add(region)
		return result(call.fail(opErr))
	case attemptStaleRead:
		c.m.attempts[attemptStaleRead].Inc()
		c.breakers.Success(p, region)
		call.last = opErr
		call.tried.add(region)
		var buf [maxCandidates]string
		if e, ok := c.cache.Get(p); !ok || call.tried.covers(Candidates(buf[:], *e, call.req, c.cfg.PreferredRegions)) {
			call.tried = triedSet{}
			return result(call.fail(opErr))
		}
		return 0, false, nil
	case attemptCanceled:
		c.m.attempts[attemptCanceled].Inc()
		c.breakers.Release(p, region)
		return result(0, opErr)
	case attemptPermanent:
		c.m.attempts[attemptPermanent].Inc()
		c.breakers.Success(p, region)
		return result(0, opErr)
	default:
		c.m.attempts[attemptFailure].Inc()
		c.breakers.Failure(p, region, c.clock.Now())
		call.tried.add(region)
		call.force = true
		return result(call.fail(opErr))
	}
}

func (c *Client) call(ctx context.Context, op Op, t Target) (SessionToken, error) {
	if c.cfg.AttemptTimeout <= 0 {
		return op(ctx, t)
	}
	actx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
	defer cancel()
	return op(actx, t)
}

func (c *Client) classify(ctx context.Context, err error) int {
	if err == nil {
		return attemptOK
	}
	var rd Redirect
	if errors.As(err, &rd) {
		return attemptRedirect
	}
	var sr StaleRead
	if errors.As(err, &sr) && sr.StaleRead() || c.cfg.IsStaleRead != nil && c.cfg.IsStaleRead(err) {
		return attemptStaleRead
	}
	if ctx.Err() != nil {
		return attemptCanceled
	}
	var pe *PermanentError
	if errors.As(err, &pe) {
		return attemptPermanent
	}
	if c.cfg.Retryable != nil && !c.cfg.Retryable(err) {
		return attemptPermanent
	}
	return attemptFailure
}

// pick returns the first candidate not yet tried whose breaker allows a
// request; when every candidate was tried, the first one allowed.
func (c *Client) pick(p uint32, cands []string, tried *triedSet) (string, bool) {
	now := c.clock.Now()
	for pass := range 2 {
		for _, r := range cands {
			if pass == 0 && tried.has(r) {
				continue
			}
			if c.breakers.Allow(p, r, now) {
				return r, true
			}
		}
	}
	return "", false
}

func (c *Client) applyRedirect(p uint32, epoch uint64, region string) Outcome {
	if txtdns.ValidateRegion(region) != nil || epoch == 0 || p >= c.part.Partitions() {
		c.m.redirects[RejectedOlder].Inc()
		return RejectedOlder
	}
	now := c.clock.Now()
	out := c.cache.Redirect(p, epoch, c.intern(region), now.Add(c.cfg.RedirectTTL), now)
	c.m.redirects[out].Inc()
	return out
}

// route returns partition p's route: from the cache if fresh (and not
// forced), else from DNS; if DNS fails, a cached route up to MaxStale past
// its expiry.
func (c *Client) route(ctx context.Context, p uint32, force bool) (*Entry, error) {
	now := c.clock.Now()
	e, ok := c.cache.Get(p)
	if ok && (e.Fresh(now) && !force || force && now.Sub(e.Checked) < c.cfg.MinRefreshInterval) {
		c.m.hits.inc(p)
		return e, nil
	}
	return c.resolveRoute(ctx, p, e, ok, now)
}

// resolveRoute is route's slow path: cached (e, ok) is missing or stale.
func (c *Client) resolveRoute(ctx context.Context, p uint32, e *Entry, ok bool, now time.Time) (*Entry, error) {
	if ok {
		c.m.lookups[lookupExpired].Inc()
	} else {
		c.m.lookups[lookupMiss].Inc()
	}
	fresh, err := c.pflight.do(ctx, p, c.resolvePartition)
	if err == nil {
		return fresh, nil
	}
	if ok && !errors.Is(err, ErrUnknownPartition) && now.Before(e.Expires.Add(c.cfg.MaxStale)) {
		c.m.lookups[lookupStaleServed].Inc()
		c.log.Debug("serving stale route", "partition", p, "err", err)
		return e, nil
	}
	return nil, err
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

// offerRun offers every partition of run (within the partition count, and
// only p if the run is longer than MaxRunOffer) to the cache; it returns
// the outcome for p (or for the last partition when p is not in run).
func (c *Client) offerRun(run txtdns.Run, ttl time.Duration, now time.Time, p uint32) Outcome {
	run.WriteRegion = c.intern(run.WriteRegion)
	for i, r := range run.Priority {
		run.Priority[i] = c.intern(r)
	}
	expires := now.Add(min(max(ttl, c.cfg.MinTTL), c.cfg.MaxTTL))
	lo, hi := uint64(run.Lo), min(uint64(run.Hi), uint64(c.part.Partitions())-1)
	if run.Len() > uint64(c.cfg.MaxRunOffer) {
		if !run.Contains(p) {
			return RejectedFull
		}
		lo, hi = uint64(p), uint64(p)
	}
	out := RejectedFull
	for q := lo; q <= hi; q++ {
		o := c.cache.Offer(run.Route(uint32(q)), expires, now)
		c.m.answers[o].Inc()
		if uint32(q) == p || q == hi {
			out = o
		}
	}
	return out
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

// triedSet is the small set of regions one operation has tried.
type triedSet struct {
	regions [maxCandidates]string
	n       int
}

func (t *triedSet) has(r string) bool {
	for _, x := range t.regions[:t.n] {
		if x == r {
			return true
		}
	}
	return false
}

func (t *triedSet) add(r string) {
	if t.has(r) || t.n == len(t.regions) {
		return
	}
	t.regions[t.n] = r
	t.n++
}

func (t *triedSet) covers(cands []string) bool {
	for _, r := range cands {
		if !t.has(r) {
			return false
		}
	}
	return true
}
