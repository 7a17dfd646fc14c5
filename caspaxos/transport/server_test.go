package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/wire"
)

// gatedStore holds every Apply until the test releases it, and records
// what each Apply carried.
// It is deliberately not a caspaxos.PipelineStore (the memory store it
// wraps is not embedded), so the acceptor persists one group at a time.
type gatedStore struct {
	mem     *caspaxos.MemoryStore
	gate    chan struct{}
	mu      sync.Mutex
	applied []caspaxos.Batch
	entered chan struct{}
}

func newGatedStore() *gatedStore {
	return &gatedStore{mem: caspaxos.NewMemoryStore(), gate: make(chan struct{}), entered: make(chan struct{}, 100)}
}

func (s *gatedStore) Apply(b caspaxos.Batch) error {
	s.entered <- struct{}{}
	select {
	case <-s.gate:
	case <-time.After(testWait):
		// A test that failed before releasing the gate: the acceptor's
		// goroutine must not hang the package.
		return errors.New("gated store: not released within the test's wait")
	}
	if err := s.mem.Apply(b); err != nil {
		return err
	}
	s.mu.Lock()
	s.applied = append(s.applied, b)
	s.mu.Unlock()
	return nil
}

func (s *gatedStore) Load() (caspaxos.State, error) { return s.mem.Load() }
func (s *gatedStore) Close() error                  { return s.mem.Close() }

func prepare(key string, counter uint64) caspaxos.Message {
	return caspaxos.Message{Type: caspaxos.MsgPrepare, From: 7, To: 1,
		Items: []caspaxos.Item{{Key: key, Ballot: caspaxos.Ballot{Counter: counter, Proposer: 7}}}}
}

func expectNoReply(t *testing.T, tr Transport, d time.Duration) {
	t.Helper()
	select {
	case m := <-tr.Replies():
		t.Fatalf("reply %v left before its batch was durable", m)
	case <-time.After(d):
	}
}

func recvReply(t *testing.T, tr Transport) caspaxos.Message {
	t.Helper()
	select {
	case m := <-tr.Replies():
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no reply")
		return caspaxos.Message{}
	}
}

// Replies leave only after their batch is durable, and requests that
// arrive during an fsync share the next one (group commit).
func TestAcceptorDurabilityOrderAndGroupCommit(t *testing.T) {
	st := newGatedStore()
	net := NewMemNetwork()
	a, err := net.StartAcceptor(AcceptorConfig{ID: 1, Store: st})
	require.NoError(t, err)
	defer a.Close()
	tr := net.Dial(0)

	require.NoError(t, tr.Send(prepare("first", 1)))
	recvWithin(t, st.entered, "the gated store's next Apply") // the first batch is being persisted
	for i := range 10 {
		require.NoError(t, tr.Send(prepare(fmt.Sprintf("k%d", i), 1)))
	}
	expectNoReply(t, tr, 50*time.Millisecond)

	sendWithin(t, st.gate, struct{}{}, "release the gated store") // first batch durable
	m := recvReply(t, tr)
	assert.Equal(t, "first", m.Items[0].Key)
	recvWithin(t, st.entered, "the gated store's next Apply") // the second batch: everything that arrived meanwhile
	expectNoReply(t, tr, 30*time.Millisecond)
	sendWithin(t, st.gate, struct{}{}, "release the gated store")
	for range 10 {
		m := recvReply(t, tr)
		assert.Equal(t, caspaxos.MsgPrepareReply, m.Type)
		assert.Equal(t, caspaxos.RejectNone, m.Items[0].Reject)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	require.Len(t, st.applied, 2)
	assert.Len(t, st.applied[0].Put, 1)
	assert.Len(t, st.applied[1].Put, 10, "ten requests, one fsync")
}

// failingStore fails every Apply; it is not a PipelineStore.
type failingStore struct{ mem *caspaxos.MemoryStore }

func (failingStore) Apply(caspaxos.Batch) error      { return io.ErrShortWrite }
func (s failingStore) Load() (caspaxos.State, error) { return s.mem.Load() }
func (s failingStore) Close() error                  { return s.mem.Close() }

// failingPipeStore is a PipelineStore whose commits fail: at Submit
// (atSubmit) or when the wait learns of the failed fsync.
type failingPipeStore struct {
	failingStore
	atSubmit bool
}

func (s failingPipeStore) Submit(caspaxos.Batch) (func() error, error) {
	if s.atSubmit {
		return nil, io.ErrShortWrite
	}
	return func() error { return io.ErrShortWrite }, nil
}

func TestAcceptorStopsOnStoreFailure(t *testing.T) {
	plain := failingStore{caspaxos.NewMemoryStore()}
	for name, st := range map[string]caspaxos.Store{
		"apply":  plain,
		"wait":   failingPipeStore{failingStore: plain},
		"submit": failingPipeStore{failingStore: plain, atSubmit: true},
	} {
		t.Run(name, func(t *testing.T) {
			logs := &logBuffer{}
			srv, err := ListenAcceptor(ServerConfig{
				AcceptorConfig: AcceptorConfig{ID: 1, Store: st, Logger: logs.logger()},
				Addr:           "127.0.0.1:0",
			})
			require.NoError(t, err)
			tr, err := DialTCP(ClientConfig{Peers: map[caspaxos.NodeID]string{1: srv.Addr().String()}})
			require.NoError(t, err)
			defer tr.Close()
			require.NoError(t, tr.WaitConnected(context.Background()))
			require.NoError(t, tr.Send(prepare("k", 1)))
			select {
			case <-srv.Dead():
			case <-time.After(5 * time.Second):
				t.Fatal("acceptor kept running after a failed commit")
			}
			expectNoReply(t, tr, 50*time.Millisecond)
			assert.ErrorIs(t, srv.Close(), io.ErrShortWrite)
			assert.Contains(t, logs.String(), "acceptor stopped")
		})
	}
}

func rawConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// expectClosed waits for the server to close c.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err := io.ReadAll(c)
	require.NoError(t, err, "the server must close the connection (EOF), not leave it hanging")
}

func frameOf(t *testing.T, m caspaxos.Message) []byte {
	t.Helper()
	f, err := wire.AppendMessageFrame(nil, m)
	require.NoError(t, err)
	return f
}

// Malformed input closes that connection, is logged with the remote
// address, and never disturbs the other connections.
func TestServerClosesMalformedConnections(t *testing.T) {
	c := newTCPCluster(t, 3, true)
	n := newNode(t, c.dial(t), testProposerConfig(100, c.ids...))
	addr := c.addrs[1]

	random := make([]byte, 4096)
	r := mrand.New(mrand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	oversized := []byte{0xC5, 0xA9, 1, 0}
	oversized = binary.LittleEndian.AppendUint32(oversized, 0xFFFFFFFF)
	badPayload := wire.AppendFrame(nil, []byte{1, 99, 1, 1, 0, 0}) // unknown message type
	corruptCRC := frameOf(t, prepare("k", 1))
	corruptCRC[len(corruptCRC)-1] ^= 0xff

	tests := map[string]struct {
		bytes  []byte
		reason string
	}{
		"random bytes":     {bytes: random, reason: "malformed_frame"},
		"oversized length": {bytes: oversized, reason: "malformed_frame"},
		"bad checksum":     {bytes: corruptCRC, reason: "malformed_frame"},
		"bad message":      {bytes: badPayload, reason: "malformed_message"},
		"reply type": {bytes: frameOf(t, caspaxos.Message{Type: caspaxos.MsgPrepareReply, From: 7, To: 1}),
			reason: "bad_request"},
		"wrong acceptor": {bytes: frameOf(t, caspaxos.Message{Type: caspaxos.MsgPrepare, From: 7, To: 2}),
			reason: "bad_request"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			conn := rawConn(t, addr)
			local := conn.LocalAddr().String()
			_, _ = conn.Write(tc.bytes)
			expectClosed(t, conn)
			waitFor(t, "log line", func() bool {
				return containsAll(c.logs.String(), "closing connection", "remote="+local, "reason="+tc.reason)
			})
			// The others are still served.
			_, err := n.Propose(context.Background(), "alive-"+name, caspaxos.CAS(0, []byte("x")))
			require.NoError(t, err)
		})
	}
	// A good request on a raw connection gets its reply.
	conn := rawConn(t, addr)
	_, err := conn.Write(frameOf(t, prepare("raw", 1)))
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	p, err := wire.ReadFrame(bufio.NewReader(conn), wire.DefaultMaxFrameBytes, nil)
	require.NoError(t, err)
	m, err := wire.DecodeMessage(p)
	require.NoError(t, err)
	assert.Equal(t, caspaxos.MsgPrepareReply, m.Type)
	assert.Equal(t, caspaxos.NodeID(1), m.From)
}

func TestServerIdleTimeoutAndMaxConns(t *testing.T) {
	logs := &logBuffer{}
	srv, err := ListenAcceptor(ServerConfig{
		AcceptorConfig: AcceptorConfig{ID: 1, Store: caspaxos.NewMemoryStore(), Logger: logs.logger()},
		Addr:           "127.0.0.1:0",
		IdleTimeout:    100 * time.Millisecond,
		MaxConns:       1,
	})
	require.NoError(t, err)
	defer srv.Close()
	first := rawConn(t, srv.Addr().String())
	waitFor(t, "first connection registered", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.conns) == 1
	})
	second := rawConn(t, srv.Addr().String())
	expectClosed(t, second)
	assert.Contains(t, logs.String(), "too many connections")
	start := time.Now()
	expectClosed(t, first)
	assert.Less(t, time.Since(start), 3*time.Second)
	waitFor(t, "idle log", func() bool { return containsAll(logs.String(), "reason=idle_timeout") })
}

func selfSignedTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "fmnode test acceptor"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		IsCA:         true,

		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS13}
	client = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	return server, client
}

func TestTLSCluster(t *testing.T) {
	serverTLS, clientTLS := selfSignedTLS(t)
	logs := &logBuffer{}
	peers := map[caspaxos.NodeID]string{}
	var ids []caspaxos.NodeID
	for id := caspaxos.NodeID(1); id <= 3; id++ {
		srv, err := ListenAcceptor(ServerConfig{
			AcceptorConfig: AcceptorConfig{ID: id, Store: caspaxos.NewMemoryStore(), Logger: logs.logger()},
			Addr:           "127.0.0.1:0",
			TLS:            serverTLS,
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = srv.Close() })
		peers[id] = srv.Addr().String()
		ids = append(ids, id)
	}
	tr, err := DialTCP(ClientConfig{Peers: peers, TLS: clientTLS})
	require.NoError(t, err)
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, tr.WaitConnected(ctx))
	n := newNode(t, tr, testProposerConfig(100, ids...))
	commits, _ := casWorkload(t, n, 8, 4, 10)
	assert.Positive(t, commits)

	// A plaintext client on a TLS listener is refused, not served.
	conn := rawConn(t, peers[1])
	_, _ = conn.Write(frameOf(t, prepare("k", 1)))
	expectClosed(t, conn)
}

func TestServerMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, err := ListenAcceptor(ServerConfig{
		AcceptorConfig: AcceptorConfig{ID: 1, Store: caspaxos.NewMemoryStore(), Registerer: reg},
		Addr:           "127.0.0.1:0",
	})
	require.NoError(t, err)
	tr, err := DialTCP(ClientConfig{Peers: map[caspaxos.NodeID]string{1: srv.Addr().String()}})
	require.NoError(t, err)
	defer tr.Close()
	require.NoError(t, tr.WaitConnected(context.Background()))
	n, err := NewProposerNode(NodeConfig{Proposer: testProposerConfig(5, 1), Registerer: reg}, tr)
	require.NoError(t, err)
	defer n.Close()
	for i := range 5 {
		_, err := n.Propose(context.Background(), "k", caspaxos.CAS(uint64(i), []byte("v")))
		require.NoError(t, err)
	}
	require.NoError(t, srv.Close())
	// Restarting on the same registry reuses the series instead of failing.
	srv2, err := ListenAcceptor(ServerConfig{
		AcceptorConfig: AcceptorConfig{ID: 1, Store: caspaxos.NewMemoryStore(), Registerer: reg},
		Addr:           "127.0.0.1:0",
	})
	require.NoError(t, err)
	defer srv2.Close()

	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				got[f.GetName()] += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				got[f.GetName()] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	for _, name := range []string{
		"fmnode_acceptor_messages_in_total", "fmnode_acceptor_batches_total", "fmnode_acceptor_apply_seconds",
		"fmnode_acceptor_batch_messages", "fmnode_acceptor_batch_records", "fmnode_acceptor_messages_out_total",
		"fmnode_proposer_results_total", "fmnode_proposer_latency_seconds", "fmnode_proposer_messages_out_total",
	} {
		assert.Positive(t, got[name], name)
	}
}

func TestAppendFramesSplitsLargeMessages(t *testing.T) {
	big := bytes.Repeat([]byte{'v'}, caspaxos.MaxValueBytes)
	m := caspaxos.Message{Type: caspaxos.MsgPrepareReply, From: 1, To: 2}
	for i := range 5 {
		m.Items = append(m.Items, caspaxos.Item{Key: fmt.Sprintf("k%d", i), Ballot: caspaxos.Ballot{Counter: 1, Proposer: 2},
			Value: caspaxos.Value{Version: 1, Data: big}})
	}
	buf, err := appendFrames(nil, m, MinFrameBytes)
	require.NoError(t, err)
	r := bufio.NewReader(bytes.NewReader(buf))
	var items []caspaxos.Item
	frames := 0
	for {
		p, err := wire.ReadFrame(r, MinFrameBytes, nil)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got, err := wire.DecodeMessage(p)
		require.NoError(t, err)
		assert.Equal(t, m.Type, got.Type)
		items = append(items, got.Items...)
		frames++
	}
	assert.Equal(t, 5, frames)
	assert.Equal(t, m.Items, items)

	_, err = appendFrames(nil, caspaxos.Message{Type: caspaxos.MsgPrepareReply, Items: m.Items[:1]}, 1000)
	assert.Error(t, err, "one item above the bound cannot be split")
}

func TestBudget(t *testing.T) {
	b := newBudget(10)
	require.True(t, b.tryAcquire(6))
	require.False(t, b.tryAcquire(5))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, b.acquire(ctx, 5), context.DeadlineExceeded)
	done := make(chan error, 1)
	go func() { done <- b.acquire(context.Background(), 5) }()
	time.Sleep(10 * time.Millisecond)
	b.release(6)
	require.NoError(t, recvWithin(t, done, "acquire to return after the release"))
	assert.Equal(t, 5, b.inUse())
	b.release(5)
	assert.True(t, b.tryAcquire(100), "an oversized request passes when nothing else is held")
	assert.False(t, b.tryAcquire(1))
}
