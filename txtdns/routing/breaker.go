package routing

import (
	"sync"
	"time"
)

// BreakerState is the state of one partition-region circuit breaker.
type BreakerState uint8

// Breaker states.
const (
	// Closed: requests flow; consecutive failures are counted.
	Closed BreakerState = iota
	// Open: the region is skipped for the partition until the open window ends.
	Open
	// HalfOpen: one probe request is let through; its result closes or
	// reopens the breaker.
	HalfOpen
	numBreakerStates
)

func (s BreakerState) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	default:
		return "unknown"
	}
}

// BreakerConfig configures Breakers.
type BreakerConfig struct {
	// FailureThreshold consecutive failures open a breaker. Default 3.
	FailureThreshold int
	// OpenFor is the open window before a half-open probe. Default 5 s.
	OpenFor time.Duration
	// ProbeTimeout: a half-open probe that reports nothing for this long
	// is presumed lost and another probe is allowed. Default 10 s.
	ProbeTimeout time.Duration
	// ProbeDeadline bounds a half-open probe of a region whose breaker
	// was tripped (Trip: a live replica confirmed that the region the
	// request failed to reach is still the write region, so a failover
	// is pending). Such a probe is a real attempt; one that waited a full
	// attempt timeout while the failover commits would hold the client
	// back from the new write region, so it is given up after
	// ProbeDeadline and the operation moves on to the live regions at
	// once. Set it above the region's normal attempt latency. Default
	// 300 ms.
	ProbeDeadline time.Duration
	// QuickProbeFor is how long after the first Trip (since the breaker
	// last closed) its probes keep ProbeDeadline. Past it they wait the
	// driver's full attempt timeout, so a region that came back slower
	// than ProbeDeadline without being failed over still closes its
	// breaker. Keep it above the failover's detection and commit time.
	// Default 3 min.
	QuickProbeFor time.Duration
	// PromotedOpenFor is the open window, in place of OpenFor, of a
	// region made the partition's write region by a failover the client
	// learnt of (Promoted) within QuickProbeFor: a failover commits only
	// to a live, caught-up region, so a client that cannot reach it is
	// most likely cut off from it for a while, and every write of the
	// partition can only go there: its probes come this often (quick,
	// with ProbeDeadline, once a live replica names it) so that the
	// client is back within about this long of the cut healing, rather
	// than OpenFor. Default 1 s; at most OpenFor.
	PromotedOpenFor time.Duration
	// MaxBreakers bounds the tracked (not plainly closed) breakers.
	// Default 65536.
	MaxBreakers int
	// OnTransition, if set, is called (under the breakers' lock; keep it
	// short) on every state change.
	OnTransition func(partition uint32, region string, from, to BreakerState)
}

func (c *BreakerConfig) setDefaults() error {
	if c.FailureThreshold == 0 {
		c.FailureThreshold = 3
	}
	if c.FailureThreshold < 1 || c.FailureThreshold > 1000 {
		return configErr("BreakerFailureThreshold", "%d: must be in [1, 1000]", c.FailureThreshold)
	}
	if c.OpenFor == 0 {
		c.OpenFor = 5 * time.Second
	}
	if c.OpenFor < time.Millisecond || c.OpenFor > time.Hour {
		return configErr("BreakerOpenFor", "%v: must be in [1ms, 1h]", c.OpenFor)
	}
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = 10 * time.Second
	}
	if c.ProbeTimeout < time.Millisecond || c.ProbeTimeout > time.Hour {
		return configErr("BreakerProbeTimeout", "%v: must be in [1ms, 1h]", c.ProbeTimeout)
	}
	if c.ProbeDeadline == 0 {
		c.ProbeDeadline = 300 * time.Millisecond
	}
	if c.ProbeDeadline < time.Millisecond || c.ProbeDeadline > c.ProbeTimeout {
		return configErr("BreakerProbeDeadline", "%v: must be in [1ms, BreakerProbeTimeout %v]", c.ProbeDeadline, c.ProbeTimeout)
	}
	if c.PromotedOpenFor == 0 {
		c.PromotedOpenFor = min(time.Second, c.OpenFor)
	}
	if c.PromotedOpenFor < time.Millisecond || c.PromotedOpenFor > c.OpenFor {
		return configErr("BreakerPromotedOpenFor", "%v: must be in [1ms, BreakerOpenFor %v]", c.PromotedOpenFor, c.OpenFor)
	}
	if c.QuickProbeFor == 0 {
		c.QuickProbeFor = 3 * time.Minute
	}
	if c.QuickProbeFor < time.Millisecond || c.QuickProbeFor > 24*time.Hour {
		return configErr("BreakerQuickProbeFor", "%v: must be in [1ms, 24h]", c.QuickProbeFor)
	}
	if c.MaxBreakers == 0 {
		c.MaxBreakers = 65536
	}
	if c.MaxBreakers < 1 || c.MaxBreakers > 1<<24 {
		return configErr("MaxBreakers", "%d: must be in [1, %d]", c.MaxBreakers, 1<<24)
	}
	return nil
}

type breakerKey struct {
	partition uint32
	region    string
}

type breaker struct {
	state     BreakerState
	failures  int
	openUntil time.Time
	probeAt   time.Time // when the half-open probe was let through
	trippedAt time.Time // the first Trip since the breaker closed (zero: none)
	// promotedAt: the region became the partition's write region by a
	// failover the client learnt of then (Promoted; zero: not so).
	promotedAt time.Time
}

// Breakers is a circuit breaker per partition and region: FailureThreshold
// consecutive failures open it for OpenFor; then one probe is let through
// (half-open); its success closes the breaker, its failure reopens it. A
// pure data structure (callers pass now), safe for concurrent use. Plainly
// closed breakers are not stored, so memory follows the failing pairs.
type Breakers struct {
	cfg BreakerConfig
	mu  sync.Mutex
	m   map[breakerKey]*breaker
	// counts of stored breakers by state, for metrics
	counts [numBreakerStates]int
}

// NewBreakers validates cfg.
func NewBreakers(cfg BreakerConfig) (*Breakers, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Breakers{cfg: cfg, m: make(map[breakerKey]*breaker)}, nil
}

// Allow reports whether a request for partition p may go to region now. An
// open breaker whose window has passed turns half-open and lets this one
// request through as the probe; the caller must report Success, Failure or
// Release for it.
func (b *Breakers) Allow(p uint32, region string, now time.Time) bool {
	ok, _ := b.AllowProbe(p, region, now)
	return ok
}

// AllowProbe is Allow that also says how long the request may take: a
// half-open probe of a tripped breaker (within QuickProbeFor of its first
// Trip) gets ProbeDeadline, after which the caller gives the attempt up
// and reports it failed; otherwise 0 (the caller's own attempt timeout).
func (b *Breakers) AllowProbe(p uint32, region string, now time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	br := b.m[breakerKey{p, region}]
	if br == nil {
		return true, 0
	}
	switch br.state {
	case Open:
		if now.Before(br.openUntil) {
			return false, 0
		}
		b.setState(p, region, br, HalfOpen)
		br.probeAt = now
		return true, b.probeDeadline(br, now)
	case HalfOpen:
		if now.Sub(br.probeAt) >= b.cfg.ProbeTimeout {
			br.probeAt = now // the previous probe is lost: let another through
			return true, b.probeDeadline(br, now)
		}
		return false, 0
	default:
		return true, 0
	}
}

// Tripped reports whether region's breaker for partition p is open or
// half-open by a Trip: a live replica confirmed that the region, which
// the client could not reach, is still the write region (a failover is
// pending).
func (b *Breakers) Tripped(p uint32, region string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	br := b.m[breakerKey{p, region}]
	return br != nil && br.state != Closed && !br.trippedAt.IsZero()
}

// QuickProbeDue reports whether Allow would now let a quick probe
// (ProbeDeadline) through to region for partition p. It changes nothing.
func (b *Breakers) QuickProbeDue(p uint32, region string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	br := b.m[breakerKey{p, region}]
	if br == nil || b.probeDeadline(br, now) == 0 {
		return false
	}
	return br.state == Open && !now.Before(br.openUntil) ||
		br.state == HalfOpen && now.Sub(br.probeAt) >= b.cfg.ProbeTimeout
}

func (b *Breakers) probeDeadline(br *breaker, now time.Time) time.Duration {
	if !br.trippedAt.IsZero() && now.Sub(br.trippedAt) < b.cfg.QuickProbeFor {
		return b.cfg.ProbeDeadline
	}
	return 0
}

// State returns the breaker's state (an open breaker past its window
// still reads Open until Allow probes it).
func (b *Breakers) State(p uint32, region string) BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	if br := b.m[breakerKey{p, region}]; br != nil {
		return br.state
	}
	return Closed
}

// Counts returns how many breakers are in each state; closed counts only
// those with failures recorded or a recent promotion (Promoted).
func (b *Breakers) Counts() (closed, open, halfOpen int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.counts[Closed], b.counts[Open], b.counts[HalfOpen]
}

// Success records a request that reached the region and got an answer
// (including a redirect): the breaker closes.
func (b *Breakers) Success(p uint32, region string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := breakerKey{p, region}
	br := b.m[k]
	if br == nil {
		return
	}
	b.setState(p, region, br, Closed)
	b.counts[Closed]--
	delete(b.m, k)
}

// trackLocked returns k's breaker, adding a closed one if k has none;
// nil when the bound is reached even after dropping closed breakers (the
// pair is then not tracked, and keeps the plain windows).
func (b *Breakers) trackLocked(k breakerKey) *breaker {
	if br := b.m[k]; br != nil {
		return br
	}
	if len(b.m) >= b.cfg.MaxBreakers {
		b.dropClosedLocked()
		if len(b.m) >= b.cfg.MaxBreakers {
			return nil
		}
	}
	br := &breaker{}
	b.m[k] = br
	b.counts[Closed]++
	return br
}

// Failure records a failed request: FailureThreshold in a row open the
// breaker; a failed half-open probe reopens it.
func (b *Breakers) Failure(p uint32, region string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := breakerKey{p, region}
	br := b.trackLocked(k)
	if br == nil {
		return // bound reached: this pair is not tracked
	}
	openFor := b.openFor(br, now)
	switch br.state {
	case Closed:
		br.failures++
		if br.failures >= b.cfg.FailureThreshold {
			b.setState(p, region, br, Open)
			br.openUntil = now.Add(openFor)
		}
	case HalfOpen:
		b.setState(p, region, br, Open)
		br.openUntil = now.Add(openFor)
	case Open:
		br.openUntil = later(br.openUntil, now.Add(openFor))
	}
}

// Trip opens the breaker at once (for OpenFor), whatever its failure
// count: the caller has other evidence that the region is out (a live
// replica confirmed it is still the write region the request failed to
// reach). An open breaker's window is extended. Its half-open probes are
// quick (ProbeDeadline) for QuickProbeFor from the first Trip.
func (b *Breakers) Trip(p uint32, region string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := breakerKey{p, region}
	br := b.trackLocked(k)
	if br == nil {
		return // bound reached: this pair is not tracked
	}
	b.setState(p, region, br, Open)
	br.openUntil = later(br.openUntil, now.Add(b.openFor(br, now)))
	if br.trippedAt.IsZero() {
		br.trippedAt = now
	}
}

// Reset forgets the breaker of partition p and region (closed, no
// failures, no trip).
//
// Forgetting is what a success does too, so it shares Success's code.
func (b *Breakers) Reset(p uint32, region string) { b.Success(p, region) }

// Promoted records that region was made partition p's write region by a
// failover the caller learnt of at now: the breaker is closed with no
// failures and no trip (a failover commits only to a region that was
// live and caught up, so earlier failures are older than the route that
// now names it), and for QuickProbeFor it opens for PromotedOpenFor
// rather than OpenFor. A success forgets the mark with the breaker.
func (b *Breakers) Promoted(p uint32, region string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := breakerKey{p, region}
	br := b.trackLocked(k)
	if br == nil {
		return // bound reached: this pair is not tracked
	}
	b.setState(p, region, br, Closed)
	br.failures, br.trippedAt, br.openUntil, br.probeAt, br.promotedAt = 0, time.Time{}, time.Time{}, time.Time{}, now
}

// openFor is the open window of br opening at now.
func (b *Breakers) openFor(br *breaker, now time.Time) time.Duration {
	if !br.promotedAt.IsZero() && now.Sub(br.promotedAt) < b.cfg.QuickProbeFor {
		return b.cfg.PromotedOpenFor
	}
	return b.cfg.OpenFor
}

// Release gives back a half-open probe that ended without a verdict (the
// caller's context ended), so another request may probe.
func (b *Breakers) Release(p uint32, region string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if br := b.m[breakerKey{p, region}]; br != nil && br.state == HalfOpen {
		br.probeAt = time.Time{}
	}
}

func (b *Breakers) setState(p uint32, region string, br *breaker, to BreakerState) {
	from := br.state
	if from == to {
		return
	}
	b.counts[from]--
	b.counts[to]++
	br.state = to
	if to == Closed {
		br.failures = 0
	}
	if b.cfg.OnTransition != nil {
		b.cfg.OnTransition(p, region, from, to)
	}
}

// dropClosedLocked forgets closed breakers (their partial failure counts).
// The set dropped does not depend on map order.
func (b *Breakers) dropClosedLocked() {
	if b.counts[Closed] == 0 {
		// Full of open and half-open breakers: nothing to drop. Without
		// this every failure on an untracked pair rescanned the full
		// map (a 100k-partition region outage opens more than the
		// default bound, and the drill crawled).
		return
	}
	for k, br := range b.m {
		if br.state == Closed {
			delete(b.m, k)
			b.counts[Closed]--
		}
	}
}
