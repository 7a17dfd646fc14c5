package nodenet

import (
	"bufio"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/internal/nodewire"
)

func TestConfigValidation(t *testing.T) {
	base := func() Config {
		return Config{ID: 1, Cluster: "c", Codec: gobCodec{}, Handler: func(NodeID, nodewire.Batch) {}}
	}
	cases := []struct {
		field string
		edit  func(*Config)
	}{
		{"ID", func(c *Config) { c.ID = 0 }},
		{"Cluster", func(c *Config) { c.Cluster = "" }},
		{"Cluster", func(c *Config) { c.Cluster = string(make([]byte, MaxClusterBytes+1)) }},
		{"Codec", func(c *Config) { c.Codec = nil }},
		{"Handler", func(c *Config) { c.Handler = nil }},
		{"TLS", func(c *Config) { c.TLS = &TLSConfig{} }},
		{"MaxFrameBytes", func(c *Config) { c.MaxFrameBytes = 10 }},
		{"QueueMessages", func(c *Config) { c.QueueMessages = -1 }},
		{"QueueBytes", func(c *Config) { c.QueueBytes = -1 }},
		{"DialTimeout", func(c *Config) { c.DialTimeout = -1 }},
		{"HandshakeTimeout", func(c *Config) { c.HandshakeTimeout = -1 }},
		{"WriteTimeout", func(c *Config) { c.WriteTimeout = -1 }},
		{"IdleTimeout", func(c *Config) { c.KeepaliveInterval, c.IdleTimeout = time.Second, time.Second }},
		{"ReconnectMin", func(c *Config) { c.ReconnectMin, c.ReconnectMax = time.Second, time.Millisecond }},
		{"MaxPeers", func(c *Config) { c.MaxPeers = -1 }},
		{"MaxHandshakes", func(c *Config) { c.MaxHandshakes = -1 }},
		{"Peers", func(c *Config) { c.Peers = map[NodeID]string{1: "x"} }},
		{"Peers", func(c *Config) { c.Peers = map[NodeID]string{0: "x"} }},
		{"Peers", func(c *Config) { c.MaxPeers, c.Peers = 1, map[NodeID]string{2: "", 3: ""} }},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			cfg := base()
			tc.edit(&cfg)
			_, err := Start(cfg)
			require.ErrorIs(t, err, caspaxos.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestHelloRoundTrip(t *testing.T) {
	h := hello{Version: ProtocolVersion, Kind: helloRefuse, From: 7, To: 9, Cluster: "prod", Reason: "because"}
	frame := appendHello(nil, h)
	got, err := readHello(bufio.NewReader(bytesReader(frame)))
	require.NoError(t, err)
	assert.Equal(t, h, got)
	for _, bad := range [][]byte{nil, []byte("FMNN"), []byte("XXXX0000000000000000000000"), append([]byte("FMNN"), make([]byte, 30)...)} {
		_, err := parseHello(bad)
		assert.ErrorIs(t, err, ErrHandshake, "%q", bad)
	}
}

func TestThreeNodesExchangeInEveryDirectionInOrder(t *testing.T) {
	checkGoroutines(t)
	nodes := []*node{startNode(t, 1, nil), startNode(t, 2, nil), startNode(t, 3, nil)}
	mesh(t, nodes...)
	const n = 300
	for seq := uint64(1); seq <= n; seq++ {
		for _, a := range nodes {
			for _, b := range nodes {
				if a != b {
					require.NoError(t, a.Send(b.cfg.ID, learn(a.cfg.ID, b.cfg.ID, seq)))
				}
			}
		}
	}
	for _, b := range nodes {
		for _, a := range nodes {
			if a == b {
				continue
			}
			from := a.cfg.ID
			require.Eventually(t, func() bool { return b.in.count(from) == n }, waitFor, tick, "%d -> %d", from, b.cfg.ID)
			for i, l := range b.in.from(from) {
				require.Equal(t, uint64(i+1), l.Version, "order %d -> %d", from, b.cfg.ID)
			}
			assert.EqualValues(t, n, a.Stats()[b.cfg.ID].Sent)
			assert.EqualValues(t, n, b.Stats()[from].Received)
		}
	}
	// One connection per pair: every node has exactly one established
	// connection to each peer, and nobody reconnected.
	for _, a := range nodes {
		for id, st := range a.Stats() {
			assert.True(t, st.Connected, "%d -> %d", a.cfg.ID, id)
			assert.Zero(t, st.Reconnects, "%d -> %d", a.cfg.ID, id)
		}
	}
}

func TestKeepalivesHoldAnIdleConnection(t *testing.T) {
	checkGoroutines(t)
	// 25 keepalives per idle timeout: with 5 (100 ms) a loaded machine's
	// scheduling stall of one idle timeout reconnected (1 run in the
	// session 12 full test run, with a sweep beside it).
	edit := func(c *Config) { c.KeepaliveInterval, c.IdleTimeout = 20*time.Millisecond, 500*time.Millisecond }
	a, b := startNode(t, 1, edit), startNode(t, 2, edit)
	mesh(t, a, b)
	require.Eventually(t, connected(a, 2), waitFor, tick)
	time.Sleep(1200 * time.Millisecond) // more than two idle timeouts without traffic
	assert.Zero(t, a.Stats()[2].Reconnects)
	assert.Zero(t, b.Stats()[1].Reconnects)
	assert.Zero(t, b.Stats()[1].Received, "keepalives are not delivered")
}

func TestPeerRestartReconnects(t *testing.T) {
	for _, restart := range []NodeID{1, 2} { // the dialer, then the acceptor
		t.Run(map[NodeID]string{1: "dialer", 2: "acceptor"}[restart], func(t *testing.T) {
			checkGoroutines(t)
			nodes := map[NodeID]*node{1: startNode(t, 1, nil), 2: startNode(t, 2, nil)}
			mesh(t, nodes[1], nodes[2])
			other := 3 - restart
			require.NoError(t, nodes[other].Send(restart, learn(other, restart, 1)))
			require.Eventually(t, func() bool { return nodes[restart].in.count(other) == 1 }, waitFor, tick)

			addr := nodes[restart].Addr().String()
			require.NoError(t, nodes[restart].Close())
			require.Eventually(t, func() bool { return !nodes[other].Stats()[restart].Connected }, waitFor, tick)
			fresh := startNode(t, restart, func(c *Config) {
				c.Addr = addr
				c.Peers = map[NodeID]string{other: nodes[other].Addr().String()}
			})
			require.Eventually(t, func() bool {
				_ = nodes[other].Send(restart, learn(other, restart, 2))
				_ = fresh.Send(other, learn(restart, other, 2))
				return fresh.in.count(other) > 0 && nodes[other].in.count(restart) > 0
			}, waitFor, 20*time.Millisecond)
			assert.GreaterOrEqual(t, nodes[other].Stats()[restart].Reconnects, uint64(1))
		})
	}
}

func TestQueueFullDropsNewAndCounts(t *testing.T) {
	big := &nodewire.Batch{Learns: []nodewire.Learn{{Key: "k", Data: make([]byte, 4000)}}}
	cases := []struct {
		name  string
		edit  func(*Config)
		batch func(seq uint64) *nodewire.Batch
		fit   int
	}{
		{"messages", func(c *Config) { c.QueueMessages = 3 }, func(seq uint64) *nodewire.Batch { return learn(1, 2, seq) }, 3},
		{"bytes", func(c *Config) { c.QueueBytes = 10000 }, func(uint64) *nodewire.Batch { return big }, 2},
		{"one batch beyond the bound enters an empty queue", func(c *Config) { c.QueueBytes = 100 }, func(uint64) *nodewire.Batch { return big }, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			addr := freeAddr(t) // nobody listens: the batches wait
			a := startNode(t, 1, func(c *Config) {
				tc.edit(c)
				c.Peers = map[NodeID]string{2: addr}
			})
			for i := range tc.fit {
				require.NoError(t, a.Send(2, tc.batch(uint64(i+1))))
			}
			err := a.Send(2, tc.batch(99))
			require.ErrorIs(t, err, ErrQueueFull)
			require.ErrorIs(t, a.Send(2, tc.batch(100)), ErrQueueFull)
			st := a.Stats()[2]
			assert.EqualValues(t, 2, st.Dropped)
			assert.Equal(t, tc.fit, st.QueuedMessages)

			// The queue outlives the outage: once the peer is up it gets
			// the queued batches, not the dropped ones.
			b := startNode(t, 2, func(c *Config) { c.Addr = addr; c.Peers = map[NodeID]string{1: ""} })
			require.Eventually(t, func() bool { return b.in.count(1) == tc.fit }, waitFor, tick)
			time.Sleep(50 * time.Millisecond)
			assert.Equal(t, tc.fit, b.in.count(1))
			assert.Zero(t, a.Stats()[2].QueuedMessages)
		})
	}
}

func TestSendErrors(t *testing.T) {
	checkGoroutines(t)
	a := startNode(t, 1, func(c *Config) { c.MaxFrameBytes = MinFrameBytes })
	require.ErrorIs(t, a.Send(9, learn(1, 9, 1)), ErrUnknownPeer)
	require.NoError(t, a.SetPeer(2, ""))
	err := a.Send(2, &nodewire.Batch{Learns: []nodewire.Learn{{Data: make([]byte, 2*MinFrameBytes)}}})
	require.ErrorIs(t, err, ErrFrameTooLarge)
	require.NoError(t, a.Send(2, &nodewire.Batch{}), "an empty batch is a no-op")
	require.ErrorIs(t, a.SetPeer(1, "x"), ErrUnknownPeer)
	require.ErrorIs(t, a.SetPeer(0, "x"), ErrUnknownPeer)
}

// rawDial connects to n and, when as is not zero, completes the hello as
// node as.
func rawDial(t *testing.T, n *node, as NodeID) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", n.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(waitFor)))
	br := bufio.NewReader(c)
	if as != 0 {
		require.NoError(t, writeHello(c, hello{Version: ProtocolVersion, Kind: helloDial, From: as, To: n.cfg.ID, Cluster: n.cfg.Cluster}))
		h, err := readHello(br)
		require.NoError(t, err)
		require.Equal(t, byte(helloAccept), h.Kind, h.Reason)
	}
	return c, br
}

// waitClosed reads from c until the peer closes it.
func waitClosed(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	buf := make([]byte, 4096)
	for {
		if _, err := br.Read(buf); err != nil {
			var ne net.Error
			require.False(t, errors.As(err, &ne) && ne.Timeout(), "the node did not close the connection")
			return
		}
	}
}

func TestGarbageClosesTheConnectionAndTheNodeServesOthers(t *testing.T) {
	garbage := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n\x00\xff\xfe garbage")
	misaddressed, err := gobCodec{}.AppendFrame(nil, &nodewire.Batch{From: 5, To: 3, Learns: []nodewire.Learn{{Key: "x"}}})
	require.NoError(t, err)
	badGob := wireFrame([]byte("\x07not gob at all"))
	cases := []struct {
		name      string
		hello     bool
		payload   []byte
		decodeErr bool
	}{
		{"garbage instead of a hello", false, garbage, false},
		{"garbage frame after the hello", true, garbage, true},
		{"checksummed frame the codec refuses", true, badGob, true},
		{"batch from another node", true, misaddressed, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			n2, n3 := startNode(t, 2, nil), startNode(t, 3, nil)
			mesh(t, n2, n3)
			require.NoError(t, n3.SetPeer(1, ""))
			var as NodeID
			if tc.hello {
				as = 1
			}
			c, br := rawDial(t, n3, as)
			_, err := c.Write(tc.payload)
			require.NoError(t, err)
			waitClosed(t, c, br)
			if tc.decodeErr {
				require.Eventually(t, func() bool { return n3.Stats()[1].DecodeErrors == 1 }, waitFor, tick)
				assert.Contains(t, n3.log.String(), "malformed input")
			} else {
				require.Eventually(t, func() bool { return stringsContains(n3.log.String(), "inbound connection refused") }, waitFor, tick)
			}
			// Node 3 still serves node 2, both ways.
			require.NoError(t, n2.Send(3, learn(2, 3, 1)))
			require.NoError(t, n3.Send(2, learn(3, 2, 1)))
			require.Eventually(t, func() bool { return n3.in.count(2) == 1 && n2.in.count(3) == 1 }, waitFor, tick)
		})
	}
}

func TestHandshakeRefusals(t *testing.T) {
	cases := []struct {
		name   string
		hello  func(target *node) hello
		reason string
	}{
		{"wrong cluster", func(n *node) hello {
			return hello{Version: ProtocolVersion, Kind: helloDial, From: 1, To: n.cfg.ID, Cluster: "other"}
		}, "cluster"},
		{"wrong node id expected", func(n *node) hello {
			return hello{Version: ProtocolVersion, Kind: helloDial, From: 1, To: 7, Cluster: n.cfg.Cluster}
		}, "dialed node 7"},
		{"unknown peer", func(n *node) hello {
			return hello{Version: ProtocolVersion, Kind: helloDial, From: 2, To: n.cfg.ID, Cluster: n.cfg.Cluster}
		}, "not a known peer"},
		{"higher id dials", func(n *node) hello {
			return hello{Version: ProtocolVersion, Kind: helloDial, From: 9, To: n.cfg.ID, Cluster: n.cfg.Cluster}
		}, "lower id dials"},
		{"unsupported version", func(n *node) hello {
			return hello{Version: ProtocolVersion + 1, Kind: helloDial, From: 1, To: n.cfg.ID, Cluster: n.cfg.Cluster}
		}, "protocol version"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			n := startNode(t, 5, func(c *Config) { c.Peers = map[NodeID]string{1: "", 9: ""} })
			c, br := rawDial(t, n, 0)
			require.NoError(t, writeHello(c, tc.hello(n)))
			h, err := readHello(br)
			require.NoError(t, err)
			assert.Equal(t, byte(helloRefuse), h.Kind)
			assert.Contains(t, h.Reason, tc.reason)
			waitClosed(t, c, br)
			require.Eventually(t, func() bool { return stringsContains(n.log.String(), "inbound connection refused") }, waitFor, tick)
		})
	}
}

func TestWrongClusterBetweenTransportsIsRefusedAndLogged(t *testing.T) {
	checkGoroutines(t)
	a := startNode(t, 1, nil)
	b := startNode(t, 2, func(c *Config) { c.Cluster = "elsewhere" })
	mesh(t, a, b)
	require.Eventually(t, func() bool { return stringsContains(a.log.String(), "refused") }, waitFor, tick)
	assert.Contains(t, a.log.String(), "elsewhere")
	assert.Contains(t, b.log.String(), "inbound connection refused")
	assert.False(t, a.Stats()[2].Connected)
	assert.False(t, b.Stats()[1].Connected)
}

func TestWrongPeerAtAddressIsRefused(t *testing.T) {
	checkGoroutines(t)
	a := startNode(t, 1, nil)
	c := startNode(t, 3, func(c *Config) { c.Peers = map[NodeID]string{1: ""} })
	require.NoError(t, a.SetPeer(2, c.Addr().String())) // 1 believes node 2 lives where node 3 does
	require.Eventually(t, func() bool { return stringsContains(a.log.String(), "dialed node 2 but reached node 3") }, waitFor, tick)
	assert.False(t, a.Stats()[2].Connected)
}

func TestCloseIsPromptAndFinal(t *testing.T) {
	checkGoroutines(t)
	nodes := []*node{startNode(t, 1, nil), startNode(t, 2, nil), startNode(t, 3, nil)}
	mesh(t, nodes...)
	// Node 1 also dials a blackhole that never answers the handshake.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	require.NoError(t, nodes[0].SetPeer(4, ln.Addr().String()))
	require.Eventually(t, func() bool { return nodes[0].Stats()[2].Connected && nodes[0].Stats()[3].Connected }, waitFor, tick)
	for i := range 100 {
		_ = nodes[0].Send(2, learn(1, 2, uint64(i)))
	}

	start := time.Now()
	for _, n := range nodes {
		require.NoError(t, n.Close())
	}
	assert.Less(t, time.Since(start), time.Second, "Close waited for a deadline")
	require.NoError(t, nodes[0].Close(), "Close twice")
	require.ErrorIs(t, nodes[0].Send(2, learn(1, 2, 1)), ErrClosed)
	require.ErrorIs(t, nodes[0].SetPeer(5, ""), ErrClosed)
}

func TestJitterStaysInBounds(t *testing.T) {
	for _, f := range []float64{0, 0.5, 0.999999, -1, 2} {
		n := &TCPTransport{rand: func() float64 { return f }}
		d := n.jitter(100 * time.Millisecond)
		assert.GreaterOrEqual(t, d, 50*time.Millisecond, "rand %v", f)
		assert.LessOrEqual(t, d, 100*time.Millisecond, "rand %v", f)
	}
}

func TestSilentPeerIsClosedAfterIdleTimeout(t *testing.T) {
	checkGoroutines(t)
	n := startNode(t, 3, func(c *Config) {
		c.KeepaliveInterval, c.IdleTimeout = 20*time.Millisecond, 150*time.Millisecond
		c.Peers = map[NodeID]string{1: ""}
	})
	c, br := rawDial(t, n, 1) // completes the hello, then never writes
	start := time.Now()
	require.Eventually(t, connected(n, 1), waitFor, tick)
	waitClosed(t, c, br) // reads (and discards) the node's keepalives until it hangs up
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
	require.Eventually(t, func() bool { return !n.Stats()[1].Connected }, waitFor, tick)
}

// TestDialsFromLocalIP: with LocalIP set, connections to peers leave
// from that address (a pinned source; the fault-injection harness tells
// nodes apart by it), and without it the kernel picks 127.0.0.1.
func TestDialsFromLocalIP(t *testing.T) {
	for _, tc := range []struct {
		local net.IP
		want  string
	}{{net.ParseIP("127.0.4.7"), "127.0.4.7"}, {nil, "127.0.0.1"}} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		got := make(chan string, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			got <- c.RemoteAddr().(*net.TCPAddr).IP.String()
			c.Close()
		}()
		a := startNode(t, 1, func(c *Config) { c.LocalIP = tc.local })
		require.NoError(t, a.SetPeer(2, ln.Addr().String()))
		require.NoError(t, a.Send(2, learn(1, 2, 1)))
		select {
		case ip := <-got:
			assert.Equal(t, tc.want, ip)
		case <-time.After(waitFor):
			t.Fatal("no connection arrived")
		}
		ln.Close()
	}
}
