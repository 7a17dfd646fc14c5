package noderun

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
)

// commit is one Ready on its way through the committer.
type commit struct {
	rd    node.Ready
	reads node.Reads
	start time.Time
	// waits are the stores' waits for this Ready's writes, in the order
	// they were queued; every one is called once (waitDurable).
	waits []func() error
	err   error
}

// Run is the node's loop: it returns when ctx ends (nil error after a
// clean stop: in-flight commits finish first) or a store fails (the error;
// the node must not go on with a store it cannot trust).
func (d *Driver) Run(ctx context.Context, tr Sender) (err error) {
	defer func() {
		d.mu.Lock()
		d.err = err
		d.mu.Unlock()
		d.running.Store(false)
		close(d.done)
	}()
	commits := make(chan *commit, d.cfg.MaxInflight)
	durable, stages := pipeline(commits, d.cfg.MaxInflight, d.apply)
	l := &loop{d: d, tr: tr, commits: commits, durable: durable}
	d.n.Start(d.cfg.Clock())
	err = l.run(ctx)
	close(commits)
	for c := range durable { // let in-flight fsyncs finish before the stores close
		if err == nil && c.err != nil {
			err = c.err
		}
	}
	stages.Wait()
	if ctx.Err() != nil && err == ctx.Err() {
		err = nil
	}
	return err
}

// pipeline runs the committer's two stages over commits, both in Ready
// order: apply queues a Ready's writes on the stores (visible to reads,
// not yet durable) and runs its reads; the syncer then waits for them to
// be durable and hands the commit to durable. The next Ready is applied
// while the last one's fsync runs, so the stores' group commit merges the
// fsyncs of every Ready in flight, instead of the committer paying one
// (bbolt: two) per Ready in turn. After a commit whose apply failed, later
// ones are not applied and carry its error: a store that failed cannot be
// trusted with what came after (the loop stops on the first error).
// durable is closed, and stages done, once commits is closed and drained.
func pipeline(commits <-chan *commit, depth int, apply func(*commit)) (<-chan *commit, *sync.WaitGroup) {
	syncq := make(chan *commit, depth)
	durable := make(chan *commit, depth)
	var stages sync.WaitGroup
	stages.Add(2)
	go func() {
		defer stages.Done()
		defer close(syncq)
		var failed error
		for c := range commits {
			if failed != nil {
				c.err = failed
			} else {
				apply(c)
				failed = c.err
			}
			syncq <- c
		}
	}()
	go func() {
		defer stages.Done()
		defer close(durable)
		for c := range syncq {
			c.waitDurable()
			durable <- c
		}
	}()
	return durable, &stages
}

// loop is Run's state, owned by the loop goroutine.
type loop struct {
	d       *Driver
	tr      Sender
	commits chan<- *commit
	durable <-chan *commit
	// inflight counts Readys at the committer; it takes them in order and
	// hands them back in order, so Readys are advanced in order.
	inflight int
}

func (l *loop) run(ctx context.Context) error {
	d := l.d
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// The cores arm their timers in Tick and Ready: without this first
	// round the loop would wait for an outside event before its first
	// heartbeat, and a cluster whose nodes all start this way waits
	// forever.
	d.n.Tick(d.cfg.Clock())
	l.issue()
	for {
		wait := time.Hour
		if t, ok := d.n.NextDeadline(); ok {
			wait = max(t-d.cfg.Clock(), 0)
		}
		timer.Reset(wait)
		select {
		case ev := <-d.inbox:
			l.handle(ev)
		case c, ok := <-l.durable:
			if !ok {
				return fmt.Errorf("noderun: committer stopped")
			}
			if err := l.finish(c); err != nil {
				return err
			}
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if err := l.drain(); err != nil {
			return err
		}
		d.n.Tick(d.cfg.Clock())
		if err := d.n.Violation(); err != nil {
			return fmt.Errorf("noderun: %w", err)
		}
		l.issue()
	}
}

// drain takes what else is queued, up to EventsPerReady events, without
// blocking: they share the next Ready (group commit).
func (l *loop) drain() error {
	for range l.d.cfg.EventsPerReady {
		select {
		case ev := <-l.d.inbox:
			l.handle(ev)
		case c, ok := <-l.durable:
			if !ok {
				return fmt.Errorf("noderun: committer stopped")
			}
			if err := l.finish(c); err != nil {
				return err
			}
		default:
			return nil
		}
	}
	return nil
}

func (l *loop) handle(ev event) {
	d, n := l.d, l.d.n
	now := d.cfg.Clock()
	switch ev.kind {
	case evBatch:
		d.stats.DataBytesReceived.Add(dataBytes(&ev.batch))
		if err := n.Step(now, &ev.batch); err != nil {
			d.stats.StepErrors.Add(1)
			d.log.Warn("batch refused", "from", ev.batch.From, "err", err)
		}
		n.Recycle(&ev.batch)
	case evWrite:
		ref := l.ref(ev.reply)
		ev.write.Ref = ref
		n.Write(now, &ev.write)
	case evRead:
		ref := l.ref(ev.reply)
		ev.read.Ref = ref
		n.Read(now, &ev.read)
	case evDo:
		ev.errc <- ev.do(now, n)
	}
}

// ref registers a client's reply channel under a fresh ClientRef.
func (l *loop) ref(ch chan partition.Reply) partition.ClientRef {
	d := l.d
	d.nextRef++
	d.pending[d.nextRef] = ch
	return d.nextRef
}

// issue takes the node's Ready, if the commit window has room, and carries
// out what needs no fsync; the rest goes to the committer. With the window
// full, only the urgent batches leave.
func (l *loop) issue() {
	d := l.d
	if l.inflight >= d.cfg.MaxInflight {
		if bs := d.n.Urgent(); len(bs) > 0 {
			d.stats.UrgentBatches.Add(uint64(len(bs)))
			l.send(bs)
		}
		return
	}
	rd := d.n.Ready()
	if rd.Empty() {
		return
	}
	d.stats.Readys.Add(1)
	l.send(rd.Messages)
	l.answer(rd.Replies)
	if d.cfg.Publisher != nil && len(rd.Routes) > 0 {
		if _, err := d.cfg.Publisher.Apply(rd.Routes...); err != nil {
			d.log.Warn("dns publisher refused routes", "err", err)
		}
	}
	rd.Messages, rd.Replies, rd.Routes = nil, nil, nil
	c := &commit{rd: rd, start: time.Now()}
	if !rd.MustSync() && l.inflight == 0 {
		// Nothing to make durable and nothing ahead of it.
		c.reads = c.rd.Read(d.cfg.PartitionStore)
		l.advance(c)
		return
	}
	l.inflight++
	l.commits <- c // never blocks: at most MaxInflight are out
}

// finish takes a durable commit back from the committer.
func (l *loop) finish(c *commit) error {
	if c.err != nil {
		return c.err
	}
	l.inflight--
	if c.rd.MustSync() {
		l.d.stats.Commits.Add(1)
		l.d.stats.CommitNanos.Add(uint64(time.Since(c.start)))
	}
	l.advance(c)
	return nil
}

// advance hands a durable Ready back to the node and sends what waited.
func (l *loop) advance(c *commit) {
	replies := l.d.n.Advance(&c.rd, c.reads)
	l.send(c.rd.Synced)
	l.answer(replies)
}

func (l *loop) send(bs []nodewire.Batch) {
	for i := range bs {
		if err := l.tr.Send(bs[i].To, &bs[i]); err != nil {
			l.d.stats.SendErrors.Add(1)
		}
		l.d.n.Recycle(&bs[i]) // Send encoded or copied it
	}
}

// answer delivers client replies; control operations (Ref 0) have none.
func (l *loop) answer(rs []partition.Reply) {
	d := l.d
	for i := range rs {
		if ch, ok := d.pending[rs[i].Ref]; ok {
			delete(d.pending, rs[i].Ref)
			ch <- rs[i]
		}
	}
}

// apply queues a Ready's writes on both stores without waiting for their
// fsyncs (the acceptor's records through caspaxos.PipelineStore.Submit, the
// partitions' through partition.AsyncStore.CommitAsync; a store that cannot
// overlap commits makes them durable here), then runs its reads. Reads run
// before any later Ready's writes are applied (the committer takes Readys
// one at a time) and see only this Ready's writes and earlier ones, which
// is what AsyncStore allows; nothing read leaves before waitDurable.
func (d *Driver) apply(c *commit) {
	if len(c.rd.Acceptor) > 0 {
		waits, err := submitAcceptor(d.cfg.AcceptorStore, c.rd.Acceptor)
		c.waits = append(c.waits, wrapWaits(waits, "noderun: acceptor store")...)
		if err != nil {
			c.err = fmt.Errorf("noderun: acceptor store: %w", err)
			return
		}
	}
	var ws []partition.Write
	for i := range c.rd.Host {
		ws = append(ws, c.rd.Host[i].Writes...)
	}
	if len(ws) > 0 {
		wait, err := partition.CommitAsync(d.cfg.PartitionStore, ws)
		if err != nil {
			c.err = fmt.Errorf("noderun: partition store: %w", err)
			return
		}
		c.waits = append(c.waits, wrapWaits([]func() error{wait}, "noderun: partition store")...)
	}
	c.reads = c.rd.Read(d.cfg.PartitionStore)
}

// waitDurable calls every wait of c (each once, as the stores require)
// and keeps the first error.
func (c *commit) waitDurable() {
	for _, wait := range c.waits {
		if err := wait(); c.err == nil {
			c.err = err
		}
	}
	c.waits = nil
}

// wrapWaits names the store in the errors of its waits.
func wrapWaits(waits []func() error, store string) []func() error {
	for i, w := range waits {
		waits[i] = func() error {
			if err := w(); err != nil {
				return fmt.Errorf("%s: %w", store, err)
			}
			return nil
		}
	}
	return waits
}

// dataBytes is the payload of a batch's replication messages: keys and
// values of their ops and snapshot pairs.
func dataBytes(b *nodewire.Batch) uint64 {
	var sum uint64
	for i := range b.Data {
		m := &b.Data[i]
		for j := range m.Entries {
			sum += uint64(m.Entries[j].Size())
		}
		for _, kv := range m.KVs {
			sum += uint64(len(kv.Key) + len(kv.Value))
		}
	}
	return sum
}

// submitAcceptor queues a Ready's acceptor batches, in order. A
// caspaxos.PipelineStore (bbolt, memory) takes them all, and those of the
// Readys after it, before the first is durable, and merges what queued into
// as few commits as it can; the returned waits (one per batch, to be
// called in order) return once each is durable, and none lands before an
// earlier one. Other stores apply them one at a time, durably, here, and
// return no waits. On an error the waits of the batches submitted before
// it are still returned: the caller must call them.
func submitAcceptor(st caspaxos.Store, batches []caspaxos.Batch) ([]func() error, error) {
	p, ok := st.(caspaxos.PipelineStore)
	if !ok {
		for _, b := range batches {
			if err := st.Apply(b); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	waits := make([]func() error, 0, len(batches))
	for _, b := range batches {
		wait, err := p.Submit(b)
		if err != nil {
			return waits, err
		}
		waits = append(waits, wait)
	}
	return waits, nil
}
