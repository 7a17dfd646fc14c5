package proctest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

const (
	// MaxPorts bounds one FreePorts call.
	MaxPorts = 1000
	// DefaultWaitTimeout bounds WaitTCP and WaitHTTP when their context
	// has no deadline.
	DefaultWaitTimeout = 30 * time.Second
	// pollMin and pollMax are the first and the longest pause between
	// attempts: quick when the child is nearly up, not a busy loop when
	// it is slow.
	pollMin = 10 * time.Millisecond
	pollMax = 250 * time.Millisecond
	// attemptTimeout bounds one dial or request.
	attemptTimeout = 2 * time.Second
	// maxBodySnippet bounds the response body quoted in WaitHTTP's error.
	maxBodySnippet = 512
)

// FreePorts returns n distinct TCP ports on 127.0.0.1 that were free:
// all n are held open until all are found, so none is handed out twice.
// Another process may take one before the child binds it.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	if n < 1 || n > MaxPorts {
		t.Fatalf("proctest: FreePorts: n must be in 1..%d, got %d", MaxPorts, n)
	}
	ports := make([]int, 0, n)
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("proctest: FreePorts: %v (after %d ports)", err, len(ports))
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// withBound gives ctx DefaultWaitTimeout if it has no deadline.
func withBound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultWaitTimeout)
}

// poll calls try until it returns true, pausing pollMin doubling to
// pollMax, until ctx ends; it returns how long it tried and how often.
func poll(ctx context.Context, try func(context.Context) bool) (bool, time.Duration, int) {
	start := time.Now()
	pause := pollMin
	for attempts := 1; ; attempts++ {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		ok := try(actx)
		cancel()
		if ok {
			return true, time.Since(start), attempts
		}
		timer := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false, time.Since(start), attempts
		case <-timer.C:
		}
		pause = min(2*pause, pollMax)
	}
}

// WaitTCP waits until addr accepts a TCP connection, or ctx ends (or
// DefaultWaitTimeout passes, if ctx has no deadline). The error says how
// long it tried and the last dial error.
func WaitTCP(ctx context.Context, addr string) error {
	ctx, cancel := withBound(ctx)
	defer cancel()
	var last error
	var d net.Dialer
	ok, took, n := poll(ctx, func(ctx context.Context) bool {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			last = err
			return false
		}
		c.Close()
		return true
	})
	if ok {
		return nil
	}
	return fmt.Errorf("%w: %s not accepting TCP connections after %v (%d attempts; last: %v)",
		ErrTimeout, addr, took.Round(time.Millisecond), n, last)
}

// WaitHTTP waits until a GET of url answers 2xx, or ctx ends (or
// DefaultWaitTimeout passes, if ctx has no deadline); client nil means
// http.DefaultClient's transport with each attempt bounded. The error
// says how long it tried and the last status and body, or the last error.
func WaitHTTP(ctx context.Context, url string, client *http.Client) error {
	ctx, cancel := withBound(ctx)
	defer cancel()
	if client == nil {
		client = &http.Client{Timeout: attemptTimeout}
	}
	var last string
	ok, took, n := poll(ctx, func(ctx context.Context) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			last = err.Error()
			return false
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBodySnippet))
		// Drain a little more so the connection can be reused, not all:
		// a wrong URL may stream.
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return true
		}
		last = fmt.Sprintf("%s: %q", resp.Status, strings.TrimSpace(string(body)))
		return false
	})
	if ok {
		return nil
	}
	return fmt.Errorf("%w: GET %s not 2xx after %v (%d attempts; last: %s)",
		ErrTimeout, url, took.Round(time.Millisecond), n, last)
}
