package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/wire"
)

// Defaults for ClientConfig fields left zero.
const (
	DefaultDialTimeout     = 2 * time.Second
	DefaultReconnectMin    = 20 * time.Millisecond
	DefaultReconnectMax    = 2 * time.Second
	DefaultPeerQueue       = 4096
	DefaultReplyBuffer     = 4096
	DefaultKeepAlivePeriod = 15 * time.Second
)

// ClientConfig configures a TCPTransport.
type ClientConfig struct {
	// Peers maps each acceptor id to its address.
	Peers map[caspaxos.NodeID]string
	// TLS, when set, makes connections speak TLS.
	TLS *tls.Config
	// MaxFrameBytes bounds frames both ways; use the servers' bound.
	MaxFrameBytes int
	DialTimeout   time.Duration
	WriteTimeout  time.Duration
	// ReconnectMin and ReconnectMax bound the jittered exponential backoff
	// between attempts to reach a peer.
	ReconnectMin, ReconnectMax time.Duration
	// PeerQueue bounds messages waiting for one peer's writer.
	PeerQueue int
	// ReplyBuffer bounds decoded replies waiting for the proposer loop;
	// connection readers wait (TCP backpressure) when it is full.
	ReplyBuffer int
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
}

func (c ClientConfig) withDefaults() (ClientConfig, error) {
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.ReconnectMin == 0 {
		c.ReconnectMin = DefaultReconnectMin
	}
	if c.ReconnectMax == 0 {
		c.ReconnectMax = DefaultReconnectMax
	}
	if c.PeerQueue == 0 {
		c.PeerQueue = DefaultPeerQueue
	}
	if c.ReplyBuffer == 0 {
		c.ReplyBuffer = DefaultReplyBuffer
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if err := checkFrameBytes(c.MaxFrameBytes); err != nil {
		return c, err
	}
	switch {
	case len(c.Peers) == 0:
		return c, configErr("Peers", "no acceptors")
	case c.DialTimeout < 0:
		return c, configErr("DialTimeout", "must not be negative, got %v", c.DialTimeout)
	case c.WriteTimeout < 0:
		return c, configErr("WriteTimeout", "must not be negative, got %v", c.WriteTimeout)
	case c.ReconnectMin <= 0 || c.ReconnectMax < c.ReconnectMin:
		return c, configErr("ReconnectMin", "need 0 < ReconnectMin <= ReconnectMax, got %v and %v", c.ReconnectMin, c.ReconnectMax)
	case c.PeerQueue < 1:
		return c, configErr("PeerQueue", "must be at least 1, got %d", c.PeerQueue)
	case c.ReplyBuffer < 1:
		return c, configErr("ReplyBuffer", "must be at least 1, got %d", c.ReplyBuffer)
	}
	for id, addr := range c.Peers {
		if id == 0 || addr == "" {
			return c, configErr("Peers", "bad entry %d=%q", id, addr)
		}
	}
	return c, nil
}

// TCPTransport is the proposer's Transport over TCP: one connection per
// acceptor, any number of messages in flight on it, a writer goroutine per
// connection that coalesces queued messages into one write, a reader
// goroutine that decodes replies, and reconnection with jittered
// exponential backoff. While a peer is down, messages to it are dropped.
type TCPTransport struct {
	cfg     ClientConfig
	log     *slog.Logger
	peers   map[caspaxos.NodeID]*peerConn
	replies chan caspaxos.Message
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

var _ Transport = (*TCPTransport)(nil)

// DialTCP starts connecting to every peer and returns at once; Send fails
// with ErrPeerDown until a peer's connection is up (WaitConnected waits).
func DialTCP(cfg ClientConfig) (*TCPTransport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &TCPTransport{
		cfg:     cfg,
		log:     cfg.Logger,
		peers:   make(map[caspaxos.NodeID]*peerConn, len(cfg.Peers)),
		replies: make(chan caspaxos.Message, cfg.ReplyBuffer),
		ctx:     ctx,
		cancel:  cancel,
	}
	for id, addr := range cfg.Peers {
		p := &peerConn{t: t, id: id, addr: addr, wake: make(chan struct{}, 1), up: make(chan struct{})}
		t.peers[id] = p
	}
	for _, p := range t.peers {
		t.wg.Add(1)
		go p.run()
	}
	return t, nil
}

// Send implements Transport.
func (t *TCPTransport) Send(m caspaxos.Message) error {
	p := t.peers[m.To]
	if p == nil {
		return fmt.Errorf("%w: %d", ErrUnknownPeer, m.To)
	}
	return p.enqueue(m)
}

// Replies implements Transport.
func (t *TCPTransport) Replies() <-chan caspaxos.Message { return t.replies }

// Close implements Transport.
func (t *TCPTransport) Close() error {
	t.cancel()
	for _, p := range t.peers {
		p.closeConn()
	}
	t.wg.Wait()
	return nil
}

// Connected reports whether the connection to acceptor id is up.
func (t *TCPTransport) Connected(id caspaxos.NodeID) bool {
	p := t.peers[id]
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conn != nil
}

// WaitConnected waits until every peer is connected or ctx ends.
func (t *TCPTransport) WaitConnected(ctx context.Context) error {
	for id, p := range t.peers {
		for {
			p.mu.Lock()
			up, ok := p.up, p.conn != nil
			p.mu.Unlock()
			if ok {
				break
			}
			select {
			case <-up:
			case <-ctx.Done():
				return fmt.Errorf("transport: waiting for acceptor %d at %s: %w", id, p.addr, ctx.Err())
			case <-t.ctx.Done():
				return ErrClosed
			}
		}
	}
	return nil
}

// peerConn is the link to one acceptor.
type peerConn struct {
	t    *TCPTransport
	id   caspaxos.NodeID
	addr string

	mu      sync.Mutex
	conn    net.Conn // nil while down
	pending []caspaxos.Message
	wake    chan struct{} // capacity 1
	up      chan struct{} // closed when a connection comes up; replaced when it goes down
}

func (p *peerConn) enqueue(m caspaxos.Message) error {
	p.mu.Lock()
	switch {
	case p.t.ctx.Err() != nil:
		p.mu.Unlock()
		return ErrClosed
	case p.conn == nil:
		p.mu.Unlock()
		return fmt.Errorf("%w: acceptor %d at %s", ErrPeerDown, p.id, p.addr)
	case len(p.pending) >= p.t.cfg.PeerQueue:
		p.mu.Unlock()
		return fmt.Errorf("%w: acceptor %d: %d messages queued", ErrQueueFull, p.id, len(p.pending))
	}
	p.pending = append(p.pending, m)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return nil
}

func (p *peerConn) closeConn() {
	p.mu.Lock()
	c := p.conn
	p.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// run keeps a connection to the peer up until the transport closes.
func (p *peerConn) run() {
	defer p.t.wg.Done()
	ctx := p.t.ctx
	log := p.t.log.With("acceptor", uint64(p.id), "addr", p.addr)
	backoff := p.t.cfg.ReconnectMin
	failures := 0
	for ctx.Err() == nil {
		conn, err := p.dial(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if failures == 0 {
				log.Warn("cannot reach acceptor; retrying with backoff", "err", err)
			}
			failures++
			// Full jitter keeps many proposers from reconnecting in step.
			d := backoff/2 + rand.N(backoff/2+1)
			backoff = min(2*backoff, p.t.cfg.ReconnectMax)
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return
			}
			continue
		}
		if failures > 0 {
			log.Info("acceptor reachable again", "after_attempts", failures)
		}
		failures, backoff = 0, p.t.cfg.ReconnectMin
		p.serve(ctx, conn, log)
	}
}

func (p *peerConn) dial(ctx context.Context) (net.Conn, error) {
	d := &net.Dialer{Timeout: p.t.cfg.DialTimeout, KeepAlive: DefaultKeepAlivePeriod}
	if p.t.cfg.TLS != nil {
		td := &tls.Dialer{NetDialer: d, Config: p.t.cfg.TLS}
		return td.DialContext(ctx, "tcp", p.addr)
	}
	conn, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return conn, nil
}

// serve runs one connection until it fails or the transport closes.
func (p *peerConn) serve(ctx context.Context, conn net.Conn, log *slog.Logger) {
	p.mu.Lock()
	p.conn = conn
	close(p.up)
	p.mu.Unlock()
	readerDone := make(chan struct{})
	var rerr error
	go func() {
		defer close(readerDone)
		rerr = p.readLoop(ctx, conn)
	}()
	werr := p.writeLoop(ctx, conn, readerDone)
	_ = conn.Close()
	<-readerDone
	p.mu.Lock()
	p.conn = nil
	clear(p.pending)
	p.pending = p.pending[:0]
	p.up = make(chan struct{})
	p.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	err := werr
	if err == nil {
		err = rerr
	}
	if errors.Is(err, io.EOF) {
		// An orderly close: the acceptor restarted or closed an idle connection.
		log.Info("acceptor closed the connection; reconnecting", "err", err)
		return
	}
	log.Warn("connection to acceptor lost; reconnecting", "err", err)
}

// writeLoop writes queued messages until an error, the reader's end, or
// the transport's close. It returns the write error, if any.
func (p *peerConn) writeLoop(ctx context.Context, conn net.Conn, readerDone <-chan struct{}) error {
	var (
		batch, spare []caspaxos.Message
		buf          []byte
	)
	for {
		select {
		case <-p.wake:
		case <-readerDone:
			return nil
		case <-ctx.Done():
			return nil
		}
		p.mu.Lock()
		batch, p.pending = p.pending, spare
		p.mu.Unlock()
		buf = buf[:0]
		for _, m := range batch {
			var err error
			if buf, err = appendFrames(buf, m, p.t.cfg.MaxFrameBytes); err != nil {
				p.t.log.Error("cannot encode request; dropping it", "acceptor", uint64(p.id), "err", err)
			}
		}
		clear(batch)
		spare = batch[:0]
		if len(buf) == 0 {
			continue
		}
		if p.t.cfg.WriteTimeout > 0 {
			_ = conn.SetWriteDeadline(time.Now().Add(p.t.cfg.WriteTimeout))
		}
		if _, err := conn.Write(buf); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		if cap(buf) > keepBufferBytes {
			buf = nil
		}
	}
}

// readLoop decodes replies and hands them to the proposer loop.
func (p *peerConn) readLoop(ctx context.Context, conn net.Conn) error {
	br := bufio.NewReaderSize(conn, 64<<10)
	dec := wire.NewDecoder(internKeys)
	var buf []byte
	for {
		payload, err := wire.ReadFrame(br, p.t.cfg.MaxFrameBytes, buf)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("acceptor closed the connection: %w", err)
			}
			return err
		}
		m, err := dec.Decode(payload)
		if err == nil && (!m.Type.IsReply() || m.From != p.id) {
			err = fmt.Errorf("%w: got %v from acceptor %d on the connection to acceptor %d", caspaxos.ErrCorrupt, m.Type, m.From, p.id)
		}
		if err != nil {
			p.t.log.Warn("malformed reply; closing connection", "acceptor", uint64(p.id), "addr", p.addr, "err", err)
			return err
		}
		select {
		case p.t.replies <- m:
		case <-ctx.Done():
			return ctx.Err()
		}
		if cap(payload) > keepBufferBytes {
			payload = nil
		}
		buf = payload
	}
}
