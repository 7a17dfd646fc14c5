package kv_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
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

	"github.com/fmnode/fmnode/internal/dataapi"
	"github.com/fmnode/fmnode/txtdns/kv"
)

// TestFailoverBurstSharesTLSConnections: a burst of operations held in
// flight at once against one agent over TLS (what a failover sends to the
// new write region's agents) shares few connections: the agents' server and
// kv.NewTransport speak HTTP/2. Over HTTP/1.1 each operation opened a
// connection of its own, a TLS handshake on both sides: after a region's
// kill the demo's 1000 writers waited 2.2 s p50 for their connections,
// longer than the failover took.
func TestFailoverBurstSharesTLSConnections(t *testing.T) {
	const burst = 300
	conns := tlsBurst(t, burst, false)
	// Ideally the dials in flight at once plus one connection per 100
	// operations (a Go HTTP/2 client's stream limit until the server's
	// settings arrive); how many more a burst opens depends on when those
	// settings arrive (CI saw 6 against that ideal 5), so the bound is a
	// tenth of the burst: over HTTP/1.1, or without the dial bound, a burst
	// opens about one connection per operation.
	assert.LessOrEqual(t, conns, int64(burst/10), "%d operations at once opened %d connections", burst, conns)
}

// TestBurstOnAnEstablishedConnectionOpensNone: on a connection the client
// already has (a failover's writers polled the new write region's agents
// while it was pending), a burst of more operations than 256 (the server's
// stream limit before) opens no other connection: the server lets one
// connection carry as many requests as the node serves at once
// (dataapi.DefaultMaxConcurrentStreams). A connection opened in the middle
// of the burst made the writers behind it wait for its TLS handshake.
func TestBurstOnAnEstablishedConnectionOpensNone(t *testing.T) {
	require.GreaterOrEqual(t, dataapi.DefaultMaxConcurrentStreams, 400)
	conns := tlsBurst(t, 400, true)
	assert.Equal(t, int64(1), conns, "the established connection carries the whole burst")
}

// tlsBurst holds burst operations in flight at once against one agent's
// server over TLS through kv.NewTransport (after one operation alone when
// warm) and returns the connections the server accepted.
func tlsBurst(t *testing.T, burst int, warm bool) int64 {
	t.Helper()
	var arrived atomic.Int64
	var conns atomic.Int64
	gate := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/kv/warm" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		arrived.Add(1)
		<-gate
		w.WriteHeader(http.StatusNoContent)
	})
	hs, err := dataapi.NewServer(dataapi.ServerConfig{Handler: h, TLSConfig: &tls.Config{MinVersion: tls.VersionTLS13}})
	require.NoError(t, err)
	ts := httptest.NewUnstartedServer(h)
	ts.Config, ts.TLS = hs, hs.TLSConfig
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ts.StartTLS()
	defer ts.Close()
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	tr := kv.NewTransport(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13})
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	put := func(path string) {
		req, err := http.NewRequest(http.MethodPut, ts.URL+path, strings.NewReader("v"))
		if !assert.NoError(t, err) {
			return
		}
		resp, err := client.Do(req)
		if assert.NoError(t, err) {
			resp.Body.Close()
			assert.Equal(t, http.StatusNoContent, resp.StatusCode)
			assert.Equal(t, 2, resp.ProtoMajor)
		}
	}
	if warm {
		put("/v1/kv/warm")
	}

	var wg sync.WaitGroup
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			put("/v1/kv/k" + strconv.Itoa(i))
		}()
	}
	require.Eventually(t, func() bool { return arrived.Load() >= int64(burst) }, 20*time.Second, time.Millisecond, "every operation in flight at once")
	close(gate)
	wg.Wait()
	return conns.Load()
}
