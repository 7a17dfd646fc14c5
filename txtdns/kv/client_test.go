package kv_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/dataapi"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/txtdns/kv"
	"github.com/fmnode/fmnode/txtdns/routing"
)

func TestNewValidates(t *testing.T) {
	good := func() kv.Config {
		return kv.Config{Routing: routing.Config{Zone: zone, Resolver: routing.NewMapResolver(), PartitionCount: parts}}
	}
	for _, tc := range []struct {
		name, field string
		mod         func(*kv.Config)
	}{
		{"scheme", "Scheme", func(c *kv.Config) { c.Scheme = "ftp" }},
		{"negative value bound", "MaxValueBytes", func(c *kv.Config) { c.MaxValueBytes = -1 }},
		{"value bound over the hard one", "MaxValueBytes", func(c *kv.Config) { c.MaxValueBytes = kv.HardMaxValueBytes + 1 }},
		{"negative retry-after bound", "MaxRetryAfter", func(c *kv.Config) { c.MaxRetryAfter = -time.Second }},
		{"retry-after bound too long", "MaxRetryAfter", func(c *kv.Config) { c.MaxRetryAfter = time.Hour }},
		{"negative timeout", "Timeout", func(c *kv.Config) { c.Timeout = -1 }},
		{"timeout too long", "Timeout", func(c *kv.Config) { c.Timeout = 2 * time.Hour }},
		{"routing without a zone", "Zone", func(c *kv.Config) { c.Routing.Zone = "" }},
		{"routing without partitions", "PartitionCount", func(c *kv.Config) { c.Routing.PartitionCount = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good()
			tc.mod(&cfg)
			_, err := kv.New(cfg)
			require.ErrorIs(t, err, kv.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
	_, err := kv.New(kv.Config{})
	assert.ErrorIs(t, err, routing.ErrInvalidConfig, "routing's sentinel is kept")
	c, err := kv.New(good())
	require.NoError(t, err)
	assert.NotNil(t, c.Routing())
}

func TestInvalidRequestsAreNotSent(t *testing.T) {
	w := newWorld(t, worldOpts{regions: []string{"a"}, client: func(c *kv.Config) { c.MaxValueBytes = 100 }})
	c := w.client
	ctx := opCtx(t)
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"empty key put", func() error { return c.Put(ctx, "", []byte("v")) }},
		{"empty key get", func() error { _, _, err := c.Get(ctx, "", routing.ConsistencyStrong); return err }},
		{"key too long", func() error { return c.Delete(ctx, strings.Repeat("k", kv.HardMaxKeyBytes+1)) }},
		{"value over MaxValueBytes", func() error { return c.Put(ctx, "k", make([]byte, 101)) }},
		{"unknown consistency", func() error { _, _, err := c.Get(ctx, "k", routing.Consistency(9)); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorIs(t, tc.call(), kv.ErrInvalidRequest)
		})
	}
	assert.Zero(t, w.regions["a"].seen.count(0), "nothing reached the agent")
}

// Put, Get and Delete at every consistency level, through three regions
// (no preferred region: every level reads at the write region first).
func TestPutGetDelete(t *testing.T) {
	w := newWorld(t, worldOpts{})
	ctx := opCtx(t)
	for _, tc := range []struct {
		cons routing.Consistency
		key  string
	}{
		{routing.ConsistencyStrong, "strong"},
		{routing.ConsistencyBoundedStaleness, "bounded/with a slash"},
		{routing.ConsistencySession, "session?%&#"},
		{routing.ConsistencyEventual, "eventual é"},
	} {
		t.Run(tc.cons.String(), func(t *testing.T) {
			c := w.client
			_, found, err := c.Get(ctx, tc.key, tc.cons)
			require.NoError(t, err)
			assert.False(t, found, "a missing key is not an error")

			require.NoError(t, c.Put(ctx, tc.key, []byte("v1")))
			require.NoError(t, c.Put(ctx, tc.key, []byte("v2")))
			it, found, err := c.GetItem(ctx, tc.key, tc.cons)
			require.NoError(t, err)
			require.True(t, found)
			assert.Equal(t, []byte("v2"), it.Value)
			assert.Equal(t, uint64(1), it.Version.Epoch)
			assert.NotZero(t, it.Version.LSN)
			v, ok := w.stored(t, "a", tc.key)
			assert.True(t, ok, "stored at the write region under the key as given")
			assert.Equal(t, []byte("v2"), v)

			require.NoError(t, c.Put(ctx, tc.key, nil), "an empty value")
			v, found, err = c.Get(ctx, tc.key, tc.cons)
			require.NoError(t, err)
			assert.True(t, found)
			assert.Empty(t, v)

			require.NoError(t, c.Delete(ctx, tc.key))
			require.NoError(t, c.Delete(ctx, tc.key), "deleting a missing key succeeds")
			_, found, err = c.Get(ctx, tc.key, tc.cons)
			require.NoError(t, err)
			assert.False(t, found)
		})
	}
	for _, name := range []string{"b", "c"} {
		assert.Zero(t, w.regions[name].seen.count(0), "region %s was never needed", name)
	}
}

// The agents failed over to b at epoch 2 before DNS said so: a write the
// client routes to a is redirected (421) and lands in b, and the route
// moves at once, so the next operations go to b directly.
func TestRedirectFollowed(t *testing.T) {
	w := newWorld(t, worldOpts{})
	ctx := opCtx(t)
	w.failover(t, 2, "b")
	require.NoError(t, w.client.Put(ctx, "k", []byte("v")))
	assert.Equal(t, 1, w.regions["a"].seen.count(http.StatusMisdirectedRequest))
	_, inA := w.stored(t, "a", "k")
	v, inB := w.stored(t, "b", "k")
	assert.False(t, inA)
	assert.True(t, inB)
	assert.Equal(t, []byte("v"), v)

	e, ok := w.client.Routing().Cache().Get(w.client.Routing().Partition("k"))
	require.True(t, ok)
	assert.Equal(t, uint64(2), e.Epoch)
	assert.Equal(t, "b", e.WriteRegion)

	got, found, err := w.client.Get(ctx, "k", routing.ConsistencyStrong)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, []byte("v"), got)
	assert.Equal(t, 1, w.regions["a"].seen.count(0), "after the redirect, a is not asked again")
}

// A stream of writes across a failover: every write succeeds, and those
// after it land in the new write region.
func TestFailoverMidStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		// at is called before write 20.
		at func(t *testing.T, w *world)
	}{
		{"agents first, DNS later", func(t *testing.T, w *world) { w.failover(t, 2, "b") }},
		{"old write region down, DNS updated", func(t *testing.T, w *world) {
			w.regions["a"].srv.Close()
			// A pooled connection to a could be reused and fail after the
			// request was written: an unknown outcome, rightly, but not
			// this test's point.
			w.tr.CloseIdleConnections()
			w.failover(t, 2, "b")
			w.publish(t, 2, "b")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, worldOpts{})
			ctx := opCtx(t)
			keys := make([]string, 40)
			for i := range keys {
				if i == 20 {
					tc.at(t, w)
				}
				if i == 30 {
					w.publish(t, 2, "b")
				}
				keys[i] = "stream-" + strconv.Itoa(i)
				require.NoError(t, w.client.Put(ctx, keys[i], []byte{byte(i)}), "write %d", i)
			}
			for i, k := range keys[20:] {
				v, ok := w.stored(t, "b", k)
				require.True(t, ok, "write %d in b", i+20)
				assert.Equal(t, []byte{byte(i + 20)}, v)
				got, found, err := w.client.Get(ctx, k, routing.ConsistencyStrong)
				require.NoError(t, err)
				assert.True(t, found)
				assert.Equal(t, v, got)
			}
			for p := uint32(1); p <= parts; p++ {
				e, ok := w.client.Routing().Cache().Get(p)
				require.True(t, ok)
				assert.Equal(t, uint64(2), e.Epoch, "partition %d", p)
			}
		})
	}
}

// Reads prefer region b, whose replica never gets a's writes (the
// MemBackends do not replicate: b is a replica that has not caught up). A
// session read sends its token; b cannot serve it (503 stale) and the
// read goes on to the write region, which can. A read outside the
// session is served by b, without the write.
func TestSessionReadYourWrites(t *testing.T) {
	w := newWorld(t, worldOpts{regions: []string{"a", "b"}, preferred: []string{"b"}})
	ctx := opCtx(t)
	s := w.client.NewSession()
	require.NoError(t, s.Put(ctx, "k", []byte("v1")))
	require.NoError(t, s.Put(ctx, "k", []byte("v2")))
	tok := s.Token("k")
	assert.Equal(t, uint64(1), tok.Epoch)
	assert.Equal(t, uint64(2), tok.LSN, "two writes of the partition")

	v, found, err := s.Get(ctx, "k", routing.ConsistencySession)
	require.NoError(t, err)
	require.True(t, found, "the session sees its write")
	assert.Equal(t, []byte("v2"), v)
	b := w.regions["b"].seen
	assert.Equal(t, 1, b.count(http.StatusServiceUnavailable), "b refused the session read as stale")
	assert.Equal(t, tok.String(), b.lastSession(), "the token went to b")

	_, found, err = w.client.Get(ctx, "k", routing.ConsistencySession)
	require.NoError(t, err)
	assert.False(t, found, "outside the session, b answers from its lagging replica")

	resumed, err := w.client.ResumeSession(s.Encode())
	require.NoError(t, err)
	v, found, err = resumed.Get(ctx, "k", routing.ConsistencySession)
	require.NoError(t, err)
	assert.True(t, found, "a resumed session keeps its tokens")
	assert.Equal(t, []byte("v2"), v)

	require.NoError(t, s.Delete(ctx, "k"))
	_, found, err = s.Get(ctx, "k", routing.ConsistencySession)
	require.NoError(t, err)
	assert.False(t, found, "the session sees its delete")

	_, err = w.client.ResumeSession("garbage")
	assert.ErrorIs(t, err, routing.ErrMalformedToken)
}

// A write whose outcome the agent cannot tell surfaces as the typed error
// at once: one write reached the backend, none was retried.
func TestUnknownOutcome(t *testing.T) {
	for _, tc := range []struct {
		name      string
		handler   func(*dataapi.Config)
		arm       func(t *testing.T, f *faultBackend)
		wantCode  string
		wantToken routing.SessionToken
		wantEpoch uint64
	}{
		{name: "504 unknown_outcome with its write token",
			arm: func(t *testing.T, f *faultBackend) {
				f.failWrites(&partition.UnknownOutcomeError{Token: partition.Token{Epoch: 1, LSN: 7}, Epoch: 1, WriteRegion: "a"})
			},
			wantCode: kv.CodeUnknownOutcome, wantToken: routing.SessionToken{Epoch: 1, LSN: 7}, wantEpoch: 1},
		{name: "504 unknown_outcome of an unforeseen failure",
			arm:      func(t *testing.T, f *faultBackend) { f.failWrites(errors.New("disk on fire")) },
			wantCode: kv.CodeUnknownOutcome},
		{name: "504 timeout",
			handler:  func(c *dataapi.Config) { c.RequestTimeout = 50 * time.Millisecond },
			arm:      func(t *testing.T, f *faultBackend) { t.Cleanup(f.hold()) },
			wantCode: kv.CodeTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, worldOpts{handler: tc.handler})
			a := w.regions["a"]
			tc.arm(t, a.faults)
			err := w.client.Put(opCtx(t), "k", []byte("v"))
			var uo *kv.UnknownOutcomeError
			require.ErrorAs(t, err, &uo)
			assert.ErrorIs(t, err, kv.ErrUnknownOutcome)
			assert.Equal(t, "put", uo.Op)
			assert.Equal(t, "k", uo.Key)
			assert.Equal(t, "a", uo.Region)
			assert.Equal(t, tc.wantToken, uo.WriteToken)
			assert.Equal(t, tc.wantEpoch, uo.Epoch)
			var ae *kv.APIError
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, http.StatusGatewayTimeout, ae.Status)
			assert.Equal(t, tc.wantCode, ae.Code)
			assert.Equal(t, int64(1), a.faults.writes.Load(), "not retried")
			assert.Equal(t, 1, a.seen.count(0)+w.regions["b"].seen.count(0)+w.regions["c"].seen.count(0))
		})
	}
}

// A read that times out at the agent is retried: reads are idempotent.
func TestReadTimeoutRetried(t *testing.T) {
	w := newWorld(t, worldOpts{regions: []string{"a"},
		handler: func(c *dataapi.Config) { c.RequestTimeout = 20 * time.Millisecond },
		client:  func(c *kv.Config) { c.Routing.MaxAttempts = 3 }})
	a := w.regions["a"]
	t.Cleanup(a.faults.hold())
	_, _, err := w.client.Get(opCtx(t), "k", routing.ConsistencyStrong)
	var ex *routing.ExhaustedError
	require.ErrorAs(t, err, &ex)
	var ae *kv.APIError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, kv.CodeTimeout, ae.Code)
	assert.Equal(t, int64(3), a.faults.reads.Load())
}

func TestTooLarge(t *testing.T) {
	w := newWorld(t, worldOpts{regions: []string{"a"},
		handler: func(c *dataapi.Config) { c.MaxOpBytes = 2048 },
		mem:     func(c *dataapi.MemConfig) { c.MaxOpBytes = 2048 }})
	a := w.regions["a"]
	ctx := opCtx(t)

	err := w.client.Put(ctx, "k", make([]byte, 4096))
	var re *kv.RequestError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, http.StatusRequestEntityTooLarge, re.Status)
	assert.Equal(t, kv.CodeTooLarge, re.Code)
	assert.NotEmpty(t, re.Message)
	var ae *kv.APIError
	assert.ErrorAs(t, err, &ae, "a RequestError is an APIError too")
	assert.Equal(t, 1, a.seen.count(0), "not retried")
	assert.NotErrorIs(t, err, kv.ErrUnknownOutcome)

	// A value over the reader's bound is refused once, not retried: every
	// replica holds the same value.
	require.NoError(t, w.client.Put(ctx, "k", make([]byte, 200)))
	cfg := kv.Config{Routing: routing.Config{Zone: zone, Resolver: routing.AuthorityResolver{Authority: w.pub}, PartitionCount: parts},
		HTTP: &http.Client{Transport: w.tr}, Scheme: "http", MaxValueBytes: 100}
	small, err := kv.New(cfg)
	require.NoError(t, err)
	before := a.seen.count(0)
	_, _, err = small.Get(ctx, "k", routing.ConsistencyStrong)
	assert.ErrorIs(t, err, kv.ErrMalformedResponse)
	assert.Equal(t, before+1, a.seen.count(0))
}

// A 429 or 503 with Retry-After (the agent's is whole seconds, at least
// 1) is waited out before the retry, up to MaxRetryAfter.
func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name          string
		fault         error
		status        int
		maxRetryAfter time.Duration
		atLeast       time.Duration
		below         time.Duration
	}{
		{"429 honoured", partition.ErrBackpressure, http.StatusTooManyRequests, 5 * time.Second, time.Second, 4 * time.Second},
		{"503 bounded by MaxRetryAfter", partition.ErrLeaseExpired, http.StatusServiceUnavailable, 20 * time.Millisecond, 20 * time.Millisecond, 900 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, worldOpts{regions: []string{"a"},
				client: func(c *kv.Config) { c.MaxRetryAfter = tc.maxRetryAfter }})
			a := w.regions["a"]
			a.faults.failWrites(tc.fault)
			start := time.Now()
			require.NoError(t, w.client.Put(opCtx(t), "k", []byte("v")))
			took := time.Since(start)
			assert.GreaterOrEqual(t, took, tc.atLeast)
			assert.Less(t, took, tc.below)
			assert.Equal(t, 1, a.seen.count(tc.status))
			assert.Equal(t, int64(2), a.faults.writes.Load())
		})
	}
}

// The end of the caller's context (or of Config.Timeout) ends the
// operation at once; a write whose request was sent is an unknown outcome,
// one never sent and any read are not.
func TestContextEnds(t *testing.T) {
	for _, tc := range []struct {
		name        string
		timeout     time.Duration // Config.Timeout; 0: the test cancels
		cancelFirst bool
		read        bool
		wantErr     error
		unknown     bool
		sent        bool
	}{
		{name: "write in flight", wantErr: context.Canceled, unknown: true, sent: true},
		{name: "read in flight", read: true, wantErr: context.Canceled, sent: true},
		{name: "canceled before the write", cancelFirst: true, wantErr: context.Canceled},
		{name: "Config.Timeout during the write", timeout: 100 * time.Millisecond, wantErr: context.DeadlineExceeded, unknown: true, sent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, worldOpts{regions: []string{"a"}, client: func(c *kv.Config) {
				if tc.timeout > 0 {
					c.Timeout = tc.timeout
				}
			}})
			a := w.regions["a"]
			t.Cleanup(a.faults.hold())
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.cancelFirst {
				cancel()
			}
			done := make(chan error, 1)
			go func() {
				if tc.read {
					_, _, err := w.client.Get(ctx, "k", routing.ConsistencyStrong)
					done <- err
					return
				}
				done <- w.client.Put(ctx, "k", []byte("v"))
			}()
			if tc.sent && tc.timeout == 0 {
				require.Eventually(t, func() bool { return a.faults.writes.Load()+a.faults.reads.Load() == 1 },
					5*time.Second, time.Millisecond, "the request reached the backend")
				cancel()
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the operation did not end with its context")
			}
			require.ErrorIs(t, err, tc.wantErr)
			assert.Equal(t, tc.unknown, errors.Is(err, kv.ErrUnknownOutcome), "unknown outcome: %v", err)
			if !tc.sent {
				assert.Zero(t, a.seen.count(0))
			}
		})
	}
}

func BenchmarkPut(b *testing.B) {
	w := newWorld(b, worldOpts{regions: []string{"a"}})
	ctx := b.Context()
	value := make([]byte, 256)
	require.NoError(b, w.client.Put(ctx, "warm", value)) // route and connection
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for b.Loop() {
		if err := w.client.Put(ctx, "bench", value); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPollAsksToBeHeld: while the write region is down and the live
// replicas still name it, the client polls them, and once it knows a
// region's round trip its polls carry Fm-Poll-Wait (the routing default,
// 1 s), which the data API hands the backend as the write's PollWait; the
// failover's commit then ends the write. (The MemBackends answer at once;
// partition/poll.go's tests hold.)
func TestPollAsksToBeHeld(t *testing.T) {
	w := newWorld(t, worldOpts{})
	w.regions["a"].srv.Close()
	w.tr.CloseIdleConnections()
	ctx := opCtx(t)
	done := make(chan error, 1)
	go func() { done <- w.client.Put(ctx, "k", []byte("v")) }()
	polled := func() int64 { return w.regions["b"].faults.heldPolls.Load() + w.regions["c"].faults.heldPolls.Load() }
	require.Eventually(t, func() bool { return polled() > 0 }, opWait, time.Millisecond, "no poll asked to be held")
	for _, r := range []string{"b", "c"} {
		if w.regions[r].faults.heldPolls.Load() > 0 {
			assert.Equal(t, int64(routing.DefaultPollWait), w.regions[r].faults.lastPollWait.Load())
		}
	}
	w.failover(t, 2, "b")
	require.NoError(t, <-done)
	v, ok := w.stored(t, "b", "k")
	require.True(t, ok)
	assert.Equal(t, []byte("v"), v)
}
