package nodenet

import (
	"bufio"
	"bytes"
	"encoding/gob"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos/wire"
	"github.com/fmnode/fmnode/internal/nodewire"
)

// gobCodec is the test codec: the register's frame around a gob of the
// batch's addresses and Learns (the real codec is nodewire's).
type gobCodec struct{}

type gobBatch struct {
	From, To NodeID
	Learns   []nodewire.Learn
}

func (gobCodec) AppendFrame(dst []byte, b *nodewire.Batch) ([]byte, error) {
	var payload bytes.Buffer
	if err := gob.NewEncoder(&payload).Encode(gobBatch{From: b.From, To: b.To, Learns: b.Learns}); err != nil {
		return dst, err
	}
	return wire.AppendFrame(dst, payload.Bytes()), nil
}

func (gobCodec) ReadFrame(r *bufio.Reader, maxFrame int, buf []byte) (nodewire.Batch, []byte, error) {
	payload, err := wire.ReadFrame(r, maxFrame, buf)
	if err != nil {
		return nodewire.Batch{}, payload, err
	}
	var g gobBatch
	if err := gob.NewDecoder(bytes.NewReader(payload)).Decode(&g); err != nil {
		return nodewire.Batch{}, payload, fmt.Errorf("gob: %w", err)
	}
	return nodewire.Batch{From: g.From, To: g.To, Learns: g.Learns}, payload, nil
}

// checkGoroutines fails the test when goroutines it started outlive it.
// Register it first so its cleanup runs last.
func checkGoroutines(t *testing.T) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > base {
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines leaked:\n%s", n-base, buf[:runtime.Stack(buf, true)])
		}
	})
}

// inbox records what a node received, per sender, in order.
type inbox struct {
	mu   sync.Mutex
	got  map[NodeID][]nodewire.Learn
	hook func(from NodeID, b nodewire.Batch) // optional, called first
}

func newInbox() *inbox { return &inbox{got: make(map[NodeID][]nodewire.Learn)} }

func (in *inbox) handle(from NodeID, b nodewire.Batch) {
	if in.hook != nil {
		in.hook(from, b)
	}
	in.mu.Lock()
	in.got[from] = append(in.got[from], b.Learns...)
	in.mu.Unlock()
}

func (in *inbox) from(id NodeID) []nodewire.Learn {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]nodewire.Learn(nil), in.got[id]...)
}

func (in *inbox) count(id NodeID) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.got[id])
}

// logBuf is a concurrency-safe log sink tests can search.
type logBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuf) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// node is a started transport with its inbox and log.
type node struct {
	*TCPTransport
	in  *inbox
	log *logBuf
}

// testConfig is a fast config for node id on a loopback port.
func testConfig(id NodeID, in *inbox, lb *logBuf) Config {
	return Config{
		ID:                id,
		Cluster:           "test",
		Addr:              "127.0.0.1:0",
		Peers:             map[NodeID]string{},
		Codec:             gobCodec{},
		Handler:           in.handle,
		DialTimeout:       time.Second,
		HandshakeTimeout:  time.Second,
		WriteTimeout:      time.Second,
		KeepaliveInterval: 50 * time.Millisecond,
		IdleTimeout:       time.Second,
		ReconnectMin:      5 * time.Millisecond,
		ReconnectMax:      50 * time.Millisecond,
		Logger:            lb.logger(),
	}
}

// startNode starts a transport from cfg (after edit) and closes it at the
// end of the test.
func startNode(t *testing.T, id NodeID, edit func(*Config)) *node {
	t.Helper()
	n := &node{in: newInbox(), log: &logBuf{}}
	cfg := testConfig(id, n.in, n.log)
	if edit != nil {
		edit(&cfg)
	}
	tr, err := Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tr.Close() })
	n.TCPTransport = tr
	return n
}

// mesh makes every node a peer of every other, with the real addresses.
func mesh(t *testing.T, nodes ...*node) {
	t.Helper()
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				require.NoError(t, a.SetPeer(b.cfg.ID, b.Addr().String()))
			}
		}
	}
}

func connected(n *node, peer NodeID) func() bool {
	return func() bool { return n.Stats()[peer].Connected }
}

func learn(from, to NodeID, seq uint64) *nodewire.Batch {
	return &nodewire.Batch{Learns: []nodewire.Learn{{Key: fmt.Sprintf("%d->%d", from, to), Version: seq, Data: []byte("v")}}}
}

// freeAddr returns a loopback address nobody listens on (now).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

const waitFor, tick = 5 * time.Second, 5 * time.Millisecond

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

func wireFrame(payload []byte) []byte { return wire.AppendFrame(nil, payload) }

func stringsContains(s, sub string) bool { return strings.Contains(s, sub) }
