package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// A userspace L4 proxy in front of each agent's node transport and API,
// in the style of etcd's pkg/proxy: every byte between two agents, and
// between the clients and an agent, passes one, so the nemesis can cut,
// delay, slow and disturb each direction of each pair.
//
// A proxy tells its callers apart by their source address: agent i dials
// from 127.0.1.i (its source_ip), clients from anything else (client
// index 0). Each connection's two directions follow the rules of their
// own link: data from i to j follows link (i, j), the replies link (j, i).
//
// A cut link holds data (the proxy stops reading from the sender, so TCP
// backpressure stalls it) as a real partition does to a TCP stream that
// retransmits: after the heal, what was sent arrives, unless the agent
// gave up on the connection first. A dropped chunk is delayed by a
// retransmission timeout, the L4 view of a lost packet.

const (
	proxyChunkBytes   = 32 << 10
	proxyQueueChunks  = 16 // per direction: at most 16 × 32 KiB held
	proxyMaxConns     = 512
	retransmitTimeout = 200 * time.Millisecond
	cutPoll           = 10 * time.Millisecond
)

// linkRule is what the nemesis set on one direction of one pair.
type linkRule struct {
	Cut          bool          `json:"cut,omitempty"`
	Delay        time.Duration `json:"delay,omitempty"`
	Jitter       time.Duration `json:"jitter,omitempty"`
	DropRate     float64       `json:"drop_rate,omitempty"`
	BandwidthBps int           `json:"bandwidth_bps,omitempty"`
}

func (r linkRule) zero() bool { return r == linkRule{} }

// linkTable holds the rules of every directed link (from, to); node
// indexes are 1..n, 0 is the clients.
type linkTable struct {
	mu    sync.Mutex
	rules map[[2]int]linkRule
	rng   *rand.Rand
}

func newLinkTable(seed uint64) *linkTable {
	return &linkTable{rules: map[[2]int]linkRule{}, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
}

func (t *linkTable) set(from, to int, r linkRule) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.zero() {
		delete(t.rules, [2]int{from, to})
		return
	}
	t.rules[[2]int{from, to}] = r
}

func (t *linkTable) get(from, to int) linkRule {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rules[[2]int{from, to}]
}

func (t *linkTable) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.rules)
}

// float is a uniform [0, 1) draw (the jitter and drops: the proxy's
// timing is not part of the replayable schedule, the faults are).
func (t *linkTable) float() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rng.Float64()
}

// proxy forwards one listen address to one agent address.
type proxy struct {
	name   string
	to     int // the agent behind it
	listen string
	target string
	links  *linkTable
	who    func(net.Addr) int // caller index: 1..n for agents, 0 for clients
	log    *slog.Logger

	ln     net.Listener
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func startProxy(name string, to int, listen, target string, links *linkTable, who func(net.Addr) int, log *slog.Logger) (*proxy, error) {
	if err := checkLoopback(target); err != nil {
		return nil, fmt.Errorf("proxy %s: target: %w", name, err)
	}
	ln, err := listenLoopback(listen)
	if err != nil {
		return nil, fmt.Errorf("proxy %s: %w", name, err)
	}
	return startProxyOn(name, to, ln, target, links, who, log)
}

// startProxyOn is startProxy on a listener already bound (the gossip
// proxy's TCP half shares its port with the UDP half).
func startProxyOn(name string, to int, ln net.Listener, target string, links *linkTable, who func(net.Addr) int, log *slog.Logger) (*proxy, error) {
	if err := checkLoopback(target); err != nil {
		return nil, fmt.Errorf("proxy %s: target: %w", name, err)
	}
	if err := checkLoopback(ln.Addr().String()); err != nil {
		return nil, fmt.Errorf("proxy %s: %w", name, err)
	}
	p := &proxy{name: name, to: to, listen: ln.Addr().String(), target: target, links: links, who: who, log: log,
		ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *proxy) addr() string { return p.listen }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.conns) >= proxyMaxConns {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *proxy) serve(down net.Conn) {
	defer p.wg.Done()
	defer p.untrack(down)
	defer down.Close()
	from := p.who(down.RemoteAddr())
	up, err := dialLoopback(context.Background(), p.target, "", 2*time.Second)
	if err != nil {
		return // as a refused connection: the agent is down
	}
	if !p.track(up) {
		_ = up.Close()
		return
	}
	defer p.untrack(up)
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { p.pump(down, up, from, p.to); done <- struct{}{} }()
	go func() { p.pump(up, down, p.to, from); done <- struct{}{} }()
	<-done
	// One direction ended: end both (a half-closed TLS stream is of no
	// use to either side).
	_ = down.Close()
	_ = up.Close()
	<-done
}

type chunk struct {
	b  []byte
	at time.Time // not delivered before
}

// pump copies src to dst under link (from, to)'s rule, read at the time
// each chunk is read (delay) and delivered (cut, drop, bandwidth).
func (p *proxy) pump(src, dst net.Conn, from, to int) {
	q := make(chan chunk, proxyQueueChunks)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(q)
		var last time.Time
		for {
			b := make([]byte, proxyChunkBytes)
			n, err := src.Read(b)
			if n > 0 {
				r := p.links.get(from, to)
				at := time.Now().Add(r.Delay)
				if r.Jitter > 0 {
					at = at.Add(time.Duration((p.links.float()*2 - 1) * float64(r.Jitter)))
				}
				if at.Before(last) {
					at = last // a stream keeps its order
				}
				last = at
				select {
				case q <- chunk{b: b[:n], at: at}:
				case <-stop:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		if !p.deliver(dst, c, from, to) {
			_ = src.Close()
			return
		}
	}
}

func (p *proxy) deliver(dst net.Conn, c chunk, from, to int) bool {
	if d := time.Until(c.at); d > 0 {
		time.Sleep(d)
	}
	for {
		r := p.links.get(from, to)
		if !r.Cut {
			break
		}
		if p.isClosed() {
			return false
		}
		time.Sleep(cutPoll)
	}
	r := p.links.get(from, to)
	if r.DropRate > 0 && p.links.float() < r.DropRate {
		time.Sleep(retransmitTimeout)
	}
	if r.BandwidthBps > 0 {
		time.Sleep(time.Duration(float64(len(c.b)) / float64(r.BandwidthBps) * float64(time.Second)))
	}
	_, err := dst.Write(c.b)
	if err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
		p.log.Debug("proxy write", "proxy", p.name, "err", err)
	}
	return err == nil
}

func (p *proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// dropConns closes every connection through the proxy (an agent was
// killed: its peers' streams through here end as they would).
func (p *proxy) dropConns() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// close stops accepting, closes every connection and waits for the
// proxy's goroutines, at most d.
func (p *proxy) close(d time.Duration) error {
	p.mu.Lock()
	p.closed = true
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	ch := make(chan struct{})
	go func() { p.wg.Wait(); close(ch) }()
	select {
	case <-ch:
		return nil
	case <-time.After(d):
		return fmt.Errorf("proxy %s: goroutines still running %v after close", p.name, d)
	}
}
