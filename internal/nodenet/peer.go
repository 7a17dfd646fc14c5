package nodenet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fmnode/fmnode/internal/nodewire"
)

// peer is everything a transport keeps for one peer: the send queue,
// which survives connections, and the current connection, if any.
type peer struct {
	t     *TCPTransport
	id    NodeID
	dials bool // this node has the lower id: it dials the peer
	q     *sendQueue
	m     *peerMetrics
	// redial (capacity 1) wakes the dialer when the address changed.
	redial chan struct{}

	mu       sync.Mutex
	addr     string
	cur      *conn
	connects uint64

	sent, received, dropped, decodeErrors atomic.Uint64
}

// conn is one connection to a peer.
type conn struct {
	nc   net.Conn
	once sync.Once
	done chan struct{} // closed when its reader and writer are gone
}

func (c *conn) close() { c.once.Do(func() { _ = c.nc.Close() }) }

func newPeer(t *TCPTransport, id NodeID, addr string) *peer {
	return &peer{
		t:      t,
		id:     id,
		dials:  t.cfg.ID < id,
		q:      newSendQueue(t.cfg.QueueMessages, t.cfg.QueueBytes),
		m:      t.metrics.peer(id),
		redial: make(chan struct{}, 1),
		addr:   addr,
	}
}

func (p *peer) stats() PeerStats {
	p.mu.Lock()
	connected, connects := p.cur != nil, p.connects
	p.mu.Unlock()
	msgs, bytes := p.q.usage()
	return PeerStats{
		Sent:           p.sent.Load(),
		Received:       p.received.Load(),
		Dropped:        p.dropped.Load(),
		Reconnects:     max(connects, 1) - 1,
		DecodeErrors:   p.decodeErrors.Load(),
		Connected:      connected,
		QueuedMessages: msgs,
		QueuedBytes:    bytes,
	}
}

func (p *peer) setAddr(addr string) {
	p.mu.Lock()
	changed := p.addr != addr
	p.addr = addr
	c := p.cur
	p.mu.Unlock()
	if !changed || !p.dials {
		return
	}
	if c != nil {
		c.close()
	}
	select {
	case p.redial <- struct{}{}:
	default:
	}
}

func (p *peer) address() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

func (p *peer) closeConn() {
	p.mu.Lock()
	c := p.cur
	p.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// sleep waits d, or until the address changes or the transport closes
// (false).
func (p *peer) sleep(d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-p.redial:
	case <-p.t.ctx.Done():
		return false
	}
	return true
}

// dialLoop keeps a connection to a higher-id peer up until Close. A
// connection that ends sooner than ReconnectMax after it came up does not
// reset the backoff, so a peer that accepts and then drops us at once is
// not redialed in a tight loop.
func (p *peer) dialLoop() {
	defer p.t.wg.Done()
	log := p.t.log.With("peer", uint64(p.id))
	ctx := p.t.ctx
	backoff := p.t.cfg.ReconnectMin
	failures := 0
	for ctx.Err() == nil {
		addr := p.address()
		if addr == "" {
			select {
			case <-p.redial:
			case <-ctx.Done():
			}
			continue
		}
		nc, br, err := p.t.dial(p.id, addr)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			if failures == 1 || errors.Is(err, ErrHandshake) {
				log.Warn("cannot reach peer; retrying with backoff", "addr", addr, "err", err)
			} else {
				log.Debug("cannot reach peer", "addr", addr, "attempt", failures, "err", err)
			}
			if !p.sleep(p.t.jitter(backoff)) {
				return
			}
			backoff = min(2*backoff, p.t.cfg.ReconnectMax)
			continue
		}
		if failures > 0 {
			log.Info("peer reachable again", "addr", addr, "after_attempts", failures)
		}
		failures = 0
		up := time.Now()
		p.serve(nc, br)
		if time.Since(up) >= p.t.cfg.ReconnectMax {
			backoff = p.t.cfg.ReconnectMin
		}
		if !p.sleep(p.t.jitter(backoff)) {
			return
		}
		backoff = min(2*backoff, p.t.cfg.ReconnectMax)
	}
}

// serve runs an established connection until it fails, is replaced or the
// transport closes. A new connection replaces the current one only after
// the old one's goroutines are gone, so Handler calls for a peer never
// overlap and a peer's batches are written by one writer at a time.
func (p *peer) serve(nc net.Conn, br *bufio.Reader) {
	c := &conn{nc: nc, done: make(chan struct{})}
	defer close(c.done)
	p.mu.Lock()
	if p.t.ctx.Err() != nil {
		p.mu.Unlock()
		c.close()
		return
	}
	old := p.cur
	p.cur = c
	p.connects++
	reconnect := p.connects > 1
	p.mu.Unlock()
	if old != nil {
		old.close()
		<-old.done
	}
	if reconnect {
		p.m.reconnects.Inc()
	}
	p.m.connected.Set(1)
	log := p.t.log.With("peer", uint64(p.id), "remote", nc.RemoteAddr().String())
	log.Info("connected to peer", "replaced", old != nil)

	readerDone := make(chan struct{})
	var rerr error
	go func() {
		defer close(readerDone)
		rerr = p.readLoop(nc, br)
	}()
	werr := p.writeLoop(nc, readerDone)
	c.close()
	<-readerDone

	p.mu.Lock()
	current := p.cur == c
	if current {
		p.cur = nil
	}
	p.mu.Unlock()
	if current {
		p.m.connected.Set(0)
	}
	switch err := errors.Join(werr, rerr); {
	case p.t.ctx.Err() != nil:
	case !current:
		log.Info("connection replaced by a newer one")
	case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
		log.Info("peer closed the connection", "err", err)
	default:
		log.Warn("connection to peer lost", "err", err)
	}
}

// writeLoop writes queued frames, and a keepalive when the connection was
// silent for KeepaliveInterval, until an error, the reader's end, or
// Close.
func (p *peer) writeLoop(nc net.Conn, readerDone <-chan struct{}) error {
	cfg := &p.t.cfg
	keepalive, err := cfg.Codec.AppendFrame(nil, &nodewire.Batch{From: cfg.ID, To: p.id})
	if err != nil {
		return fmt.Errorf("encode keepalive: %w", err)
	}
	tm := time.NewTimer(cfg.KeepaliveInterval)
	defer tm.Stop()
	var (
		batch []entry
		bufs  net.Buffers
	)
	for {
		batch = p.q.take(batch[:0])
		if len(batch) == 0 {
			select {
			case <-p.q.wake:
				continue
			case <-tm.C:
				_ = nc.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout))
				if _, err := nc.Write(keepalive); err != nil {
					return fmt.Errorf("write keepalive: %w", err)
				}
				tm.Reset(cfg.KeepaliveInterval)
				continue
			case <-readerDone:
				return nil
			case <-p.t.ctx.Done():
				return nil
			}
		}
		bufs = bufs[:0]
		for i := range batch {
			bufs = append(bufs, batch[i].frame)
		}
		_ = nc.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout))
		_, err := bufs.WriteTo(nc)
		p.q.release(batch)
		clear(batch)
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		p.sent.Add(uint64(len(batch)))
		p.m.sent.Add(float64(len(batch)))
		tm.Reset(cfg.KeepaliveInterval)
	}
}

// readLoop decodes frames and hands batches to the Handler. A frame the
// codec refuses, or a batch not from this peer to this node, ends the
// connection (the stream cannot be trusted after it).
func (p *peer) readLoop(nc net.Conn, br *bufio.Reader) error {
	cfg := &p.t.cfg
	var buf []byte
	for {
		_ = nc.SetReadDeadline(time.Now().Add(cfg.IdleTimeout))
		b, nb, err := p.readFrame(br, buf)
		if err != nil {
			if isIOError(err) {
				return err
			}
			return p.decodeFailed(err)
		}
		if b.From != p.id || b.To != cfg.ID {
			return p.decodeFailed(fmt.Errorf("batch from %d to %d on the connection between %d and %d", b.From, b.To, p.id, cfg.ID))
		}
		if cap(nb) <= keepBufferBytes {
			buf = nb
		} else {
			buf = nil
		}
		if b.Empty() {
			continue
		}
		p.received.Add(1)
		p.m.received.Inc()
		cfg.Handler(p.id, b)
	}
}

// readFrame calls the codec, turning a panic on hostile input into an
// error: a codec bug must not take the node down.
func (p *peer) readFrame(br *bufio.Reader, buf []byte) (b nodewire.Batch, nb []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("codec panicked: %v", r)
		}
	}()
	return p.t.cfg.Codec.ReadFrame(br, p.t.cfg.MaxFrameBytes, buf)
}

func (p *peer) decodeFailed(err error) error {
	p.decodeErrors.Add(1)
	p.m.decodeErrors.Inc()
	p.t.log.Error("malformed input from peer; closing the connection", "peer", uint64(p.id), "err", err)
	return fmt.Errorf("decode: %w", err)
}

// isIOError tells connection failures from codec refusals.
func isIOError(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.As(err, &ne)
}
