package main

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"
)

// The gossip proxies. memberlist (the agents' membership) speaks UDP for
// probes and gossip and TCP for push/pull, the fallback probe and joins,
// both on one advertised port. Each agent advertises its gossip at
// 127.0.2.i:P, where a TCP proxy (proxy.go) and a UDP proxy (here) listen
// on the same port P in front of its bound gossip address. The agents
// send gossip packets from their bound UDP socket (127.0.1.i) and dial
// gossip streams from source_ip (127.0.1.i; membership.Config.SourceIP),
// so both proxies tell the pairs apart as the node transport's do, and
// the nemesis' link rules cut, delay and drop gossip per direction too.
//
// A gossip UDP proxy only forwards: memberlist answers a probe at the
// address the prober advertised (its proxy), never at a packet's source,
// so nothing comes back through the forwarding socket. A DNS proxy (the
// clients' route lookups, answered at the query's source) relays: each
// client source address gets its own forwarding socket, and what the
// agent answers on it goes back to that client under the reverse link's
// rule. Under a cut a packet
// is lost (UDP across a partition), under a drop rate it is lost at that
// rate, and a delay, jitter or bandwidth cap holds it for that long.

const (
	udpMaxPacket   = 64 << 10
	udpMaxInFlight = 1024 // delayed packets held at once; beyond, dropped
	udpMaxSessions = 256  // relay: client addresses with a forwarding socket at once
	udpSessionIdle = 30 * time.Second
)

type udpProxy struct {
	name   string
	to     int
	target *net.UDPAddr
	links  *linkTable
	who    func(net.Addr) int
	log    *slog.Logger

	in, out *net.UDPConn
	relay   bool
	mu      sync.Mutex
	held    int
	closed  bool
	wg      sync.WaitGroup
	stats   udpStats
	// sessions (relay only): a forwarding socket per client address.
	sessions map[string]*net.UDPConn
}

type udpStats struct{ Forwarded, Cut, Dropped, Overflow uint64 }

// startUDPProxy forwards listen (a bound UDP socket) to target.
func startUDPProxy(name string, to int, in *net.UDPConn, target string, links *linkTable, who func(net.Addr) int, log *slog.Logger) (*udpProxy, error) {
	return startUDPProxyMode(name, to, in, target, false, links, who, log)
}

func startUDPProxyMode(name string, to int, in *net.UDPConn, target string, relay bool, links *linkTable, who func(net.Addr) int, log *slog.Logger) (*udpProxy, error) {
	if err := checkLoopback(target); err != nil {
		return nil, fmt.Errorf("udp proxy %s: target: %w", name, err)
	}
	if err := checkLoopback(in.LocalAddr().String()); err != nil {
		return nil, fmt.Errorf("udp proxy %s: %w", name, err)
	}
	ta, err := net.ResolveUDPAddr("udp4", target)
	if err != nil {
		return nil, fmt.Errorf("udp proxy %s: %w", name, err)
	}
	host, _, _ := net.SplitHostPort(in.LocalAddr().String())
	out, err := listenPacketLoopback(net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("udp proxy %s: forwarding socket: %w", name, err)
	}
	p := &udpProxy{name: name, to: to, target: ta, links: links, who: who, log: log, in: in, out: out, relay: relay,
		sessions: map[string]*net.UDPConn{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *udpProxy) serve() {
	defer p.wg.Done()
	buf := make([]byte, udpMaxPacket)
	for {
		n, from, err := p.in.ReadFromUDP(buf)
		if err != nil {
			return // closed
		}
		b := append([]byte(nil), buf[:n]...)
		if !p.relay {
			p.pass(b, p.who(from), p.to, func() { _, _ = p.out.WriteToUDP(b, p.target) })
			continue
		}
		s := p.session(from)
		if s == nil {
			continue // too many clients at once: lost
		}
		p.pass(b, p.who(from), p.to, func() { _, _ = s.WriteToUDP(b, p.target) })
	}
}

// session is the relay's forwarding socket for a client address, made
// on its first packet; a goroutine relays the agent's answers back and
// closes it after udpSessionIdle without one. Nil when the proxy is
// closed or holds udpMaxSessions.
func (p *udpProxy) session(client *net.UDPAddr) *net.UDPConn {
	key := client.String()
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.sessions[key]; s != nil || p.closed {
		return s
	}
	if len(p.sessions) >= udpMaxSessions {
		p.stats.Overflow++
		return nil
	}
	host, _, _ := net.SplitHostPort(p.out.LocalAddr().String())
	s, err := listenPacketLoopback(net.JoinHostPort(host, "0"))
	if err != nil {
		p.log.Debug("udp relay session", "proxy", p.name, "err", err)
		return nil
	}
	p.sessions[key] = s
	from := p.who(client)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer func() {
			p.mu.Lock()
			delete(p.sessions, key)
			p.mu.Unlock()
			_ = s.Close()
		}()
		buf := make([]byte, udpMaxPacket)
		for {
			_ = s.SetReadDeadline(time.Now().Add(udpSessionIdle))
			n, _, err := s.ReadFromUDP(buf)
			if err != nil {
				return // idle, or closed
			}
			b := append([]byte(nil), buf[:n]...)
			p.pass(b, p.to, from, func() { _, _ = p.in.WriteToUDP(b, client) })
		}
	}()
	return s
}

// pass sends one packet of link (from, to) by send under the link's rule:
// lost when cut or dropped, held for a delay, jitter and bandwidth cap.
// A send error is a lost packet (the agent may be down).
func (p *udpProxy) pass(b []byte, from, to int, send func()) {
	r := p.links.get(from, to)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return
	case r.Cut:
		p.stats.Cut++
		return
	case r.DropRate > 0 && p.links.float() < r.DropRate:
		p.stats.Dropped++
		return
	}
	d := r.Delay
	if r.Jitter > 0 {
		d += time.Duration((p.links.float()*2 - 1) * float64(r.Jitter))
	}
	if r.BandwidthBps > 0 {
		d += time.Duration(float64(len(b)) / float64(r.BandwidthBps) * float64(time.Second))
	}
	if d <= 0 {
		p.stats.Forwarded++
		send()
		return
	}
	if p.held >= udpMaxInFlight {
		p.stats.Overflow++
		return
	}
	p.held++
	p.wg.Add(1)
	time.AfterFunc(d, func() {
		defer p.wg.Done()
		p.mu.Lock()
		defer p.mu.Unlock()
		p.held--
		if p.closed {
			return
		}
		p.stats.Forwarded++
		send()
	})
}

func (p *udpProxy) snapshot() udpStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// close stops the proxy and waits for its goroutines and held packets
// (dropped), at most d.
func (p *udpProxy) close(d time.Duration) error {
	p.mu.Lock()
	p.closed = true
	_ = p.in.Close()
	_ = p.out.Close()
	for _, s := range p.sessions {
		_ = s.Close()
	}
	p.mu.Unlock()
	ch := make(chan struct{})
	go func() { p.wg.Wait(); close(ch) }()
	select {
	case <-ch:
		return nil
	case <-time.After(d):
		return fmt.Errorf("udp proxy %s: goroutines still running %v after close", p.name, d)
	}
}

// gossipProxy is the TCP and UDP proxy pair on one port in front of an
// agent's gossip address (or, relaying, its DNS server).
type gossipProxy struct {
	tcp *proxy
	udp *udpProxy
}

// startGossipProxy listens on ip at a port free for both TCP and UDP and
// forwards both to target.
func startGossipProxy(name string, to int, ip, target string, links *linkTable, who func(net.Addr) int, log *slog.Logger) (*gossipProxy, error) {
	return startDualProxy(name, to, ip, target, false, links, who, log)
}

// startDNSProxy is the TCP and UDP proxy pair in front of an agent's DNS
// server, for the clients: UDP answers are relayed back, TCP (the
// resolver's fallback on a truncated answer) proxied as any stream.
func startDNSProxy(name string, to int, ip, target string, links *linkTable, who func(net.Addr) int, log *slog.Logger) (*gossipProxy, error) {
	return startDualProxy(name, to, ip, target, true, links, who, log)
}

func startDualProxy(name string, to int, ip, target string, relay bool, links *linkTable, who func(net.Addr) int, log *slog.Logger) (*gossipProxy, error) {
	var lastErr error
	for range 20 {
		ln, err := listenLoopback(ip + ":0")
		if err != nil {
			return nil, fmt.Errorf("gossip proxy %s: %w", name, err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		in, err := listenPacketLoopback(net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			_ = ln.Close()
			lastErr = err
			continue
		}
		tp, err := startProxyOn(name+"/tcp", to, ln, target, links, who, log)
		if err != nil {
			_ = ln.Close()
			_ = in.Close()
			return nil, err
		}
		up, err := startUDPProxyMode(name+"/udp", to, in, target, relay, links, who, log)
		if err != nil {
			_ = tp.close(time.Second)
			_ = in.Close()
			return nil, err
		}
		return &gossipProxy{tcp: tp, udp: up}, nil
	}
	return nil, fmt.Errorf("gossip proxy %s: no port free for TCP and UDP on %s: %w", name, ip, lastErr)
}

func (g *gossipProxy) addr() string { return g.tcp.addr() }

func (g *gossipProxy) close(d time.Duration) error {
	err := g.tcp.close(d)
	if uerr := g.udp.close(d); err == nil {
		err = uerr
	}
	return err
}
