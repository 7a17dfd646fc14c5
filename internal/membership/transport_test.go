package membership

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/stretchr/testify/require"
)

// Production (no SourceIP) keeps memberlist's own transport: Start hands
// memberlist no Transport, so memberlist binds and dials as it always did.
func TestNoSourceIPKeepsMemberlistTransport(t *testing.T) {
	c, err := validConfig().withDefaults()
	require.NoError(t, err)
	m, err := newMembership(c)
	require.NoError(t, err)
	mc, err := c.memberlistConfig(m.delegate())
	require.NoError(t, err)
	require.Nil(t, mc.Transport)
	require.Equal(t, c.BindPort, mc.BindPort)
}

// With SourceIP the gossip streams leave from it (a per-pair proxy tells
// the nodes apart by it), and the port-0 bind is reported back as
// memberlist's own transport does.
func TestSourceIPBindsGossipDials(t *testing.T) {
	c := validConfig()
	c.BindAddr, c.SourceIP = "127.0.1.7", "127.0.1.7"
	c, err := c.withDefaults()
	require.NoError(t, err)
	m, err := newMembership(c)
	require.NoError(t, err)
	mc, err := c.memberlistConfig(m.delegate())
	require.NoError(t, err)
	tr, ok := mc.Transport.(*sourceBoundTransport)
	require.True(t, ok, "transport %T", mc.Transport)
	t.Cleanup(func() { _ = tr.Shutdown() })
	require.NotZero(t, mc.BindPort)
	require.Equal(t, mc.BindPort, mc.AdvertisePort)
	ip, port, err := tr.FinalAdvertiseAddr("", mc.AdvertisePort)
	require.NoError(t, err)
	require.Equal(t, "127.0.1.7", ip.String())
	require.Equal(t, mc.BindPort, port)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	for _, dial := range []func() (net.Conn, error){
		func() (net.Conn, error) { return tr.DialTimeout(ln.Addr().String(), time.Second) },
		func() (net.Conn, error) {
			return tr.DialAddressTimeout(memberlist.Address{Addr: ln.Addr().String(), Name: "x"}, time.Second)
		},
	} {
		out, err := dial()
		require.NoError(t, err)
		in, err := ln.Accept()
		require.NoError(t, err)
		require.Equal(t, "127.0.1.7", in.RemoteAddr().(*net.TCPAddr).IP.String())
		_ = in.Close()
		_ = out.Close()
	}
}

func TestSourceIPConfigValidated(t *testing.T) {
	c := validConfig()
	c.SourceIP = "host"
	_, err := c.withDefaults()
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.Contains(t, err.Error(), "Config.SourceIP:")
}

// Three nodes with source-bound gossip on their own loopback addresses
// converge, and one dies as with memberlist's transport.
func TestSourceBoundNodesJoinAndDetectDeath(t *testing.T) {
	if testing.Short() {
		t.Skip("real gossip")
	}
	var ms []*Membership
	var addrs []string
	for i, name := range []string{"a", "b", "c"} {
		c := realConfig(name, uint16(i+1), 0, addrs...)
		c.BindAddr = "127.0.1." + strconv.Itoa(11+i)
		c.SourceIP = c.BindAddr
		m := start(t, c)
		ms = append(ms, m)
		addrs = append(addrs, m.Addr())
	}
	require.Eventually(t, func() bool {
		for _, m := range ms {
			if len(aliveNames(m)) != 3 {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "three source-bound nodes did not converge")
	require.NoError(t, ms[2].Shutdown())
	bound := ms[2].cfg.DeadBound(3)
	for _, m := range ms[:2] {
		require.Eventually(t, func() bool { return stateOf(m, "c") == StateDead }, bound, 20*time.Millisecond)
	}
}
