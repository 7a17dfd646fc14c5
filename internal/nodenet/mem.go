package nodenet

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/fmnode/fmnode/internal/nodewire"
)

// MemNetwork is the in-memory twin of the TCP transport: nodes joined to
// it exchange batches without sockets, through the same bounded per-peer
// send queue and the same drop-new policy (Send returns ErrQueueFull).
//
// Delivery is asynchronous, like TCP's: each (sender, receiver) pair has a
// goroutine that drains the sender's queue for that peer and calls the
// receiver's Handler, so Handler calls for one peer are sequential and in
// order, and calls for different peers may be concurrent. A batch that
// reaches a cut link, or a receiver that is not joined (not started yet,
// or closed), is lost and counted in the sender's Dropped: the twin loses
// what it cannot deliver at once, where TCP keeps its queue through an
// outage; both are at-most-once and ordered per peer.
type MemNetwork struct {
	mu    sync.Mutex
	nodes map[NodeID]*MemTransport
	cut   map[[2]NodeID]bool // from, to
}

// NewMemNetwork returns an empty network.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{nodes: make(map[NodeID]*MemTransport), cut: make(map[[2]NodeID]bool)}
}

// MemConfig configures a node on a MemNetwork. Zero bounds take the TCP
// defaults.
type MemConfig struct {
	ID      NodeID
	Handler Handler
	// Codec, when set, carries every batch through AppendFrame and
	// ReadFrame (nothing is shared between sender and receiver, exactly as
	// on a wire, and queue bytes are frame bytes). Without it the batch's
	// slices are copied but the messages' own byte slices are shared, and
	// queue bytes are an estimate.
	Codec         Codec
	MaxFrameBytes int
	QueueMessages int
	QueueBytes    int
	// MaxPeers bounds the peers a node keeps queues for.
	MaxPeers int
	Logger   *slog.Logger
}

// SetLink cuts (up=false) or restores the one-way link from -> to; cut
// both directions for a partition.
func (n *MemNetwork) SetLink(from, to NodeID, up bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if up {
		delete(n.cut, [2]NodeID{from, to})
	} else {
		n.cut[[2]NodeID{from, to}] = true
	}
}

// route returns the receiver for a batch from -> to, nil when the link is
// cut or the receiver is not joined.
func (n *MemNetwork) route(from, to NodeID) *MemTransport {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut[[2]NodeID{from, to}] {
		return nil
	}
	return n.nodes[to]
}

// Join starts a node on the network. An id can be joined once at a time
// (Close frees it for a restart).
func (n *MemNetwork) Join(cfg MemConfig) (*MemTransport, error) {
	if cfg.MaxFrameBytes == 0 {
		cfg.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if cfg.QueueMessages == 0 {
		cfg.QueueMessages = DefaultQueueMessages
	}
	if cfg.QueueBytes == 0 {
		cfg.QueueBytes = DefaultQueueBytes
	}
	if cfg.MaxPeers == 0 {
		cfg.MaxPeers = DefaultMaxPeers
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.ID == 0:
		return nil, configErr("ID", "must not be zero")
	case cfg.Handler == nil:
		return nil, configErr("Handler", "required")
	case cfg.MaxFrameBytes < MinFrameBytes:
		return nil, configErr("MaxFrameBytes", "%d below %d", cfg.MaxFrameBytes, MinFrameBytes)
	case cfg.QueueMessages < 1:
		return nil, configErr("QueueMessages", "must be at least 1, got %d", cfg.QueueMessages)
	case cfg.QueueBytes < 1:
		return nil, configErr("QueueBytes", "must be at least 1, got %d", cfg.QueueBytes)
	case cfg.MaxPeers < 1:
		return nil, configErr("MaxPeers", "must be at least 1, got %d", cfg.MaxPeers)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, dup := n.nodes[cfg.ID]; dup {
		return nil, configErr("ID", "node %d already joined", cfg.ID)
	}
	t := &MemTransport{net: n, cfg: cfg, peers: make(map[NodeID]*memPeer), done: make(chan struct{})}
	n.nodes[cfg.ID] = t
	return t, nil
}

// MemTransport is a node's Transport on a MemNetwork.
type MemTransport struct {
	net  *MemNetwork
	cfg  MemConfig
	done chan struct{}
	wg   sync.WaitGroup

	// gate: Handler calls into this node hold it shared; Close takes it
	// exclusively, so no call runs after Close returns.
	gate   sync.RWMutex
	closed bool // under gate

	mu    sync.Mutex
	peers map[NodeID]*memPeer
}

var _ Transport = (*MemTransport)(nil)

type memPeer struct {
	id                      NodeID
	q                       *sendQueue
	started                 bool // the delivery goroutine runs (under MemTransport.mu)
	sent, received, dropped atomic.Uint64
}

// peer returns the state for id, creating it (and, when deliver is set,
// starting its delivery goroutine); nil beyond MaxPeers or after Close.
func (t *MemTransport) peer(id NodeID, deliver bool) *memPeer {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[id]
	if p == nil {
		if len(t.peers) >= t.cfg.MaxPeers {
			return nil
		}
		p = &memPeer{id: id, q: newSendQueue(t.cfg.QueueMessages, t.cfg.QueueBytes)}
		t.peers[id] = p
	}
	if deliver && !p.started {
		select {
		case <-t.done:
			return nil
		default:
		}
		p.started = true
		t.wg.Add(1)
		go t.deliverLoop(p)
	}
	return p
}

// Send implements Transport.
func (t *MemTransport) Send(to NodeID, b *nodewire.Batch) error {
	select {
	case <-t.done:
		return ErrClosed
	default:
	}
	if err := checkPeerID(t.cfg.ID, to); err != nil {
		return err
	}
	if b.Empty() {
		return nil
	}
	cp := *b
	cp.From, cp.To = t.cfg.ID, to
	e := entry{msgs: b.Count()}
	if t.cfg.Codec != nil {
		frame, err := t.cfg.Codec.AppendFrame(nil, &cp)
		if err != nil {
			return fmt.Errorf("nodenet: encode batch for peer %d: %w", to, err)
		}
		e.frame, e.bytes = frame, len(frame)
	} else {
		e.batch = shallowCopy(cp)
		e.bytes = estimateBytes(&cp)
	}
	if e.bytes > t.cfg.MaxFrameBytes {
		return fmt.Errorf("%w: batch for peer %d is %d bytes, MaxFrameBytes is %d", ErrFrameTooLarge, to, e.bytes, t.cfg.MaxFrameBytes)
	}
	p := t.peer(to, true)
	if p == nil {
		return fmt.Errorf("%w: peer %d: MaxPeers %d reached or closed", ErrUnknownPeer, to, t.cfg.MaxPeers)
	}
	if !p.q.push(e) {
		p.dropped.Add(1)
		m, n := p.q.usage()
		return fmt.Errorf("%w: peer %d: %d messages, %d bytes queued", ErrQueueFull, to, m, n)
	}
	return nil
}

func (t *MemTransport) deliverLoop(p *memPeer) {
	defer t.wg.Done()
	var batch []entry
	for {
		select {
		case <-p.q.wake:
		case <-t.done:
			p.q.discard()
			return
		}
		batch = p.q.take(batch[:0])
		for i := range batch {
			select {
			case <-t.done:
				p.q.release(batch[i:])
				clear(batch)
				p.q.discard()
				return
			default:
			}
			if t.deliver(p, &batch[i]) {
				p.sent.Add(1)
			} else {
				p.dropped.Add(1)
			}
			p.q.release(batch[i : i+1])
		}
		clear(batch)
	}
}

// deliver hands one batch to its receiver; false when it was lost.
func (t *MemTransport) deliver(p *memPeer, e *entry) bool {
	dst := t.net.route(t.cfg.ID, p.id)
	if dst == nil {
		return false
	}
	b := e.batch
	if t.cfg.Codec != nil {
		var err error
		b, _, err = t.cfg.Codec.ReadFrame(bufio.NewReader(bytes.NewReader(e.frame)), t.cfg.MaxFrameBytes, nil)
		if err != nil {
			t.cfg.Logger.Error("cannot decode own frame", "peer", uint64(p.id), "err", err)
			return false
		}
	}
	return dst.receive(t.cfg.ID, b)
}

// receive runs the Handler for a batch from a peer, unless closed.
func (t *MemTransport) receive(from NodeID, b nodewire.Batch) bool {
	t.gate.RLock()
	defer t.gate.RUnlock()
	if t.closed {
		return false
	}
	if p := t.peer(from, false); p != nil {
		p.received.Add(1)
	}
	t.cfg.Handler(from, b)
	return true
}

// Stats returns each peer's counters; Connected means the peer is joined
// and the link towards it is up.
func (t *MemTransport) Stats() map[NodeID]PeerStats {
	t.mu.Lock()
	ps := make([]*memPeer, 0, len(t.peers))
	for _, p := range t.peers {
		ps = append(ps, p)
	}
	t.mu.Unlock()
	out := make(map[NodeID]PeerStats, len(ps))
	for _, p := range ps {
		m, b := p.q.usage()
		out[p.id] = PeerStats{
			Sent: p.sent.Load(), Received: p.received.Load(), Dropped: p.dropped.Load(),
			Connected:      t.net.route(t.cfg.ID, p.id) != nil,
			QueuedMessages: m, QueuedBytes: b,
		}
	}
	return out
}

// Close implements Transport: the node leaves the network, its delivery
// goroutines stop (queued batches are discarded) and Handler calls into it
// finish. A Handler must not call Close of its own transport.
func (t *MemTransport) Close() error {
	t.mu.Lock()
	select {
	case <-t.done:
		t.mu.Unlock()
		t.wg.Wait()
		return nil
	default:
	}
	close(t.done)
	t.mu.Unlock()
	t.net.mu.Lock()
	if t.net.nodes[t.cfg.ID] == t {
		delete(t.net.nodes, t.cfg.ID)
	}
	t.net.mu.Unlock()
	t.gate.Lock()
	t.closed = true
	t.gate.Unlock()
	t.wg.Wait()
	return nil
}

func shallowCopy(b nodewire.Batch) nodewire.Batch {
	b.CAS = append(b.CAS[:0:0], b.CAS...)
	b.Data = append(b.Data[:0:0], b.Data...)
	b.Heartbeats = append(b.Heartbeats[:0:0], b.Heartbeats...)
	b.Learns = append(b.Learns[:0:0], b.Learns...)
	b.LearnAcks = append(b.LearnAcks[:0:0], b.LearnAcks...)
	return b
}

// estimateBytes approximates a batch's memory when no codec measures it.
func estimateBytes(b *nodewire.Batch) int {
	n := 64 + 128*b.Count()
	for i := range b.Learns {
		n += len(b.Learns[i].Key) + len(b.Learns[i].Data)
	}
	for i := range b.LearnAcks {
		n += len(b.LearnAcks[i].Key)
	}
	return n
}
