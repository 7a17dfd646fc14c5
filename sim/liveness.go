package sim

import (
	"fmt"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
)

// maxFinalRounds bounds the read-and-compare rounds of the liveness phase;
// finalRetryPause separates a failed round from the next.
const (
	maxFinalRounds  = 10
	finalRetryPause = time.Second
)

// finalReads is the liveness phase's prober: one linearizable read per key
// after the heal. Every read must succeed, and afterwards every acceptor of
// the current configuration must hold exactly the value read.
type finalReads struct {
	e      *env
	rec    recorder
	keys   []string
	slots  int // >0: the keys are heartbeat tables this wide
	idx    []int
	vals   []caspaxos.Value
	ok     []bool
	out    int
	failed int
}

func (f *finalReads) opDone(tag uint64, res caspaxos.Result) {
	k := int(tag)
	f.out--
	in := regInput{Kind: opRead, Key: f.keys[k], Slots: f.slots}
	if f.rec.done(f.idx[k], in, res, f.e.w.Now()) {
		f.ok[k] = true
		f.vals[k] = res.Value
		return
	}
	f.failed++
}

func (f *finalReads) opLost(tag uint64) {
	k := int(tag)
	f.out--
	f.failed++
	f.rec.lost(f.idx[k], regInput{Kind: opRead, Key: f.keys[k], Slots: f.slots}, f.e.w.Now())
}

// settleCluster is the liveness phase of a CASPaxos scenario: after the
// heal, every pending operation (and whatever else extra says is pending)
// must finish, the final reads must succeed, and the acceptors must agree,
// all within the configured bound.
//
// slots > 0 says the keys hold heartbeat tables of that width.
func (e *env) settleCluster(cl *Cluster, keys []string, slots int, extra func() int) {
	deadline := e.w.Now() + e.cfg.LivenessBound
	pending := func() int {
		n := cl.PendingOps()
		if extra != nil {
			n += extra()
		}
		return n
	}
	if !e.runUntil(deadline, func() bool { return pending() == 0 }) {
		e.viol.add(e.w.Now(), ViolationLiveness, "%d operations still pending %v after the heal", pending(), e.cfg.LivenessBound)
		return
	}
	f := &finalReads{e: e, rec: recorder{hist: e.hist, stats: &e.ops, tr: &e.w.Trace}, keys: keys, slots: slots,
		idx: make([]int, len(keys)), vals: make([]caspaxos.Value, len(keys)), ok: make([]bool, len(keys))}
	var lastDisagree string
	readsFailed := false
	for round := 0; round < maxFinalRounds; round++ {
		f.failed = 0
		clear(f.ok)
		for k, key := range keys {
			pp := cl.prop[(k+round)%len(cl.prop)]
			in := regInput{Kind: opRead, Key: key, Slots: slots}
			f.idx[k] = f.rec.call(e.hist.NewClient(), in, e.w.Now())
			if err := pp.submit(f, uint64(k), key, caspaxos.Read()); err != nil {
				f.failed++
				f.rec.stats.Refused++
				e.hist.Discard(f.idx[k])
				continue
			}
			f.out++
		}
		e.runUntil(deadline, func() bool { return f.out == 0 })
		if f.out > 0 {
			e.viol.add(e.w.Now(), ViolationLiveness, "%d final reads unanswered %v after the heal", f.out, e.cfg.LivenessBound)
			return
		}
		readsFailed = f.failed > 0
		if readsFailed {
			lastDisagree = fmt.Sprintf("%d of %d final reads failed", f.failed, len(keys))
			if e.w.Now() >= deadline {
				break
			}
			e.run(min(deadline, e.w.Now()+finalRetryPause)) // let whatever failed them pass
			continue
		}
		if !e.runUntil(deadline, cl.Quiet) {
			e.viol.add(e.w.Now(), ViolationLiveness, "messages still in flight %v after the heal", e.cfg.LivenessBound)
			return
		}
		lastDisagree = e.disagreement(cl, f)
		if lastDisagree == "" {
			e.metrics["liveness_seconds"] = (e.w.Now() - (deadline - e.cfg.LivenessBound)).Seconds()
			return
		}
		if e.w.Now() >= deadline {
			break
		}
	}
	if readsFailed {
		e.viol.add(e.w.Now(), ViolationLiveness, "not available %v after the heal: %s", e.cfg.LivenessBound, lastDisagree)
		return
	}
	e.viol.add(e.w.Now(), ViolationConvergence, "not converged %v after the heal: %s", e.cfg.LivenessBound, lastDisagree)
}

// disagreement returns "" when every acceptor of the current configuration
// holds the value the final read returned for every key.
func (e *env) disagreement(cl *Cluster, f *finalReads) string {
	for _, id := range cl.Quorum().Acceptors() {
		acc := cl.Acceptor(id)
		if acc == nil {
			return "acceptor down"
		}
		for k, key := range f.keys {
			rec, _ := acc.Get(key)
			if !rec.Value.Equal(f.vals[k]) {
				return fmt.Sprintf("key %s: acceptor %d holds %v, the read returned %v", key, id, rec.Value, f.vals[k])
			}
		}
	}
	return ""
}
