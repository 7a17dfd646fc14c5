package routing

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fmnode/fmnode/txtdns"
)

// DefaultRedirectPoll caps the wait after a redirect that tells nothing
// new (see RouterConfig.RedirectPoll).
const DefaultRedirectPoll = 500 * time.Millisecond

// DefaultPollWait is how long a poll asks the live replica to hold it
// until the partition's route moves (see RouterConfig.PollWait).
const DefaultPollWait = time.Second

// RouterConfig configures a Router: the routing rules, without I/O. The
// fields mean what the Client's Config fields of the same names mean
// (Client builds its Router from them); zero values take the defaults.
type RouterConfig struct {
	// Partitions is the partition count (routes for 0 .. Partitions-1).
	Partitions       uint32
	PreferredRegions []string

	MaxAttempts  int
	MaxRedirects int
	BackoffBase  time.Duration
	BackoffMax   time.Duration
	// RedirectPoll caps the backoff after a redirect that tells nothing
	// new: a live replica named the write region the client already
	// tried (typically while the write region is down and its failover
	// has not committed yet). The next attempt learns the new epoch as
	// soon as a replica knows it, so the client keeps polling live
	// replicas at most this far apart rather than backing off to
	// BackoffMax. Default 500 ms; at most BackoffMax.
	RedirectPoll time.Duration
	// PollWait is how long a poll (Decision.Poll) asks the live replica
	// to hold it while nothing is new: a replica that supports it answers
	// as soon as it learns the new route (served, if it became the write
	// region), so a commit reaches the polling clients at once instead of
	// at their next poll; the next poll then leaves RedirectPoll after the
	// last one was sent, not after its answer. A replica that does not
	// hold polls answers at once, as before. Default 1 s; NoPollWait
	// turns it off (PollWait 0).
	PollWait           time.Duration
	NoPollWait         bool
	MinTTL             time.Duration
	MaxTTL             time.Duration
	RedirectTTL        time.Duration
	MaxStale           time.Duration
	MinRefreshInterval time.Duration
	MaxRunOffer        int

	Breaker BreakerConfig

	Retryable   func(error) bool
	IsStaleRead func(error) bool

	// Rand is the jitter source. Required: a Router reads no global
	// randomness.
	Rand Rand
	// Observer, if set, is told what the router decides (metrics).
	Observer RouterObserver
}

func (c *RouterConfig) setDefaults() error {
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		return configErr("PartitionCount", "%d: must be in [1, %d]", c.Partitions, MaxPartitions)
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
		{"RedirectPoll", &c.RedirectPoll, DefaultRedirectPoll, time.Hour},
		{"PollWait", &c.PollWait, DefaultPollWait, time.Minute},
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
	c.RedirectPoll = min(c.RedirectPoll, c.BackoffMax)
	if c.NoPollWait {
		c.PollWait = 0
	}
	if c.MaxTTL < c.MinTTL {
		return configErr("MaxTTL", "%v is below MinTTL %v", c.MaxTTL, c.MinTTL)
	}
	if c.Rand == nil {
		return configErr("Rand", "required")
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	return c.Breaker.setDefaults()
}

// LookupResult is how a route lookup was answered.
type LookupResult uint8

// Lookup results.
const (
	// LookupHit: a fresh cached route.
	LookupHit LookupResult = iota
	// LookupMiss: nothing cached; DNS must answer.
	LookupMiss
	// LookupExpired: the cached route expired (or a refresh is forced).
	LookupExpired
	// LookupStaleServed: DNS failed and an expired route was used.
	LookupStaleServed
)

// AttemptClass is what the result of one attempt means to the router.
type AttemptClass uint8

// Attempt classes.
const (
	AttemptOK AttemptClass = iota
	AttemptRedirect
	AttemptStaleRead
	AttemptFailure
	AttemptPermanent
	AttemptCanceled
	numAttemptClasses
)

// RouterObserver is told what a Router decides; Client counts it in its
// metrics. Calls are made synchronously from the Router's methods.
type RouterObserver interface {
	Lookup(p uint32, r LookupResult)
	Answer(o Outcome)
	Redirect(o Outcome)
	Attempt(c AttemptClass)
	Retry()
	Exhausted()
}

type nopObserver struct{}

func (nopObserver) Lookup(uint32, LookupResult) {}
func (nopObserver) Answer(Outcome)              {}
func (nopObserver) Redirect(Outcome)            {}
func (nopObserver) Attempt(AttemptClass)        {}
func (nopObserver) Retry()                      {}
func (nopObserver) Exhausted()                  {}

// Router is the pure core of routing, shared by the Client (which adds
// DNS, region endpoints, sleeps and metrics) and the simulator (which
// drives it from its event loop over a simulated network and DNS). It
// holds the epoch-monotonic route Cache and the circuit Breakers and
// decides, per operation (Operation), where each attempt goes, how a
// redirect or a failure changes that, and how long to back off. It starts
// no goroutines, reads no clock (callers pass now) and no global
// randomness (Rand is injected), and does no I/O: same inputs, same
// decisions. Safe for concurrent use as its Cache and Breakers are; an
// Operation is not.
type Router struct {
	lat      regionLatency
	cfg      RouterConfig
	cache    *Cache
	breakers *Breakers
	backoff  Backoff
	poll     Backoff
	obs      RouterObserver
}

// NewRouter validates cfg and returns a router with an empty cache.
func NewRouter(cfg RouterConfig) (*Router, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	cache, err := NewCache(cfg.Partitions)
	if err != nil {
		return nil, err
	}
	br, err := NewBreakers(cfg.Breaker)
	if err != nil {
		return nil, err
	}
	return &Router{cfg: cfg, cache: cache, breakers: br, obs: cfg.Observer,
		backoff: Backoff{Base: cfg.BackoffBase, Max: cfg.BackoffMax, Rand: cfg.Rand},
		poll:    Backoff{Base: min(cfg.BackoffBase, cfg.RedirectPoll), Max: cfg.RedirectPoll, Rand: cfg.Rand},
	}, nil
}

// Config returns the router's configuration with its defaults filled in.
func (r *Router) Config() RouterConfig { return r.cfg }

// Cache returns the route cache.
func (r *Router) Cache() *Cache { return r.cache }

// Breakers returns the circuit breakers.
func (r *Router) Breakers() *Breakers { return r.breakers }

// Lookup returns p's cached route and true when it may be used without
// asking DNS: fresh (and no refresh forced), or a refresh forced but the
// partition checked within MinRefreshInterval. Otherwise the caller
// resolves p (offering the answer with OfferRun) and, if that fails,
// asks Fallback.
func (r *Router) Lookup(p uint32, force bool, now time.Time) (*Entry, bool) {
	e, ok := r.cache.Get(p)
	if ok && (e.Fresh(now) && !force || force && now.Sub(e.Checked) < r.cfg.MinRefreshInterval) {
		r.obs.Lookup(p, LookupHit)
		return e, true
	}
	if ok {
		r.obs.Lookup(p, LookupExpired)
	} else {
		r.obs.Lookup(p, LookupMiss)
	}
	return nil, false
}

// Fallback is what a failed resolution of p leaves: the cached route
// while within MaxStale past its expiry (unless DNS says the partition
// does not exist), else err.
func (r *Router) Fallback(p uint32, err error, now time.Time) (*Entry, error) {
	e, ok := r.cache.Get(p)
	if ok && !errors.Is(err, ErrUnknownPartition) && now.Before(e.Expires.Add(r.cfg.MaxStale)) {
		r.obs.Lookup(p, LookupStaleServed)
		return e, nil
	}
	return nil, err
}

// OfferRun offers every partition of a DNS answer's run (within the
// partition count, and only p if the run is longer than MaxRunOffer) to
// the cache, trusted for ttl clamped to [MinTTL, MaxTTL]; it returns the
// outcome for p (or for the last partition offered when p is not in run).
// Older routes are refused: the cache never moves a partition backwards.
func (r *Router) OfferRun(run txtdns.Run, ttl time.Duration, now time.Time, p uint32) Outcome {
	expires := now.Add(min(max(ttl, r.cfg.MinTTL), r.cfg.MaxTTL))
	lo, hi := uint64(run.Lo), min(uint64(run.Hi), uint64(r.cfg.Partitions)-1)
	if run.Len() > uint64(r.cfg.MaxRunOffer) {
		if !run.Contains(p) {
			return RejectedFull
		}
		lo, hi = uint64(p), uint64(p)
	}
	out := RejectedFull
	for q := lo; q <= hi; q++ {
		before := r.epochOf(uint32(q))
		o := r.cache.Offer(run.Route(uint32(q)), expires, now)
		r.promoted(uint32(q), before, o, now)
		r.obs.Answer(o)
		if uint32(q) == p || q == hi {
			out = o
		}
	}
	return out
}

// Redirect applies a redirect from the data plane: p's write region is
// region at epoch. It moves the cache only to a newer epoch.
func (r *Router) Redirect(p uint32, epoch uint64, region string, now time.Time) Outcome {
	if txtdns.ValidateRegion(region) != nil || epoch == 0 || p >= r.cfg.Partitions {
		r.obs.Redirect(RejectedOlder)
		return RejectedOlder
	}
	before := r.epochOf(p)
	out := r.cache.Redirect(p, epoch, region, now.Add(r.cfg.RedirectTTL), now)
	r.promoted(p, before, out, now)
	r.obs.Redirect(out)
	return out
}

// epochOf is p's cached epoch (0: none).
func (r *Router) epochOf(p uint32) uint64 {
	if e, ok := r.cache.Get(p); ok {
		return e.Epoch
	}
	return 0
}

// promoted resets the breaker of p's new write region when the cache
// moved p from a cached epoch to a newer one (Breakers.Promoted):
// failures counted against that region (as a follower, or before it came
// back) predate the failover that made it the write region, which
// commits only to a live, caught-up region. Without this a breaker opened
// while the region was down or fenced keeps the clients off the new
// write region for OpenFor after the failover, polling replicas that all
// name it; and a client cut off from the new write region probes it every
// PromotedOpenFor rather than OpenFor, so it is back soon after the cut
// heals.
func (r *Router) promoted(p uint32, before uint64, out Outcome, now time.Time) {
	if before == 0 || out != Updated {
		return
	}
	if e, ok := r.cache.Get(p); ok && e.Epoch > before {
		r.breakers.Promoted(p, e.WriteRegion, now)
	}
}

// Classify says what an attempt's error means: nil is success; a
// Redirect, a StaleRead, a Permanent error (or one Retryable refuses), or
// else a failure of the region. (Whether the caller's context ended is
// the driver's to say: see Operation.Cancel.)
func (r *Router) Classify(err error) AttemptClass {
	if err == nil {
		return AttemptOK
	}
	var rd Redirect
	if errors.As(err, &rd) {
		return AttemptRedirect
	}
	var sr StaleRead
	if errors.As(err, &sr) && sr.StaleRead() || r.cfg.IsStaleRead != nil && r.cfg.IsStaleRead(err) {
		return AttemptStaleRead
	}
	var pe *PermanentError
	if errors.As(err, &pe) {
		return AttemptPermanent
	}
	if r.cfg.Retryable != nil && !r.cfg.Retryable(err) {
		return AttemptPermanent
	}
	return AttemptFailure
}

// pick returns the candidate to try next: the first, in priority order,
// whose breaker allows a request among those the operation has not tried;
// else among those it tried that answered (a redirect, a stale read);
// else among those that failed. So an operation does not go back to a
// region that just failed while live replicas answer.
//
// It also returns the attempt's deadline: non-zero for a quick half-open
// probe (Breakers.AllowProbe). With deferQuick (the step does not follow
// a live region's fresh "not yet": the operation starts, or a poll wait
// ended), a quick probe goes last: a live region is asked first, so the
// probe follows fresh news that the failover is still pending instead of
// delaying the news that it committed (a probe that became due during a
// poll wait used to go first, and a commit during the wait then cost the
// probe's deadline on top of the poll).
func (r *Router) pick(p uint32, cands []string, tried, failed *triedSet, deferQuick bool, now time.Time) (string, time.Duration, bool) {
	deferred := ""
	for tier := range 3 {
		for _, c := range cands {
			t, f := tried.has(c), failed.has(c)
			in := tier == 0 && !t || tier == 1 && t && !f || tier == 2 && f
			if !in {
				continue
			}
			if deferQuick && deferred == "" && r.breakers.QuickProbeDue(p, c, now) {
				deferred = c
				continue
			}
			if ok, deadline := r.breakers.AllowProbe(p, c, now); ok {
				return c, deadline, true
			}
		}
	}
	if deferred != "" {
		if ok, deadline := r.breakers.AllowProbe(p, deferred, now); ok {
			return deferred, deadline, true
		}
	}
	return "", 0, false
}

// pollTarget is where an operation polls while a live region confirmed
// its route (a failover is pending, or the write region is paused): the
// candidate with the lowest redirect latency among those not failed in the
// operation and not behind a breaker, a region never measured first (to
// measure it); ties in candidate order. Every live region learns a commit
// within a hop of the others, so the fastest one to ask is the best poll:
// each poll costs the least, and a poll landing just after the commit
// returns the news soonest. (Rotating through the live regions sent every
// other poll to a region 150 ms away, which also learnt the commit a hop
// later; sticking to the first that answered kept polling a far follower
// when a near region, the failover's target, answered too.)
//
// Held polls (PollWait) change what is best: a held poll costs no round
// trips while nothing happens, and the new epoch starts at the new write
// region, so a poll held there is served at its promotion, while one held
// at another follower comes back when that follower learns the epoch, as
// a redirect, and costs a second request to the write region (at 5
// regions on one machine every writer paid it: it had measured another
// live region faster). With PollWait the target is therefore the first
// eligible candidate in priority order other than the route's write
// region (writeRegion: alive but paused, it answers at once and is not
// where the next epoch starts), the likely failover target, and nothing
// is measured; the write region only when no other is eligible.
func (r *Router) pollTarget(p uint32, cands []string, failed *triedSet, writeRegion string) (string, bool) {
	eligible := func(c string) bool { return !failed.has(c) && r.breakers.State(p, c) == Closed }
	if r.cfg.PollWait > 0 {
		for _, c := range cands {
			if c != writeRegion && eligible(c) {
				return c, true
			}
		}
		if writeRegion != "" && eligible(writeRegion) {
			return writeRegion, true
		}
		return "", false
	}
	best, bestLat, found := "", time.Duration(0), false
	for _, c := range cands {
		if !eligible(c) {
			continue
		}
		l, known := r.lat.get(c)
		if !known {
			return c, true
		}
		if !found || l < bestLat {
			best, bestLat, found = c, l, true
		}
	}
	return best, found
}

// maxLatencyRegions bounds the regions whose latency a Router tracks.
const maxLatencyRegions = 64

// regionLatency is a moving average of each region's redirect latency
// (from an attempt's send to its redirect), safe for concurrent use.
type regionLatency struct {
	mu sync.Mutex
	m  map[string]time.Duration
}

func (l *regionLatency) observe(region string, d time.Duration) {
	d = max(d, 0)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[string]time.Duration)
	}
	old, ok := l.m[region]
	switch {
	case ok:
		l.m[region] = old + (d-old)/4
	case len(l.m) < maxLatencyRegions:
		l.m[region] = d
	}
}

func (l *regionLatency) get(region string) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d, ok := l.m[region]
	return d, ok
}

// Action is what an Operation asks of its driver.
type Action uint8

// Actions.
const (
	// ActSend: send the attempt to Decision.Region with Decision.Entry's
	// epoch, then Report its result (or Unsent if it could not be sent).
	ActSend Action = iota + 1
	// ActResolve: look the partition up in DNS, offer the answer with
	// Router.OfferRun, then call Resolved.
	ActResolve
	// ActWait: wait Decision.Wait, then call Next.
	ActWait
	// ActDone: the operation is over; Decision.Err is its result.
	ActDone
)

// Decision is one step an Operation asks for.
type Decision struct {
	Action Action
	// ActSend: the region and the route the attempt uses (shared,
	// read-only; its Epoch goes with the request); Attempt counts from 1.
	Region  string
	Entry   *Entry
	Attempt int
	// Timeout, if non-zero, bounds the attempt below the driver's own
	// attempt timeout: it is a quick half-open probe of a region a live
	// replica reported still the write region while unreachable (a
	// failover is pending). The driver gives it up after Timeout and
	// Reports it failed; the operation then moves on at once.
	Timeout time.Duration
	// Poll: the attempt asks a live region whether a pending failover
	// committed (the partition's write region is tripped, and the
	// attempt goes elsewhere). Its redirect answers every operation of
	// the partition alike, so a driver running many operations of one
	// partition may share one poll's redirect among them (Client.Exec
	// does) instead of sending one poll each.
	Poll bool
	// PollWait, on a Poll, is how long the replica may hold it until the
	// route moves (RouterConfig.PollWait; 0: answer at once). The driver
	// sends it with the request and lets the attempt take that much
	// longer than its own attempt timeout.
	PollWait time.Duration
	// ActResolve: a refresh forced by a failure (the cached route may
	// be fresh).
	Force bool
	Wait  time.Duration
	Err   error
}

// Verdict is what Report made of an attempt's result.
type Verdict struct {
	Class AttemptClass
	// Wait before the next Next (0: at once), unless Done.
	Wait time.Duration
	Done bool
	Err  error
}

type opState uint8

const (
	opIdle opState = iota
	opResolving
	opSending
	opDone
)

// Operation is the routing state of one operation of one partition, a
// state machine its driver steps:
//
//	Next -> ActResolve -> (resolve, OfferRun) Resolved -> ActSend | ActWait | ActDone
//	Next -> ActSend    -> (send) Report -> Verdict{Wait, Done}
//	Next -> ActWait    -> (wait) Next
//
// On a redirect to a newer epoch the cache moves at once and the next
// attempt goes to the new write region without waiting (at most
// MaxRedirects times); a redirect that tells nothing new counts as a
// failed attempt and waits at most RedirectPoll; a stale read moves to
// the next candidate at once; a failure counts against the region's
// breaker, forces a DNS refresh, backs off and moves to the next
// candidate in priority order. At most MaxAttempts failed attempts.
type Operation struct {
	r         *Router
	p         uint32
	req       Request
	tried     triedSet
	failed    triedSet // regions whose attempt failed (a subset of tried)
	candBuf   [maxCandidates]string
	attempts  int
	redirects int
	steps     int
	force     bool
	last      error
	region    string // the region of the attempt in flight
	sentEpoch uint64 // the route epoch the attempt in flight carries
	quick     bool   // the attempt in flight is a quick half-open probe
	pending   bool   // a live replica answered that nothing changed yet
	// fresh: the last attempt was a live replica's "not yet" that found
	// the write region's quick probe due, so the probe goes now. At any
	// other step (after a poll wait, at the start) a due quick probe waits
	// behind a live region's fresh news (see Router.pick).
	fresh bool
	// polling: a live region confirmed the route (a failover is pending,
	// or the write region is paused): the next attempts poll the fastest
	// answering region (Router.pollTarget) until the route moves.
	polling bool
	sentAt  time.Time // when the attempt in flight was sent
	// sentWait is the PollWait the attempt in flight carries (0: none).
	sentWait time.Duration
	// setEpoch is the route epoch tried and failed were gathered under:
	// a newer route (from a redirect or DNS) starts them afresh, as what
	// failed under the old route says nothing of the new one.
	setEpoch uint64
	state    opState
	final    error
}

// Begin starts routing one operation of partition p.
func (r *Router) Begin(p uint32, req Request) Operation {
	return Operation{r: r, p: p, req: req}
}

// Partition returns the operation's partition.
func (o *Operation) Partition() uint32 { return o.p }

// Finished reports whether the operation is over, and its result.
func (o *Operation) Finished() (bool, error) { return o.state == opDone, o.final }

// Attempts and Redirects count the failed attempts and the redirects
// followed so far.
func (o *Operation) Attempts() int  { return o.attempts }
func (o *Operation) Redirects() int { return o.redirects }

func (o *Operation) finish(err error) Decision {
	o.state, o.final = opDone, err
	return Decision{Action: ActDone, Err: err}
}

func (o *Operation) exhausted(last error) error {
	o.r.obs.Exhausted()
	return &ExhaustedError{Partition: o.p, Attempts: o.attempts, Redirects: o.redirects, Last: last}
}

// fail records a failed attempt (or a failure to make one) and returns
// the wait before the next, or ends the operation when attempts are spent.
func (o *Operation) fail(err error, b Backoff) Decision {
	o.last = err
	o.attempts++
	if o.attempts >= o.r.cfg.MaxAttempts {
		return o.finish(o.exhausted(err))
	}
	o.r.obs.Retry()
	if b.Max == 0 {
		return Decision{Action: ActWait} // no wait: the caller calls Next at once
	}
	return Decision{Action: ActWait, Wait: b.Delay(o.attempts)}
}

// steadyPollSpread is the random part of a steady poll's wait.
const steadyPollSpread = 0.25

// steadyPoll is the poll backoff at its cap: RedirectPoll less up to a
// quarter, in [3/4 RedirectPoll, RedirectPoll]. The cap bounds how long a
// commit can wait for the next poll (the reroute time); the mean sets the
// poll load on the live regions. With equal jitter ([1/2, 1] of the cap,
// mean 3/4) the load was higher for the same bound; a quarter still
// spreads the clients' polls, at a mean of 7/8 of the cap: about 2.3
// polls per second at 500 ms rather than 2.7.
func (r *Router) steadyPoll() Backoff {
	return Backoff{Base: r.cfg.RedirectPoll, Max: r.cfg.RedirectPoll, Rand: r.cfg.Rand, Spread: steadyPollSpread}
}

// RetryDelay is how long the application should wait before it retries
// this failed operation, its n-th failure in a row (n >= 1): at most
// RedirectPoll when a live replica answered during it that the write
// region had not changed yet (a failover is pending: the next poll may
// learn the new one), else the capped exponential backoff.
func (o *Operation) RetryDelay(n int) time.Duration {
	if o.pending {
		return o.r.steadyPoll().Delay(n)
	}
	return o.r.backoff.Delay(n)
}

// Next returns the operation's next step.
func (o *Operation) Next(now time.Time) Decision {
	switch o.state {
	case opDone:
		return Decision{Action: ActDone, Err: o.final}
	case opResolving, opSending:
		return o.finish(errors.New("routing: Operation.Next before Resolved or Report"))
	}
	// An absolute bound: every step counts an attempt, a redirect, or a
	// stale read that marks one more region tried.
	o.steps++
	if o.steps > (o.r.cfg.MaxAttempts+o.r.cfg.MaxRedirects+1)*(maxCandidates+1) {
		return o.finish(o.exhausted(o.last))
	}
	e, ok := o.r.Lookup(o.p, o.force, now)
	if !ok {
		o.state = opResolving
		return Decision{Action: ActResolve, Force: o.force}
	}
	o.force = false
	return o.pick(e, now)
}

// Resolved feeds back the result of an ActResolve: the route the answer
// left in force for the partition (nil if none), or the resolution's error.
func (o *Operation) Resolved(now time.Time, e *Entry, err error) Decision {
	if o.state != opResolving {
		return o.finish(errors.New("routing: Operation.Resolved without a resolution"))
	}
	o.state, o.force = opIdle, false
	if err == nil && e == nil {
		err = fmt.Errorf("%w: no route for partition %d", ErrBadAnswer, o.p)
	}
	if err != nil {
		if e, err = o.r.Fallback(o.p, err, now); err != nil {
			if errors.Is(err, ErrUnknownPartition) {
				return o.finish(err)
			}
			return o.fail(err, o.r.backoff)
		}
	}
	return o.pick(e, now)
}

func (o *Operation) pick(e *Entry, now time.Time) Decision {
	if e.Epoch > o.setEpoch {
		o.tried, o.failed, o.setEpoch, o.polling = triedSet{}, triedSet{}, e.Epoch, false
	}
	cands := Candidates(o.candBuf[:], *e, o.req, o.r.cfg.PreferredRegions)
	region, deadline, ok := "", time.Duration(0), false
	if o.polling && !o.fresh {
		region, ok = o.r.pollTarget(o.p, cands, &o.failed, e.WriteRegion)
	}
	if !ok {
		region, deadline, ok = o.r.pick(o.p, cands, &o.tried, &o.failed, !o.fresh, now)
	}
	o.fresh = false
	o.sentAt = now
	if !ok {
		return o.fail(fmt.Errorf("%w: partition %d", ErrCircuitOpen, o.p), o.r.backoff)
	}
	o.region, o.sentEpoch, o.quick, o.state = region, e.Epoch, deadline > 0, opSending
	poll := deadline == 0 && region != e.WriteRegion && o.r.breakers.Tripped(o.p, e.WriteRegion)
	o.sentWait = 0
	if poll {
		o.sentWait = o.r.cfg.PollWait
	}
	return Decision{Action: ActSend, Region: region, Entry: e, Attempt: o.attempts + o.redirects + 1, Timeout: deadline,
		Poll: poll, PollWait: o.sentWait}
}

// Unsent reports that the attempt Next chose could not be sent (the
// region's endpoints are unknown): the region is skipped and the failure
// counts as an attempt.
func (o *Operation) Unsent(now time.Time, err error) Decision {
	if o.state != opSending {
		return o.finish(errors.New("routing: Operation.Unsent without an attempt"))
	}
	o.state = opIdle
	o.r.breakers.Release(o.p, o.region)
	o.tried.add(o.region)
	return o.fail(err, o.r.backoff)
}

// Cancel ends the operation because its caller gave up (a context
// ended): an attempt in flight is no verdict on its region.
func (o *Operation) Cancel(err error) Decision {
	if o.state == opDone {
		return Decision{Action: ActDone, Err: o.final}
	}
	if o.state == opSending {
		o.r.obs.Attempt(AttemptCanceled)
		o.r.breakers.Release(o.p, o.region)
	}
	return o.finish(err)
}

// Report feeds back the result of the attempt Next asked for (see
// Classify for what an error means).
func (o *Operation) Report(now time.Time, opErr error) Verdict {
	if o.state == opDone {
		return Verdict{Done: true, Err: o.final}
	}
	if o.state != opSending {
		d := o.finish(errors.New("routing: Operation.Report without an attempt"))
		return Verdict{Done: true, Err: d.Err}
	}
	o.state = opIdle
	p, region, r := o.p, o.region, o.r
	cls := r.Classify(opErr)
	r.obs.Attempt(cls)
	if cls == AttemptRedirect && o.sentWait == 0 {
		// A redirect is answered at once (no write, no replication): its
		// latency is the region's round trip, what a poll costs. A poll
		// the replica may have held says nothing of that.
		r.lat.observe(region, now.Sub(o.sentAt))
	}
	verdict := func(d Decision) Verdict {
		return Verdict{Class: cls, Wait: d.Wait, Done: d.Action == ActDone, Err: d.Err}
	}
	switch cls {
	case AttemptOK:
		r.breakers.Success(p, region)
		return verdict(o.finish(nil))
	case AttemptRedirect:
		r.breakers.Success(p, region)
		var rd Redirect
		errors.As(opErr, &rd)
		rp, epoch, to := rd.RedirectTo()
		out := RejectedOlder
		if rp == p {
			out = r.Redirect(rp, epoch, to, now)
		}
		o.last = opErr
		// News for this operation: the redirect moved the route, or the
		// route moved past the epoch the attempt carried while it was in
		// flight (another operation's redirect or a DNS answer got there
		// first, so this redirect leaves the cache unchanged). Either way
		// the next attempt goes to the newer route at once: waiting a
		// poll here would only delay a route already known.
		if out == Inserted || out == Updated || o.routeMoved() {
			o.redirects++
			if o.redirects > r.cfg.MaxRedirects {
				return verdict(o.finish(o.exhausted(fmt.Errorf("%w: %w", ErrTooManyRedirects, opErr))))
			}
			o.tried, o.failed = triedSet{}, triedSet{}
			return Verdict{Class: cls}
		}
		// Nothing new (the failover has not committed, or this replica
		// has not learnt it yet): poll again soon. If the region it names
		// failed this operation, a live replica confirms that the write
		// region we cannot reach was not replaced yet: a failover is
		// pending, so the region's breaker opens and the polls go to live
		// replicas, which will name the new write region.
		o.tried.add(region)
		o.pending = true
		e, ok := r.cache.Get(p)
		named := ok && to == e.WriteRegion && epoch == e.Epoch
		// A live region confirmed the route we know: the operation polls
		// (pollTarget) until the route moves.
		o.polling = o.polling || named
		if named && o.failed.has(to) {
			r.breakers.Trip(p, to, now)
		}
		if named && !o.tried.has(to) && r.breakers.QuickProbeDue(p, to, now) {
			// The named write region's quick probe is due: it goes now,
			// right after this fresh "not yet", and stands in for the
			// poll's wait.
			o.fresh = true
			return verdict(o.fail(opErr, Backoff{}))
		}
		if named {
			// A failover is pending: poll at the configured interval
			// (RedirectPoll, jittered down to half), not faster, however
			// many operations start: the load on the live regions stays
			// bounded through a long outage.
			return verdict(o.afterPoll(now, o.fail(opErr, r.steadyPoll())))
		}
		return verdict(o.fail(opErr, r.poll))
	case AttemptStaleRead:
		r.breakers.Success(p, region)
		o.last = opErr
		o.tried.add(region)
		var buf [maxCandidates]string
		if e, ok := r.cache.Get(p); !ok || o.tried.covers(Candidates(buf[:], *e, o.req, r.cfg.PreferredRegions)) {
			o.tried, o.failed = triedSet{}, triedSet{}
			return verdict(o.fail(opErr, r.backoff))
		}
		return Verdict{Class: cls}
	case AttemptPermanent:
		r.breakers.Success(p, region)
		return verdict(o.finish(opErr))
	default:
		r.breakers.Failure(p, region, now)
		o.tried.add(region)
		o.failed.add(region)
		o.force = true
		if o.quick {
			// A quick probe of a region whose failover is pending is the
			// breaker's attempt, not one of the operation's (MaxAttempts;
			// at most one per OpenFor, and every step is bounded): its
			// deadline spaced the attempts already, so the next one (a
			// live region, or a refreshed route) goes at once.
			o.last = opErr
			r.obs.Retry()
			return Verdict{Class: cls}
		}
		return verdict(o.fail(opErr, r.backoff))
	}
}

// afterPoll shortens the wait after a poll the replica may have held by
// the time it was held: polls stay RedirectPoll apart from send to send,
// and a poll held to its end is followed by the next one at once.
func (o *Operation) afterPoll(now time.Time, d Decision) Decision {
	if o.sentWait > 0 && d.Action == ActWait {
		d.Wait = max(0, d.Wait-now.Sub(o.sentAt))
	}
	return d
}

// Acked feeds back the epoch of a write the operation's successful
// attempt had acknowledged (its session token's): an epoch has exactly one
// write region, and the region the write went to assigned it, so if the
// epoch is newer than the route the attempt carried, the route moves there
// as a redirect would move it. This is how a client learns of a failover
// from the new write region's own answer: the data plane serves a write of
// an older epoch that reaches the write region of a newer one (partition's
// redirect rule) instead of redirecting it to itself, one round trip
// instead of two. Nothing happens for a read, an unfinished or failed
// operation, or an epoch that is not newer.
func (o *Operation) Acked(now time.Time, epoch uint64) Outcome {
	if !o.req.Write || o.state != opDone || o.final != nil || epoch <= o.sentEpoch || o.region == "" {
		return RejectedOlder
	}
	return o.r.Redirect(o.p, epoch, o.region, now)
}

// routeMoved reports whether the partition's cached route is newer than
// the one the attempt in flight carried.
func (o *Operation) routeMoved() bool {
	e, ok := o.r.cache.Get(o.p)
	return ok && e.Epoch > o.sentEpoch
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
