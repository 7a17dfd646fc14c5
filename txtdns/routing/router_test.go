package routing

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/txtdns"
)

func newTestRouter(t *testing.T, mod func(*RouterConfig)) *Router {
	t.Helper()
	cfg := RouterConfig{Partitions: 8, Rand: NewRand(7)}
	if mod != nil {
		mod(&cfg)
	}
	r, err := NewRouter(cfg)
	require.NoError(t, err)
	// Partitions 0-7: epoch 3, write region eastus.
	r.OfferRun(txtdns.Run{Lo: 0, Hi: 7, Epoch: 3, WriteRegion: "eastus", Priority: prio, ConfigVersion: 1}, 5*time.Second, t0, 0)
	return r
}

// send steps op until it asks to send, and returns that decision.
func mustSend(t *testing.T, op *Operation, now time.Time) Decision {
	t.Helper()
	d := op.Next(now)
	require.Equal(t, ActSend, d.Action, "decision %+v", d)
	return d
}

func TestRouterConfigErrorsNameTheField(t *testing.T) {
	tests := []struct {
		field string
		cfg   RouterConfig
	}{
		{"PartitionCount", RouterConfig{Rand: NewRand(1)}},
		{"Rand", RouterConfig{Partitions: 1}},
		{"MaxAttempts", RouterConfig{Partitions: 1, Rand: NewRand(1), MaxAttempts: -1}},
		{"RedirectPoll", RouterConfig{Partitions: 1, Rand: NewRand(1), RedirectPoll: -time.Second}},
		{"BackoffMax", RouterConfig{Partitions: 1, Rand: NewRand(1), BackoffBase: time.Second, BackoffMax: time.Millisecond}},
	}
	for _, tc := range tests {
		t.Run(tc.field, func(t *testing.T) {
			_, err := NewRouter(tc.cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
}

// TestOperationRedirects: what the pure core does with each kind of
// redirect the data plane answers a write with.
func TestOperationRedirects(t *testing.T) {
	tests := []struct {
		name     string
		redirect error
		// want: the cache after the redirect, the verdict, the next region
		wantEpoch  uint64
		wantWrite  string
		wantWait   bool // a (poll) wait before the next attempt
		wantNext   string
		wantNextEp uint64
		wantFailed int
	}{
		{name: "newer epoch: follow at once",
			redirect:  &RedirectError{Partition: 5, Epoch: 4, WriteRegion: "westus"},
			wantEpoch: 4, wantWrite: "westus", wantNext: "westus", wantNextEp: 4},
		{name: "same epoch, same region: nothing new, poll another region",
			redirect:  &RedirectError{Partition: 5, Epoch: 3, WriteRegion: "eastus"},
			wantEpoch: 3, wantWrite: "eastus", wantWait: true, wantNext: "westus", wantNextEp: 3, wantFailed: 1},
		{name: "older epoch is refused",
			redirect:  &RedirectError{Partition: 5, Epoch: 2, WriteRegion: "northeu"},
			wantEpoch: 3, wantWrite: "eastus", wantWait: true, wantNext: "westus", wantNextEp: 3, wantFailed: 1},
		{name: "same epoch naming another region is refused",
			redirect:  &RedirectError{Partition: 5, Epoch: 3, WriteRegion: "northeu"},
			wantEpoch: 3, wantWrite: "eastus", wantWait: true, wantNext: "westus", wantNextEp: 3, wantFailed: 1},
		{name: "another partition's redirect is ignored",
			redirect:  &RedirectError{Partition: 6, Epoch: 9, WriteRegion: "westus"},
			wantEpoch: 3, wantWrite: "eastus", wantWait: true, wantNext: "westus", wantNextEp: 3, wantFailed: 1},
		{name: "unknown write region is no route",
			redirect:  &RedirectError{Partition: 5, Epoch: 4, WriteRegion: ""},
			wantEpoch: 3, wantWrite: "eastus", wantWait: true, wantNext: "westus", wantNextEp: 3, wantFailed: 1},
		{name: "wrapped redirect is found",
			redirect:  errors.Join(errors.New("rpc"), &RedirectError{Partition: 5, Epoch: 7, WriteRegion: "northeu"}),
			wantEpoch: 7, wantWrite: "northeu", wantNext: "northeu", wantNextEp: 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRouter(t, nil)
			op := r.Begin(5, Request{Write: true})
			d := mustSend(t, &op, t0)
			assert.Equal(t, "eastus", d.Region)
			assert.Equal(t, uint64(3), d.Entry.Epoch)
			v := op.Report(t0, tc.redirect)
			assert.Equal(t, AttemptRedirect, v.Class)
			require.False(t, v.Done)
			e, ok := r.Cache().Get(5)
			require.True(t, ok)
			assert.Equal(t, tc.wantEpoch, e.Epoch)
			assert.Equal(t, tc.wantWrite, e.WriteRegion)
			if tc.wantWait {
				assert.Positive(t, v.Wait)
				assert.LessOrEqual(t, v.Wait, DefaultRedirectPoll, "nothing new: poll, not a full backoff")
			} else {
				assert.Zero(t, v.Wait, "a newer route is tried at once")
			}
			assert.Equal(t, tc.wantFailed, op.Attempts())
			d = mustSend(t, &op, t0.Add(v.Wait))
			assert.Equal(t, tc.wantNext, d.Region)
			assert.Equal(t, tc.wantNextEp, d.Entry.Epoch)
			v = op.Report(t0.Add(v.Wait), nil)
			assert.True(t, v.Done)
			assert.NoError(t, v.Err)
			assert.Equal(t, ActDone, op.Next(t0).Action, "a finished operation stays finished")
		})
	}
}

func TestOperationRedirectBound(t *testing.T) {
	r := newTestRouter(t, func(c *RouterConfig) { c.MaxRedirects = 2 })
	op := r.Begin(1, Request{Write: true})
	var v Verdict
	for epoch := uint64(4); ; epoch++ {
		require.Less(t, epoch, uint64(10), "the redirects must be bounded")
		mustSend(t, &op, t0)
		v = op.Report(t0, &RedirectError{Partition: 1, Epoch: epoch, WriteRegion: prio[epoch%3]})
		if v.Done {
			break
		}
	}
	require.ErrorIs(t, v.Err, ErrTooManyRedirects)
	require.ErrorIs(t, v.Err, ErrExhausted)
	var ex *ExhaustedError
	require.ErrorAs(t, v.Err, &ex)
	assert.Equal(t, 3, ex.Redirects)
}

// TestOperationFailuresWalkThePriorityList: failures force a DNS refresh,
// open the region's breaker after the threshold, back off and move to the
// next region; the attempts are bounded.
func TestOperationFailuresWalkThePriorityList(t *testing.T) {
	r := newTestRouter(t, func(c *RouterConfig) { c.MaxAttempts = 6 })
	op := r.Begin(2, Request{Write: true})
	now := t0
	var regions []string
	var resolves int
	for i := 0; ; i++ {
		require.Less(t, i, 50)
		d := op.Next(now)
		switch d.Action {
		case ActResolve:
			assert.True(t, d.Force, "only a failure asks DNS while the route is fresh")
			resolves++
			d = op.Resolved(now, nil, errors.New("dns down"))
			if d.Action == ActWait {
				now = now.Add(d.Wait)
				continue
			}
		case ActWait:
			now = now.Add(d.Wait)
			continue
		case ActDone:
			t.Fatalf("ended early: %v", d.Err)
		}
		require.Equal(t, ActSend, d.Action)
		regions = append(regions, d.Region)
		v := op.Report(now, errors.New("timeout"))
		if v.Done {
			require.ErrorIs(t, v.Err, ErrExhausted)
			break
		}
		assert.Positive(t, v.Wait)
		assert.LessOrEqual(t, v.Wait, DefaultBackoffMax)
		now = now.Add(v.Wait)
	}
	assert.Equal(t, []string{"eastus", "westus", "northeu"}, regions[:3], "priority order")
	assert.Positive(t, resolves)
	assert.Equal(t, 6, op.Attempts())
	assert.Equal(t, Open, r.Breakers().State(2, "eastus"))
}

func TestOperationMisuse(t *testing.T) {
	r := newTestRouter(t, nil)
	op := r.Begin(1, Request{Write: true})
	v := op.Report(t0, nil)
	assert.True(t, v.Done)
	assert.Error(t, v.Err, "Report without an attempt")

	op = r.Begin(1, Request{Write: true})
	mustSend(t, &op, t0)
	d := op.Next(t0)
	assert.Equal(t, ActDone, d.Action)
	assert.Error(t, d.Err, "Next before Report")

	op = r.Begin(1, Request{Write: true})
	mustSend(t, &op, t0)
	d = op.Cancel(errors.New("caller gone"))
	assert.Equal(t, ActDone, d.Action)
	assert.Equal(t, Closed, r.Breakers().State(1, "eastus"), "a cancelled attempt is no verdict")
}

// TestRouterNeverMovesBackwards: whatever order answers and redirects
// come in (stale resolvers, lagging replicas), a partition's cached epoch
// never decreases and always equals the newest epoch offered.
func TestRouterNeverMovesBackwards(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		r, err := NewRouter(RouterConfig{Partitions: 4, Rand: NewRand(seed)})
		require.NoError(t, err)
		newest := make([]uint64, 4)
		now := t0
		for range 500 {
			now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
			p := uint32(rng.IntN(4))
			epoch := uint64(1 + rng.IntN(10))
			region := prio[rng.IntN(len(prio))]
			if rng.IntN(2) == 0 {
				lo := p - min(p, uint32(rng.IntN(2)))
				r.OfferRun(txtdns.Run{Lo: lo, Hi: p, Epoch: epoch, WriteRegion: region, Priority: prio, ConfigVersion: 1}, 5*time.Second, now, p)
				for q := lo; q <= p; q++ {
					newest[q] = max(newest[q], epoch)
				}
			} else {
				r.Redirect(p, epoch, region, now)
				newest[p] = max(newest[p], epoch)
			}
			for q := range uint32(4) {
				if e, ok := r.Cache().Get(q); ok {
					require.Equal(t, newest[q], e.Epoch, "seed %d partition %d", seed, q)
				}
			}
		}
	}
}

// TestRouterIsDeterministic: the same inputs and seed give the same
// decisions (the simulator's trace hashes rely on it).
func TestRouterIsDeterministic(t *testing.T) {
	run := func() []Decision {
		r := newTestRouter(t, nil)
		var out []Decision
		now := t0
		for i := range 20 {
			op := r.Begin(uint32(i%8), Request{Write: true})
			for range 10 {
				d := op.Next(now)
				if d.Action == ActResolve {
					d = op.Resolved(now, nil, errors.New("no dns"))
				}
				d.Entry = nil
				out = append(out, d)
				if d.Action == ActDone {
					break
				}
				if d.Action == ActWait {
					now = now.Add(d.Wait)
					continue
				}
				v := op.Report(now, errors.New("down"))
				out = append(out, Decision{Wait: v.Wait, Err: v.Err})
				now = now.Add(v.Wait)
				if v.Done {
					break
				}
			}
		}
		return out
	}
	assert.Equal(t, run(), run())
}

func TestRetryDelayPollsWhileAFailoverIsPending(t *testing.T) {
	r := newTestRouter(t, nil)
	pending := r.Begin(1, Request{Write: true})
	mustSend(t, &pending, t0)
	pending.Report(t0, &RedirectError{Partition: 1, Epoch: 3, WriteRegion: "eastus"})
	failing := r.Begin(2, Request{Write: true})
	mustSend(t, &failing, t0)
	failing.Report(t0, errors.New("timeout"))
	for n := 1; n <= 20; n++ {
		assert.LessOrEqual(t, pending.RetryDelay(n), DefaultRedirectPoll)
		assert.GreaterOrEqual(t, pending.RetryDelay(n), DefaultRedirectPoll*3/4, "a steady poll: at most a quarter early")
		assert.LessOrEqual(t, failing.RetryDelay(n), DefaultBackoffMax)
	}
	assert.Greater(t, failing.RetryDelay(20), DefaultRedirectPoll, "other failures back off further")
}

// TestOperationQuickProbeWhileFailoverPending: eastus, the write region
// of partition 1, is tripped (a live replica confirmed it is still the
// write region after an attempt there failed: a failover is pending). Its
// half-open probe must never make an operation sit in the dead region's
// timeout: it goes after fresh news from a live region, with the probe
// deadline, and the operation moves on at once when it fails.
func TestOperationQuickProbeWhileFailoverPending(t *testing.T) {
	notYet := &RedirectError{Partition: 1, Epoch: 3, WriteRegion: "eastus"}
	committed := &RedirectError{Partition: 1, Epoch: 4, WriteRegion: "westus"}
	timeout := errors.New("timeout")
	const probeDeadline = 300 * time.Millisecond
	type step struct {
		region  string        // the attempt Next must send
		timeout time.Duration // its Decision.Timeout
		result  error
		wait    string // "none", "poll" (steady poll), "done"
	}
	tests := []struct {
		name  string
		at    time.Duration // after the trip
		prio  []string      // the partition's priority list (default prio)
		steps []step
		// attempts counted by the operation at the end
		attempts  int
		wantState BreakerState
	}{
		{name: "within the open window: the fastest live region is polled", at: time.Second,
			steps: []step{
				{"westus", 0, notYet, "poll"},
				{"westus", 0, notYet, "poll"},
				{"westus", 0, committed, "none"},
				{"westus", 0, nil, "done"},
			}, attempts: 2, wantState: Open},
		{name: "a follower with an older view: the next region is asked", at: time.Second,
			steps: []step{
				{"westus", 0, &RedirectError{Partition: 1, Epoch: 2, WriteRegion: "eastus"}, "backoff"},
				{"northeu", 0, committed, "none"},
				{"westus", 0, nil, "done"},
			}, attempts: 1, wantState: Open},
		{name: "probe due: a live region first, then the probe at once, then on at once", at: 5 * time.Second,
			steps: []step{
				{"westus", 0, notYet, "none"},
				{"eastus", probeDeadline, timeout, "none"},
				{"westus", 0, notYet, "poll"},
			}, attempts: 2, wantState: Open},
		{name: "probe due during a poll wait: the live follower first, then the probe", at: 5*time.Second - 200*time.Millisecond,
			steps: []step{
				{"westus", 0, notYet, "poll"},
				{"westus", 0, committed, "none"},
				{"westus", 0, nil, "done"},
			}, attempts: 1, wantState: Open},
		{name: "probe due during a poll wait, failover still pending", at: 5*time.Second - 200*time.Millisecond,
			steps: []step{
				{"westus", 0, notYet, "poll"},
				{"westus", 0, notYet, "none"},
				{"eastus", probeDeadline, timeout, "none"},
				{"westus", 0, notYet, "poll"},
			}, attempts: 3, wantState: Open},
		{name: "commit during the probe: the live follower redirects", at: 5 * time.Second,
			steps: []step{
				{"westus", 0, notYet, "none"},
				{"eastus", probeDeadline, timeout, "none"},
				{"westus", 0, committed, "none"},
				{"westus", 0, nil, "done"},
			}, attempts: 1, wantState: Open},
		{name: "the region came back: the probe closes the breaker", at: 5 * time.Second,
			steps: []step{
				{"westus", 0, notYet, "none"},
				{"eastus", probeDeadline, nil, "done"},
			}, attempts: 1, wantState: Closed},
		{name: "no live region to ask: the probe goes anyway", at: 5 * time.Second, prio: []string{"eastus"},
			steps: []step{
				{"eastus", probeDeadline, timeout, "none"},
			}, attempts: 0, wantState: Open},
		{name: "tripped long ago: a full probe, first", at: 3*time.Minute + time.Second,
			steps: []step{
				{"eastus", 0, timeout, "backoff"},
			}, attempts: 1, wantState: Open},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRouter(t, func(c *RouterConfig) {
				c.Breaker.ProbeDeadline = probeDeadline
				c.Breaker.QuickProbeFor = 3 * time.Minute
			})
			if tc.prio != nil {
				r.OfferRun(txtdns.Run{Lo: 1, Hi: 1, Epoch: 3, WriteRegion: "eastus", Priority: tc.prio, ConfigVersion: 2}, time.Hour, t0, 1)
			}
			r.Breakers().Trip(1, "eastus", t0)
			// westus answers faster than northeu: polls go there.
			r.lat.observe("westus", 10*time.Millisecond)
			r.lat.observe("northeu", 80*time.Millisecond)
			// The DNS route stays fresh for the test (forced refreshes are
			// answered from the cache).
			r.OfferRun(txtdns.Run{Lo: 1, Hi: 1, Epoch: 3, WriteRegion: "eastus", Priority: cmpPrio(tc.prio), ConfigVersion: 3}, time.Hour, t0.Add(tc.at), 1)
			now := t0.Add(tc.at)
			op := r.Begin(1, Request{Write: true})
			for i, s := range tc.steps {
				d := op.Next(now)
				if d.Action == ActResolve {
					e, _ := r.Cache().Get(1)
					d = op.Resolved(now, e, nil)
				}
				require.Equal(t, ActSend, d.Action, "step %d: %+v", i, d)
				assert.Equal(t, s.region, d.Region, "step %d", i)
				assert.Equal(t, s.timeout, d.Timeout, "step %d", i)
				if d.Timeout > 0 {
					now = now.Add(d.Timeout)
				}
				v := op.Report(now, s.result)
				switch s.wait {
				case "none":
					assert.False(t, v.Done, "step %d", i)
					assert.Zero(t, v.Wait, "step %d: the next attempt goes at once", i)
				case "poll":
					assert.False(t, v.Done, "step %d", i)
					assert.GreaterOrEqual(t, v.Wait, DefaultRedirectPoll*3/4, "step %d: steady poll, not faster", i)
					assert.LessOrEqual(t, v.Wait, DefaultRedirectPoll, "step %d", i)
				case "backoff":
					assert.False(t, v.Done, "step %d", i)
					assert.Positive(t, v.Wait, "step %d", i)
				case "done":
					assert.True(t, v.Done, "step %d", i)
					assert.NoError(t, v.Err, "step %d", i)
				}
				now = now.Add(v.Wait)
			}
			assert.Equal(t, tc.attempts, op.Attempts(), "a quick probe is not one of the operation's attempts")
			assert.Equal(t, tc.wantState, r.Breakers().State(1, "eastus"))
		})
	}
}

func cmpPrio(p []string) []string {
	if p == nil {
		return prio
	}
	return p
}

// TestOperationQuickProbesAreBounded: however long a failover stays
// pending, operations end within MaxAttempts polls, quick probes at most
// once per open window, and no attempt waits past the probe deadline.
func TestOperationQuickProbesAreBounded(t *testing.T) {
	r := newTestRouter(t, nil)
	r.Breakers().Trip(1, "eastus", t0)
	now := t0
	var probes, sends int
	for now.Before(t0.Add(3*time.Minute - 10*time.Second)) { // within QuickProbeFor
		op := r.Begin(1, Request{Write: true})
		for steps := 0; ; steps++ {
			require.Less(t, steps, 100, "an operation's steps are bounded")
			var d Decision
			if d, now = nextSend(t, r, &op, now); d.Action == ActDone {
				break
			}
			sends++
			var v Verdict
			if d.Region == "eastus" {
				probes++
				require.Positive(t, d.Timeout, "every probe of the dead region is quick")
				now = now.Add(d.Timeout)
				v = op.Report(now, errors.New("timeout"))
			} else {
				v = op.Report(now, &RedirectError{Partition: 1, Epoch: 3, WriteRegion: "eastus"})
			}
			now = now.Add(v.Wait)
			if v.Done {
				break
			}
		}
		now = now.Add(op.RetryDelay(1))
	}
	elapsed := now.Sub(t0)
	assert.LessOrEqual(t, probes, int(elapsed/(5*time.Second))+1, "at most one probe per open window")
	assert.Positive(t, probes)
	assert.LessOrEqual(t, float64(sends)/elapsed.Seconds(), 2/DefaultRedirectPoll.Seconds()+1,
		"polls stay near one per RedirectPoll")
}

// TestPartitionRedirectIsARedirect: the data plane's typed redirect
// satisfies Redirect as is (no conversion), wrapped or not.
func TestPartitionRedirectIsARedirect(t *testing.T) {
	var _ Redirect = (*partition.RedirectError)(nil)
	tests := []struct {
		name string
		err  error
	}{
		{"bare", &partition.RedirectError{Partition: 1, Epoch: 4, WriteRegion: "westus", Reason: partition.ReasonStaleEpoch, RequestEpoch: 3}},
		{"wrapped", fmt.Errorf("rpc: %w", &partition.RedirectError{Partition: 1, Epoch: 4, WriteRegion: "westus", Reason: partition.ReasonNotWriteRegion})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRouter(t, nil)
			assert.Equal(t, AttemptRedirect, r.Classify(tc.err))
			op := r.Begin(1, Request{Write: true})
			mustSend(t, &op, t0)
			v := op.Report(t0, tc.err)
			assert.Zero(t, v.Wait)
			d := mustSend(t, &op, t0)
			assert.Equal(t, "westus", d.Region)
			assert.Equal(t, uint64(4), d.Entry.Epoch)
		})
	}
}

// TestRouterPromotedRegionLeavesItsBreaker: a breaker opened against a
// region (while it was a follower, or down) is forgotten when a newer
// epoch names that region the write region, learnt by redirect or DNS; a
// route that is not newer, or names another region, leaves it open.
func TestRouterPromotedRegionLeavesItsBreaker(t *testing.T) {
	tests := []struct {
		name      string
		learn     func(r *Router, now time.Time)
		wantState BreakerState
		wantFirst string // where the next operation's first attempt goes
	}{
		{name: "redirect to a newer epoch naming it",
			learn:     func(r *Router, now time.Time) { r.Redirect(2, 4, "westus", now) },
			wantState: Closed, wantFirst: "westus"},
		{name: "DNS answer with a newer epoch naming it",
			learn: func(r *Router, now time.Time) {
				r.OfferRun(txtdns.Run{Lo: 2, Hi: 2, Epoch: 4, WriteRegion: "westus", Priority: prio, ConfigVersion: 1}, 5*time.Second, now, 2)
			},
			wantState: Closed, wantFirst: "westus"},
		{name: "same epoch: nothing learnt",
			learn:     func(r *Router, now time.Time) { r.Redirect(2, 3, "eastus", now) },
			wantState: Open, wantFirst: "eastus"},
		{name: "newer epoch naming another region",
			learn:     func(r *Router, now time.Time) { r.Redirect(2, 4, "northeu", now) },
			wantState: Open, wantFirst: "northeu"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRouter(t, nil)
			for range r.Config().Breaker.FailureThreshold {
				r.Breakers().Failure(2, "westus", t0)
			}
			r.Breakers().Trip(2, "westus", t0)
			require.Equal(t, Open, r.Breakers().State(2, "westus"))
			now := t0.Add(time.Second)
			tc.learn(r, now)
			assert.Equal(t, tc.wantState, r.Breakers().State(2, "westus"))
			op := r.Begin(2, Request{Write: true})
			assert.Equal(t, tc.wantFirst, mustSend(t, &op, now).Region)
		})
	}
}

// TestOperationNewRouteStartsAfresh: what an operation failed under an
// old route says nothing of a newer one. A graceful switchover: the
// fenced write region answers "paused", the next region does not answer
// (it is being promoted, or its node restarts), DNS then names it the
// write region at a newer epoch: the next attempt goes there, and a live
// replica naming it does not trip its breaker as a pending failover.
func TestOperationNewRouteStartsAfresh(t *testing.T) {
	r := newTestRouter(t, nil)
	op := r.Begin(2, Request{Write: true})
	now := t0
	d := mustSend(t, &op, now)
	require.Equal(t, "eastus", d.Region)
	v := op.Report(now, &partition.RedirectError{Partition: 2, Epoch: 3, WriteRegion: "eastus", Reason: partition.ReasonPaused})
	require.False(t, v.Done)
	require.Positive(t, v.Wait, "paused: nothing new, poll")
	now = now.Add(v.Wait)
	d = mustSend(t, &op, now)
	require.Equal(t, "westus", d.Region)
	v = op.Report(now, errors.New("timeout"))
	require.False(t, v.Done)
	now = now.Add(v.Wait)
	d = op.Next(now)
	require.Equal(t, ActResolve, d.Action)
	r.OfferRun(txtdns.Run{Lo: 0, Hi: 7, Epoch: 4, WriteRegion: "westus", Priority: prio, ConfigVersion: 1}, 5*time.Second, now, 2)
	e, ok := r.Cache().Get(2)
	require.True(t, ok)
	d = op.Resolved(now, e, nil)
	require.Equal(t, ActSend, d.Action)
	assert.Equal(t, "westus", d.Region, "the new write region first, though it failed under the old route")
	assert.Equal(t, uint64(4), d.Entry.Epoch)
	// Had it gone elsewhere: a live replica names westus at epoch 4; an
	// attempt that failed under epoch 3 is no evidence of a pending failover.
	v = op.Report(now, errors.New("timeout"))
	require.False(t, v.Done)
	now = now.Add(v.Wait)
	if d = op.Next(now); d.Action == ActResolve {
		e, _ = r.Cache().Get(2)
		d = op.Resolved(now, e, nil)
	}
	require.Equal(t, ActSend, d.Action)
	require.NotEqual(t, "westus", d.Region)
	op.Report(now, &RedirectError{Partition: 2, Epoch: 4, WriteRegion: "westus"})
	assert.Equal(t, Open, r.Breakers().State(2, "westus"), "failed under epoch 4 and named at epoch 4: tripped")
}

// TestOperationRouteMovedWhileInFlight: the route moved past the epoch an
// attempt carried while it was in flight (another operation's redirect,
// or a DNS answer, possibly a range naming many partitions). The
// attempt's redirect then leaves the cache unchanged, yet it is news for
// this operation: the next attempt goes to the newer route at once, not
// after a poll wait. (Traced in the 4300-partition drill: a client's
// redirect to the new epoch waited 345 ms because a DNS answer for
// another partition's run had taught its router the new route first.)
func TestOperationRouteMovedWhileInFlight(t *testing.T) {
	committed := &RedirectError{Partition: 1, Epoch: 4, WriteRegion: "westus"}
	notYet := &RedirectError{Partition: 1, Epoch: 3, WriteRegion: "eastus"}
	tests := []struct {
		name  string
		move  func(r *Router) // while the attempt is in flight
		reply error
	}{
		{"another operation's redirect", func(r *Router) {
			r.Redirect(1, 4, "westus", t0)
		}, committed},
		{"a DNS answer naming a run of partitions", func(r *Router) {
			r.OfferRun(txtdns.Run{Lo: 0, Hi: 7, Epoch: 4, WriteRegion: "westus", Priority: prio, ConfigVersion: 2}, 5*time.Second, t0, 5)
		}, committed},
		{"a replica not yet told answers the old route", func(r *Router) {
			r.Redirect(1, 4, "westus", t0)
		}, notYet},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRouter(t, nil)
			op := r.Begin(1, Request{Write: true})
			d := mustSend(t, &op, t0)
			require.Equal(t, uint64(3), d.Entry.Epoch)
			tc.move(r)
			v := op.Report(t0, tc.reply)
			require.False(t, v.Done)
			assert.Zero(t, v.Wait, "the newer route is tried at once")
			assert.Zero(t, op.Attempts(), "not a failed attempt")
			d = mustSend(t, &op, t0)
			assert.Equal(t, "westus", d.Region)
			assert.Equal(t, uint64(4), d.Entry.Epoch)
		})
	}
}

// TestRouterCutOffFromTheNewWriteRegion: the route moves to westus at a
// newer epoch, but this client cannot reach it (a cut); live replicas name
// it. Its breaker opens and is probed about every PromotedOpenFor (1 s)
// plus a poll wait and the probe's deadline, so once the cut heals the
// client is there within about 2 s, not OpenFor (5 s) and more.
func TestRouterCutOffFromTheNewWriteRegion(t *testing.T) {
	tests := []struct {
		name        string
		promotedFor time.Duration
		within      bool // back within 2.5 s of the heal (PromotedOpenFor + a poll + a probe)
	}{
		{"default PromotedOpenFor", 0, true},
		{"PromotedOpenFor = OpenFor (as before)", 5 * time.Second, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The worst over heals at every phase of the probe cadence.
			var worst time.Duration
			for k := range 24 {
				worst = max(worst, cutOffReturn(t, tc.promotedFor, 20*time.Second+time.Duration(k)*250*time.Millisecond))
			}
			t.Logf("back %v after the heal at worst", worst)
			assert.Equal(t, tc.within, worst <= 2500*time.Millisecond, "back %v after the heal at worst", worst)
		})
	}
}

// nextSend steps op (of partition 1) to its next attempt: it resolves
// from r's cache and waits as told, and returns the send (or the end of
// the operation) and the time then.
func nextSend(t *testing.T, r *Router, op *Operation, now time.Time) (Decision, time.Time) {
	t.Helper()
	for range 1000 {
		d := op.Next(now)
		if d.Action == ActResolve {
			e, _ := r.Cache().Get(1)
			d = op.Resolved(now, e, nil)
		}
		if d.Action != ActWait {
			require.Contains(t, []Action{ActSend, ActDone}, d.Action)
			return d, now
		}
		now = now.Add(d.Wait)
	}
	require.FailNow(t, "an operation waits forever")
	return Decision{}, now
}

// cutOffReturn is how long after the heal (at healAt) the client's
// write lands.
func cutOffReturn(t *testing.T, promotedFor, healAt time.Duration) time.Duration {
	r := newTestRouter(t, func(c *RouterConfig) { c.Breaker.PromotedOpenFor = promotedFor })
	now := t0
	r.Redirect(1, 4, "westus", now)
	heal := now.Add(healAt)
	var landed time.Time
	for steps := 0; landed.IsZero(); steps++ {
		require.Less(t, steps, 1000)
		op := r.Begin(1, Request{Write: true})
		for landed.IsZero() {
			var d Decision
			if d, now = nextSend(t, r, &op, now); d.Action == ActDone {
				break
			}
			var v Verdict
			switch {
			case d.Region == "westus" && now.Before(heal):
				timeout := time.Second
				if d.Timeout > 0 {
					timeout = d.Timeout
				}
				now = now.Add(timeout)
				v = op.Report(now, errors.New("timeout"))
			case d.Region == "westus":
				v = op.Report(now, nil)
				landed = now
			default:
				v = op.Report(now, &RedirectError{Partition: 1, Epoch: 4, WriteRegion: "westus"})
			}
			now = now.Add(v.Wait)
			if v.Done {
				break
			}
		}
		if landed.IsZero() {
			now = now.Add(op.RetryDelay(1))
		}
	}
	return landed.Sub(heal)
}

// TestPollTargetIsTheFastestLiveRegion: while a live region confirms the
// route, polls go to the region that answers fastest, among those not
// failed in the operation and not behind a breaker; a region never
// measured is asked first (to measure it).
func TestPollTargetIsTheFastestLiveRegion(t *testing.T) {
	ms := time.Millisecond
	cands := []string{"eastus", "westus", "northeu"}
	tests := []struct {
		name   string
		lat    map[string]time.Duration
		failed []string
		open   []string
		want   string
	}{
		{"fastest", map[string]time.Duration{"eastus": 70 * ms, "westus": 150 * ms, "northeu": 20 * ms}, nil, nil, "northeu"},
		{"a region never measured first", map[string]time.Duration{"eastus": 1 * ms, "northeu": 20 * ms}, nil, nil, "westus"},
		{"failed in the operation: skipped", map[string]time.Duration{"eastus": 1 * ms, "westus": 150 * ms, "northeu": 20 * ms}, []string{"eastus"}, nil, "northeu"},
		{"breaker open: skipped", map[string]time.Duration{"eastus": 1 * ms, "westus": 150 * ms, "northeu": 20 * ms}, nil, []string{"eastus", "northeu"}, "westus"},
		{"ties in candidate order", map[string]time.Duration{"eastus": 5 * ms, "westus": 5 * ms, "northeu": 5 * ms}, nil, nil, "eastus"},
		{"none left", map[string]time.Duration{"eastus": 1 * ms, "westus": 1 * ms, "northeu": 1 * ms}, []string{"eastus", "westus"}, []string{"northeu"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRouter(t, func(c *RouterConfig) { c.NoPollWait = true })
			for reg, d := range tc.lat {
				r.lat.observe(reg, d)
			}
			var failed triedSet
			for _, f := range tc.failed {
				failed.add(f)
			}
			for _, o := range tc.open {
				r.Breakers().Trip(1, o, t0)
			}
			got, ok := r.pollTarget(1, cands, &failed, "")
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.want != "", ok)
			// Held polls go to the first eligible candidate, whatever
			// the latencies.
			held := newTestRouter(t, nil)
			for reg, d := range tc.lat {
				held.lat.observe(reg, d)
			}
			for _, o := range tc.open {
				held.Breakers().Trip(1, o, t0)
			}
			eligible := func(c string) bool { return !failed.has(c) && !slices.Contains(tc.open, c) }
			want := ""
			for _, c := range cands[1:] {
				if eligible(c) {
					want = c
					break
				}
			}
			if want == "" && eligible(cands[0]) {
				want = cands[0] // the write region, only when nothing else is eligible
			}
			got, ok = held.pollTarget(1, cands, &failed, cands[0])
			assert.Equal(t, want, got, "held")
			assert.Equal(t, want != "", ok)
		})
	}
}

// TestOperationPollsTheNearRegion: the write region eastus is tripped
// (a failover is pending); westus answers in 150 ms, northeu in 20 ms.
// An operation measures both, then polls northeu only, and follows
// its redirect once the failover commits. (Rotating sent every other
// poll to the far region; sticking to the first region that answered
// kept polling it.)
// Polls that are not held (NoPollWait); held ones go in priority order
// (TestOperationHeldPolls).
func TestOperationPollsTheNearRegion(t *testing.T) {
	notYet := &RedirectError{Partition: 1, Epoch: 3, WriteRegion: "eastus"}
	r := newTestRouter(t, func(c *RouterConfig) { c.MaxAttempts, c.NoPollWait = 20, true })
	r.Breakers().Trip(1, "eastus", t0)
	r.OfferRun(txtdns.Run{Lo: 1, Hi: 1, Epoch: 3, WriteRegion: "eastus", Priority: prio, ConfigVersion: 2}, time.Hour, t0, 1)
	rtt := map[string]time.Duration{"westus": 150 * time.Millisecond, "northeu": 20 * time.Millisecond}
	now := t0.Add(time.Second) // within the open window: no probe
	op := r.Begin(1, Request{Write: true})
	var sent []string
	for i := range 6 {
		d := mustSend(t, &op, now)
		sent = append(sent, d.Region)
		assert.True(t, d.Poll, "a poll of a pending failover")
		now = now.Add(rtt[d.Region])
		var reply error = notYet
		if i == 5 {
			reply = &RedirectError{Partition: 1, Epoch: 4, WriteRegion: "northeu"}
		}
		v := op.Report(now, reply)
		require.False(t, v.Done)
		now = now.Add(v.Wait)
	}
	assert.Equal(t, []string{"westus", "northeu", "northeu", "northeu", "northeu", "northeu"}, sent)
	d := mustSend(t, &op, now)
	assert.Equal(t, "northeu", d.Region)
	assert.Equal(t, uint64(4), d.Entry.Epoch)
	assert.False(t, d.Poll, "the new write region: not a poll")
}

// TestOperationHeldPolls: a poll asks the replica to hold it (PollWait)
// and goes to the first live candidate in priority order, the likely
// failover target, however much faster another live region answers (the
// new epoch starts at the new write region: a poll held there is served
// at the promotion). The next poll leaves RedirectPoll after the last was
// sent, not after its answer, and a held poll's time is not taken as the
// region's round trip. NoPollWait holds none, and polls the nearest.
func TestOperationHeldPolls(t *testing.T) {
	notYet := &RedirectError{Partition: 1, Epoch: 3, WriteRegion: "eastus"}
	rtt := map[string]time.Duration{"westus": 150 * time.Millisecond, "northeu": 20 * time.Millisecond}
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoPollWait=%v", off), func(t *testing.T) {
			r := newTestRouter(t, func(c *RouterConfig) { c.MaxAttempts, c.NoPollWait = 20, off })
			r.Breakers().Trip(1, "eastus", t0)
			r.OfferRun(txtdns.Run{Lo: 1, Hi: 1, Epoch: 3, WriteRegion: "eastus", Priority: prio, ConfigVersion: 2}, time.Hour, t0, 1)
			now := t0.Add(time.Second)
			op := r.Begin(1, Request{Write: true})
			var sent []string
			for i, held := range []time.Duration{100 * time.Millisecond, 900 * time.Millisecond, 0, 0} {
				d := mustSend(t, &op, now)
				require.True(t, d.Poll)
				sent = append(sent, d.Region)
				if off {
					assert.Zero(t, d.PollWait)
					held = rtt[d.Region]
				} else {
					assert.Equal(t, DefaultPollWait, d.PollWait)
					held = max(held, rtt[d.Region])
				}
				now = now.Add(held)
				v := op.Report(now, notYet)
				require.False(t, v.Done)
				if !off {
					assert.LessOrEqual(t, v.Wait, max(0, DefaultRedirectPoll-held), "poll %d held %v: polls stay RedirectPoll apart from send to send", i, held)
					assert.GreaterOrEqual(t, v.Wait, max(0, DefaultRedirectPoll*3/4-held))
				}
				now = now.Add(v.Wait)
			}
			if off {
				assert.Equal(t, []string{"westus", "northeu", "northeu", "northeu"}, sent, "not held: measured, then the nearest")
				return
			}
			assert.Equal(t, []string{"westus", "westus", "westus", "westus"}, sent, "held: the first in priority order")
			_, measured := r.lat.get("westus")
			assert.False(t, measured, "a held poll's time is not a round trip")
		})
	}
}
