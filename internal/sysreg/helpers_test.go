package sysreg

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/boltstore"
	"github.com/fmnode/fmnode/caspaxos/wire"
)

// testTimeout bounds every operation a test waits for.
const testTimeout = 10 * time.Second

// testCtx is a context that ends the test's waits with a clear deadline.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

type clusterOpts struct {
	tls  bool // httptest.NewTLSServer and an https client
	bolt bool // a boltstore per acceptor in t.TempDir (else a MemoryStore)
}

// cluster is n acceptors, each on its own httptest server on 127.0.0.1,
// mounted at Path on a mux as the agent mounts it.
type cluster struct {
	t      *testing.T
	opts   clusterOpts
	dir    string
	peers  []Peer
	srvs   []*httptest.Server
	accs   []*Acceptor
	stores []caspaxos.Store
	mem    []*caspaxos.MemoryStore
	http   *http.Client
	tr     *http.Transport
}

func newCluster(t *testing.T, n int, opts clusterOpts) *cluster {
	t.Helper()
	c := &cluster{
		t: t, opts: opts, dir: t.TempDir(),
		peers:  make([]Peer, n),
		srvs:   make([]*httptest.Server, n),
		accs:   make([]*Acceptor, n),
		stores: make([]caspaxos.Store, n),
		mem:    make([]*caspaxos.MemoryStore, n),
		tr:     &http.Transport{MaxIdleConnsPerHost: 4},
	}
	c.http = &http.Client{Transport: c.tr}
	for i := range n {
		c.peers[i].ID = uint64(i + 1)
		if !opts.bolt {
			c.mem[i] = caspaxos.NewMemoryStore()
		}
		c.start(i)
	}
	if opts.tls {
		// Every httptest TLS server uses the same certificate (for
		// 127.0.0.1), so trusting the first trusts them all.
		pool := x509.NewCertPool()
		pool.AddCert(c.srvs[0].Certificate())
		c.tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	t.Cleanup(func() {
		for i := range c.srvs {
			c.stop(i)
		}
		c.tr.CloseIdleConnections()
	})
	return c
}

// start (re)starts acceptor i on its store, on a new server (a new port).
func (c *cluster) start(i int) {
	c.t.Helper()
	require.Nil(c.t, c.srvs[i], "acceptor %d already running", i+1)
	var st caspaxos.Store
	if c.opts.bolt {
		bs, err := boltstore.Open(filepath.Join(c.dir, fmt.Sprintf("system-%d.db", i+1)), boltstore.Options{})
		require.NoError(c.t, err)
		st = bs
	} else {
		if c.stores[i] != nil {
			c.mem[i] = c.mem[i].Reopen()
		}
		st = c.mem[i]
	}
	acc, err := NewAcceptor(AcceptorConfig{ID: c.peers[i].ID, Store: st})
	require.NoError(c.t, err)
	mux := http.NewServeMux()
	mux.Handle(Path, acc)
	var srv *httptest.Server
	if c.opts.tls {
		srv = httptest.NewTLSServer(mux)
	} else {
		srv = httptest.NewServer(mux)
	}
	require.True(c.t, strings.HasPrefix(srv.Listener.Addr().String(), "127.0.0.1:"), "test server on %s", srv.Listener.Addr())
	c.srvs[i], c.accs[i], c.stores[i] = srv, acc, st
	c.peers[i].Addr = srv.Listener.Addr().String()
}

// stop closes acceptor i's server (and its bolt store): it is down.
func (c *cluster) stop(i int) {
	c.t.Helper()
	if c.srvs[i] == nil {
		return
	}
	c.srvs[i].CloseClientConnections()
	c.srvs[i].Close()
	c.srvs[i] = nil
	if c.opts.bolt {
		require.NoError(c.t, c.stores[i].Close())
	}
}

func (c *cluster) scheme() string {
	if c.opts.tls {
		return "https"
	}
	return "http"
}

func (c *cluster) client(id uint64) *Client {
	c.t.Helper()
	return newTestClient(c.t, c.http, c.scheme(), id)
}

// newTestClient has short phases so failure cases end quickly.
func newTestClient(t *testing.T, hc *http.Client, scheme string, id uint64) *Client {
	t.Helper()
	return newTestClientPhase(t, hc, scheme, id, 250*time.Millisecond)
}

// newTestClientPhase is newTestClient with another phase timeout.
func newTestClientPhase(t *testing.T, hc *http.Client, scheme string, id uint64, phase time.Duration) *Client {
	t.Helper()
	cl, err := NewClient(Config{
		HTTP: hc, Scheme: scheme, ProposerID: id,
		Timeout: testTimeout, PhaseTimeout: phase, MaxAttempts: 4,
	})
	require.NoError(t, err)
	return cl
}

// gateStore wraps a store: Apply signals entered, then waits for release
// (if set), then fails with failErr (if set).
type gateStore struct {
	caspaxos.Store
	entered chan struct{}
	release chan struct{}

	mu      sync.Mutex
	failErr error
	applied int
}

func (s *gateStore) Apply(b caspaxos.Batch) error {
	if s.entered != nil {
		s.entered <- struct{}{}
	}
	if s.release != nil {
		<-s.release
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failErr != nil {
		return s.failErr
	}
	s.applied++
	return s.Store.Apply(b)
}

func (s *gateStore) appliedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

func ballot(counter, proposer uint64) caspaxos.Ballot {
	return caspaxos.Ballot{Counter: counter, Proposer: caspaxos.NodeID(proposer)}
}

func prepareMsg(from, to uint64, b caspaxos.Ballot) caspaxos.Message {
	return caspaxos.Message{Type: caspaxos.MsgPrepare, From: caspaxos.NodeID(from), To: caspaxos.NodeID(to),
		Items: []caspaxos.Item{{Key: Key, Ballot: b}}}
}

func acceptMsg(from, to uint64, b caspaxos.Ballot, v caspaxos.Value) caspaxos.Message {
	return caspaxos.Message{Type: caspaxos.MsgAccept, From: caspaxos.NodeID(from), To: caspaxos.NodeID(to),
		Items: []caspaxos.Item{{Key: Key, Ballot: b, Value: v}}}
}

func encode(t testing.TB, m caspaxos.Message) []byte {
	t.Helper()
	b, err := wire.AppendMessage(nil, m)
	require.NoError(t, err)
	return b
}

// regValue is a register value at version ver holding spec, as a Client
// with ProposerID 7 writes it.
func regValue(ver uint64, spec string) caspaxos.Value {
	return caspaxos.Value{Version: ver, Data: encodeValue(writeTag{writer: 7, seq: ver}, []byte(spec))}
}
