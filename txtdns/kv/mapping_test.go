package kv_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/txtdns"
	"github.com/fmnode/fmnode/txtdns/kv"
	"github.com/fmnode/fmnode/txtdns/routing"
)

// fakeAgent serves h as the only agent of region "a" (every partition
// written there at epoch 1) and returns a client with MaxAttempts 3 and
// a counter of the requests h got.
func fakeAgent(t *testing.T, h http.HandlerFunc) (*kv.Client, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	pub, err := txtdns.NewPublisher(txtdns.PublisherConfig{Zone: zone})
	require.NoError(t, err)
	_, err = pub.SetRegions(txtdns.RegionInfo{Region: "a", ConfigVersion: 1, Endpoints: []string{srv.Listener.Addr().String()}})
	require.NoError(t, err)
	for p := uint32(1); p <= parts; p++ {
		_, err = pub.Apply(txtdns.Route{Partition: p, Epoch: 1, WriteRegion: "a", Priority: []string{"a"}, ConfigVersion: 1})
		require.NoError(t, err)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := kv.New(kv.Config{
		Routing: routing.Config{Zone: zone, Resolver: routing.AuthorityResolver{Authority: pub}, PartitionCount: parts,
			MaxAttempts: 3, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond, RedirectPoll: 2 * time.Millisecond,
			MinRefreshInterval: time.Millisecond, Seed: 1},
		HTTP: &http.Client{Transport: tr}, Scheme: "http", Timeout: opWait, MaxRetryAfter: time.Second,
	})
	require.NoError(t, err)
	return c, &hits
}

// reply answers status with the API's JSON error body (code "" sends
// body as is) and the headers given as name, value pairs.
func reply(status int, code, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Add(headers[i], headers[i+1])
		}
		b := body
		if code != "" {
			b = `{"error":"` + body + `","code":"` + code + `"}`
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(b))
	}
}

// hangUp takes the connection over and closes it: the request arrived,
// the answer never will.
func hangUp(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

const key = "k"

// How every kind of answer maps, and whether it is retried (3 requests:
// MaxAttempts) or not (1).
func TestResponseMapping(t *testing.T) {
	hp, err := routing.NewOneBasedHashPartitioner(parts)
	require.NoError(t, err)
	p := hp.Partition(key)
	other := strconv.Itoa(int(p%parts + 1))
	isAPI := func(status int, code string) func(*testing.T, error) {
		return func(t *testing.T, err error) {
			var ae *kv.APIError
			require.ErrorAs(t, err, &ae)
			assert.Equal(t, status, ae.Status)
			assert.Equal(t, code, ae.Code)
			assert.Equal(t, "a", ae.Region)
		}
	}
	isRequest := func(status int, code string) func(*testing.T, error) {
		return func(t *testing.T, err error) {
			var re *kv.RequestError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, status, re.Status)
			assert.Equal(t, code, re.Code)
			assert.Equal(t, "nope", re.Message)
		}
	}
	isUnknown := func(status int) func(*testing.T, error) {
		return func(t *testing.T, err error) {
			var uo *kv.UnknownOutcomeError
			require.ErrorAs(t, err, &uo)
			assert.ErrorIs(t, err, kv.ErrUnknownOutcome)
			if status != 0 {
				isAPI(status, errorCode(err))(t, err)
			}
		}
	}
	exhausted := func(then func(*testing.T, error)) func(*testing.T, error) {
		return func(t *testing.T, err error) {
			require.ErrorIs(t, err, routing.ErrExhausted)
			then(t, err)
		}
	}
	is := func(target error) func(*testing.T, error) {
		return func(t *testing.T, err error) { assert.ErrorIs(t, err, target) }
	}
	for _, tc := range []struct {
		name  string
		read  bool
		h     http.HandlerFunc
		hits  int64
		check func(*testing.T, error) // nil: success
		found bool
	}{
		{name: "put 204", h: reply(http.StatusNoContent, "", "", kv.HeaderSession, "1:1"), hits: 1},
		{name: "put 204 with a malformed token is still a success", h: reply(http.StatusNoContent, "", "", kv.HeaderSession, "x"), hits: 1},
		{name: "put 204 of another partition", h: reply(http.StatusNoContent, "", "", kv.HeaderPartition, other), hits: 1,
			check: is(kv.ErrPartitionMismatch)},
		{name: "get 200", read: true, h: reply(http.StatusOK, "", "v", kv.HeaderVersion, "1:1", kv.HeaderSession, "1:2"), hits: 1, found: true},
		{name: "get 200 of another partition", read: true, h: reply(http.StatusOK, "", "v", kv.HeaderPartition, other), hits: 1,
			check: is(kv.ErrPartitionMismatch)},
		{name: "get 200 with a malformed version", read: true, h: reply(http.StatusOK, "", "v", kv.HeaderVersion, "1:01"), hits: 3,
			check: exhausted(is(kv.ErrMalformedResponse))},
		{name: "get 200 with two versions", read: true, h: reply(http.StatusOK, "", "v", kv.HeaderVersion, "1:1", kv.HeaderVersion, "1:2"), hits: 3,
			check: exhausted(is(kv.ErrMalformedResponse))},
		{name: "get 404 not_found", read: true, h: reply(http.StatusNotFound, kv.CodeNotFound, "no", kv.HeaderSession, "1:3"), hits: 1},
		{name: "get 404 unknown_partition", read: true, h: reply(http.StatusNotFound, kv.CodeUnknownPartition, "no"), hits: 3,
			check: exhausted(isAPI(http.StatusNotFound, kv.CodeUnknownPartition))},
		{name: "put 404 unknown_partition", h: reply(http.StatusNotFound, kv.CodeUnknownPartition, "no"), hits: 3,
			check: exhausted(isAPI(http.StatusNotFound, kv.CodeUnknownPartition))},
		{name: "get 404 no_route", read: true, h: reply(http.StatusNotFound, kv.CodeNoRoute, "no"), hits: 1,
			check: isAPI(http.StatusNotFound, kv.CodeNoRoute)},
		{name: "put 400 bad_header", h: reply(http.StatusBadRequest, kv.CodeBadHeader, "nope"), hits: 1,
			check: isRequest(http.StatusBadRequest, kv.CodeBadHeader)},
		{name: "get 400 bad_path", read: true, h: reply(http.StatusBadRequest, kv.CodeBadPath, "nope"), hits: 1,
			check: isRequest(http.StatusBadRequest, kv.CodeBadPath)},
		{name: "put 413 too_large", h: reply(http.StatusRequestEntityTooLarge, kv.CodeTooLarge, "nope"), hits: 1,
			check: isRequest(http.StatusRequestEntityTooLarge, kv.CodeTooLarge)},
		{name: "put 405", h: reply(http.StatusMethodNotAllowed, kv.CodeMethodNotAllowed, "no"), hits: 1,
			check: isAPI(http.StatusMethodNotAllowed, kv.CodeMethodNotAllowed)},
		{name: "put 301 is not followed", h: reply(http.StatusMovedPermanently, "", "", "Location", "http://127.0.0.1:1/"), hits: 1,
			check: isAPI(http.StatusMovedPermanently, "")},
		{name: "put 421", h: reply(http.StatusMisdirectedRequest, kv.CodeRedirect, "go", kv.HeaderEpoch, "1", kv.HeaderWriteRegion, "a",
			kv.HeaderRedirectReason, "not_write_region"), hits: 3,
			check: exhausted(func(t *testing.T, err error) {
				var rd routing.Redirect
				require.ErrorAs(t, err, &rd)
				rp, epoch, region := rd.RedirectTo()
				assert.Equal(t, p, rp)
				assert.Equal(t, uint64(1), epoch)
				assert.Equal(t, "a", region)
				assert.Contains(t, err.Error(), "not_write_region")
			})},
		{name: "put 421 without an epoch", h: reply(http.StatusMisdirectedRequest, kv.CodeRedirect, "go", kv.HeaderWriteRegion, "a"), hits: 3,
			check: exhausted(func(t *testing.T, err error) {
				assert.ErrorIs(t, err, kv.ErrMalformedResponse)
				var rd routing.Redirect
				assert.False(t, errors.As(err, &rd))
			})},
		{name: "put 421 with a bad region", h: reply(http.StatusMisdirectedRequest, kv.CodeRedirect, "go", kv.HeaderEpoch, "2", kv.HeaderWriteRegion, "A B"), hits: 3,
			check: exhausted(is(kv.ErrMalformedResponse))},
		{name: "put 429", h: reply(http.StatusTooManyRequests, kv.CodeBackpressure, "busy", "Retry-After", "0"), hits: 3,
			check: exhausted(isAPI(http.StatusTooManyRequests, kv.CodeBackpressure))},
		{name: "put 429 with a malformed Retry-After", h: reply(http.StatusTooManyRequests, kv.CodeBackpressure, "busy", "Retry-After", "soon"), hits: 3,
			check: exhausted(isAPI(http.StatusTooManyRequests, kv.CodeBackpressure))},
		{name: "put 503 overloaded", h: reply(http.StatusServiceUnavailable, kv.CodeOverloaded, "busy"), hits: 3,
			check: exhausted(isAPI(http.StatusServiceUnavailable, kv.CodeOverloaded))},
		{name: "get 503 stale", read: true, h: reply(http.StatusServiceUnavailable, kv.CodeStale, "behind"), hits: 3,
			check: exhausted(func(t *testing.T, err error) {
				var sr routing.StaleRead
				require.ErrorAs(t, err, &sr)
				assert.True(t, sr.StaleRead())
			})},
		{name: "put 503 canceled", h: reply(http.StatusServiceUnavailable, kv.CodeCanceled, "gone"), hits: 1,
			check: isUnknown(http.StatusServiceUnavailable)},
		{name: "get 503 canceled", read: true, h: reply(http.StatusServiceUnavailable, kv.CodeCanceled, "gone"), hits: 3,
			check: exhausted(isAPI(http.StatusServiceUnavailable, kv.CodeCanceled))},
		{name: "put 504 unknown_outcome", hits: 1,
			h: reply(http.StatusGatewayTimeout, kv.CodeUnknownOutcome, "maybe", kv.HeaderWriteToken, "2:9", kv.HeaderEpoch, "2", kv.HeaderWriteRegion, "b"),
			check: func(t *testing.T, err error) {
				var uo *kv.UnknownOutcomeError
				require.ErrorAs(t, err, &uo)
				assert.Equal(t, routing.SessionToken{Epoch: 2, LSN: 9}, uo.WriteToken)
				assert.Equal(t, uint64(2), uo.Epoch)
				assert.Equal(t, "b", uo.WriteRegion)
				assert.Equal(t, p, uo.Partition)
				assert.Contains(t, err.Error(), "2:9")
			}},
		{name: "put 504 unknown_outcome with a malformed token", hits: 1,
			h: reply(http.StatusGatewayTimeout, kv.CodeUnknownOutcome, "maybe", kv.HeaderWriteToken, "2-9"),
			check: func(t *testing.T, err error) {
				var uo *kv.UnknownOutcomeError
				require.ErrorAs(t, err, &uo)
				assert.True(t, uo.WriteToken.IsZero())
			}},
		{name: "get 504 timeout", read: true, h: reply(http.StatusGatewayTimeout, kv.CodeTimeout, "slow"), hits: 3,
			check: exhausted(isAPI(http.StatusGatewayTimeout, kv.CodeTimeout))},
		{name: "put 500 internal", h: reply(http.StatusInternalServerError, kv.CodeInternal, "oops"), hits: 1,
			check: isUnknown(http.StatusInternalServerError)},
		{name: "get 500 internal", read: true, h: reply(http.StatusInternalServerError, kv.CodeInternal, "oops"), hits: 3,
			check: exhausted(isAPI(http.StatusInternalServerError, kv.CodeInternal))},
		{name: "put 502 from a proxy", h: reply(http.StatusBadGateway, "", "<html>bad gateway</html>"), hits: 1,
			check: func(t *testing.T, err error) {
				isUnknown(http.StatusBadGateway)(t, err)
				var ae *kv.APIError
				require.ErrorAs(t, err, &ae)
				assert.Equal(t, "<html>bad gateway</html>", ae.Message)
			}},
		{name: "put connection lost after the request", h: hangUp, hits: 1, check: isUnknown(0)},
		{name: "get connection lost after the request", read: true, h: hangUp, hits: 3, check: is(routing.ErrExhausted)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, hits := fakeAgent(t, tc.h)
			ctx := opCtx(t)
			var err error
			found := false
			if tc.read {
				_, found, err = c.Get(ctx, key, routing.ConsistencyStrong)
			} else {
				err = c.Put(ctx, key, []byte("v"))
			}
			if tc.check == nil {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				tc.check(t, err)
			}
			assert.Equal(t, tc.found, found)
			assert.Equal(t, tc.hits, hits.Load(), "requests")
		})
	}
}

func errorCode(err error) string {
	var ae *kv.APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// The request the client sends: path, method and headers as the data API
// reads them.
func TestRequestHeaders(t *testing.T) {
	var (
		mu  sync.Mutex // the race detector does not see the loopback's ordering
		got []*http.Request
	)
	c, _ := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Clone(r.Context()))
		mu.Unlock()
		switch r.Method {
		case http.MethodGet:
			reply(http.StatusOK, "", "v", kv.HeaderVersion, "1:1", kv.HeaderSession, "1:4")(w, r)
		default:
			reply(http.StatusNoContent, "", "", kv.HeaderSession, "1:4")(w, r)
		}
	})
	ctx := opCtx(t)
	s := c.NewSession()
	require.NoError(t, s.Put(ctx, "a/b c", []byte("v")))
	_, _, err := s.Get(ctx, "a/b c", routing.ConsistencySession)
	require.NoError(t, err)
	_, _, err = c.Get(ctx, "a/b c", routing.ConsistencyStrong)
	require.NoError(t, err)
	_, _, err = c.Get(ctx, "a/b c", routing.ConsistencyBoundedStaleness)
	require.NoError(t, err)
	require.NoError(t, c.Delete(ctx, "a/b c"))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 5)
	for i, tc := range []struct {
		method, consistency, epoch, session string
	}{
		{http.MethodPut, "", "1", ""},
		{http.MethodGet, "session", "", "1:4"},
		{http.MethodGet, "strong", "1", ""},
		{http.MethodGet, "bounded", "", ""},
		{http.MethodDelete, "", "1", ""},
	} {
		r := got[i]
		assert.Equal(t, tc.method, r.Method, "request %d", i)
		assert.Equal(t, "/v1/kv/a%2Fb%20c", r.URL.EscapedPath(), "request %d", i)
		assert.Equal(t, tc.consistency, r.Header.Get(kv.HeaderConsistency), "request %d", i)
		assert.Equal(t, tc.epoch, r.Header.Get(kv.HeaderEpoch), "request %d", i)
		assert.Equal(t, tc.session, r.Header.Get(kv.HeaderSession), "request %d", i)
	}
	assert.Equal(t, int64(1), got[0].ContentLength)
	assert.Equal(t, routing.SessionToken{Epoch: 1, LSN: 4}, s.Token("a/b c"))
}

// An endpoint record that would change the URL's path is not dialled.
func TestBadEndpointRecord(t *testing.T) {
	pub, err := txtdns.NewPublisher(txtdns.PublisherConfig{Zone: zone})
	require.NoError(t, err)
	_, err = pub.SetRegions(txtdns.RegionInfo{Region: "a", ConfigVersion: 1, Endpoints: []string{"127.0.0.1:1/x"}})
	require.NoError(t, err)
	_, err = pub.Apply(txtdns.Route{Partition: 1, Epoch: 1, WriteRegion: "a", Priority: []string{"a"}, ConfigVersion: 1})
	require.NoError(t, err)
	c, err := kv.New(kv.Config{Routing: routing.Config{Zone: zone, Resolver: routing.AuthorityResolver{Authority: pub},
		PartitionCount: 1, MaxAttempts: 2, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond}, Scheme: "http"})
	require.NoError(t, err)
	err = c.Put(opCtx(t), key, []byte("v"))
	assert.ErrorIs(t, err, routing.ErrExhausted)
	assert.ErrorIs(t, err, kv.ErrInvalidRequest)
}

// With no http.Client given, the client builds its own.
func TestDefaultHTTPClient(t *testing.T) {
	w := newWorld(t, worldOpts{regions: []string{"a"}, client: func(c *kv.Config) { c.HTTP = nil }})
	ctx := opCtx(t)
	require.NoError(t, w.client.Put(ctx, key, []byte("v")))
	v, found, err := w.client.Get(ctx, key, routing.ConsistencyStrong)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, []byte("v"), v)
}
