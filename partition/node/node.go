// Package node runs a partition.Host for real: one goroutine owns the
// host and the store, turning client calls and transport deliveries into
// host steps, and every Ready into one store commit (one fsync for all
// partitions' writes: group commit), then sending its messages and
// answering its clients. While a commit's fsync is in progress new requests
// queue up and form the next group, so group size adapts to load with no
// timer; with an AsyncStore several groups are in flight at once and the
// store shares fsyncs between them (see Node.Run).
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fmnode/fmnode/partition"
)

// Transport sends messages to the node of another region. Send must not
// block for long; it may drop (the protocol retransmits).
type Transport interface {
	Send(to partition.Region, msgs []partition.Message)
}

// Config configures a Node.
type Config struct {
	Host      partition.Config
	Store     partition.Store
	Transport Transport
	// Clock returns the time since the node's origin (default: monotonic
	// time since New).
	Clock func() time.Duration
	// InboxSize bounds queued client requests and deliveries.
	InboxSize int
	// MaxEventsPerCommit bounds the events stepped before one Ready.
	MaxEventsPerCommit int
	// MaxInflightCommits bounds the Readys applied and awaiting their
	// fsync at once (default 4; 1 disables pipelining).
	MaxInflightCommits int
	Logger             *slog.Logger
}

// ErrStopped: the node is not running (stopped, or failed).
var ErrStopped = errors.New("node: stopped")

// Node hosts a region's partition replicas.
type Node struct {
	cfg   Config
	log   *slog.Logger
	host  *partition.Host
	store partition.Store
	inbox chan event
	clock func() time.Duration

	pending map[partition.ClientRef]chan partition.Reply
	nextRef partition.ClientRef

	done   chan struct{}
	err    error
	failed atomic.Bool
	stats  Stats
	pool   sync.Pool // chan partition.Reply
	outbuf map[partition.Region][]partition.Message
}

// Stats counts what a node did.
type Stats struct {
	Commits         atomic.Uint64
	WritesCommitted atomic.Uint64
	Events          atomic.Uint64
	Dropped         atomic.Uint64 // deliveries dropped on a full inbox
	CommitNanos     atomic.Uint64
}

type eventKind uint8

const (
	evMessages eventKind = iota + 1
	evWrite
	evRead
	evDo
)

type event struct {
	kind  eventKind
	msgs  []partition.Message
	write partition.WriteRequest
	read  partition.ReadRequest
	do    func(now time.Duration, h *partition.Host) error
	reply chan partition.Reply
	errc  chan error
}

// New loads every partition of cfg.Store into a new host.
func New(cfg Config) (*Node, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("node: Config.Store is nil: %w", partition.ErrInvalidConfig)
	}
	if cfg.Transport == nil {
		return nil, fmt.Errorf("node: Config.Transport is nil: %w", partition.ErrInvalidConfig)
	}
	if cfg.InboxSize == 0 {
		cfg.InboxSize = 1 << 16
	}
	if cfg.MaxEventsPerCommit == 0 {
		cfg.MaxEventsPerCommit = 4096
	}
	if cfg.MaxInflightCommits == 0 {
		cfg.MaxInflightCommits = 4
	}
	if cfg.InboxSize < 1 || cfg.MaxEventsPerCommit < 1 || cfg.MaxInflightCommits < 1 {
		return nil, fmt.Errorf("node: InboxSize and MaxEventsPerCommit must be positive: %w", partition.ErrInvalidConfig)
	}
	if cfg.Clock == nil {
		start := time.Now()
		cfg.Clock = func() time.Duration { return time.Since(start) }
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Host.Logger == nil {
		cfg.Host.Logger = log
	}
	h, err := partition.NewHost(cfg.Host)
	if err != nil {
		return nil, err
	}
	ids, err := cfg.Store.Partitions()
	if err != nil {
		return nil, fmt.Errorf("node: list partitions: %w", err)
	}
	now := cfg.Clock()
	for _, p := range ids {
		rec, err := cfg.Store.Load(p)
		if err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
		if err := h.Open(now, rec); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
	}
	n := &Node{
		cfg: cfg, log: log, host: h, store: cfg.Store, clock: cfg.Clock,
		inbox:   make(chan event, cfg.InboxSize),
		pending: make(map[partition.ClientRef]chan partition.Reply),
		done:    make(chan struct{}),
		outbuf:  make(map[partition.Region][]partition.Message),
	}
	n.pool.New = func() any { return make(chan partition.Reply, 1) }
	return n, nil
}

// Region returns the node's region.
func (n *Node) Region() partition.Region { return n.cfg.Host.Region }

// Stats returns the node's counters.
func (n *Node) Stats() *Stats { return &n.stats }

// Deliver queues messages from the transport. It never blocks: on a full
// inbox the messages are dropped (and retransmitted by the protocol). An
// empty delivery is ignored rather than spending an inbox slot.
func (n *Node) Deliver(msgs []partition.Message) {
	if len(msgs) == 0 {
		return
	}
	select {
	case n.inbox <- event{kind: evMessages, msgs: msgs}:
	default:
		n.stats.Dropped.Add(uint64(len(msgs)))
	}
}

func (n *Node) submit(ctx context.Context, ev event) error {
	if n.failed.Load() {
		return ErrStopped
	}
	select {
	case n.inbox <- ev:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.done:
		return ErrStopped
	}
}

func (n *Node) await(ctx context.Context, ch chan partition.Reply) (partition.Reply, error) {
	select {
	case r := <-ch:
		n.pool.Put(ch)
		return r, r.Err
	case <-ctx.Done():
		// ch may still receive; do not reuse it.
		return partition.Reply{}, fmt.Errorf("node: %w (outcome unknown)", ctx.Err())
	case <-n.done:
		return partition.Reply{}, ErrStopped
	}
}

// Write submits a client write and waits for its reply. Key and Value are
// copied: the caller may reuse its buffers.
func (n *Node) Write(ctx context.Context, req partition.WriteRequest) (partition.Token, error) {
	buf := make([]byte, len(req.Key)+len(req.Value))
	k := copy(buf, req.Key)
	copy(buf[k:], req.Value)
	req.Key = buf[:k:k]
	if req.Value != nil {
		req.Value = buf[k:]
	}
	ch := n.pool.Get().(chan partition.Reply)
	if err := n.submit(ctx, event{kind: evWrite, write: req, reply: ch}); err != nil {
		n.pool.Put(ch)
		return partition.Token{}, err
	}
	r, err := n.await(ctx, ch)
	return r.Token, err
}

// Read submits a client read and waits for its reply.
func (n *Node) Read(ctx context.Context, req partition.ReadRequest) (partition.Reply, error) {
	ch := n.pool.Get().(chan partition.Reply)
	if err := n.submit(ctx, event{kind: evRead, read: req, reply: ch}); err != nil {
		n.pool.Put(ch)
		return partition.Reply{}, err
	}
	return n.await(ctx, ch)
}

// Do runs fn on the host inside the node's loop (control operations:
// Create, Fence, Promote, Truncate, SetLease, Progress, ...) and returns
// its error once the writes it caused are durable.
func (n *Node) Do(ctx context.Context, fn func(now time.Duration, h *partition.Host) error) error {
	errc := make(chan error, 1)
	if err := n.submit(ctx, event{kind: evDo, do: fn, errc: errc}); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-n.done:
		return ErrStopped
	}
}

// inflightReady is a Ready whose writes are applied and awaiting their fsync.
type inflightReady struct {
	rd      partition.Ready
	wait    func() error
	replies []partition.Reply
	fetched []partition.FetchResult
	dos     []chan error
	doErrs  []error
	start   time.Time
	err     error
}

// Run is the node's loop; it returns when ctx ends or the store fails.
//
// Commits are pipelined: the loop applies Ready n (CommitAsync), runs its
// reads, and goes on stepping events and applying Ready n+1 while a syncer
// goroutine waits for n's fsync; only then are n's messages sent and its
// acknowledgements delivered (Advance). Up to MaxInflightCommits Readys are
// in flight; the store groups their fsyncs.
func (n *Node) Run(ctx context.Context) error {
	defer close(n.done)
	depth := n.cfg.MaxInflightCommits
	syncq := make(chan *inflightReady, depth)
	synced := make(chan *inflightReady, depth)
	go func() {
		defer close(synced)
		for it := range syncq {
			it.err = it.wait()
			synced <- it
		}
	}()
	inflight := 0
	shutdown := func(err error) error {
		close(syncq)
		for range synced { // let in-flight fsyncs finish before the store closes
		}
		return n.stop(err)
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var dos []chan error
	var doErrs []error
	for {
		canIssue := n.host.HasReady() && inflight < depth
		if !canIssue {
			wait := time.Hour
			if d, ok := n.host.NextDeadline(); ok {
				wait = max(d-n.clock(), 0)
			}
			timer.Reset(wait)
			select {
			case ev := <-n.inbox:
				n.handle(ev, &dos, &doErrs)
			case it := <-synced:
				inflight--
				if err := n.finish(it); err != nil {
					return shutdown(err)
				}
			case <-timer.C:
			case <-ctx.Done():
				return shutdown(ctx.Err())
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	drain:
		for i := 1; i < n.cfg.MaxEventsPerCommit; i++ {
			select {
			case ev := <-n.inbox:
				n.handle(ev, &dos, &doErrs)
			case it := <-synced:
				inflight--
				if err := n.finish(it); err != nil {
					return shutdown(err)
				}
			default:
				break drain
			}
		}
		now := n.clock()
		n.host.Tick(now)
		if err := n.host.Violation(); err != nil {
			return shutdown(err)
		}
		if inflight >= depth || !n.host.HasReady() {
			if len(dos) > 0 && inflight == 0 && !n.host.HasReady() {
				for i, ch := range dos {
					ch <- doErrs[i]
				}
				dos, doErrs = dos[:0], doErrs[:0]
			}
			continue
		}
		it, err := n.issue(now)
		if err != nil {
			return shutdown(err)
		}
		it.dos, it.doErrs = dos, doErrs
		dos, doErrs = nil, nil
		inflight++
		syncq <- it
	}
}

// issue takes a Ready, applies its writes and runs its reads.
func (n *Node) issue(now time.Duration) (*inflightReady, error) {
	it := &inflightReady{rd: n.host.Ready(now), start: time.Now()}
	n.answer(it.rd.Replies)
	it.rd.Replies = nil
	wait, err := partition.CommitAsync(n.store, it.rd.Writes)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Region(), err)
	}
	it.wait = wait
	it.replies, it.fetched = partition.ExecReads(n.store, &it.rd)
	return it, nil
}

// finish acts on a Ready whose writes are durable.
func (n *Node) finish(it *inflightReady) error {
	if it.err != nil {
		return fmt.Errorf("node %s: %w", n.Region(), it.err)
	}
	if len(it.rd.Writes) > 0 {
		n.stats.CommitNanos.Add(uint64(time.Since(it.start)))
		n.stats.Commits.Add(1)
		n.stats.WritesCommitted.Add(uint64(len(it.rd.Writes)))
	}
	n.answer(n.host.Finish(n.clock(), &it.rd, it.replies, it.fetched))
	n.send(it.rd.Messages)
	for i, ch := range it.dos {
		ch <- it.doErrs[i]
	}
	return nil
}

func (n *Node) stop(err error) error {
	n.failed.Store(true)
	n.err = err
	for ref, ch := range n.pending {
		ch <- partition.Reply{Ref: ref, Err: fmt.Errorf("node %s: %w: %v", n.Region(), ErrStopped, err)}
		delete(n.pending, ref)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		n.log.Error("node: stopped", "region", n.Region(), "err", err)
	}
	return err
}

func (n *Node) handle(ev event, doneDo *[]chan error, doneErr *[]error) {
	n.stats.Events.Add(1)
	now := n.clock()
	switch ev.kind {
	case evMessages:
		for i := range ev.msgs {
			_ = n.host.Step(now, &ev.msgs[i]) // unknown partitions: dropped
		}
	case evWrite:
		n.nextRef++
		ev.write.Ref = n.nextRef
		n.pending[n.nextRef] = ev.reply
		n.host.Write(now, &ev.write)
	case evRead:
		n.nextRef++
		ev.read.Ref = n.nextRef
		n.pending[n.nextRef] = ev.reply
		n.host.Read(now, &ev.read)
	case evDo:
		err := ev.do(now, n.host)
		*doneDo = append(*doneDo, ev.errc)
		*doneErr = append(*doneErr, err)
	}
}

func (n *Node) answer(rs []partition.Reply) {
	for _, r := range rs {
		if r.Kind == partition.ReplyControl {
			continue
		}
		if ch, ok := n.pending[r.Ref]; ok {
			delete(n.pending, r.Ref)
			ch <- r
		}
	}
}

func (n *Node) send(msgs []partition.Message) {
	if len(msgs) == 0 {
		return
	}
	for _, m := range msgs {
		n.outbuf[m.To] = append(n.outbuf[m.To], m)
	}
	for to, ms := range n.outbuf {
		// The key stays (a region seen once is likely seen again), so a
		// region with nothing this time is skipped: an empty Send would
		// still take a slot of the receiver's inbox, and a full inbox
		// drops real messages.
		if len(ms) == 0 {
			continue
		}
		n.cfg.Transport.Send(to, ms)
		n.outbuf[to] = nil // the receiver owns the slice now
	}
}

// MemNetwork is the in-memory transport twin: it hands messages straight
// to the destination node's inbox.
type MemNetwork struct {
	mu    sync.RWMutex
	nodes map[partition.Region]*Node
}

// NewMemNetwork returns an empty network.
func NewMemNetwork() *MemNetwork { return &MemNetwork{nodes: map[partition.Region]*Node{}} }

// Attach connects a node.
func (m *MemNetwork) Attach(n *Node) {
	m.mu.Lock()
	m.nodes[n.Region()] = n
	m.mu.Unlock()
}

// Send implements Transport.
func (m *MemNetwork) Send(to partition.Region, msgs []partition.Message) {
	m.mu.RLock()
	n := m.nodes[to]
	m.mu.RUnlock()
	if n != nil {
		n.Deliver(msgs)
	}
}
