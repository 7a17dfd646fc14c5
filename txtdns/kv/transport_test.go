package kv_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/txtdns/kv"
)

// TestDefaultTransportKeepsBurstConnections: a burst of concurrent
// operations opens one connection each (HTTP/1.1); the default transport
// must keep them for the next burst instead of closing all but
// http.DefaultTransport's 100 and handshaking again. (It did: after a
// failover the demo's 1000 writers waited 0.9 s p50 for new TLS
// connections.)
func TestDefaultTransportKeepsBurstConnections(t *testing.T) {
	const burst = 300 // above the stdlib's 100 idle in all and the old 64 per host
	w := newWorld(t, worldOpts{client: func(c *kv.Config) { c.HTTP = nil }})
	a := w.regions["a"]
	ctx := opCtx(t)
	run := func(round int) {
		release := a.faults.hold() // every Put of the burst in flight at once
		var wg sync.WaitGroup
		errs := make(chan error, burst)
		for i := range burst {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- w.client.Put(ctx, "k"+strconv.Itoa(round)+"-"+strconv.Itoa(i), []byte("v"))
			}()
		}
		require.Eventually(t, func() bool { return a.faults.writes.Load() >= int64(burst*(round+1)) }, opWait, time.Millisecond)
		release()
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
	run(0)
	first := a.seen.connections()
	require.GreaterOrEqual(t, first, burst, "the burst ran its Puts at once")
	run(1)
	assert.Equal(t, first, a.seen.connections(), "the second burst reused the first one's connections")
}
