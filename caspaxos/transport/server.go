package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/wire"
)

// ServerConfig configures an AcceptorServer.
type ServerConfig struct {
	AcceptorConfig
	// Addr is the TCP address to listen on, e.g. "127.0.0.1:0".
	Addr string
	// TLS, when set, makes the server speak TLS (the listener is wrapped).
	TLS *tls.Config
	// MaxFrameBytes bounds a frame's payload in both directions; larger
	// incoming frames close the connection, larger outgoing messages are
	// split. Proposers must use the same bound.
	MaxFrameBytes int
	// IdleTimeout closes a connection that sends nothing for this long.
	IdleTimeout time.Duration
	// WriteTimeout bounds one write to a connection.
	WriteTimeout time.Duration
	// MaxConns bounds open connections; further ones are closed at once.
	MaxConns int
	// ConnQueue bounds replies waiting for one connection's writer; a
	// connection that falls that far behind is closed.
	ConnQueue int
}

func (c ServerConfig) withDefaults() (ServerConfig, error) {
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.ConnQueue == 0 {
		c.ConnQueue = DefaultConnQueue
	}
	if c.InboxBytes == 0 {
		c.InboxBytes = max(DefaultInboxBytes, c.MaxFrameBytes)
	}
	if err := checkFrameBytes(c.MaxFrameBytes); err != nil {
		return c, err
	}
	switch {
	case c.IdleTimeout < 0:
		return c, configErr("IdleTimeout", "must not be negative, got %v", c.IdleTimeout)
	case c.WriteTimeout < 0:
		return c, configErr("WriteTimeout", "must not be negative, got %v", c.WriteTimeout)
	case c.MaxConns < 1:
		return c, configErr("MaxConns", "must be at least 1, got %d", c.MaxConns)
	case c.ConnQueue < 1:
		return c, configErr("ConnQueue", "must be at least 1, got %d", c.ConnQueue)
	case c.InboxBytes > 0 && c.InboxBytes < c.MaxFrameBytes:
		return c, configErr("InboxBytes", "%d is below MaxFrameBytes %d: one frame must fit", c.InboxBytes, c.MaxFrameBytes)
	}
	return c, nil
}

// AcceptorServer serves one acceptor over TCP. Create it with
// ListenAcceptor; Close stops it.
type AcceptorServer struct {
	cfg  ServerConfig
	core *acceptorCore
	ln   net.Listener
	log  *slog.Logger

	mu     sync.Mutex
	conns  map[*serverConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// ListenAcceptor recovers the acceptor from cfg.Store, listens on cfg.Addr
// and starts serving. It returns once the listener is bound (Addr reports
// the port when cfg.Addr asked for port 0).
func ListenAcceptor(cfg ServerConfig) (*AcceptorServer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("transport: acceptor %d: listen: %w", cfg.ID, err)
	}
	s, err := Serve(ln, cfg)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	return s, nil
}

// Serve serves the acceptor on an existing listener (cfg.Addr is ignored);
// the server owns ln from now on and closes it on Close.
func Serve(ln net.Listener, cfg ServerConfig) (*AcceptorServer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	core, err := newAcceptorCore(cfg.AcceptorConfig)
	if err != nil {
		return nil, err
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	s := &AcceptorServer{
		cfg:   cfg,
		core:  core,
		ln:    ln,
		log:   core.log,
		conns: make(map[*serverConn]struct{}),
	}
	s.wg.Add(2)
	go s.acceptLoop()
	go s.watchCore()
	s.log.Info("acceptor listening", "addr", ln.Addr().String(), "tls", cfg.TLS != nil, "records", core.acc.Len())
	return s, nil
}

// Addr returns the address the server listens on.
func (s *AcceptorServer) Addr() net.Addr { return s.ln.Addr() }

// ID returns the acceptor's id.
func (s *AcceptorServer) ID() caspaxos.NodeID { return s.cfg.ID }

// Dead is closed when the acceptor stopped on a fatal error (a failed
// Store.Apply or a broken invariant); Err says which.
func (s *AcceptorServer) Dead() <-chan struct{} { return s.core.dead }

// Stats returns the acceptor's counters.
func (s *AcceptorServer) Stats() AcceptorStats { return s.core.snapshot() }

// Err returns the fatal error that stopped the acceptor, or nil.
func (s *AcceptorServer) Err() error { return s.core.err() }

// Close stops accepting, closes every connection, stops the acceptor loop
// and waits for every goroutine. It does not close the store. It returns
// the fatal error that stopped the acceptor, if there was one.
func (s *AcceptorServer) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.core.err()
	}
	s.closed = true
	conns := make([]*serverConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	_ = s.ln.Close()
	s.core.close()
	for _, c := range conns {
		c.shutdown("server closing", nil)
	}
	s.wg.Wait()
	s.log.Info("acceptor stopped")
	return s.core.err()
}

// watchCore closes the listener and connections when the acceptor dies,
// so proposers see it as down instead of as silent.
func (s *AcceptorServer) watchCore() {
	defer s.wg.Done()
	select {
	case <-s.core.dead:
	case <-s.core.ctx.Done():
		return
	}
	_ = s.ln.Close()
	s.mu.Lock()
	conns := make([]*serverConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.shutdown("acceptor failed", nil)
	}
}

func (s *AcceptorServer) acceptLoop() {
	defer s.wg.Done()
	var delay time.Duration
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.core.ctx.Err() != nil {
				return
			}
			// Temporary failures (EMFILE and the like): back off, go on.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed", "err", err, "retry_in", delay)
			select {
			case <-time.After(delay):
			case <-s.core.ctx.Done():
				return
			}
			continue
		}
		delay = 0
		s.mu.Lock()
		if s.closed || len(s.conns) >= s.cfg.MaxConns {
			full := !s.closed
			s.mu.Unlock()
			if full {
				s.core.metrics.connErrors.WithLabelValues("too_many_connections").Inc()
				s.log.Warn("connection refused: too many connections", "remote", conn.RemoteAddr().String(), "max", s.cfg.MaxConns)
			}
			_ = conn.Close()
			continue
		}
		c := newServerConn(s, conn)
		s.conns[c] = struct{}{}
		s.wg.Add(2)
		s.mu.Unlock()
		s.core.metrics.conns.Inc()
		go c.readLoop()
		go c.writeLoop()
	}
}

func (s *AcceptorServer) forget(c *serverConn) {
	s.mu.Lock()
	if _, ok := s.conns[c]; ok {
		delete(s.conns, c)
		s.core.metrics.conns.Dec()
	}
	s.mu.Unlock()
}

// serverConn is one proposer connection: a reader goroutine that decodes
// requests and hands them to the acceptor loop, and a writer goroutine that
// coalesces the replies routed to it into one write.
type serverConn struct {
	srv    *AcceptorServer
	conn   net.Conn
	remote string

	mu       sync.Mutex
	pending  []caspaxos.Message
	closed   bool
	overflow bool          // the writer fell ConnQueue replies behind
	wake     chan struct{} // capacity 1
	done     chan struct{} // closed by shutdown
	ctx      context.Context
	cancel   context.CancelFunc
}

func newServerConn(s *AcceptorServer, conn net.Conn) *serverConn {
	ctx, cancel := context.WithCancel(s.core.ctx)
	return &serverConn{
		srv:    s,
		conn:   conn,
		remote: conn.RemoteAddr().String(),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		ctx:    ctx,
		cancel: cancel,
	}
}

// shutdown closes the connection once. reason and err are logged when err
// is not nil (a protocol or IO failure rather than an orderly close).
func (c *serverConn) shutdown(reason string, err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.pending = nil
	c.mu.Unlock()
	if err != nil {
		c.srv.log.Warn("closing connection", "remote", c.remote, "reason", reason, "err", err)
		c.srv.core.metrics.connErrors.WithLabelValues(reason).Inc()
	} else {
		c.srv.log.Debug("connection closed", "remote", c.remote, "reason", reason)
	}
	c.cancel()
	close(c.done)
	_ = c.conn.Close()
	c.srv.forget(c)
}

// deliver queues a reply for the writer. It never blocks and does no IO
// (it runs on the acceptor's persistence goroutine): a connection whose
// queue is full loses the reply and is closed by its own writer.
func (c *serverConn) deliver(m caspaxos.Message) {
	c.mu.Lock()
	if c.closed || len(c.pending) >= c.srv.cfg.ConnQueue {
		c.overflow = !c.closed
		c.mu.Unlock()
		c.srv.core.metrics.dropped.Inc()
		c.srv.core.stats.dropped.Add(1)
	} else {
		c.pending = append(c.pending, m)
		c.mu.Unlock()
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *serverConn) readLoop() {
	defer c.srv.wg.Done()
	br := bufio.NewReaderSize(c.conn, 64<<10)
	dec := wire.NewDecoder(internKeys)
	var buf []byte
	for {
		if c.srv.cfg.IdleTimeout > 0 {
			_ = c.conn.SetReadDeadline(time.Now().Add(c.srv.cfg.IdleTimeout))
		}
		payload, err := wire.ReadFrame(br, c.srv.cfg.MaxFrameBytes, buf)
		if err != nil {
			c.readFailed(err)
			return
		}
		m, err := dec.Decode(payload)
		if err != nil {
			c.shutdown("malformed_message", err)
			return
		}
		if err := c.srv.core.checkRequest(m); err != nil {
			c.shutdown("bad_request", err)
			return
		}
		if err := c.srv.core.submit(c.ctx, inbound{m: m, route: c, cost: len(payload) + 64}); err != nil {
			c.shutdown("closing", nil)
			return
		}
		if cap(payload) > keepBufferBytes {
			payload = nil
		}
		buf = payload
	}
}

func (c *serverConn) readFailed(err error) {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), c.ctx.Err() != nil:
		c.shutdown("eof", nil)
	case errors.Is(err, caspaxos.ErrCorrupt):
		c.shutdown("malformed_frame", err)
	case errors.As(err, &ne) && ne.Timeout():
		c.shutdown("idle_timeout", nil)
	default:
		c.shutdown("read_error", err)
	}
}

func (c *serverConn) writeLoop() {
	defer c.srv.wg.Done()
	var (
		batch, spare []caspaxos.Message
		buf          []byte
	)
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		c.mu.Lock()
		batch, c.pending = c.pending, spare
		overflow := c.overflow
		c.mu.Unlock()
		if overflow {
			c.shutdown("slow_consumer", fmt.Errorf("more than %d replies queued", c.srv.cfg.ConnQueue))
			return
		}
		buf = buf[:0]
		for _, m := range batch {
			var err error
			if buf, err = appendFrames(buf, m, c.srv.cfg.MaxFrameBytes); err != nil {
				c.srv.log.Error("cannot encode reply; dropping it", "remote", c.remote, "err", err)
			}
		}
		clear(batch)
		spare = batch[:0]
		if len(buf) == 0 {
			continue
		}
		if c.srv.cfg.WriteTimeout > 0 {
			_ = c.conn.SetWriteDeadline(time.Now().Add(c.srv.cfg.WriteTimeout))
		}
		if _, err := c.conn.Write(buf); err != nil {
			if c.ctx.Err() == nil {
				c.shutdown("write_error", err)
			}
			return
		}
		if cap(buf) > keepBufferBytes {
			buf = nil
		}
	}
}
