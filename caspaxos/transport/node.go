package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fmnode/fmnode/caspaxos"
)

// Defaults for NodeConfig fields left zero.
const (
	DefaultMaxPending    = 65536
	DefaultMaxLoopEvents = 8192
	DefaultCallQueue     = 4096
)

// NodeConfig configures a ProposerNode.
type NodeConfig struct {
	// Proposer configures the state machine (caspaxos.DefaultProposerConfig).
	Proposer caspaxos.ProposerConfig
	// Rand is the proposer's randomness (backoff jitter); nil seeds a
	// math/rand/v2 PCG from the runtime's random source.
	Rand caspaxos.Rand
	// MaxPending bounds Propose calls in progress; further callers wait.
	MaxPending int
	// MaxLoopEvents bounds the calls and replies the loop takes in before
	// one Ready, so a flood cannot delay sending indefinitely.
	MaxLoopEvents int
	// Logger receives transport errors; nil discards them.
	Logger *slog.Logger
	// Registerer receives the node's metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

func (c NodeConfig) withDefaults() (NodeConfig, error) {
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.MaxLoopEvents == 0 {
		c.MaxLoopEvents = DefaultMaxLoopEvents
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.MaxPending < 1:
		return c, configErr("MaxPending", "must be at least 1, got %d", c.MaxPending)
	case c.MaxLoopEvents < 1:
		return c, configErr("MaxLoopEvents", "must be at least 1, got %d", c.MaxLoopEvents)
	}
	return c, nil
}

// call is one Propose in progress.
type call struct {
	key    string
	change caspaxos.Change
	done   chan caspaxos.Result // capacity 1: the loop never blocks on it
}

// ProposerNode runs one caspaxos.Proposer over a Transport. Propose is safe
// for any number of concurrent callers; a single loop goroutine owns the
// proposer, takes in every pending call and reply before each Ready (so one
// message per acceptor carries many keys), and sleeps on a timer set to the
// proposer's next deadline.
type ProposerNode struct {
	cfg     NodeConfig
	tr      Transport
	p       *caspaxos.Proposer
	log     *slog.Logger
	metrics *proposerMetrics

	calls chan *call
	slots chan struct{} // counting semaphore: MaxPending
	start time.Time

	statsMu  sync.Mutex
	stats    caspaxos.ProposerStats
	sendErrs uint64

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// NewProposerNode validates cfg and starts the loop. The node does not own
// tr: close the node first, then the transport.
func NewProposerNode(cfg NodeConfig, tr Transport) (*ProposerNode, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if tr == nil {
		return nil, configErr("Transport", "must not be nil")
	}
	p, err := caspaxos.NewProposer(cfg.Proposer, cfg.Rand)
	if err != nil {
		return nil, fmt.Errorf("transport: proposer: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &ProposerNode{
		cfg:     cfg,
		tr:      tr,
		p:       p,
		log:     cfg.Logger.With("proposer", uint64(cfg.Proposer.ID)),
		metrics: newProposerMetrics(cfg.Registerer, cfg.Proposer.ID),
		calls:   make(chan *call, min(DefaultCallQueue, cfg.MaxPending)),
		slots:   make(chan struct{}, cfg.MaxPending),
		start:   time.Now(),
		ctx:     ctx,
		cancel:  cancel,
		done:    make(chan struct{}),
	}
	go n.loop()
	return n, nil
}

// Propose applies ch to the register key and returns the committed value.
//
// Errors are the proposer's (caspaxos.ErrNoQuorum, a *VersionMismatchError,
// caspaxos.ErrUnknownOutcome, ...) or the context's. When ctx ends before
// the proposal finished, Propose stops waiting but the proposal itself is
// not withdrawn: it may still commit. For a mutating change the error then
// wraps both caspaxos.ErrUnknownOutcome and ctx.Err() (read the register to
// learn the outcome); for a read it wraps only ctx.Err(). A call that ends
// before it reached the proposer returns ctx.Err() alone: nothing was
// proposed. After Close, Propose fails with ErrClosed (also wrapping
// ErrUnknownOutcome for a mutating change that was in progress).
//
// ch (and any bytes it writes) is used by the proposer until the proposal
// finishes, which may be after Propose returned on a cancelled ctx: do not
// modify what it refers to. The returned Value's Data must not be modified.
func (n *ProposerNode) Propose(ctx context.Context, key string, ch caspaxos.Change) (caspaxos.Value, error) {
	if ch == nil {
		return caspaxos.Value{}, fmt.Errorf("%w: nil change", caspaxos.ErrBadChange)
	}
	select {
	case <-n.done:
		return caspaxos.Value{}, ErrClosed
	default:
	}
	select {
	case n.slots <- struct{}{}:
	case <-ctx.Done():
		return caspaxos.Value{}, ctx.Err()
	case <-n.done:
		return caspaxos.Value{}, ErrClosed
	}
	c := &call{key: key, change: ch, done: make(chan caspaxos.Result, 1)}
	select {
	case n.calls <- c:
	case <-ctx.Done():
		<-n.slots
		return caspaxos.Value{}, ctx.Err()
	case <-n.done:
		<-n.slots
		return caspaxos.Value{}, ErrClosed
	}
	select {
	case r := <-c.done:
		return r.Value, r.Err
	case <-n.done:
		// The loop delivers a result to every call it took in before it
		// closes done; a call still in the queue was never proposed.
		select {
		case r := <-c.done:
			return r.Value, r.Err
		default:
			return caspaxos.Value{}, ErrClosed
		}
	case <-ctx.Done():
		if ch.Mutates() {
			return caspaxos.Value{}, fmt.Errorf("%w: %w", caspaxos.ErrUnknownOutcome, ctx.Err())
		}
		return caspaxos.Value{}, ctx.Err()
	}
}

// Stats returns the proposer's counters as of the loop's last cycle.
func (n *ProposerNode) Stats() caspaxos.ProposerStats {
	n.statsMu.Lock()
	defer n.statsMu.Unlock()
	return n.stats
}

// SendErrors returns how many messages the transport dropped.
func (n *ProposerNode) SendErrors() uint64 {
	n.statsMu.Lock()
	defer n.statsMu.Unlock()
	return n.sendErrs
}

// Close stops the loop and waits for it. Calls in progress fail with
// ErrClosed. It does not close the transport.
func (n *ProposerNode) Close() error {
	n.cancel()
	<-n.done
	return nil
}

// now anchors the proposer's clock at the wall clock of the node's start
// and advances it monotonically: ballots start from the clock's
// milliseconds, which only helps if nodes' clocks are comparable, while a
// wall clock stepping backwards must not stall the proposer's timers.
func (n *ProposerNode) now() time.Duration {
	return time.Duration(n.start.UnixNano()) + time.Since(n.start)
}

func (n *ProposerNode) loop() {
	waiting := make(map[caspaxos.RequestID]*call)
	var nextID caspaxos.RequestID
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var armed time.Duration = -1 // deadline the timer is set for; -1: none
	var sendErrs uint64
	replies := n.tr.Replies()

	defer func() {
		for _, c := range waiting {
			err := ErrClosed
			if c.change.Mutates() {
				err = fmt.Errorf("%w: %w", caspaxos.ErrUnknownOutcome, ErrClosed)
			}
			c.done <- caspaxos.Result{Key: c.key, Err: err}
			<-n.slots
		}
		timer.Stop()
		close(n.done)
	}()

	var now time.Duration // one clock read per cycle stamps all its events
	propose := func(c *call) {
		nextID++
		id := nextID
		if err := n.p.Propose(now, id, c.key, c.change); err != nil {
			c.done <- caspaxos.Result{ID: id, Key: c.key, Err: err}
			<-n.slots
			n.metrics.results[outcomeRefused].Inc()
			return
		}
		waiting[id] = c
	}

	for {
		var first *call
		var reply caspaxos.Message
		gotReply := false
		select {
		case first = <-n.calls:
		case reply = <-replies:
			gotReply = true
		case <-timer.C:
			armed = -1
		case <-n.ctx.Done():
			return
		}
		now = n.now()
		if first != nil {
			propose(first)
		} else if gotReply {
			n.p.Step(now, reply)
		}
		// Take in everything else pending, so that this Ready batches it.
		// Yielding once first lets callers and connection readers that are
		// already runnable (typically the callers just handed results by
		// the previous cycle) queue their work: without it most messages
		// would carry a single item and cost a write syscall each.
		events := 1
		for pass := 0; pass < 2 && events < n.cfg.MaxLoopEvents; pass++ {
			if pass == 1 {
				runtime.Gosched()
			}
		drain:
			for ; events < n.cfg.MaxLoopEvents; events++ {
				select {
				case c := <-n.calls:
					propose(c)
				case m := <-replies:
					n.p.Step(now, m)
				default:
					break drain
				}
			}
		}
		now = n.now()
		n.p.Tick(now)
		msgs, results := n.p.Ready()
		for _, m := range msgs {
			if err := n.tr.Send(m); err != nil {
				sendErrs++
				n.metrics.sendErrors.Inc()
				if sendErrs&(sendErrs-1) == 0 { // log at powers of two, not per message
					n.log.Warn("transport dropped messages", "dropped_total", sendErrs, "err", err)
				}
				continue
			}
			n.metrics.messages.Inc()
			n.metrics.items.Add(float64(len(m.Items)))
		}
		for _, r := range results {
			c := waiting[r.ID]
			if c == nil {
				continue
			}
			delete(waiting, r.ID)
			c.done <- r
			<-n.slots
			n.metrics.results[outcome(r.Err)].Inc()
			n.metrics.latency.Observe((r.End - r.Start).Seconds())
		}
		if d, ok := n.p.NextDeadline(); ok {
			if d != armed {
				armed = d
				timer.Reset(max(d-n.now(), 0))
			}
		} else if armed >= 0 {
			timer.Stop()
			armed = -1
		}
		n.statsMu.Lock()
		n.stats = n.p.Stats()
		n.sendErrs = sendErrs
		n.statsMu.Unlock()
	}
}

func outcome(err error) int {
	switch {
	case err == nil:
		return outcomeCommitted
	case errors.Is(err, caspaxos.ErrUnknownOutcome):
		return outcomeUnknown
	case errors.Is(err, caspaxos.ErrVersionMismatch):
		return outcomeMismatch
	case errors.Is(err, caspaxos.ErrNoQuorum):
		return outcomeNoQuorum
	default:
		return outcomeError
	}
}
