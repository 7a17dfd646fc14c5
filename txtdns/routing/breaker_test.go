package routing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBreakerLifecycle(t *testing.T) {
	type step struct {
		at     time.Duration
		do     string // allow, ok, fail, release
		allow  bool   // for allow
		state  BreakerState
		reason string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"opens after threshold", []step{
			{0, "fail", false, Closed, "1st failure"},
			{0, "fail", false, Closed, "2nd failure"},
			{0, "fail", false, Open, "3rd failure opens"},
			{time.Second, "allow", false, Open, "open window"},
		}},
		{"success resets the count", []step{
			{0, "fail", false, Closed, ""},
			{0, "fail", false, Closed, ""},
			{0, "ok", false, Closed, "reset"},
			{0, "fail", false, Closed, "count restarted"},
			{0, "fail", false, Closed, ""},
		}},
		{"half-open probe success closes", []step{
			{0, "fail", false, Closed, ""}, {0, "fail", false, Closed, ""}, {0, "fail", false, Open, ""},
			{5 * time.Second, "allow", true, HalfOpen, "window over: the probe"},
			{5 * time.Second, "allow", false, HalfOpen, "one probe at a time"},
			{6 * time.Second, "ok", false, Closed, "probe succeeded"},
			{6 * time.Second, "allow", true, Closed, ""},
		}},
		{"half-open probe failure reopens", []step{
			{0, "fail", false, Closed, ""}, {0, "fail", false, Closed, ""}, {0, "fail", false, Open, ""},
			{5 * time.Second, "allow", true, HalfOpen, ""},
			{6 * time.Second, "fail", false, Open, "probe failed"},
			{10 * time.Second, "allow", false, Open, "new window from 6 s"},
			{11 * time.Second, "allow", true, HalfOpen, ""},
		}},
		{"lost probe", []step{
			{0, "fail", false, Closed, ""}, {0, "fail", false, Closed, ""}, {0, "fail", false, Open, ""},
			{5 * time.Second, "allow", true, HalfOpen, ""},
			{14 * time.Second, "allow", false, HalfOpen, "probe still out"},
			{15 * time.Second, "allow", true, HalfOpen, "probe timed out: another"},
			{15 * time.Second, "release", false, HalfOpen, "caller gave up"},
			{15 * time.Second, "allow", true, HalfOpen, "released: another"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var transitions []BreakerState
			b, err := NewBreakers(BreakerConfig{OnTransition: func(_ uint32, _ string, _, to BreakerState) {
				transitions = append(transitions, to)
			}})
			require.NoError(t, err)
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				switch s.do {
				case "allow":
					assert.Equal(t, s.allow, b.Allow(1, "eastus", now), "step %d %s", i, s.reason)
				case "ok":
					b.Success(1, "eastus")
				case "fail":
					b.Failure(1, "eastus", now)
				case "release":
					b.Release(1, "eastus")
				}
				assert.Equal(t, s.state, b.State(1, "eastus"), "step %d %s", i, s.reason)
				assert.True(t, b.Allow(2, "eastus", now), "other partitions unaffected")
				assert.True(t, b.Allow(1, "westus", now), "other regions unaffected")
			}
			_, open, half := b.Counts()
			st := b.State(1, "eastus")
			assert.Equal(t, st == Open, open == 1)
			assert.Equal(t, st == HalfOpen, half == 1)
		})
	}
}

func TestBreakerBound(t *testing.T) {
	b, err := NewBreakers(BreakerConfig{MaxBreakers: 2, FailureThreshold: 1})
	require.NoError(t, err)
	b.Failure(1, "a", t0)
	b.Failure(2, "a", t0)
	b.Failure(3, "a", t0) // full of open breakers: not tracked
	assert.Equal(t, Open, b.State(1, "a"))
	assert.Equal(t, Closed, b.State(3, "a"))
	_, err = NewBreakers(BreakerConfig{FailureThreshold: -1})
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "BreakerFailureThreshold")
}

// TestBreakerQuickProbes: a breaker a live replica tripped (a failover is
// pending) lets its half-open probes through with ProbeDeadline, for
// QuickProbeFor from its first Trip; one opened by failures alone, or
// tripped longer ago, probes with the caller's full timeout.
func TestBreakerQuickProbes(t *testing.T) {
	const deadline = 300 * time.Millisecond
	tests := []struct {
		name      string
		setup     func(b *Breakers)
		at        time.Duration
		wantDue   bool
		wantAllow bool
		wantLimit time.Duration
	}{
		{"tripped: quick probe after the window", func(b *Breakers) { b.Trip(1, "a", t0) },
			5 * time.Second, true, true, deadline},
		{"tripped: nothing within the window", func(b *Breakers) { b.Trip(1, "a", t0) },
			4 * time.Second, false, false, 0},
		{"opened by failures: full probe", func(b *Breakers) {
			for range 3 {
				b.Failure(1, "a", t0)
			}
		}, 5 * time.Second, false, true, 0},
		{"failed quick probe: the next is quick too", func(b *Breakers) {
			b.Trip(1, "a", t0)
			b.Allow(1, "a", t0.Add(5*time.Second))
			b.Failure(1, "a", t0.Add(5*time.Second+deadline))
		}, 10*time.Second + deadline, true, true, deadline},
		{"re-tripped: quickness counts from the first trip", func(b *Breakers) {
			b.Trip(1, "a", t0)
			b.Trip(1, "a", t0.Add(2*time.Minute+58*time.Second))
		}, 3*time.Minute + 3*time.Second, false, true, 0},
		{"closed by a success: a later trip starts over", func(b *Breakers) {
			b.Trip(1, "a", t0)
			b.Success(1, "a")
			b.Trip(1, "a", t0.Add(4*time.Minute))
		}, 4*time.Minute + 5*time.Second, true, true, deadline},
		{"lost quick probe: another, quick", func(b *Breakers) {
			b.Trip(1, "a", t0)
			b.Allow(1, "a", t0.Add(5*time.Second))
		}, 15 * time.Second, true, true, deadline},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBreakers(BreakerConfig{ProbeDeadline: deadline, QuickProbeFor: 3 * time.Minute})
			require.NoError(t, err)
			tc.setup(b)
			now := t0.Add(tc.at)
			assert.Equal(t, tc.wantDue, b.QuickProbeDue(1, "a", now))
			before := b.State(1, "a")
			ok, limit := b.AllowProbe(1, "a", now)
			assert.Equal(t, tc.wantAllow, ok)
			assert.Equal(t, tc.wantLimit, limit)
			if ok && before == Open {
				assert.Equal(t, HalfOpen, b.State(1, "a"), "the probe is out")
			}
			ok2, _ := b.AllowProbe(1, "a", now)
			assert.False(t, ok2 && before != Closed, "one probe at a time")
		})
	}
}

func TestBreakerProbeConfigErrorsNameTheField(t *testing.T) {
	tests := []struct {
		field string
		cfg   BreakerConfig
	}{
		{"BreakerProbeDeadline", BreakerConfig{ProbeDeadline: -time.Second}},
		{"BreakerProbeDeadline", BreakerConfig{ProbeDeadline: time.Minute, ProbeTimeout: time.Second}},
		{"BreakerQuickProbeFor", BreakerConfig{QuickProbeFor: -time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.field, func(t *testing.T) {
			_, err := NewBreakers(tc.cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
}

// TestBreakerPromotedRegionReopensSooner: a region made the partition's
// write region by a failover the client learnt of opens for
// PromotedOpenFor (1 s), not OpenFor (5 s), on failures or a trip, for
// QuickProbeFor after the promotion; a success forgets the mark.
func TestBreakerPromotedRegionReopensSooner(t *testing.T) {
	const quickFor = 3 * time.Minute
	tests := []struct {
		name     string
		promoted bool
		success  bool          // a success after the promotion
		at       time.Duration // when the failures start, after the promotion
		trip     bool          // a trip instead of FailureThreshold failures
		wantOpen time.Duration // the open window
		quick    bool          // the probe after it is quick
	}{
		{name: "plain region: OpenFor", wantOpen: 5 * time.Second},
		{name: "promoted, failures: PromotedOpenFor", promoted: true, at: time.Second, wantOpen: time.Second},
		{name: "promoted, tripped: PromotedOpenFor and a quick probe", promoted: true, at: time.Second, trip: true, wantOpen: time.Second, quick: true},
		{name: "promoted long ago: OpenFor", promoted: true, at: quickFor + time.Second, wantOpen: 5 * time.Second},
		{name: "promoted, then a success: OpenFor", promoted: true, success: true, at: time.Second, wantOpen: 5 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBreakers(BreakerConfig{QuickProbeFor: quickFor})
			require.NoError(t, err)
			if tc.promoted {
				b.Failure(1, "eastus", t0)
				b.Promoted(1, "eastus", t0)
				assert.Equal(t, Closed, b.State(1, "eastus"))
				assert.True(t, b.Allow(1, "eastus", t0), "a promotion closes the breaker")
			}
			if tc.success {
				b.Success(1, "eastus")
			}
			now := t0.Add(tc.at)
			if tc.trip {
				b.Trip(1, "eastus", now)
			} else {
				for range 3 {
					b.Failure(1, "eastus", now)
				}
			}
			require.Equal(t, Open, b.State(1, "eastus"))
			ok, _ := b.AllowProbe(1, "eastus", now.Add(tc.wantOpen-time.Millisecond))
			assert.False(t, ok, "open until the window ends")
			ok, deadline := b.AllowProbe(1, "eastus", now.Add(tc.wantOpen))
			assert.True(t, ok, "the probe at the window's end")
			assert.Equal(t, tc.quick, deadline > 0)
			// A failed probe reopens it for the same window.
			b.Failure(1, "eastus", now.Add(tc.wantOpen))
			ok, _ = b.AllowProbe(1, "eastus", now.Add(2*tc.wantOpen))
			assert.True(t, ok)
		})
	}
	_, err := NewBreakers(BreakerConfig{OpenFor: time.Second, PromotedOpenFor: 2 * time.Second})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "PromotedOpenFor")
}

// TestBreakerBoundFullOfOpenIsCheap: once the bound holds only open
// breakers, a failure on an untracked pair costs O(1), not a scan of the
// bound (a 100k-partition region outage opens more breakers than the
// default bound, and then every client failure rescanned 65,536 of them).
func TestBreakerBoundFullOfOpenIsCheap(t *testing.T) {
	const bound = 1 << 14
	b, err := NewBreakers(BreakerConfig{MaxBreakers: bound, FailureThreshold: 1})
	require.NoError(t, err)
	for p := uint32(1); p <= bound; p++ {
		b.Failure(p, "a", t0)
	}
	read, unlock := threadCPU()
	defer unlock()
	start := read()
	for p := uint32(bound + 1); p <= 2*bound; p++ {
		b.Failure(p, "a", t0)
	}
	used := read() - start
	assert.Equal(t, Closed, b.State(2*bound, "a"), "beyond the bound: not tracked")
	_, open, _ := b.Counts()
	assert.Equal(t, bound, open)
	assert.Less(t, used, 100*time.Millisecond, "%d failures on untracked pairs", bound)
}
