package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/fmnode/fmnode/internal/membership"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGuardRefusesUDPOffLoopback(t *testing.T) {
	_, err := listenPacketLoopback("0.0.0.0:0")
	assert.ErrorIs(t, err, ErrNotLoopback)
	_, err = listenPacketLoopback("192.0.2.1:7946")
	assert.ErrorIs(t, err, ErrNotLoopback)
	lt := newLinkTable(1)
	who := func(net.Addr) int { return 0 }
	log := slog.New(slog.DiscardHandler)
	in, err := listenPacketLoopback("127.0.3.5:0")
	require.NoError(t, err)
	defer in.Close()
	_, err = startUDPProxy("p", 1, in, "192.0.2.1:7946", lt, who, log)
	assert.ErrorIs(t, err, ErrNotLoopback)
	_, err = startGossipProxy("g", 1, "10.0.0.1", "127.0.0.1:7946", lt, who, log)
	assert.ErrorIs(t, err, ErrNotLoopback)
	_, err = startGossipProxy("g", 1, "127.0.3.5", "192.0.2.1:7946", lt, who, log)
	assert.ErrorIs(t, err, ErrNotLoopback)
}

// A gossip packet crosses the UDP proxy under its link's rule: cut and
// certain drop lose it, a delay holds it, and another pair's link is
// not affected.
func TestUDPProxyFollowsEachDirectedLink(t *testing.T) {
	lt := newLinkTable(1)
	c := &cluster{nodes: make([]*node, 9)}
	sink, err := listenPacketLoopback("127.0.3.6:0")
	require.NoError(t, err)
	defer sink.Close()
	g, err := startGossipProxy("g", 9, "127.0.3.7", sink.LocalAddr().String(), lt, c.who, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer func() { require.NoError(t, g.close(5*time.Second)) }()
	from := func(ip string) *net.UDPConn {
		s, err := listenPacketLoopback(ip + ":0")
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := from("127.0.1.3"), from("127.0.1.4")
	pa, err := net.ResolveUDPAddr("udp4", g.addr())
	require.NoError(t, err)
	recv := func(wait time.Duration) string {
		buf := make([]byte, 100)
		_ = sink.SetReadDeadline(time.Now().Add(wait))
		n, _, err := sink.ReadFromUDP(buf)
		if err != nil {
			return ""
		}
		return string(buf[:n])
	}
	send := func(s *net.UDPConn, msg string) {
		_, err := s.WriteToUDP([]byte(msg), pa)
		require.NoError(t, err)
	}
	send(a, "a1")
	require.Equal(t, "a1", recv(time.Second))

	lt.set(3, 9, linkRule{Cut: true})
	send(a, "a2")
	require.Equal(t, "", recv(300*time.Millisecond), "a cut link lost nothing")
	send(b, "b1") // (4, 9) is not cut
	require.Equal(t, "b1", recv(time.Second))
	lt.set(3, 9, linkRule{DropRate: 1})
	send(a, "a3")
	require.Equal(t, "", recv(300*time.Millisecond), "a link dropping all delivered")
	lt.set(3, 9, linkRule{Delay: 300 * time.Millisecond})
	t0 := time.Now()
	send(a, "a4")
	require.Equal(t, "a4", recv(2*time.Second))
	require.GreaterOrEqual(t, time.Since(t0), 250*time.Millisecond)
	lt.clear()
	send(a, "a5")
	require.Equal(t, "a5", recv(time.Second))
	st := g.udp.snapshot()
	require.Equal(t, udpStats{Forwarded: 4, Cut: 1, Dropped: 1}, st)
}

// With the agents' gossip behind the proxies (advertised at the proxy,
// streams dialed from the source IP), a partition cuts gossip: the cut
// node turns dead in the others' view, the uncut pair stays alive to each
// other throughout, and after the heal the cut node is alive again.
func TestPartitionCutsGossip(t *testing.T) {
	if testing.Short() {
		t.Skip("real gossip")
	}
	const n = 3
	lt := newLinkTable(1)
	c := &cluster{nodes: make([]*node, n)}
	log := slog.New(slog.DiscardHandler)
	type gnode struct {
		bind  string
		port  int
		proxy *gossipProxy
		m     *membership.Membership
	}
	nodes := make([]*gnode, n)
	for i := range nodes {
		ip := fmt.Sprintf("127.0.1.%d", i+1)
		ports, err := agentPorts(ip, 1)
		require.NoError(t, err)
		port := ports[0]
		g, err := startGossipProxy(fmt.Sprintf("n%d/gossip", i+1), i+1, fmt.Sprintf("127.0.2.%d", i+1),
			fmt.Sprintf("%s:%d", ip, port), lt, c.who, log)
		require.NoError(t, err)
		t.Cleanup(func() { _ = g.close(5 * time.Second) })
		nodes[i] = &gnode{bind: ip, port: port, proxy: g}
	}
	for i, gn := range nodes {
		var join []string
		for j, o := range nodes {
			if j != i {
				join = append(join, o.proxy.addr())
			}
		}
		_, aport, err := net.SplitHostPort(gn.proxy.addr())
		require.NoError(t, err)
		var ap int
		_, _ = fmt.Sscan(aport, &ap)
		m, err := membership.Start(membership.Config{
			Name: fmt.Sprintf("n%d", i+1), NodeID: uint16(i + 1), Region: "r", Cluster: "jepsen-test",
			BindAddr: gn.bind, BindPort: gn.port, AdvertiseAddr: fmt.Sprintf("127.0.2.%d", i+1), AdvertisePort: ap,
			SourceIP: gn.bind, RetryJoin: join, RetryJoinMin: 20 * time.Millisecond, RetryJoinMax: 300 * time.Millisecond,
			GossipKey: bytes.Repeat([]byte{9}, 16), NodeAddr: "127.0.0.1:1",
			Profile: membership.ProfileLocal, ProbeInterval: 250 * time.Millisecond, ProbeTimeout: 150 * time.Millisecond,
			GossipInterval: 50 * time.Millisecond, SuspicionMult: 3, SuspicionMaxTimeoutMult: 2,
			TCPTimeout: 500 * time.Millisecond,
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Shutdown() })
		gn.m = m
	}
	state := func(of *gnode, name string) membership.State {
		for _, mem := range of.m.Members() {
			if mem.Name == name {
				return mem.State
			}
		}
		return 0
	}
	allAlive := func() bool {
		for _, a := range nodes {
			for k := 1; k <= n; k++ {
				if state(a, fmt.Sprintf("n%d", k)) != membership.StateAlive {
					return false
				}
			}
		}
		return true
	}
	require.Eventually(t, allAlive, 15*time.Second, 20*time.Millisecond, "no convergence through the proxies")
	for _, a := range nodes[1:] {
		for _, mem := range a.m.Members() {
			if mem.Name == "n1" {
				require.Equal(t, nodes[0].proxy.addr(), mem.Addr, "n1 is known at its proxy")
			}
		}
	}

	// Partition n3 from n1 and n2 (both directions); n1-n2 stays.
	for _, k := range []int{1, 2} {
		lt.set(k, 3, linkRule{Cut: true})
		lt.set(3, k, linkRule{Cut: true})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for state(nodes[0], "n3") != membership.StateDead || state(nodes[1], "n3") != membership.StateDead {
		require.Equal(t, membership.StateAlive, state(nodes[0], "n2"), "the uncut pair's gossip was cut")
		require.Equal(t, membership.StateAlive, state(nodes[1], "n1"), "the uncut pair's gossip was cut")
		select {
		case <-ctx.Done():
			t.Fatalf("n3 not dead behind the cut: n1 sees %v, n2 sees %v", state(nodes[0], "n3"), state(nodes[1], "n3"))
		case <-time.After(20 * time.Millisecond):
		}
	}
	require.Positive(t, nodes[2].proxy.udp.snapshot().Cut, "no gossip packet met the cut")
	// Past the verdict the uncut pair still sees each other.
	time.Sleep(time.Second)
	require.Equal(t, membership.StateAlive, state(nodes[0], "n2"))
	require.Equal(t, membership.StateAlive, state(nodes[1], "n1"))

	lt.clear()
	require.Eventually(t, allAlive, 20*time.Second, 20*time.Millisecond, "n3 did not come back after the heal")
}

// The DNS proxy relays a client's query to the agent and the answer back
// to the client's address, each under its own direction's rule.
func TestDNSRelayAnswersUnderBothDirections(t *testing.T) {
	lt := newLinkTable(1)
	c := &cluster{nodes: make([]*node, 9)}
	srv, err := listenPacketLoopback("127.0.3.8:0")
	require.NoError(t, err)
	defer srv.Close()
	go func() { // echoes every packet to its source, as a DNS server answers
		buf := make([]byte, 512)
		for {
			n, from, err := srv.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = srv.WriteToUDP(append([]byte("re:"), buf[:n]...), from)
		}
	}()
	d, err := startDNSProxy("dns", 9, "127.0.3.9", srv.LocalAddr().String(), lt, c.who, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer func() { require.NoError(t, d.close(5*time.Second)) }()
	cl, err := listenPacketLoopback("127.0.0.1:0") // a client: not 127.0.1.x
	require.NoError(t, err)
	defer cl.Close()
	pa, err := net.ResolveUDPAddr("udp4", d.addr())
	require.NoError(t, err)
	ask := func(q string, wait time.Duration) string {
		_, err := cl.WriteToUDP([]byte(q), pa)
		require.NoError(t, err)
		buf := make([]byte, 512)
		_ = cl.SetReadDeadline(time.Now().Add(wait))
		n, from, err := cl.ReadFromUDP(buf)
		if err != nil {
			return ""
		}
		require.Equal(t, d.addr(), from.String(), "the answer comes from the proxy")
		return string(buf[:n])
	}
	require.Equal(t, "re:q1", ask("q1", time.Second))
	lt.set(0, 9, linkRule{Cut: true})
	require.Equal(t, "", ask("q2", 300*time.Millisecond), "a query crossed a cut")
	lt.set(0, 9, linkRule{})
	lt.set(9, 0, linkRule{Cut: true})
	require.Equal(t, "", ask("q3", 300*time.Millisecond), "an answer crossed a cut")
	lt.clear()
	got := ask("q4", time.Second)
	if got == "re:q3" { // q3's answer never left; but a late one must not be taken for q4's
		t.Fatalf("the cut answer was delivered late")
	}
	require.Equal(t, "re:q4", got)
	st := d.udp.snapshot()
	require.Equal(t, uint64(2), st.Cut)
}
