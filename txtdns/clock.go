package txtdns

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Clock is the only source of time for the publisher's lag measurement and
// for the routing client's cache expiry, breakers and backoff. Production
// uses SystemClock; tests and the simulator use ManualClock or their own.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx is done, returning ctx's error then.
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits on a timer.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ManualClock is a virtual clock, the in-memory twin of SystemClock: Now
// returns the virtual time and Sleep advances it by d at once, so code that
// sleeps runs deterministically and instantly. Safe for concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
	// slept accumulates the virtual time spent in Sleep.
	slept time.Duration
}

// NewManualClock starts a virtual clock at start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now returns the virtual time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the virtual time forward by d (negative d is ignored).
func (c *ManualClock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Sleep advances the virtual time by d, unless ctx is already done.
func (c *ManualClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d > 0 {
		c.mu.Lock()
		c.now = c.now.Add(d)
		c.slept += d
		c.mu.Unlock()
	}
	return nil
}

// Slept returns the total virtual time spent in Sleep.
func (c *ManualClock) Slept() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slept
}

// DefaultCoarseResolution is CoarseClock's default refresh period.
const DefaultCoarseResolution = time.Millisecond

// CoarseClock is the wall clock read from a value that Run refreshes every
// resolution, so Now costs an atomic load instead of a clock read (which
// takes 25-100 ns on virtual machines). Use it where Now is on a hot path
// and a millisecond of error is harmless: the routing client's cache
// expiry, for instance. Before Run starts and after it returns, Now reads
// the system clock. Safe for concurrent use.
type CoarseClock struct {
	resolution time.Duration
	nowNanos   atomic.Int64 // unix nanoseconds; 0 while Run is not running
}

// NewCoarseClock returns a coarse clock refreshed every resolution
// (0 means DefaultCoarseResolution; at least 100 µs, at most 1 s).
func NewCoarseClock(resolution time.Duration) (*CoarseClock, error) {
	if resolution == 0 {
		resolution = DefaultCoarseResolution
	}
	if resolution < 100*time.Microsecond || resolution > time.Second {
		return nil, configErr("resolution", "%v: must be in [100µs, 1s]", resolution)
	}
	return &CoarseClock{resolution: resolution}, nil
}

// Run refreshes the clock until ctx is done.
func (c *CoarseClock) Run(ctx context.Context) {
	t := time.NewTicker(c.resolution)
	defer t.Stop()
	defer c.nowNanos.Store(0)
	c.nowNanos.Store(time.Now().UnixNano())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			c.nowNanos.Store(now.UnixNano())
		}
	}
}

// Now returns the last refreshed time (or time.Now when Run is not running).
func (c *CoarseClock) Now() time.Time {
	if n := c.nowNanos.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Now()
}

// Sleep waits on a timer, like SystemClock.
func (c *CoarseClock) Sleep(ctx context.Context, d time.Duration) error {
	return SystemClock{}.Sleep(ctx, d)
}
