package transport

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fmnode/fmnode/caspaxos"
)

// AcceptorConfig configures the acceptor loop shared by AcceptorServer and
// MemAcceptor.
type AcceptorConfig struct {
	// ID is the acceptor's id; requests addressed to another id are refused.
	ID caspaxos.NodeID
	// Store holds the acceptor's records. The caller opens it before and
	// closes it after the server: the server never closes it.
	Store caspaxos.Store
	// InboxMessages bounds requests waiting for the acceptor loop.
	InboxMessages int
	// InboxBytes bounds the encoded size of requests waiting for the loop;
	// connection readers wait (TCP backpressure) when it is used up.
	InboxBytes int
	// MaxStepMessages bounds the requests stepped into one group (one
	// Store.Apply). While a group is being persisted the loop keeps
	// stepping the next one, up to this bound.
	MaxStepMessages int
	// GroupWait, if positive, lets the loop hold a group back for at most
	// this long once the previous one is durable, so that requests the
	// previous group's replies trigger join this group instead of the
	// next one (see acceptorCore.loop); at most MaxGroupWait. Zero (the
	// default) sends each group as soon as the previous one is durable:
	// measured with `fmnode bench cas`, the wait cut fsyncs per record but
	// did not raise throughput (docs/BENCHMARKS.md).
	GroupWait time.Duration
	// GroupWaitFraction bounds that wait further, to this fraction of the
	// last Store.Apply's duration; in (0, 1]. Zero: DefaultGroupWaitFraction.
	GroupWaitFraction float64
	// PipelineDepth bounds the groups handed to the store and not yet
	// durable. 1 persists one group at a time with Store.Apply. Above 1,
	// and only with a store that implements caspaxos.PipelineStore, the
	// loop submits each group as soon as it is stepped (up to this many in
	// flight) and replies leave as each becomes durable, in order; the
	// store merges what queued into its next commit. Zero means 1: the
	// pipeline is opt-in per store, because measured it paid for pebble's
	// tail and not for bbolt (docs/BENCHMARKS.md); `fmnode acceptor`
	// picks DefaultPipelineDepth for pebble and memory. It must be 1 with
	// GroupWait (the wait holds a group back relative to the last one's
	// durability, which means one at a time). At most MaxPipelineDepth.
	PipelineDepth int
	// Logger receives connection and failure events; nil discards them.
	Logger *slog.Logger
	// Registerer receives the acceptor's metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

func (c AcceptorConfig) withDefaults() (AcceptorConfig, error) {
	if c.InboxMessages == 0 {
		c.InboxMessages = DefaultInboxMessages
	}
	if c.InboxBytes == 0 {
		c.InboxBytes = DefaultInboxBytes
	}
	if c.MaxStepMessages == 0 {
		c.MaxStepMessages = DefaultMaxStepMessages
	}
	if c.GroupWaitFraction == 0 {
		c.GroupWaitFraction = DefaultGroupWaitFraction
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	_, canPipeline := c.Store.(caspaxos.PipelineStore)
	if c.PipelineDepth == 0 {
		c.PipelineDepth = 1
	}
	switch {
	case c.PipelineDepth < 1 || c.PipelineDepth > MaxPipelineDepth:
		return c, configErr("PipelineDepth", "must be in [1, %d], got %d", MaxPipelineDepth, c.PipelineDepth)
	case c.PipelineDepth > 1 && c.GroupWait > 0:
		return c, configErr("PipelineDepth", "must be 1 (or 0) when GroupWait is set, got %d", c.PipelineDepth)
	case c.PipelineDepth > 1 && !canPipeline && c.Store != nil:
		return c, configErr("PipelineDepth", "is %d but the store (%T) cannot pipeline (not a caspaxos.PipelineStore)", c.PipelineDepth, c.Store)
	}
	switch {
	case c.ID == 0:
		return c, configErr("ID", "must be non-zero")
	case c.Store == nil:
		return c, configErr("Store", "must not be nil")
	case c.InboxMessages < 1:
		return c, configErr("InboxMessages", "must be at least 1, got %d", c.InboxMessages)
	case c.InboxBytes < 1:
		return c, configErr("InboxBytes", "must be at least 1, got %d", c.InboxBytes)
	case c.MaxStepMessages < 1:
		return c, configErr("MaxStepMessages", "must be at least 1, got %d", c.MaxStepMessages)
	case c.GroupWait < 0 || c.GroupWait > MaxGroupWait:
		return c, configErr("GroupWait", "must be in [0, %v], got %v", MaxGroupWait, c.GroupWait)
	case !(c.GroupWaitFraction > 0 && c.GroupWaitFraction <= 1):
		return c, configErr("GroupWaitFraction", "must be in (0, 1], got %v", c.GroupWaitFraction)
	}
	return c, nil
}

// inbound is one request on its way to the acceptor loop.
type inbound struct {
	m     caspaxos.Message
	route route
	cost  int
}

// persistJob is one Ready: the batch to make durable and the replies that
// may leave once it is.
type persistJob struct {
	batch caspaxos.Batch
	// wait, when set, is the PipelineStore's wait for batch, which the
	// loop already submitted at submitted; nil: persistence applies batch
	// itself (one group at a time), or batch is empty.
	wait      func() error
	submitted time.Time
	msgs      []caspaxos.Message
	routes    []route
	steps     int
	items     int // request items stepped into the group
}

// persisted is persistence's report that a job is durable.
type persisted struct {
	took  time.Duration // Store.Apply's duration (0 for an empty batch)
	items int           // the job's request items
}

// acceptorCore runs one caspaxos.Acceptor: a loop goroutine that owns the
// state machine and steps requests, and a persistence goroutine that makes
// each Ready's batch durable and then routes its replies.
//
// One group at a time (PipelineDepth 1, or a store that cannot pipeline):
// persistence applies each batch with Store.Apply, and the loop takes the
// next Ready only once the last is durable, stepping the next group
// meanwhile. Batches reach the store one at a time, in order (Store does
// not promise that concurrent Apply calls land in call order, and a later
// record overwritten by an earlier one would move a promise backwards on
// disk).
//
// Pipelined (a caspaxos.PipelineStore, PipelineDepth > 1): the loop
// submits each group's batch itself, from its one goroutine, as soon as it
// is stepped and fewer than PipelineDepth groups are in flight; the store
// keeps Submit order on disk and merges what queued during one commit into
// the next. Persistence waits for the groups in Ready order and routes
// each group's replies once its wait returned. Measured with `fmnode bench
// cas`, this takes the acceptor's own turnaround (route replies, wake the
// loop, take the next Ready, hand it over) out of the time between two
// commits: 1.25x on the memory store, a lower open-loop p99 on pebble, no
// gain on bbolt, whose commits stay serial behind two fdatasyncs
// (docs/BENCHMARKS.md).
//
// Either way replies leave in Ready order, each after its own batch and
// every earlier batch is durable (rule 3): persistence handles groups
// strictly in order, and a group with an empty batch (replies only) still
// waits behind every earlier group.
type acceptorCore struct {
	cfg     AcceptorConfig
	log     *slog.Logger
	metrics *acceptorMetrics
	acc     *caspaxos.Acceptor

	inbox  chan inbound
	budget *budget
	// pipe is the store when groups are pipelined (PipelineDepth > 1).
	pipe caspaxos.PipelineStore
	// persist carries groups in Ready order to persistence, which makes
	// each durable and routes its replies, in that order; durable returns
	// one report per group. Both hold PipelineDepth, the most groups in
	// flight, so neither side ever blocks on the other.
	persist chan *persistJob
	durable chan persisted

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	failMu sync.Mutex
	failed error
	dead   chan struct{} // closed on a fatal error

	stats struct {
		messages, items, batches, records, replies, dropped atomic.Uint64
		applyNanos                                          atomic.Uint64
		groupWaits, groupWaitsPaid, groupWaitNanos          atomic.Uint64
		durableHist                                         [DurableHistBuckets]atomic.Uint64
	}
}

// DurableHistBuckets is the size of AcceptorStats.DurableHist; bucket i
// counts groups made durable within DurableHistBound(i) (and above the
// bound of bucket i-1); the last bucket also holds everything slower.
const DurableHistBuckets = 16

// DurableHistBound is the upper bound of DurableHist bucket i: 64 µs
// doubled i times (64 µs ... ~2.1 s).
func DurableHistBound(i int) time.Duration { return 64 * time.Microsecond << i }

func durableBucket(d time.Duration) int {
	for i := range DurableHistBuckets - 1 {
		if d <= DurableHistBound(i) {
			return i
		}
	}
	return DurableHistBuckets - 1
}

// AcceptorStats counts what an acceptor did since it started.
type AcceptorStats struct {
	Messages uint64 // requests stepped
	Items    uint64 // request items stepped
	Batches  uint64 // Ready groups persisted (Store.Apply or Submit calls, empty ones included)
	Records  uint64 // records written
	Replies  uint64 // replies routed after their batch was durable
	Dropped  uint64 // replies dropped (connection gone or too far behind)
	// ApplyTime is the total time spent making groups durable: in
	// Store.Apply, or when pipelined from Submit until the group's wait
	// returned (groups then overlap, so it can exceed the wall time).
	ApplyTime time.Duration
	// GroupWaits counts groups held back for more requests to join;
	// GroupWaitsPaid those where the joiners' gain outweighed the delay
	// (see acceptorCore.loop); GroupWaitTime is the total time held.
	GroupWaits     uint64
	GroupWaitsPaid uint64
	GroupWaitTime  time.Duration
	// DurableHist is the distribution of the time each non-empty group
	// took to become durable (ApplyTime's parts), in DurableHistBound
	// buckets: the store's share of a reply's latency, tail included.
	DurableHist [DurableHistBuckets]uint64
}

func (c *acceptorCore) snapshot() AcceptorStats {
	var hist [DurableHistBuckets]uint64
	for i := range hist {
		hist[i] = c.stats.durableHist[i].Load()
	}
	return AcceptorStats{
		DurableHist: hist,
		Messages:    c.stats.messages.Load(),
		Items:       c.stats.items.Load(),
		Batches:     c.stats.batches.Load(),
		Records:     c.stats.records.Load(),
		Replies:     c.stats.replies.Load(),
		Dropped:     c.stats.dropped.Load(),
		ApplyTime:   time.Duration(c.stats.applyNanos.Load()),

		GroupWaits:     c.stats.groupWaits.Load(),
		GroupWaitsPaid: c.stats.groupWaitsPaid.Load(),
		GroupWaitTime:  time.Duration(c.stats.groupWaitNanos.Load()),
	}
}

func newAcceptorCore(cfg AcceptorConfig) (*acceptorCore, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	st, err := cfg.Store.Load()
	if err != nil {
		return nil, fmt.Errorf("transport: acceptor %d: load: %w", cfg.ID, err)
	}
	acc, err := caspaxos.NewAcceptor(cfg.ID, st)
	if err != nil {
		return nil, fmt.Errorf("transport: acceptor %d: recover: %w", cfg.ID, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &acceptorCore{
		cfg:     cfg,
		log:     cfg.Logger.With("acceptor", uint64(cfg.ID)),
		metrics: newAcceptorMetrics(cfg.Registerer, cfg.ID),
		acc:     acc,
		inbox:   make(chan inbound, cfg.InboxMessages),
		budget:  newBudget(cfg.InboxBytes),
		persist: make(chan *persistJob, cfg.PipelineDepth),
		durable: make(chan persisted, cfg.PipelineDepth),
		ctx:     ctx,
		cancel:  cancel,
		dead:    make(chan struct{}),
	}
	if cfg.PipelineDepth > 1 {
		c.pipe = cfg.Store.(caspaxos.PipelineStore)
	}
	c.wg.Add(2)
	go c.loop()
	go c.persistLoop()
	return c, nil
}

// submit hands a request to the loop, waiting for room in the inbox while
// ctx allows (TCP readers: waiting is backpressure on the connection).
func (c *acceptorCore) submit(ctx context.Context, in inbound) error {
	if err := c.budget.acquire(ctx, in.cost); err != nil {
		return err
	}
	select {
	case c.inbox <- in:
		return nil
	case <-ctx.Done():
		c.budget.release(in.cost)
		return ctx.Err()
	case <-c.ctx.Done():
		c.budget.release(in.cost)
		return ErrClosed
	}
}

// trySubmit hands a request to the loop if there is room now.
func (c *acceptorCore) trySubmit(in inbound) error {
	if c.ctx.Err() != nil {
		return ErrClosed
	}
	if !c.budget.tryAcquire(in.cost) {
		return ErrQueueFull
	}
	select {
	case c.inbox <- in:
		return nil
	default:
		c.budget.release(in.cost)
		return ErrQueueFull
	}
}

// checkRequest reports why m must not reach the acceptor; a connection
// that sends such a message is closed.
func (c *acceptorCore) checkRequest(m caspaxos.Message) error {
	if !m.Type.Valid() || m.Type.IsReply() {
		return fmt.Errorf("%w: acceptor %d got a %v, not a request", caspaxos.ErrCorrupt, c.cfg.ID, m.Type)
	}
	if m.To != c.cfg.ID {
		return fmt.Errorf("%w: request for acceptor %d reached acceptor %d", caspaxos.ErrCorrupt, m.To, c.cfg.ID)
	}
	return nil
}

// maxGroupWaitSkip bounds the groups sent without waiting after waits
// that did not pay (the back-off doubles up to it).
const maxGroupWaitSkip = 64

// groupWait is the loop's state for holding a group back.
type groupWait struct {
	fresh     bool          // the next group is the first since a batch became durable
	lastItems int           // request items of the batch that became durable
	lastApply time.Duration // its Store.Apply duration
	skip      int           // groups left to send without waiting
	backoff   int           // skip to set after the next wait that does not pay

	// The wait in progress.
	target     int
	start      time.Time
	startItems int
}

// loop steps requests into a group while the previous group is persisted
// and hands the group to persistence once that one is durable.
//
// Group wait: in a closed loop (each client sends its next request when
// its last one is answered) a batch's replies bring back requests one
// round trip after they leave. Sent at once, the next group holds only
// what queued during the last persist, and the clients split into two
// cohorts that alternate, each paying two persists per request. So when a
// batch has just become durable and the pending group holds fewer items
// than were in flight then (that batch plus the group), the loop waits
// for the group to reach that size, at most GroupWaitFraction of the last
// Apply and at most GroupWait, never when the group is at MaxStepMessages.
// A wait pays when joined * (lastApply - waited) > pending * waited: the
// items that joined saved about one persist each, the items already
// pending lost the wait. Arrivals that do not follow the replies (an open
// loop, a trickle) make that false; each wait that does not pay doubles
// the number of groups sent without waiting (up to maxGroupWaitSkip), and
// one that pays resets it, so at low load groups go at once.
//
// Off unless GroupWait is set: in `fmnode bench cas` (3 acceptors, 64
// clients) a round completes on the second of three replies, so one
// acceptor's replies do not bring its next requests back as a burst; the
// wait found ~30% of its waits paid, cut fsyncs per record by ~7% (40%
// when forced on every group) and did not raise throughput
// (docs/BENCHMARKS.md).
func (c *acceptorCore) loop() {
	defer c.wg.Done()
	// Persistence drains what was handed to it, then exits.
	defer close(c.persist)
	var routes []route
	steps, items, inflight := 0, 0, 0
	var gw groupWait
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var waitC <-chan time.Time // non-nil while a group is held back
	for {
		inbox := c.inbox
		if steps >= c.cfg.MaxStepMessages {
			inbox = nil // the group is full: wait for persistence
		}
		timedOut := false
		select {
		case in := <-inbox:
			routes, items = c.step(in, routes, items)
			steps++
		case p := <-c.durable:
			inflight--
			gw.fresh, gw.lastItems, gw.lastApply = true, p.items, p.took
		case <-waitC:
			waitC, timedOut = nil, true
		case <-c.ctx.Done():
			return
		}
		// Drain whatever else is queued into the same group.
	drain:
		for steps < c.cfg.MaxStepMessages {
			select {
			case in := <-c.inbox:
				routes, items = c.step(in, routes, items)
				steps++
			default:
				break drain
			}
		}
		if inflight >= c.cfg.PipelineDepth {
			continue
		}
		if !c.acc.HasReady() {
			// Only refused requests (no replies, nothing to write): the
			// group is empty, so the step bound must not hold the inbox shut.
			steps, items = 0, 0
			continue
		}
		if gw.fresh {
			gw.fresh = false
			if d := c.groupWaitFor(&gw, steps, items); d > 0 {
				timer.Reset(d)
				waitC = timer.C
				continue
			}
		}
		if waitC != nil {
			if items < gw.target && steps < c.cfg.MaxStepMessages {
				continue
			}
			timer.Stop()
			waitC = nil
			c.endGroupWait(&gw, items)
		} else if timedOut {
			c.endGroupWait(&gw, items)
		}
		batch, msgs := c.acc.Ready()
		if err := c.acc.Violation(); err != nil {
			c.fail(fmt.Errorf("transport: acceptor %d: %w", c.cfg.ID, err))
			return
		}
		if len(msgs) != len(routes) {
			// Every stepped request yields exactly one reply; if that ever
			// stops holding, dropping the replies is the safe reaction.
			c.log.Error("acceptor replies do not match requests; dropping replies",
				"replies", len(msgs), "requests", len(routes))
			msgs = nil
		}
		job := &persistJob{batch: batch, msgs: msgs, routes: routes, steps: steps, items: items}
		if c.pipe != nil && !batch.Empty() {
			job.submitted = time.Now()
			wait, err := c.pipe.Submit(batch)
			if err != nil {
				// The in-memory acceptor is now ahead of the disk: serving
				// on could send replies that a restart would contradict.
				c.fail(fmt.Errorf("transport: acceptor %d: store submit: %w", c.cfg.ID, err))
				return
			}
			job.wait = wait
		}
		c.persist <- job // never blocks: it holds PipelineDepth jobs
		inflight++
		routes, steps, items = make([]route, 0, len(routes)), 0, 0
	}
}

// groupWaitFor decides whether to hold back the first group since a batch
// became durable, and for how long (0: send it now). See loop.
func (c *acceptorCore) groupWaitFor(gw *groupWait, steps, items int) time.Duration {
	if c.cfg.GroupWait == 0 || steps >= c.cfg.MaxStepMessages {
		return 0
	}
	target := gw.lastItems + items
	d := min(time.Duration(float64(gw.lastApply)*c.cfg.GroupWaitFraction), c.cfg.GroupWait)
	if items >= target || d <= 0 {
		return 0
	}
	if gw.skip > 0 {
		gw.skip--
		return 0
	}
	gw.target, gw.start, gw.startItems = target, time.Now(), items
	return d
}

// endGroupWait judges the wait that just ended (see loop) and sets the
// back-off.
func (c *acceptorCore) endGroupWait(gw *groupWait, items int) {
	waited := time.Since(gw.start)
	joined := items - gw.startItems
	paid := float64(joined)*float64(gw.lastApply-waited) > float64(gw.startItems)*float64(waited)
	c.stats.groupWaits.Add(1)
	c.stats.groupWaitNanos.Add(uint64(waited))
	c.metrics.groupWait.Observe(waited.Seconds())
	if paid {
		c.stats.groupWaitsPaid.Add(1)
		gw.backoff = 0
		return
	}
	gw.backoff = min(max(1, 2*gw.backoff), maxGroupWaitSkip)
	gw.skip = gw.backoff
}

func (c *acceptorCore) step(in inbound, routes []route, items int) ([]route, int) {
	c.budget.release(in.cost)
	c.metrics.messagesIn[in.m.Type].Inc()
	c.metrics.itemsIn.Add(float64(len(in.m.Items)))
	c.stats.messages.Add(1)
	c.stats.items.Add(uint64(len(in.m.Items)))
	if err := c.acc.Step(in.m); err != nil {
		// Readers check requests first, so this is a bug; the request
		// gets no reply, which the proposer survives.
		c.log.Error("acceptor refused a request", "err", err)
		return routes, items
	}
	return append(routes, in.route), items + len(in.m.Items)
}

// persistLoop makes each job durable (applying it, or waiting for the
// store to have committed what the loop submitted) and then routes its
// replies, in job order. It runs until the loop closes persist; jobs
// still queued then are waited for (a PipelineStore's waits must all be
// called) but, once the acceptor has failed, their replies are dropped.
func (c *acceptorCore) persistLoop() {
	defer c.wg.Done()
	for job := range c.persist {
		if c.err() != nil {
			// Failed (here or in the loop): send nothing more.
			if job.wait != nil {
				_ = job.wait()
			}
			continue
		}
		took, err := c.persistOne(job)
		if err != nil {
			// The in-memory acceptor is now ahead of the disk: serving
			// on could send replies that a restart would contradict.
			c.fail(fmt.Errorf("transport: acceptor %d: store apply: %w", c.cfg.ID, err))
			continue
		}
		c.stats.batches.Add(1)
		c.stats.records.Add(uint64(len(job.batch.Put)))
		c.stats.replies.Add(uint64(len(job.msgs)))
		c.metrics.batches.Inc()
		c.metrics.batchMsgs.Observe(float64(job.steps))
		c.metrics.batchPuts.Observe(float64(len(job.batch.Put)))
		for i, m := range job.msgs {
			job.routes[i].deliver(m)
		}
		c.metrics.messagesOut.Add(float64(len(job.msgs)))
		// Let the connection writers just handed replies run before the
		// next group starts: otherwise, with few Ps, the store's commit
		// work for that group can hold the P while the replies of this
		// one wait.
		runtime.Gosched()
		c.durable <- persisted{took: took, items: job.items} // never blocks: it holds PipelineDepth
	}
}

// persistOne makes job's batch durable and returns how long that took:
// Store.Apply's duration, or for a submitted batch the time from Submit
// until its wait returned (0 for an empty batch).
func (c *acceptorCore) persistOne(job *persistJob) (time.Duration, error) {
	var start time.Time
	switch {
	case job.wait != nil:
		start = job.submitted
		if err := job.wait(); err != nil {
			return 0, err
		}
	case c.pipe == nil && !job.batch.Empty():
		start = time.Now()
		if err := c.cfg.Store.Apply(job.batch); err != nil {
			return 0, err
		}
	default:
		return 0, nil
	}
	took := time.Since(start)
	c.metrics.fsync.Observe(took.Seconds())
	c.stats.applyNanos.Add(uint64(took))
	c.stats.durableHist[durableBucket(took)].Add(1)
	return took, nil
}

// fail records a fatal error and stops the acceptor: it stops stepping and
// sends nothing more. Callers learn of it through Err and Dead.
func (c *acceptorCore) fail(err error) {
	c.failMu.Lock()
	first := c.failed == nil
	if first {
		c.failed = err
		close(c.dead)
	}
	c.failMu.Unlock()
	if first {
		c.log.Error("acceptor stopped", "err", err)
	}
	c.cancel()
}

// err returns the fatal error, if any.
func (c *acceptorCore) err() error {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	return c.failed
}

// close stops both goroutines and waits for them. A batch being applied
// finishes first (Apply cannot be interrupted); its replies are routed
// (and dropped by closed connections).
func (c *acceptorCore) close() {
	c.cancel()
	c.wg.Wait()
}
