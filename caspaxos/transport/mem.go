package transport

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/wire"
)

// MemNetwork is the in-memory twin of TCP: acceptors started on it and
// transports dialled from it talk without sockets, through the same
// acceptor loop (group commit, durability ordering) as AcceptorServer and
// through the same codec (every message is encoded and decoded on its way,
// so nothing is shared between sender and receiver, exactly as on a wire).
// Tests and examples use it to run a cluster in one process. Fault
// injection: close an acceptor (it becomes unreachable) and start it again
// on the same store, or cut links with SetLink.
type MemNetwork struct {
	mu        sync.Mutex
	acceptors map[caspaxos.NodeID]*MemAcceptor
	cut       map[caspaxos.NodeID]bool
}

// NewMemNetwork returns an empty network.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{acceptors: make(map[caspaxos.NodeID]*MemAcceptor), cut: make(map[caspaxos.NodeID]bool)}
}

// MemAcceptor is an acceptor served on a MemNetwork.
type MemAcceptor struct {
	net  *MemNetwork
	core *acceptorCore
	once sync.Once
}

// StartAcceptor recovers an acceptor from cfg.Store and makes it reachable
// under cfg.ID. An id can be served by one acceptor at a time.
func (n *MemNetwork) StartAcceptor(cfg AcceptorConfig) (*MemAcceptor, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, dup := n.acceptors[cfg.ID]; dup {
		return nil, configErr("ID", "acceptor %d already running on this network", cfg.ID)
	}
	core, err := newAcceptorCore(cfg)
	if err != nil {
		return nil, err
	}
	a := &MemAcceptor{net: n, core: core}
	n.acceptors[cfg.ID] = a
	return a, nil
}

// SetLink cuts (up=false) or restores the link to acceptor id: while cut,
// messages to it are dropped, like a network partition around it.
func (n *MemNetwork) SetLink(id caspaxos.NodeID, up bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if up {
		delete(n.cut, id)
	} else {
		n.cut[id] = true
	}
}

func (n *MemNetwork) lookup(id caspaxos.NodeID) (*MemAcceptor, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	a := n.acceptors[id]
	switch {
	case a == nil:
		return nil, fmt.Errorf("%w: acceptor %d not running", ErrPeerDown, id)
	case n.cut[id]:
		return nil, fmt.Errorf("%w: link to acceptor %d cut", ErrPeerDown, id)
	}
	return a, nil
}

// ID returns the acceptor's id.
func (a *MemAcceptor) ID() caspaxos.NodeID { return a.core.cfg.ID }

// Stats returns the acceptor's counters.
func (a *MemAcceptor) Stats() AcceptorStats { return a.core.snapshot() }

// Dead is closed when the acceptor stopped on a fatal error.
func (a *MemAcceptor) Dead() <-chan struct{} { return a.core.dead }

// Close makes the acceptor unreachable and stops it (it does not close
// the store). It returns the fatal error that stopped it, if any.
func (a *MemAcceptor) Close() error {
	a.once.Do(func() {
		a.net.mu.Lock()
		if a.net.acceptors[a.core.cfg.ID] == a {
			delete(a.net.acceptors, a.core.cfg.ID)
		}
		a.net.mu.Unlock()
		a.core.close()
	})
	return a.core.err()
}

// MemTransport is a proposer's Transport on a MemNetwork.
type MemTransport struct {
	net     *MemNetwork
	replies chan caspaxos.Message
	closed  atomic.Bool
	dropped atomic.Uint64
}

var _ Transport = (*MemTransport)(nil)

// Dial returns a transport whose replies wait in a queue of replyBuffer
// messages (0 means DefaultReplyBuffer); replies beyond it are dropped.
func (n *MemNetwork) Dial(replyBuffer int) *MemTransport {
	if replyBuffer <= 0 {
		replyBuffer = DefaultReplyBuffer
	}
	return &MemTransport{net: n, replies: make(chan caspaxos.Message, replyBuffer)}
}

// Send implements Transport: the message is encoded, decoded and queued
// at the acceptor (dropped when its inbox is full).
func (t *MemTransport) Send(m caspaxos.Message) error {
	if t.closed.Load() {
		return ErrClosed
	}
	a, err := t.net.lookup(m.To)
	if err != nil {
		return err
	}
	cp, err := copyMessage(m)
	if err != nil {
		return err
	}
	if err := a.core.checkRequest(cp); err != nil {
		return err
	}
	if err := a.core.trySubmit(inbound{m: cp, route: t, cost: messageCost(cp)}); err != nil {
		return fmt.Errorf("acceptor %d: %w", m.To, err)
	}
	return nil
}

// deliver implements route: a reply from an acceptor's persistence goroutine.
func (t *MemTransport) deliver(m caspaxos.Message) {
	if t.closed.Load() {
		return
	}
	cp, err := copyMessage(m)
	if err != nil {
		t.dropped.Add(1)
		return
	}
	if _, err := t.net.lookup(m.From); err != nil { // a cut link drops replies too
		t.dropped.Add(1)
		return
	}
	select {
	case t.replies <- cp:
	default:
		t.dropped.Add(1)
	}
}

// Replies implements Transport.
func (t *MemTransport) Replies() <-chan caspaxos.Message { return t.replies }

// Dropped returns the replies dropped because the queue was full or the
// link was cut.
func (t *MemTransport) Dropped() uint64 { return t.dropped.Load() }

// Close implements Transport.
func (t *MemTransport) Close() error {
	t.closed.Store(true)
	return nil
}

// copyMessage passes m through the codec, as a wire would.
func copyMessage(m caspaxos.Message) (caspaxos.Message, error) {
	b, err := wire.AppendMessage(nil, m)
	if err != nil {
		return caspaxos.Message{}, err
	}
	return wire.DecodeMessage(b)
}
