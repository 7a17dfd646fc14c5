package nodenet

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/fmnode/fmnode/internal/nodewire"
)

// TCPTransport is the node transport over TCP (see the package doc for the
// connection rule, queues, deadlines and backoff). Start creates it.
type TCPTransport struct {
	cfg     Config
	log     *slog.Logger
	ln      net.Listener // nil without Addr
	metrics *metrics
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	hsSlots chan struct{} // bounds inbound handshakes

	randMu sync.Mutex
	rand   func() float64

	mu        sync.Mutex
	peers     map[NodeID]*peer
	handshake map[net.Conn]struct{} // connections in their handshake, closed by Close
	closed    bool
}

var _ Transport = (*TCPTransport)(nil)

// Start validates cfg, listens on cfg.Addr (when set) and starts dialing
// the peers with higher ids. It returns once the listener is bound.
func Start(cfg Config) (*TCPTransport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &TCPTransport{
		cfg:       cfg,
		log:       cfg.Logger.With("node", uint64(cfg.ID)),
		metrics:   newMetrics(cfg.Registerer, cfg.ID),
		ctx:       ctx,
		cancel:    cancel,
		hsSlots:   make(chan struct{}, cfg.MaxHandshakes),
		rand:      cfg.Rand,
		peers:     make(map[NodeID]*peer, len(cfg.Peers)),
		handshake: make(map[net.Conn]struct{}),
	}
	if t.rand == nil {
		t.rand = rand.Float64
	}
	if cfg.Addr != "" {
		ln, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("nodenet: node %d: listen on %s: %w", cfg.ID, cfg.Addr, err)
		}
		t.ln = ln
		t.wg.Add(1)
		go t.acceptLoop()
	}
	for id, addr := range cfg.Peers {
		if err := t.SetPeer(id, addr); err != nil {
			_ = t.Close()
			return nil, err
		}
	}
	t.log.Info("node transport started", "addr", t.addrString(), "tls", cfg.TLS != nil, "peers", len(cfg.Peers))
	return t, nil
}

// Addr returns the listening address, or nil when not listening.
func (t *TCPTransport) Addr() net.Addr {
	if t.ln == nil {
		return nil
	}
	return t.ln.Addr()
}

func (t *TCPTransport) addrString() string {
	if a := t.Addr(); a != nil {
		return a.String()
	}
	return ""
}

// SetPeer adds peer id at addr or changes its address. A changed address
// of a peer this node dials closes the current connection and redials at
// once. addr may be empty for a peer with a lower id (it dials us).
func (t *TCPTransport) SetPeer(id NodeID, addr string) error {
	if err := checkPeerID(t.cfg.ID, id); err != nil {
		return err
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	p := t.peers[id]
	if p == nil {
		if len(t.peers) >= t.cfg.MaxPeers {
			t.mu.Unlock()
			return fmt.Errorf("nodenet: peer %d: %d peers reach MaxPeers", id, len(t.peers))
		}
		p = newPeer(t, id, addr)
		t.peers[id] = p
		if p.dials {
			t.wg.Add(1)
			go p.dialLoop()
		}
		t.mu.Unlock()
		return nil
	}
	t.mu.Unlock()
	p.setAddr(addr)
	return nil
}

func (t *TCPTransport) peer(id NodeID) *peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.peers[id]
}

// Send implements Transport.
func (t *TCPTransport) Send(to NodeID, b *nodewire.Batch) error {
	if t.ctx.Err() != nil {
		return ErrClosed
	}
	p := t.peer(to)
	if p == nil {
		return fmt.Errorf("%w: %d", ErrUnknownPeer, to)
	}
	if b.Empty() {
		return nil
	}
	cp := *b
	cp.From, cp.To = t.cfg.ID, to
	frame, err := t.cfg.Codec.AppendFrame(nil, &cp)
	if err != nil {
		return fmt.Errorf("nodenet: encode batch for peer %d: %w", to, err)
	}
	if len(frame) > t.cfg.MaxFrameBytes {
		return fmt.Errorf("%w: batch for peer %d encodes to %d bytes, MaxFrameBytes is %d", ErrFrameTooLarge, to, len(frame), t.cfg.MaxFrameBytes)
	}
	if !p.q.push(entry{frame: frame, msgs: b.Count(), bytes: len(frame)}) {
		p.dropped.Add(1)
		p.m.dropped.Inc()
		m, n := p.q.usage()
		return fmt.Errorf("%w: peer %d: %d messages, %d bytes queued", ErrQueueFull, to, m, n)
	}
	return nil
}

// Stats returns each peer's counters.
func (t *TCPTransport) Stats() map[NodeID]PeerStats {
	t.mu.Lock()
	ps := make([]*peer, 0, len(t.peers))
	for _, p := range t.peers {
		ps = append(ps, p)
	}
	t.mu.Unlock()
	out := make(map[NodeID]PeerStats, len(ps))
	for _, p := range ps {
		out[p.id] = p.stats()
	}
	return out
}

// Close implements Transport: it stops listening and dialing, closes every
// connection and waits for every goroutine, Handler calls in progress
// included. Send fails with ErrClosed afterwards.
func (t *TCPTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		t.wg.Wait()
		return nil
	}
	t.closed = true
	t.cancel()
	for nc := range t.handshake {
		_ = nc.Close()
	}
	ps := make([]*peer, 0, len(t.peers))
	for _, p := range t.peers {
		ps = append(ps, p)
	}
	t.mu.Unlock()
	if t.ln != nil {
		_ = t.ln.Close()
	}
	for _, p := range ps {
		p.closeConn()
	}
	t.wg.Wait()
	t.log.Info("node transport stopped")
	return nil
}

// track registers a connection in its handshake so Close can interrupt it.
func (t *TCPTransport) track(nc net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.handshake[nc] = struct{}{}
	return true
}

func (t *TCPTransport) untrack(nc net.Conn) {
	t.mu.Lock()
	delete(t.handshake, nc)
	t.mu.Unlock()
}

// jitter returns a wait uniform in [d/2, d).
func (t *TCPTransport) jitter(d time.Duration) time.Duration {
	t.randMu.Lock()
	f := t.rand()
	t.randMu.Unlock()
	f = min(max(f, 0), 1)
	return d/2 + time.Duration(float64(d/2)*f)
}

func (t *TCPTransport) acceptLoop() {
	defer t.wg.Done()
	var delay time.Duration
	for {
		nc, err := t.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || t.ctx.Err() != nil {
				return
			}
			// Temporary failures (EMFILE and the like): back off, go on.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			t.log.Warn("accept failed", "err", err, "retry_in", delay)
			select {
			case <-time.After(delay):
			case <-t.ctx.Done():
				return
			}
			continue
		}
		delay = 0
		select {
		case t.hsSlots <- struct{}{}:
		default:
			t.log.Warn("connection refused: too many handshakes in progress", "remote", nc.RemoteAddr().String(), "max", t.cfg.MaxHandshakes)
			_ = nc.Close()
			continue
		}
		if !t.track(nc) {
			<-t.hsSlots
			_ = nc.Close()
			return
		}
		t.wg.Add(1)
		go t.inbound(nc)
	}
}

// inbound runs the acceptor's side of the handshake, then serves the
// connection for the peer it came from.
func (t *TCPTransport) inbound(raw net.Conn) {
	defer t.wg.Done()
	p, nc, br, err := t.acceptHandshake(raw)
	t.untrack(raw)
	<-t.hsSlots
	if err != nil {
		_ = raw.Close()
		if t.ctx.Err() == nil {
			t.log.Warn("inbound connection refused", "remote", raw.RemoteAddr().String(), "err", err)
		}
		return
	}
	p.serve(nc, br)
}

func (t *TCPTransport) acceptHandshake(raw net.Conn) (*peer, net.Conn, *bufio.Reader, error) {
	nc := raw
	_ = nc.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	if t.cfg.TLS != nil {
		tc := tls.Server(raw, t.cfg.TLS.Server)
		if err := tc.HandshakeContext(t.ctx); err != nil {
			return nil, nil, nil, fmt.Errorf("tls handshake: %w", err)
		}
		nc = tc
	}
	br := bufio.NewReaderSize(nc, readBufferBytes)
	h, err := readHello(br)
	if err != nil {
		return nil, nil, nil, err
	}
	var p *peer
	reason := ""
	switch {
	case h.Kind != helloDial:
		reason = fmt.Sprintf("expected a dial hello, got kind %d", h.Kind)
	case h.Version != ProtocolVersion:
		reason = fmt.Sprintf("protocol version %d not supported (this node speaks %d)", h.Version, ProtocolVersion)
	case h.Cluster != t.cfg.Cluster:
		reason = fmt.Sprintf("cluster %q is not this node's cluster %q", h.Cluster, t.cfg.Cluster)
	case h.To != t.cfg.ID:
		reason = fmt.Sprintf("dialed node %d but reached node %d", h.To, t.cfg.ID)
	case h.From >= t.cfg.ID:
		reason = fmt.Sprintf("node %d must not dial node %d (the lower id dials)", h.From, t.cfg.ID)
	default:
		if p = t.peer(h.From); p == nil {
			reason = fmt.Sprintf("node %d is not a known peer", h.From)
		} else if err := t.verifyPeer(nc, h.From); err != nil {
			reason = err.Error()
		}
	}
	if reason != "" {
		_ = writeHello(nc, hello{Version: ProtocolVersion, Kind: helloRefuse, From: t.cfg.ID, To: h.From, Cluster: t.cfg.Cluster, Reason: reason})
		return nil, nil, nil, fmt.Errorf("%w: from node %d: %s", ErrHandshake, h.From, reason)
	}
	if err := writeHello(nc, hello{Version: ProtocolVersion, Kind: helloAccept, From: t.cfg.ID, To: h.From, Cluster: t.cfg.Cluster}); err != nil {
		return nil, nil, nil, fmt.Errorf("write hello: %w", err)
	}
	_ = nc.SetDeadline(time.Time{})
	return p, nc, br, nil
}

// verifyPeer runs Config.VerifyPeer on the certificate nc's peer
// presented (nothing without TLS or without the hook).
func (t *TCPTransport) verifyPeer(nc net.Conn, id NodeID) error {
	tc, ok := nc.(*tls.Conn)
	if t.cfg.VerifyPeer == nil || !ok {
		return nil
	}
	certs := tc.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return fmt.Errorf("node %d presented no certificate", id)
	}
	return t.cfg.VerifyPeer(id, certs[0])
}

// dial connects to peer id at addr and runs the dialer's handshake.
func (t *TCPTransport) dial(id NodeID, addr string) (net.Conn, *bufio.Reader, error) {
	d := &net.Dialer{Timeout: t.cfg.DialTimeout, KeepAlive: tcpKeepAlive}
	if t.cfg.LocalIP != nil {
		d.LocalAddr = &net.TCPAddr{IP: t.cfg.LocalIP}
	}
	raw, err := d.DialContext(t.ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if !t.track(raw) {
		_ = raw.Close()
		return nil, nil, ErrClosed
	}
	defer t.untrack(raw)
	nc, br, err := t.dialHandshake(raw, id, addr)
	if err != nil {
		_ = raw.Close()
		return nil, nil, err
	}
	return nc, br, nil
}

func (t *TCPTransport) dialHandshake(raw net.Conn, id NodeID, addr string) (net.Conn, *bufio.Reader, error) {
	nc := raw
	_ = nc.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	if t.cfg.TLS != nil {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		tc := tls.Client(raw, t.cfg.TLS.clientConfig(host))
		if err := tc.HandshakeContext(t.ctx); err != nil {
			return nil, nil, fmt.Errorf("tls handshake: %w", err)
		}
		nc = tc
	}
	if err := writeHello(nc, hello{Version: ProtocolVersion, Kind: helloDial, From: t.cfg.ID, To: id, Cluster: t.cfg.Cluster}); err != nil {
		return nil, nil, fmt.Errorf("write hello: %w", err)
	}
	br := bufio.NewReaderSize(nc, readBufferBytes)
	h, err := readHello(br)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case h.Kind == helloRefuse:
		return nil, nil, fmt.Errorf("%w by node %d: %s", ErrHandshake, h.From, h.Reason)
	case h.Kind != helloAccept:
		return nil, nil, fmt.Errorf("%w: expected an accept hello, got kind %d", ErrHandshake, h.Kind)
	case h.Version != ProtocolVersion:
		return nil, nil, fmt.Errorf("%w: peer answered with protocol version %d", ErrHandshake, h.Version)
	case h.Cluster != t.cfg.Cluster:
		return nil, nil, fmt.Errorf("%w: peer is in cluster %q, not %q", ErrHandshake, h.Cluster, t.cfg.Cluster)
	case h.From != id || h.To != t.cfg.ID:
		return nil, nil, fmt.Errorf("%w: expected node %d at %s, reached node %d (which expected %d)", ErrHandshake, id, addr, h.From, h.To)
	}
	if err := t.verifyPeer(nc, id); err != nil {
		return nil, nil, fmt.Errorf("%w: node %d at %s: %w", ErrHandshake, id, addr, err)
	}
	_ = nc.SetDeadline(time.Time{})
	return nc, br, nil
}
