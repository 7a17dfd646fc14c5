package dataapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
)

// stubBackend answers every request with reply (Err set) or err, after
// calling hook (if set) with the request's context.
type stubBackend struct {
	reply partition.Reply
	err   error
	hook  func(ctx context.Context) error
}

func (s *stubBackend) answer(ctx context.Context) (partition.Reply, error) {
	if s.hook != nil {
		if err := s.hook(ctx); err != nil {
			return partition.Reply{}, err
		}
	}
	return s.reply, s.err
}

func (s *stubBackend) Write(ctx context.Context, _ partition.WriteRequest) (partition.Reply, error) {
	return s.answer(ctx)
}

func (s *stubBackend) Read(ctx context.Context, _ partition.ReadRequest) (partition.Reply, error) {
	return s.answer(ctx)
}

// serve starts the handler on 127.0.0.1 (httptest) and closes it at the end.
func serve(t *testing.T, cfg Config) (*httptest.Server, *Handler) {
	t.Helper()
	if cfg.Region == "" {
		cfg.Region = "eu"
	}
	if cfg.Partitions == 0 && cfg.Partitioner == nil {
		cfg.Partitions = 16
	}
	h, err := New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, h
}

func memServe(t *testing.T, mc MemConfig, cfg Config) (*httptest.Server, *MemBackend) {
	t.Helper()
	if mc.Region == "" {
		mc.Region = "eu"
	}
	m, err := NewMemBackend(mc)
	require.NoError(t, err)
	cfg.Backend, cfg.Region = m, mc.Region
	srv, _ := serve(t, cfg)
	return srv, m
}

type response struct {
	status int
	header http.Header
	body   []byte
	err    ErrorBody // decoded when the body is JSON
}

func do(t *testing.T, srv *httptest.Server, method, path string, body io.Reader, hdr map[string]string) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, body)
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := response{status: resp.StatusCode, header: resp.Header, body: b}
	if resp.Header.Get("Content-Type") == "application/json" {
		require.NoError(t, json.Unmarshal(b, &r.err), string(b))
		assert.NotEmpty(t, r.err.Code)
		assert.NotEmpty(t, r.err.Error)
	}
	return r
}

func TestRoundTrip(t *testing.T) {
	for _, cons := range []string{"", "strong", "bounded", "session", "eventual"} {
		t.Run("consistency="+cons, func(t *testing.T) {
			srv, _ := memServe(t, MemConfig{Epoch: 5}, Config{})
			key := []byte("user/42 ü?#")
			path := KeyPath(key)
			hdr := map[string]string{HeaderEpoch: "5"}
			if cons != "" {
				hdr[HeaderConsistency] = cons
			}
			put := do(t, srv, http.MethodPut, path, strings.NewReader("v1"), hdr)
			require.Equal(t, http.StatusNoContent, put.status, string(put.body))
			assert.Equal(t, "5", put.header.Get(HeaderEpoch))
			assert.Equal(t, "eu", put.header.Get(HeaderWriteRegion))
			assert.Equal(t, "5:1", put.header.Get(HeaderSession))
			part, err := NewHashPartitioner(16)
			require.NoError(t, err)
			assert.Equal(t, part.Partition(key).String(), put.header.Get(HeaderPartition))

			hdr[HeaderSession] = put.header.Get(HeaderSession)
			get := do(t, srv, http.MethodGet, path, nil, hdr)
			require.Equal(t, http.StatusOK, get.status, string(get.body))
			assert.Equal(t, "v1", string(get.body))
			assert.Equal(t, "5:1", get.header.Get(HeaderVersion), "the version is the write's token")
			assert.Equal(t, "5:1", get.header.Get(HeaderSession))
			assert.Equal(t, "5", get.header.Get(HeaderEpoch))
			assert.Equal(t, "application/octet-stream", get.header.Get("Content-Type"))
			if cons == "strong" {
				assert.Equal(t, "eu", get.header.Get(HeaderWriteRegion))
			}

			// An empty value is a value.
			put = do(t, srv, http.MethodPut, path, nil, hdr)
			require.Equal(t, http.StatusNoContent, put.status)
			get = do(t, srv, http.MethodGet, path, nil, hdr)
			require.Equal(t, http.StatusOK, get.status)
			assert.Empty(t, get.body)
			assert.Equal(t, "5:2", get.header.Get(HeaderVersion))

			del := do(t, srv, http.MethodDelete, path, nil, hdr)
			require.Equal(t, http.StatusNoContent, del.status, string(del.body))
			assert.Equal(t, "5:3", del.header.Get(HeaderSession))
			hdr[HeaderSession] = del.header.Get(HeaderSession)
			get = do(t, srv, http.MethodGet, path, nil, hdr)
			require.Equal(t, http.StatusNotFound, get.status)
			assert.Equal(t, CodeNotFound, get.err.Code)
			assert.Equal(t, "5:3", get.header.Get(HeaderSession), "a miss still reports the state read")
		})
	}
}

func TestSessionToken(t *testing.T) {
	srv, m := memServe(t, MemConfig{Epoch: 2}, Config{})
	w := map[string]string{HeaderEpoch: "2"}
	var tok string
	for i := range 3 {
		r := do(t, srv, http.MethodPut, KeyPath([]byte("k")), strings.NewReader(fmt.Sprint(i)), w)
		require.Equal(t, http.StatusNoContent, r.status)
		tok = r.header.Get(HeaderSession)
	}
	parsed, err := ParseToken(tok)
	require.NoError(t, err)
	assert.Equal(t, partition.Token{Epoch: 2, LSN: 3}, parsed)

	// This region becomes a follower: session reads are still served here
	// once it has the token, and refused (stale, retry elsewhere) beyond.
	require.NoError(t, m.SetWriteRegion(3, "us"))
	r := do(t, srv, http.MethodGet, KeyPath([]byte("k")), nil, map[string]string{HeaderConsistency: "session", HeaderSession: tok})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	assert.Equal(t, "2", string(r.body))
	assert.Equal(t, tok, r.header.Get(HeaderSession), "the token to merge")
	assert.Equal(t, "3", r.header.Get(HeaderEpoch))
	assert.Empty(t, r.header.Get(HeaderWriteRegion), "a session read does not know the write region")

	ahead := FormatToken(partition.Token{Epoch: 2, LSN: 4})
	r = do(t, srv, http.MethodGet, KeyPath([]byte("k")), nil, map[string]string{HeaderConsistency: "session", HeaderSession: ahead})
	assert.Equal(t, http.StatusServiceUnavailable, r.status)
	assert.Equal(t, CodeStale, r.err.Code)
	assert.Equal(t, "1", r.header.Get("Retry-After"))
}

func TestRedirect(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mem    MemConfig
		method string
		hdr    map[string]string
		reason string
	}{
		{"write at an old epoch to a follower", MemConfig{Epoch: 7, WriteRegion: "us"}, http.MethodPut, map[string]string{HeaderEpoch: "6"}, ReasonStaleEpoch},
		{"write with no epoch", MemConfig{Epoch: 7}, http.MethodPut, nil, ReasonStaleEpoch},
		{"delete at an old epoch to a follower", MemConfig{Epoch: 7, WriteRegion: "us"}, http.MethodDelete, map[string]string{HeaderEpoch: "1"}, ReasonStaleEpoch},
		{"strong read at an old epoch to a follower", MemConfig{Epoch: 7, WriteRegion: "us"}, http.MethodGet,
			map[string]string{HeaderEpoch: "6", HeaderConsistency: "strong"}, ReasonStaleEpoch},
		{"write ahead of the replica", MemConfig{Epoch: 7}, http.MethodPut, map[string]string{HeaderEpoch: "8"}, ReasonReplicaBehind},
		{"write to a follower", MemConfig{Epoch: 7, WriteRegion: "us"}, http.MethodPut, map[string]string{HeaderEpoch: "7"}, ReasonNotWriteRegion},
		{"strong read at a follower", MemConfig{Epoch: 7, WriteRegion: "us"}, http.MethodGet,
			map[string]string{HeaderEpoch: "7", HeaderConsistency: "strong"}, ReasonNotWriteRegion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, m := memServe(t, tc.mem, Config{})
			epoch, region := m.Epoch()
			r := do(t, srv, tc.method, KeyPath([]byte("k")), strings.NewReader("v"), tc.hdr)
			require.Equal(t, http.StatusMisdirectedRequest, r.status, string(r.body))
			assert.Equal(t, CodeRedirect, r.err.Code)
			// What the routing SDK's Redirect needs: partition, epoch, write region.
			assert.Equal(t, FormatEpoch(epoch), r.header.Get(HeaderEpoch))
			assert.Equal(t, string(region), r.header.Get(HeaderWriteRegion))
			assert.NotEmpty(t, r.header.Get(HeaderPartition))
			assert.Equal(t, tc.reason, r.header.Get(HeaderRedirectReason))
			assert.Empty(t, r.header.Get("Retry-After"), "a redirect is followed at once")
		})
	}
}

func TestTooLarge(t *testing.T) {
	srv, _ := memServe(t, MemConfig{}, Config{MaxKeyBytes: 8, MaxOpBytes: 32})
	hdr := map[string]string{HeaderEpoch: "1"}
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   io.Reader
		status int
	}{
		{"value at the bound", http.MethodPut, KeyPath([]byte("k")), strings.NewReader(strings.Repeat("v", 31)), http.StatusNoContent},
		{"value over the bound", http.MethodPut, KeyPath([]byte("k")), strings.NewReader(strings.Repeat("v", 32)), http.StatusRequestEntityTooLarge},
		{"key plus value over the bound", http.MethodPut, KeyPath([]byte("kkkkkkkk")), strings.NewReader(strings.Repeat("v", 25)), http.StatusRequestEntityTooLarge},
		{"chunked body over the bound", http.MethodPut, KeyPath([]byte("k")),
			io.MultiReader(strings.NewReader(strings.Repeat("v", 20)), strings.NewReader(strings.Repeat("v", 20))), http.StatusRequestEntityTooLarge},
		{"chunked body at the bound", http.MethodPut, KeyPath([]byte("k")),
			io.MultiReader(strings.NewReader(strings.Repeat("v", 20)), strings.NewReader(strings.Repeat("v", 11))), http.StatusNoContent},
		{"key over the bound", http.MethodGet, KeyPath([]byte("kkkkkkkkk")), nil, http.StatusRequestEntityTooLarge},
		{"escaped key over the bound", http.MethodDelete, KeyPath([]byte(strings.Repeat("/", 9))), nil, http.StatusRequestEntityTooLarge},
		{"escaped key at the bound", http.MethodDelete, KeyPath([]byte(strings.Repeat("/", 8))), nil, http.StatusNoContent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, srv, tc.method, tc.path, tc.body, hdr)
			require.Equal(t, tc.status, r.status, string(r.body))
			if tc.status == http.StatusRequestEntityTooLarge {
				assert.Equal(t, CodeTooLarge, r.err.Code)
			}
		})
	}
}

func TestBadRequest(t *testing.T) {
	srv, _ := memServe(t, MemConfig{}, Config{})
	for _, tc := range []struct {
		name   string
		method string
		path   string
		hdr    map[string]string
		status int
		code   string
		names  string // the error text names it
	}{
		{"bad consistency", http.MethodGet, "/v1/kv/k", map[string]string{HeaderConsistency: "linearizable"}, 400, CodeBadHeader, HeaderConsistency},
		{"alias consistency", http.MethodGet, "/v1/kv/k", map[string]string{HeaderConsistency: "bounded-staleness"}, 400, CodeBadHeader, HeaderConsistency},
		{"bad epoch", http.MethodPut, "/v1/kv/k", map[string]string{HeaderEpoch: "-1"}, 400, CodeBadHeader, HeaderEpoch},
		{"epoch overflow", http.MethodPut, "/v1/kv/k", map[string]string{HeaderEpoch: "18446744073709551616"}, 400, CodeBadHeader, HeaderEpoch},
		{"bad session", http.MethodGet, "/v1/kv/k", map[string]string{HeaderSession: "1.2"}, 400, CodeBadHeader, HeaderSession},
		{"long session", http.MethodGet, "/v1/kv/k", map[string]string{HeaderSession: strings.Repeat("1", 100) + ":1"}, 400, CodeBadHeader, HeaderSession},
		{"empty key", http.MethodPut, "/v1/kv/", nil, 400, CodeBadPath, "empty key"},
		{"no route", http.MethodGet, "/v2/kv/k", nil, 404, CodeNoRoute, "/v2/kv/k"},
		{"method", http.MethodPost, "/v1/kv/k", nil, 405, CodeMethodNotAllowed, "POST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, srv, tc.method, tc.path, nil, tc.hdr)
			require.Equal(t, tc.status, r.status, string(r.body))
			assert.Equal(t, tc.code, r.err.Code)
			assert.Contains(t, r.err.Error, tc.names)
		})
	}
	t.Run("repeated header", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/kv/k", nil)
		require.NoError(t, err)
		req.Header.Add(HeaderEpoch, "1")
		req.Header.Add(HeaderEpoch, "2")
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var eb ErrorBody
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&eb))
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
		assert.Equal(t, CodeBadHeader, eb.Code)
		assert.Contains(t, eb.Error, HeaderEpoch)
	})
}

func TestErrorMapping(t *testing.T) {
	uo := &partition.UnknownOutcomeError{Partition: 3, Token: partition.Token{Epoch: 4, LSN: 10}, Epoch: 5, WriteRegion: "us"}
	stale := &partition.StalenessError{Partition: 3, LagOps: 10, MaxOps: 5}
	for _, tc := range []struct {
		name       string
		method     string
		replyErr   error // the partition's answer
		backendErr error // the backend's own failure
		status     int
		code       string
		retryAfter bool
		hdr        map[string]string
	}{
		{"backpressure", http.MethodPut, fmt.Errorf("p 3: %w", partition.ErrBackpressure), nil, 429, CodeBackpressure, true, nil},
		{"lease expired", http.MethodGet, partition.ErrLeaseExpired, nil, 503, CodeLeaseExpired, true, nil},
		{"lease expired on a write", http.MethodPut, partition.ErrLeaseExpired, nil, 503, CodeLeaseExpired, true, nil},
		{"not ready", http.MethodGet, fmt.Errorf("p 3: %w", partition.ErrNotReady), nil, 503, CodeNotReady, true, nil},
		{"not fresh", http.MethodGet, partition.ErrNotFresh, nil, 503, CodeStale, true, nil},
		{"session unavailable", http.MethodGet, partition.ErrSessionUnavailable, nil, 503, CodeStale, true, nil},
		{"staleness bound", http.MethodPut, stale, nil, 503, CodeStalenessBound, true, nil},
		{"other read failure", http.MethodGet, errors.New("replica lost"), nil, 503, CodeUnavailable, true, nil},
		{"unknown outcome", http.MethodPut, uo, nil, 504, CodeUnknownOutcome, false,
			map[string]string{HeaderWriteToken: "4:10", HeaderEpoch: "5", HeaderWriteRegion: "us"}},
		{"bare unknown outcome", http.MethodDelete, partition.ErrUnknownOutcome, nil, 504, CodeUnknownOutcome, false, nil},
		{"unforeseen write failure", http.MethodPut, errors.New("disk on fire"), nil, 504, CodeUnknownOutcome, false, nil},
		{"too large", http.MethodPut, partition.ErrTooLarge, nil, 413, CodeTooLarge, false, nil},
		{"bad request", http.MethodGet, partition.ErrBadRequest, nil, 400, CodeBadRequest, false, nil},
		{"unknown partition", http.MethodGet, partition.ErrUnknownPartition, nil, 404, CodeUnknownPartition, false, nil},
		{"redirect in the reply", http.MethodPut, &partition.RedirectError{Partition: 3, Epoch: 9, WriteRegion: "ap", Reason: partition.ReasonPaused}, nil,
			421, CodeRedirect, false, map[string]string{HeaderEpoch: "9", HeaderWriteRegion: "ap", HeaderRedirectReason: ReasonPaused, HeaderPartition: "3"}},
		{"backend deadline", http.MethodPut, nil, context.DeadlineExceeded, 504, CodeTimeout, false, nil},
		{"backend busy", http.MethodPut, nil, fmt.Errorf("driver: %w", partition.ErrBackpressure), 429, CodeBackpressure, true, nil},
		{"backend stopped", http.MethodGet, nil, errors.New("noderun: stopped"), 500, CodeInternal, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := serve(t, Config{Backend: &stubBackend{reply: partition.Reply{Err: tc.replyErr}, err: tc.backendErr},
				RetryAfter: 1500 * time.Millisecond})
			r := do(t, srv, tc.method, "/v1/kv/k", strings.NewReader("v"), nil)
			require.Equal(t, tc.status, r.status, string(r.body))
			assert.Equal(t, tc.code, r.err.Code)
			if tc.retryAfter {
				assert.Equal(t, "2", r.header.Get("Retry-After"), "rounded up to seconds")
			} else {
				assert.Empty(t, r.header.Get("Retry-After"))
			}
			for k, v := range tc.hdr {
				assert.Equal(t, v, r.header.Get(k), k)
			}
			if tc.status == 500 {
				assert.Contains(t, r.err.Error, "noderun: stopped", "the error text")
			}
		})
	}
}

func TestOverload(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	stub := &stubBackend{hook: func(ctx context.Context) error {
		once.Do(func() { close(entered) })
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	srv, _ := serve(t, Config{Backend: stub, MaxInFlight: 1})
	first := make(chan int, 1) // the first request's status (-1: it failed)
	go func() {
		req, err := http.NewRequest(http.MethodPut, srv.URL+"/v1/kv/a", strings.NewReader("v"))
		if err != nil {
			first <- -1
			return
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			first <- -1
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-entered

	start := time.Now()
	r := do(t, srv, http.MethodGet, "/v1/kv/b", nil, nil)
	assert.Less(t, time.Since(start), 2*time.Second, "refused at once, not queued")
	assert.Equal(t, http.StatusServiceUnavailable, r.status)
	assert.Equal(t, CodeOverloaded, r.err.Code)
	assert.Equal(t, "1", r.header.Get("Retry-After"))

	close(release)
	assert.Equal(t, http.StatusNoContent, <-first)
	assert.Equal(t, CodeNotFound, do(t, srv, http.MethodGet, "/v1/kv/b", nil, nil).err.Code, "the slot is free again")
}

func TestRequestTimeout(t *testing.T) {
	stub := &stubBackend{hook: func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}}
	srv, _ := serve(t, Config{Backend: stub, RequestTimeout: 50 * time.Millisecond})
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		t.Run(method, func(t *testing.T) {
			start := time.Now()
			r := do(t, srv, method, "/v1/kv/k", nil, nil)
			assert.Equal(t, http.StatusGatewayTimeout, r.status)
			assert.Equal(t, CodeTimeout, r.err.Code)
			assert.Less(t, time.Since(start), 5*time.Second)
			if method != http.MethodGet {
				assert.Contains(t, r.err.Error, "outcome is unknown")
			}
		})
	}
}

func TestConfig(t *testing.T) {
	m, err := NewMemBackend(MemConfig{Region: "eu"})
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		cfg   Config
		field string
	}{
		{"no backend", Config{Region: "eu", Partitions: 1}, "Config.Backend"},
		{"no region", Config{Backend: m, Partitions: 1}, "Config.Region"},
		{"no partitions", Config{Backend: m, Region: "eu"}, "Config.Partitions"},
		{"key bound", Config{Backend: m, Region: "eu", Partitions: 1, MaxKeyBytes: partition.HardMaxKeyBytes + 1}, "Config.MaxKeyBytes"},
		{"op bound", Config{Backend: m, Region: "eu", Partitions: 1, MaxOpBytes: partition.HardMaxOpBytes + 1}, "Config.MaxOpBytes"},
		{"op below key", Config{Backend: m, Region: "eu", Partitions: 1, MaxKeyBytes: 100, MaxOpBytes: 10}, "Config.MaxOpBytes"},
		{"in flight", Config{Backend: m, Region: "eu", Partitions: 1, MaxInFlight: -1}, "Config.MaxInFlight"},
		{"timeout", Config{Backend: m, Region: "eu", Partitions: 1, RequestTimeout: -time.Second}, "Config.RequestTimeout"},
		{"retry after", Config{Backend: m, Region: "eu", Partitions: 1, RetryAfter: 2 * time.Hour}, "Config.RetryAfter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
	_, err = New(Config{Backend: m, Region: "eu", Partitioner: PartitionerFunc(func([]byte) partition.ID { return 0 })})
	assert.NoError(t, err, "a Partitioner needs no Partitions")
}

// The same registry can take a restarted handler (promreg reuses).
func TestHandlerRestartSameRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		_, err := New(Config{Backend: &stubBackend{}, Region: "eu", Partitions: 1, Registerer: reg})
		require.NoError(t, err)
	}
}
