package main

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fmnode/fmnode/sim"
	"github.com/fmnode/fmnode/txtdns/kv"
	"github.com/fmnode/fmnode/txtdns/routing"
)

// demoClients are the demo's application: per partition a closed-loop
// writer of strong Puts through the Go routing client (one kv.Client, one
// route cache, as one application has), every key new, so that every
// acknowledged write can be read back. They write with a think time
// until the outage; from the outage the writers of the affected
// partitions write without it (after a failed Put, a steady poll's wait)
// until one of their writes is acknowledged in a newer epoch, then think
// again: the simulator's clients do the same (sim/failover_client.go), so
// that write recovery and reroute measure the failover and the routing,
// not a think time.
type demoClients struct {
	cl         *kv.Client
	hp         routing.Partitioner
	valueBytes int
	thinkMin   time.Duration
	thinkMax   time.Duration
	writers    []*demoWriter

	outage   chan struct{} // closed at the kill
	outageAt atomic.Int64  // unix nanos of the kill
	stop     atomic.Bool
	wg       sync.WaitGroup

	mu       sync.Mutex
	firstErr string
	errs     uint64
	unknown  uint64
	// steadyLat: latencies of the writes acknowledged before the kill
	// (at most demoMaxLatencies).
	steadyLat []time.Duration
}

// demoMaxLatencies bounds the steady latencies kept.
const demoMaxLatencies = 100000

// demoWriter is one partition's writer and what it saw.
type demoWriter struct {
	id   int
	part uint32
	sess *kv.Session
	next int // the next key candidate

	mu    sync.Mutex
	acked []demoAck
	// affected and epoch0 are set before the kill: the partition's write
	// region is in the region killed, at epoch epoch0.
	affected bool
	epoch0   uint64
	// firstNew is the first write acknowledged in an epoch after epoch0,
	// once the outage began (zero: none yet).
	firstNew      time.Time
	firstNewEpoch uint64
	// ackedAfterKill: writes acknowledged from the kill on (in the new
	// epoch or not), with their bytes: what the returning region lacks.
	ackedAfterKill uint64
	// woken: the kill cut a sleep of this writer short, or the writer
	// was awake then (only its own goroutine reads it): later sleeps
	// last their time.
	woken bool
}

// demoAck is one acknowledged write: the key's number and the epoch the
// write was acknowledged in.
type demoAck struct {
	n     int
	epoch uint64
	at    time.Time
}

// demoPollWait is the wait after a failed write: the routing core's
// steady poll while a failover is pending (RedirectPoll, 500 ms, with a
// quarter of it random), which is what routing.Operation.RetryDelay
// gives the simulator's clients then.
func demoPollWait(r routing.Rand) routing.Backoff {
	return routing.Backoff{Base: routing.DefaultRedirectPoll, Max: routing.DefaultRedirectPoll, Spread: 0.25, Rand: r}
}

func newDemoClients(cl *kv.Client, partitions, valueBytes int, thinkMin, thinkMax time.Duration) (*demoClients, error) {
	hp, err := routing.NewOneBasedHashPartitioner(uint32(partitions))
	if err != nil {
		return nil, err
	}
	dc := &demoClients{cl: cl, hp: hp, valueBytes: valueBytes, thinkMin: thinkMin, thinkMax: thinkMax, outage: make(chan struct{})}
	for p := 1; p <= partitions; p++ {
		dc.writers = append(dc.writers, &demoWriter{id: p, part: uint32(p), sess: cl.NewSession()})
	}
	return dc, nil
}

// key returns writer w's n-th candidate key and whether it is of w's
// partition (keys map to partitions by hash: a writer skips the others).
func (w *demoWriter) key(n int) string { return "d" + strconv.Itoa(w.id) + "-" + strconv.Itoa(n) }

// nextKey is the writer's next key of its own partition.
func (dc *demoClients) nextKey(w *demoWriter) (string, int) {
	for {
		n := w.next
		w.next++
		if k := w.key(n); dc.hp.Partition(k) == w.part {
			return k, n
		}
	}
}

// start runs every writer until stop.
func (dc *demoClients) start(ctx context.Context) {
	for _, w := range dc.writers {
		dc.wg.Add(1)
		go func() {
			defer dc.wg.Done()
			dc.run(ctx, w)
		}()
	}
}

func (dc *demoClients) run(ctx context.Context, w *demoWriter) {
	rnd := routing.NewRand(uint64(w.id)*0x9e3779b97f4a7c15 + uint64(time.Now().UnixNano()))
	poll := demoPollWait(rnd)
	// Spread the first writes over a think time.
	if !dc.sleep(ctx, w, time.Duration(rnd.Float64()*float64(dc.thinkMax))) {
		return
	}
	for !dc.stop.Load() && ctx.Err() == nil {
		key, n := dc.nextKey(w)
		t0 := time.Now()
		err := w.sess.Put(ctx, key, agentBenchValue(key, dc.valueBytes))
		now := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			dc.noteErr(err)
			if !dc.sleep(ctx, w, poll.Delay(1)) {
				return
			}
			continue
		}
		tok := w.sess.Token(key)
		if dc.outageAt.Load() == 0 {
			dc.noteLatency(now.Sub(t0))
		}
		probing := dc.record(w, n, tok.Epoch, now, len(key)+dc.valueBytes)
		if probing {
			continue // no think time until a write lands in a new epoch
		}
		think := dc.thinkMin + time.Duration(rnd.Float64()*float64(dc.thinkMax-dc.thinkMin))
		if !dc.sleep(ctx, w, think) {
			return
		}
	}
}

// record notes an acknowledged write; probing reports whether the writer
// should write again at once (its partition is affected by the outage
// and no write of it was acknowledged in a newer epoch yet).
func (dc *demoClients) record(w *demoWriter, n int, epoch uint64, at time.Time, bytes int) (probing bool) {
	out := dc.outageAt.Load()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.acked = append(w.acked, demoAck{n: n, epoch: epoch, at: at})
	if out == 0 {
		return false
	}
	if at.UnixNano() >= out {
		w.ackedAfterKill += uint64(bytes)
	}
	if !w.affected {
		return false
	}
	if w.firstNew.IsZero() && at.UnixNano() >= out && epoch > w.epoch0 {
		w.firstNew, w.firstNewEpoch = at, epoch
	}
	return w.firstNew.IsZero()
}

// sleep waits d, cut short by the outage's start (an affected writer
// starts probing at once; once per writer) or the end; false when the
// writer must stop.
func (dc *demoClients) sleep(ctx context.Context, w *demoWriter, d time.Duration) bool {
	var outage <-chan struct{}
	if !w.woken {
		if dc.outageAt.Load() != 0 {
			w.woken = true // awake at the kill: nothing to cut short
		} else {
			outage = dc.outage
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-outage:
		w.woken = true
	case <-ctx.Done():
		return false
	}
	return !dc.stop.Load()
}

func (dc *demoClients) noteLatency(d time.Duration) {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	if len(dc.steadyLat) < demoMaxLatencies {
		dc.steadyLat = append(dc.steadyLat, d)
	}
}

// steadyLatency is the distribution of the writes' latencies before the
// kill, in seconds.
func (dc *demoClients) steadyLatency() sim.Dist {
	dc.mu.Lock()
	xs := make([]float64, len(dc.steadyLat))
	for i, d := range dc.steadyLat {
		xs[i] = d.Seconds()
	}
	dc.mu.Unlock()
	return demoDist(xs)
}

func (dc *demoClients) noteErr(err error) {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	dc.errs++
	var uo *kv.UnknownOutcomeError
	if errors.As(err, &uo) {
		dc.unknown++
	}
	if dc.firstErr == "" {
		dc.firstErr = err.Error()
	}
}

// markAffected records, before the kill, which partitions the kill
// affects and their epochs.
func (dc *demoClients) markAffected(affected map[uint32]uint64) {
	for _, w := range dc.writers {
		w.mu.Lock()
		w.epoch0, w.affected = affected[w.part], false
		if _, ok := affected[w.part]; ok {
			w.affected = true
		}
		w.mu.Unlock()
	}
}

// startOutage marks the kill's time and wakes every writer: from now on
// the affected ones probe.
func (dc *demoClients) startOutage(at time.Time) {
	dc.outageAt.Store(at.UnixNano())
	close(dc.outage)
}

// recovered counts the affected partitions with a write acknowledged in
// a newer epoch, of how many are affected.
func (dc *demoClients) recovered() (done, affected int) {
	for _, w := range dc.writers {
		w.mu.Lock()
		if w.affected {
			affected++
			if !w.firstNew.IsZero() {
				done++
			}
		}
		w.mu.Unlock()
	}
	return done, affected
}

// changedBytes are the keys' and values' bytes of the writes
// acknowledged from the kill on: what the returning region lacks.
func (dc *demoClients) changedBytes() uint64 {
	var sum uint64
	for _, w := range dc.writers {
		w.mu.Lock()
		sum += w.ackedAfterKill
		w.mu.Unlock()
	}
	return sum
}

// halt stops every writer and waits for them.
func (dc *demoClients) halt() {
	dc.stop.Store(true)
	dc.wg.Wait()
}

// acks is the number of acknowledged writes, and their keys' and values'
// bytes.
func (dc *demoClients) acks() (n, bytes uint64) {
	for _, w := range dc.writers {
		w.mu.Lock()
		for _, a := range w.acked {
			n++
			bytes += uint64(len(w.key(a.n)) + dc.valueBytes)
		}
		w.mu.Unlock()
	}
	return n, bytes
}

// verify reads every acknowledged write back strongly (readers in
// parallel) and returns, per partition, the writes lost: not found or
// another value. Reads that fail after the client's own retries are
// retried for a while, then counted as unreadable.
func (dc *demoClients) verify(ctx context.Context, readers int) (lost map[uint32]int, verified, unreadable uint64) {
	var mu sync.Mutex
	lost = map[uint32]int{}
	var v, u atomic.Uint64
	work := make(chan *demoWriter)
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range work {
				w.mu.Lock()
				acked := append([]demoAck(nil), w.acked...)
				w.mu.Unlock()
				for _, a := range acked {
					key := w.key(a.n)
					got, found, err := dc.readBack(ctx, key)
					switch {
					case err != nil:
						u.Add(1)
					case !found || string(got) != string(agentBenchValue(key, dc.valueBytes)):
						mu.Lock()
						lost[w.part]++
						mu.Unlock()
					default:
						v.Add(1)
					}
				}
			}
		}()
	}
	for _, w := range dc.writers {
		select {
		case work <- w:
		case <-ctx.Done():
			// Out of time: what is left is unread, and says so.
			w.mu.Lock()
			u.Add(uint64(len(w.acked)))
			w.mu.Unlock()
		}
	}
	close(work)
	wg.Wait()
	return lost, v.Load(), u.Load()
}

func (dc *demoClients) readBack(ctx context.Context, key string) ([]byte, bool, error) {
	var err error
	for range 5 {
		var got []byte
		var found bool
		got, found, err = dc.cl.Get(ctx, key, routing.ConsistencyStrong)
		if err == nil || ctx.Err() != nil {
			return got, found, err
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	return nil, false, err
}
