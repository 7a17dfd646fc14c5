package sysreg

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/transport"
	"github.com/fmnode/fmnode/caspaxos/wire"
)

// Defaults for TransportConfig fields left zero.
const (
	DefaultScheme         = "https"
	DefaultPeerInFlight   = 2
	DefaultReplyBuffer    = 64
	DefaultRequestTimeout = 2 * time.Second
)

// TransportConfig configures an HTTPTransport.
type TransportConfig struct {
	// HTTP carries the requests (required). In production its transport
	// holds the agent's mTLS tls.Config.
	HTTP *http.Client
	// Scheme is "https" (default) or "http".
	Scheme string
	// Peers are the acceptors messages may be sent to (see checkPeers).
	Peers []Peer
	// PeerInFlight bounds the requests in flight to one peer; a message
	// beyond it is dropped (transport.ErrQueueFull). Default DefaultPeerInFlight.
	PeerInFlight int
	// ReplyBuffer bounds replies waiting to be read; later ones are
	// dropped. Default DefaultReplyBuffer.
	ReplyBuffer int
	// RequestTimeout bounds one request. Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
}

func (c TransportConfig) withDefaults() (TransportConfig, error) {
	if c.Scheme == "" {
		c.Scheme = DefaultScheme
	}
	if c.PeerInFlight == 0 {
		c.PeerInFlight = DefaultPeerInFlight
	}
	if c.ReplyBuffer == 0 {
		c.ReplyBuffer = DefaultReplyBuffer
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.HTTP == nil:
		return c, configErr("TransportConfig.HTTP", "must not be nil")
	case c.Scheme != "https" && c.Scheme != "http":
		return c, configErr("TransportConfig.Scheme", "must be https or http, got %q", c.Scheme)
	case c.PeerInFlight < 1:
		return c, configErr("TransportConfig.PeerInFlight", "must be at least 1, got %d", c.PeerInFlight)
	case c.ReplyBuffer < 1:
		return c, configErr("TransportConfig.ReplyBuffer", "must be at least 1, got %d", c.ReplyBuffer)
	case c.RequestTimeout < 0:
		return c, configErr("TransportConfig.RequestTimeout", "must not be negative, got %v", c.RequestTimeout)
	}
	if _, err := checkPeers(c.Peers); err != nil {
		return c, fmt.Errorf("%w: TransportConfig.Peers: %w", ErrInvalidConfig, err)
	}
	return c, nil
}

// HTTPTransport is a transport.Transport that posts each message to its
// acceptor's Path and queues the reply. Send never blocks: it encodes the
// message and starts a request in its own goroutine, at most PeerInFlight
// per peer, and drops the message when they are all busy. CASPaxos
// tolerates the loss (phase timeouts retry). Replies queue in a bounded
// channel; a reply that finds it full is dropped too.
type HTTPTransport struct {
	cfg     TransportConfig
	log     *slog.Logger
	peers   map[caspaxos.NodeID]*httpPeer
	replies chan caspaxos.Message
	dropped atomic.Uint64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.RWMutex // guards closed against wg.Add racing Close
	closed bool
}

type httpPeer struct {
	peer  Peer
	url   string
	slots chan struct{}

	mu      sync.Mutex
	lastErr error // of the latest finished request; nil after a success
}

var _ transport.Transport = (*HTTPTransport)(nil)

// NewHTTPTransport validates cfg and returns a transport to cfg.Peers.
func NewHTTPTransport(cfg TransportConfig) (*HTTPTransport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &HTTPTransport{
		cfg:     cfg,
		log:     cfg.Logger,
		peers:   make(map[caspaxos.NodeID]*httpPeer, len(cfg.Peers)),
		replies: make(chan caspaxos.Message, cfg.ReplyBuffer),
		ctx:     ctx,
		cancel:  cancel,
	}
	for _, p := range cfg.Peers {
		t.peers[caspaxos.NodeID(p.ID)] = &httpPeer{
			peer:  p,
			url:   cfg.Scheme + "://" + p.Addr + Path,
			slots: make(chan struct{}, cfg.PeerInFlight),
		}
	}
	return t, nil
}

// Send implements transport.Transport.
func (t *HTTPTransport) Send(m caspaxos.Message) error {
	p := t.peers[m.To]
	if p == nil {
		return fmt.Errorf("%w: %d", transport.ErrUnknownPeer, m.To)
	}
	body, err := wire.AppendMessage(nil, m)
	if err != nil {
		return fmt.Errorf("sysreg: encode %v: %w", m.Type, err)
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return transport.ErrClosed
	}
	select {
	case p.slots <- struct{}{}:
	default:
		t.dropped.Add(1)
		return fmt.Errorf("%w: peer %d has %d requests in flight", transport.ErrQueueFull, m.To, t.cfg.PeerInFlight)
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer func() { <-p.slots }()
		reply, err := t.post(p, m, body)
		p.mu.Lock()
		p.lastErr = err
		p.mu.Unlock()
		if err != nil {
			if t.ctx.Err() == nil {
				t.log.Debug("sysreg request failed", "peer", p.peer.ID, "addr", p.peer.Addr, "type", m.Type, "err", err)
			}
			return
		}
		select {
		case t.replies <- reply:
		default:
			t.dropped.Add(1)
		}
	}()
	return nil
}

// post sends one request and returns its checked reply.
func (t *HTTPTransport) post(p *httpPeer, m caspaxos.Message, body []byte) (caspaxos.Message, error) {
	ctx, cancel := t.ctx, context.CancelFunc(func() {})
	if t.cfg.RequestTimeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, t.cfg.RequestTimeout)
	}
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return caspaxos.Message{}, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := t.cfg.HTTP.Do(req)
	if err != nil {
		return caspaxos.Message{}, err
	}
	defer func() {
		// Drain a little so the connection can be reused, then close.
		_, _ = io.CopyN(io.Discard, resp.Body, maxErrorBody)
		_ = resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return caspaxos.Message{}, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(text)))
	}
	if resp.ContentLength > MaxBodyBytes {
		return caspaxos.Message{}, fmt.Errorf("reply of %d bytes exceeds %d", resp.ContentLength, MaxBodyBytes)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	if err != nil {
		return caspaxos.Message{}, fmt.Errorf("read reply: %w", err)
	}
	if len(raw) > MaxBodyBytes {
		return caspaxos.Message{}, fmt.Errorf("reply exceeds %d bytes", MaxBodyBytes)
	}
	return decodeReply(m, raw)
}

// decodeReply decodes the reply to request m from an acceptor's bytes
// and checks that it answers m: the reply type, from m's acceptor to m's
// proposer, about Key only.
func decodeReply(m caspaxos.Message, raw []byte) (caspaxos.Message, error) {
	reply, err := wire.DecodeMessage(raw)
	if err != nil {
		return caspaxos.Message{}, fmt.Errorf("decode reply: %w", err)
	}
	switch {
	case reply.Type != m.Type+1:
		return caspaxos.Message{}, fmt.Errorf("%w: reply %v to a %v", caspaxos.ErrCorrupt, reply.Type, m.Type)
	case reply.From != m.To || reply.To != m.From:
		return caspaxos.Message{}, fmt.Errorf("%w: reply %d->%d to a request %d->%d", caspaxos.ErrCorrupt, reply.From, reply.To, m.From, m.To)
	case len(reply.Items) > 1 || (len(reply.Items) == 1 && reply.Items[0].Key != Key):
		return caspaxos.Message{}, fmt.Errorf("%w: reply about other keys", caspaxos.ErrCorrupt)
	}
	return reply, nil
}

// Replies implements transport.Transport. The channel is never closed.
func (t *HTTPTransport) Replies() <-chan caspaxos.Message { return t.replies }

// Dropped returns the messages and replies dropped because a bound was reached.
func (t *HTTPTransport) Dropped() uint64 { return t.dropped.Load() }

// PeerError returns the error of the latest finished request to peer id,
// nil if it succeeded or none finished.
func (t *HTTPTransport) PeerError(id uint64) error {
	p := t.peers[caspaxos.NodeID(id)]
	if p == nil {
		return fmt.Errorf("%w: %d", transport.ErrUnknownPeer, id)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// Close implements transport.Transport: it cancels requests in flight
// and waits for their goroutines.
func (t *HTTPTransport) Close() error {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
	return nil
}
