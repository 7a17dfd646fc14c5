package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/boltstore"
	"github.com/fmnode/fmnode/quorum"
)

// logBuffer collects log lines from many goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testProposerConfig has short timeouts so that failure cases end quickly.
func testProposerConfig(id caspaxos.NodeID, acceptors ...caspaxos.NodeID) caspaxos.ProposerConfig {
	cfg := caspaxos.DefaultProposerConfig(id, quorum.MajorityConfig(acceptors...))
	cfg.Phase1Timeout = 150 * time.Millisecond
	cfg.Phase2Timeout = 150 * time.Millisecond
	cfg.MaxAttempts = 3
	cfg.BackoffBase = 5 * time.Millisecond
	cfg.BackoffMax = 50 * time.Millisecond
	return cfg
}

// tcpCluster is n acceptors on loopback, each on its own bbolt store.
type tcpCluster struct {
	t       *testing.T
	dir     string
	logs    *logBuffer
	ids     []caspaxos.NodeID
	addrs   map[caspaxos.NodeID]string
	stores  map[caspaxos.NodeID]caspaxos.Store
	servers map[caspaxos.NodeID]*AcceptorServer
	mem     bool
}

func newTCPCluster(t *testing.T, n int, mem bool) *tcpCluster {
	t.Helper()
	c := &tcpCluster{
		t: t, dir: t.TempDir(), logs: &logBuffer{}, mem: mem,
		addrs:   make(map[caspaxos.NodeID]string),
		stores:  make(map[caspaxos.NodeID]caspaxos.Store),
		servers: make(map[caspaxos.NodeID]*AcceptorServer),
	}
	for i := 1; i <= n; i++ {
		id := caspaxos.NodeID(i)
		c.ids = append(c.ids, id)
		c.start(id, "127.0.0.1:0")
	}
	t.Cleanup(c.closeAll)
	return c
}

func (c *tcpCluster) openStore(id caspaxos.NodeID) caspaxos.Store {
	if c.mem {
		if old, ok := c.stores[id].(*caspaxos.MemoryStore); ok {
			return old.Reopen()
		}
		return caspaxos.NewMemoryStore()
	}
	st, err := boltstore.Open(filepath.Join(c.dir, fmt.Sprintf("acceptor-%d.db", id)), boltstore.Options{})
	require.NoError(c.t, err)
	return st
}

func (c *tcpCluster) start(id caspaxos.NodeID, addr string) {
	c.t.Helper()
	st := c.openStore(id)
	c.stores[id] = st
	var srv *AcceptorServer
	var err error
	// A restarted acceptor rebinds its old port, which may linger briefly.
	for try := 0; ; try++ {
		srv, err = ListenAcceptor(ServerConfig{
			AcceptorConfig: AcceptorConfig{ID: id, Store: st, Logger: c.logs.logger()},
			Addr:           addr,
		})
		if err == nil || try == 50 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(c.t, err)
	c.servers[id] = srv
	c.addrs[id] = srv.Addr().String()
}

// kill stops acceptor id and closes its store, as a crash would.
func (c *tcpCluster) kill(id caspaxos.NodeID) {
	c.t.Helper()
	srv := c.servers[id]
	if srv == nil {
		return
	}
	require.NoError(c.t, srv.Close())
	if !c.mem {
		require.NoError(c.t, c.stores[id].Close())
	}
	delete(c.servers, id)
}

func (c *tcpCluster) restart(id caspaxos.NodeID) { c.start(id, c.addrs[id]) }

func (c *tcpCluster) closeAll() {
	for id := range c.servers {
		c.kill(id)
	}
}

func (c *tcpCluster) dial(t *testing.T) *TCPTransport {
	t.Helper()
	tr, err := DialTCP(ClientConfig{Peers: c.addrs, Logger: c.logs.logger(), ReconnectMax: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tr.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, tr.WaitConnected(ctx))
	return tr
}

func newNode(t *testing.T, tr Transport, cfg caspaxos.ProposerConfig) *ProposerNode {
	t.Helper()
	n, err := NewProposerNode(NodeConfig{Proposer: cfg}, tr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// casWorkload runs `workers` goroutines doing read-modify-write CAS on
// `keys` keys for `ops` operations each and checks that every key's final
// version equals its starting version plus its number of successful CASes.
func casWorkload(t *testing.T, n *ProposerNode, workers, keys, ops int) (commits, mismatches int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	success := make(map[string]int)
	initial := make(map[string]uint64)
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		v, err := n.Propose(ctx, key, caspaxos.Read())
		require.NoError(t, err)
		initial[key] = v.Version
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ops {
				key := fmt.Sprintf("key-%d", (w*7+i)%keys)
				cur, err := n.Propose(ctx, key, caspaxos.Read())
				if err != nil {
					errs <- fmt.Errorf("read %s: %w", key, err)
					return
				}
				_, err = n.Propose(ctx, key, caspaxos.CAS(cur.Version, []byte(fmt.Sprintf("w%d-%d", w, i))))
				mu.Lock()
				switch {
				case err == nil:
					success[key]++
					commits++
				case errors.Is(err, caspaxos.ErrVersionMismatch) && !errors.Is(err, caspaxos.ErrUnknownOutcome):
					mismatches++
				default:
					mu.Unlock()
					errs <- fmt.Errorf("cas %s: %w", key, err)
					return
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		v, err := n.Propose(ctx, key, caspaxos.Read())
		require.NoError(t, err)
		require.Equal(t, initial[key]+uint64(success[key]), v.Version, "key %s", key)
	}
	return commits, mismatches
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
