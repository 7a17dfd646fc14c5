package proctest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFreePorts(t *testing.T) {
	ports := FreePorts(t, 5)
	require.Len(t, ports, 5)
	seen := map[int]bool{}
	for _, p := range ports {
		assert.False(t, seen[p], "port %d twice", p)
		seen[p] = true
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		require.NoError(t, err, "port %d is free", p)
		ln.Close()
	}
	for _, n := range []int{0, -1, MaxPorts + 1} {
		errs := fatalOf(newFake(t), func(tb testing.TB) { FreePorts(tb, n) })
		assert.Contains(t, errs, "FreePorts: n must be in 1..")
	}
}

func TestWaitTCP(t *testing.T) {
	port := FreePorts(t, 1)[0]
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	t.Run("nothing listens", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := WaitTCP(ctx, addr)
		require.ErrorIs(t, err, ErrTimeout)
		assert.Contains(t, err.Error(), addr+" not accepting TCP connections after")
		assert.Contains(t, err.Error(), "connection refused")
		assert.Less(t, time.Since(start), 2*time.Second)
	})
	t.Run("a child listens late", func(t *testing.T) {
		p := Start(t, childSpec(t, "listener", "listen", addr, "300ms"))
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		require.NoError(t, WaitTCP(ctx, addr), p.Tail())
		waitOutput(t, p, "listening")
	})
}

func TestWaitHTTP(t *testing.T) {
	cases := []struct {
		name     string
		failures int64 // 503s before 200s; -1 for always
		wantErr  string
	}{
		{"ready at once", 0, ""},
		{"ready after three 503s", 3, ""},
		{"never ready", -1, `last: 503 Service Unavailable: "not ready"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n := calls.Add(1); tc.failures < 0 || n <= tc.failures {
					http.Error(w, "not ready", http.StatusServiceUnavailable)
					return
				}
				w.WriteHeader(http.StatusNoContent)
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			err := WaitHTTP(ctx, srv.URL+"/ready", srv.Client())
			if tc.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.failures+1, calls.Load())
				return
			}
			require.ErrorIs(t, err, ErrTimeout)
			assert.Contains(t, err.Error(), "GET "+srv.URL+"/ready not 2xx after")
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
	t.Run("nothing listens", func(t *testing.T) {
		port := FreePorts(t, 1)[0]
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		err := WaitHTTP(ctx, "http://127.0.0.1:"+strconv.Itoa(port)+"/", nil)
		require.ErrorIs(t, err, ErrTimeout)
		assert.Contains(t, err.Error(), "connection refused")
	})
}
