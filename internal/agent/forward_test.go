package agent

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"crypto/tls"
	"crypto/x509"
	"github.com/fmnode/fmnode/internal/dataapi"
)

// forwardThrough sends method to a forwarding proxy whose target is
// addr, and returns the status and error code the client sees.
func forwardThrough(t *testing.T, method, addr string) (int, string) {
	p := newForwardProxy("http", &http.Transport{}, "n1", slog.New(slog.DiscardHandler))
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.ServeHTTP(w, r.WithContext(withForward(r, addr)))
	}))
	defer front.Close()
	req, err := http.NewRequest(method, front.URL+"/v1/kv/k", strings.NewReader("v"))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body dataapi.ErrorBody
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &body)
	return resp.StatusCode, body.Code
}

// TestForwardedWriteToADyingNodeIsUnknownOutcome: the hosting node
// received the write and died before answering (kill -9 between commit
// and reply). The forwarding agent must not call that "unavailable",
// which tells the client the write was not applied and may be retried.
func TestForwardedWriteToADyingNodeIsUnknownOutcome(t *testing.T) {
	dying := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // received...
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // ...and gone without an answer
		}
	}))
	defer dying.Close()
	addr := strings.TrimPrefix(dying.URL, "http://")
	for _, method := range []string{http.MethodPut, http.MethodDelete} {
		st, code := forwardThrough(t, method, addr)
		assert.Equal(t, http.StatusGatewayTimeout, st, method)
		assert.Equal(t, dataapi.CodeUnknownOutcome, code, method)
	}
	// A read is safe to retry: unavailable.
	st, code := forwardThrough(t, http.MethodGet, addr)
	assert.Equal(t, http.StatusServiceUnavailable, st)
	assert.Equal(t, dataapi.CodeUnavailable, code)
}

// A write that never left (nothing listens at the hosting node's
// address) was not applied: unavailable, retryable.
func TestForwardedWriteNeverSentIsUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	st, code := forwardThrough(t, http.MethodPut, addr)
	assert.Equal(t, http.StatusServiceUnavailable, st)
	assert.Equal(t, dataapi.CodeUnavailable, code)
}

// TestForwardingKeepsBurstConnections: after a failover every client of
// the moved partitions arrives at once, and a node passes most of them on
// to the hosting node, one HTTP/1.1 connection per request in flight. The
// forwarding transport must keep that burst's connections for the next
// one (it kept 64 per peer, so every poll round after a failover opened
// the rest again, with a TLS handshake on both agents).
func TestForwardingKeepsBurstConnections(t *testing.T) {
	const burst = 200 // above the old 64 per peer
	var mu sync.Mutex
	conns := map[string]bool{}
	var arrived atomic.Int64
	gate := make(chan struct{})
	hosting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr] = true
		mu.Unlock()
		arrived.Add(1)
		<-gate
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hosting.Close()
	addr := strings.TrimPrefix(hosting.URL, "http://")
	var d net.Dialer
	tr := newForwardTransport(d.DialContext)
	defer tr.CloseIdleConnections()
	p := newForwardProxy("http", tr, "n1", slog.New(slog.DiscardHandler))
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.ServeHTTP(w, r.WithContext(withForward(r, addr)))
	}))
	defer front.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: burst}}
	run := func(round int) {
		gate = make(chan struct{})
		var wg sync.WaitGroup
		for i := range burst {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, err := http.NewRequest(http.MethodPut, front.URL+"/v1/kv/k"+strconv.Itoa(i), strings.NewReader("v"))
				if !assert.NoError(t, err) {
					return
				}
				resp, err := client.Do(req)
				if assert.NoError(t, err) {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					assert.Equal(t, http.StatusNoContent, resp.StatusCode)
				}
			}()
		}
		require.Eventually(t, func() bool { return arrived.Load() >= int64(burst*(round+1)) }, 10*time.Second, time.Millisecond)
		close(gate) // every request of the burst was in flight at once
		wg.Wait()
	}
	run(0)
	mu.Lock()
	first := len(conns)
	mu.Unlock()
	require.GreaterOrEqual(t, first, burst)
	run(1)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, first, len(conns), "the second burst reused the first one's connections to the hosting node")
}

// TestForwardingBurstSharesTLSConnections: over TLS the forwarding
// transport speaks HTTP/2 and opens few connections at a time, so a burst
// of requests held in flight at once to a peer it had no connection to
// (the hosting node of partitions that just failed over) shares one
// connection instead of opening one each (200 TLS handshakes on both
// agents, at the moment they were busiest).
func TestForwardingBurstSharesTLSConnections(t *testing.T) {
	const burst = 200 // under one connection's streams
	var conns, arrived atomic.Int64
	gate := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		<-gate
		w.WriteHeader(http.StatusNoContent)
	})
	hs, err := dataapi.NewServer(dataapi.ServerConfig{Handler: h, TLSConfig: &tls.Config{MinVersion: tls.VersionTLS13}})
	require.NoError(t, err)
	hosting := httptest.NewUnstartedServer(h)
	hosting.Config, hosting.TLS = hs, hs.TLSConfig
	hosting.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	hosting.StartTLS()
	defer hosting.Close()
	pool := x509.NewCertPool()
	pool.AddCert(hosting.Certificate())
	var d net.Dialer
	tr := newForwardTransport(d.DialContext)
	forwardOverTLS(tr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13})
	defer tr.CloseIdleConnections()
	addr := strings.TrimPrefix(hosting.URL, "https://")
	p := newForwardProxy("https", tr, "n1", slog.New(slog.DiscardHandler))
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.ServeHTTP(w, r.WithContext(withForward(r, addr)))
	}))
	defer front.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: burst}}
	var wg sync.WaitGroup
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequest(http.MethodPut, front.URL+"/v1/kv/k"+strconv.Itoa(i), strings.NewReader("v"))
			if !assert.NoError(t, err) {
				return
			}
			resp, err := client.Do(req)
			if assert.NoError(t, err) {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				assert.Equal(t, http.StatusNoContent, resp.StatusCode)
			}
		}()
	}
	require.Eventually(t, func() bool { return arrived.Load() >= burst }, 20*time.Second, time.Millisecond, "every request in flight at once")
	close(gate)
	wg.Wait()
	// Ideally the dials in flight at once plus one connection per 100
	// requests (a Go HTTP/2 client's stream limit until the server's
	// settings arrive); how many more depends on when the settings arrive
	// (the kv twin of this test saw 6 against 5 in CI), so the bound is a
	// tenth of the burst: without HTTP/2 and the bound, one per request.
	assert.LessOrEqual(t, conns.Load(), int64(burst/10), "%d forwarded requests at once opened %d connections to the hosting node", burst, conns.Load())
}
