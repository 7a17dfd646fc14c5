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
// A UDP proxy only forwards: memberlist answers a probe at the address
// the prober advertised (its proxy), never at a packet's source, so
// nothing comes back through the forwarding socket. Under a cut a packet
// is lost (UDP across a partition), under a drop rate it is lost at that
// rate, and a delay, jitter or bandwidth cap holds it for that long.

const (
	udpMaxPacket   = 64 << 10
	udpMaxInFlight = 1024 // delayed packets held at once; beyond, dropped
)

type udpProxy struct {
	name   string
	to     int
	target *net.UDPAddr
	links  *linkTable
	who    func(net.Addr) int
	log    *slog.Logger

	in, out *net.UDPConn
	mu      sync.Mutex
	held    int
	closed  bool
	wg      sync.WaitGroup
	stats   udpStats
}

type udpStats struct{ Forwarded, Cut, Dropped, Overflow uint64 }

// startUDPProxy forwards listen (a bound UDP socket) to target.
func startUDPProxy(name string, to int, in *net.UDPConn, target string, links *linkTable, who func(net.Addr) int, log *slog.Logger) (*udpProxy, error) {
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
	p := &udpProxy{name: name, to: to, target: ta, links: links, who: who, log: log, in: in, out: out}
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
		p.forward(append([]byte(nil), buf[:n]...), p.who(from))
	}
}

func (p *udpProxy) forward(b []byte, from int) {
	r := p.links.get(from, p.to)
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
		_, _ = p.out.WriteToUDP(b, p.target) // the agent may be down: lost, as a packet is
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
		_, _ = p.out.WriteToUDP(b, p.target)
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
// agent's gossip address.
type gossipProxy struct {
	tcp *proxy
	udp *udpProxy
}

// startGossipProxy listens on ip at a port free for both TCP and UDP and
// forwards both to target.
func startGossipProxy(name string, to int, ip, target string, links *linkTable, who func(net.Addr) int, log *slog.Logger) (*gossipProxy, error) {
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
		up, err := startUDPProxy(name+"/udp", to, in, target, links, who, log)
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
