package routing

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		assert.LessOrEqual(t, failing.RetryDelay(n), DefaultBackoffMax)
	}
	assert.Greater(t, failing.RetryDelay(20), DefaultRedirectPoll, "other failures back off further")
}
