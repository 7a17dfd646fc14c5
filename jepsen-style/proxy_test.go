package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echoServer echoes every line on 127.0.3.1.
func echoServer(t *testing.T) string {
	ln, err := listenLoopback("127.0.3.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// testProxy is a proxy to agent 9 that tells callers apart as the
// cluster does: 127.0.1.i is agent i, anything else a client.
func testProxy(t *testing.T) (*proxy, *linkTable) {
	lt := newLinkTable(1)
	c := &cluster{nodes: make([]*node, 9)}
	p, err := startProxy("test", 9, "127.0.3.2:0", echoServer(t), lt, c.who, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.close(5*time.Second)) })
	return p, lt
}

type lineConn struct {
	net.Conn
	r *bufio.Reader
}

func dialFrom(t *testing.T, p *proxy, src string) *lineConn {
	c, err := dialLoopback(context.Background(), p.addr(), src, time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &lineConn{Conn: c, r: bufio.NewReader(c)}
}

// roundTrip sends a line and returns the echo, or "" after wait.
func (c *lineConn) roundTrip(t *testing.T, line string, wait time.Duration) string {
	_ = c.SetDeadline(time.Now().Add(wait))
	_, err := c.Write([]byte(line + "\n"))
	require.NoError(t, err)
	got, err := c.r.ReadString('\n')
	if err != nil {
		return ""
	}
	return got[:len(got)-1]
}

func (c *lineConn) read(wait time.Duration) string {
	_ = c.SetDeadline(time.Now().Add(wait))
	got, err := c.r.ReadString('\n')
	if err != nil {
		return ""
	}
	return got[:len(got)-1]
}

func TestProxyForwards(t *testing.T) {
	p, _ := testProxy(t)
	c := dialFrom(t, p, "")
	assert.Equal(t, "hello", c.roundTrip(t, "hello", 2*time.Second))
}

// A cut holds the data (as TCP retransmitting across a partition does)
// and the heal delivers it, in order; only the pair's own link is cut.
func TestProxyCutHoldsUntilHeal(t *testing.T) {
	p, lt := testProxy(t)
	one := dialFrom(t, p, "127.0.1.1")
	two := dialFrom(t, p, "127.0.1.2")
	lt.set(1, 9, linkRule{Cut: true})
	assert.Equal(t, "", one.roundTrip(t, "a", 300*time.Millisecond), "a cut link delivered")
	assert.Equal(t, "b", two.roundTrip(t, "b", 2*time.Second), "another node's link is cut too")
	lt.clear()
	assert.Equal(t, "a", one.read(2*time.Second), "the held data never arrived after the heal")
}

// A one-way cut stops only its direction: the request reaches the echo
// server but its reply (link 9 -> 1) is held.
func TestProxyOneWayCut(t *testing.T) {
	p, lt := testProxy(t)
	one := dialFrom(t, p, "127.0.1.1")
	lt.set(9, 1, linkRule{Cut: true})
	assert.Equal(t, "", one.roundTrip(t, "x", 300*time.Millisecond))
	lt.set(9, 1, linkRule{})
	assert.Equal(t, "x", one.read(2*time.Second))
	// The client link (0) is unaffected by rules on node 1's.
	lt.set(1, 9, linkRule{Cut: true})
	cl := dialFrom(t, p, "")
	assert.Equal(t, "y", cl.roundTrip(t, "y", 2*time.Second))
}

func TestProxyDelayAndBandwidth(t *testing.T) {
	p, lt := testProxy(t)
	c := dialFrom(t, p, "127.0.1.3")
	lt.set(3, 9, linkRule{Delay: 150 * time.Millisecond})
	lt.set(9, 3, linkRule{Delay: 150 * time.Millisecond})
	start := time.Now()
	require.Equal(t, "d", c.roundTrip(t, "d", 3*time.Second))
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "two delayed directions")
	lt.clear()
	lt.set(3, 9, linkRule{BandwidthBps: 4 << 10})
	big := make([]byte, 8<<10)
	for i := range big {
		big[i] = 'z'
	}
	start = time.Now()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Write(append(big, '\n'))
	require.NoError(t, err)
	got, err := c.r.ReadString('\n')
	require.NoError(t, err)
	assert.Len(t, got, len(big)+1)
	assert.GreaterOrEqual(t, time.Since(start), 1500*time.Millisecond, "8 KiB at 4 KiB/s")
}

func TestProxyWho(t *testing.T) {
	c := &cluster{nodes: make([]*node, 6)}
	for _, tc := range []struct {
		ip   string
		want int
	}{{"127.0.1.1", 1}, {"127.0.1.6", 6}, {"127.0.1.7", 0}, {"127.0.0.1", 0}, {"127.0.2.1", 0}, {"127.0.1.0", 0}} {
		assert.Equal(t, tc.want, c.who(&net.TCPAddr{IP: net.ParseIP(tc.ip), Port: 1}), tc.ip)
	}
}
