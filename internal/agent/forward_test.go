package agent

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
