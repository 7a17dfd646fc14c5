package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
)

// changeFor builds the core's change function for an input.
func changeFor(in regInput) caspaxos.Change {
	switch in.Kind {
	case opCAS:
		return caspaxos.CAS(in.Expected, []byte(in.Data))
	case opBeat:
		return beatChange(in.Slots, in.Slot, in.N)
	}
	return caspaxos.Read()
}

// WorkloadConfig shapes the closed-loop register clients.
type WorkloadConfig struct {
	Keys            int
	ClientsPerNode  int
	ReadFraction    float64
	ThinkMin        time.Duration
	ThinkMax        time.Duration
	MaxHistory      int
	HeartbeatEvery  time.Duration // >0: heartbeat mode (one beat per interval)
	HeartbeatJitter float64       // fraction of HeartbeatEvery
	HeartbeatOneKey bool
	// HeartbeatBurst makes every client beat at the same instants, the
	// multiples of HeartbeatEvery (jitter unused): every observer of one
	// event reacting at once. A beat still running at an instant skips it.
	HeartbeatBurst bool
}

// client is one closed-loop session on a proposer's node: it issues an
// operation, waits for its result, thinks, and issues the next. It dies with
// its node and a new session (a new porcupine client) starts on restart.
type client struct {
	wl   *workload
	pp   *proposerProc
	r    *rand.Rand
	hid  int
	inc  uint32
	busy bool
	idx  int
	in   regInput
	seq  uint64
	name string
	// known[k] is the last version of key k this session saw: CAS uses it
	// as its expectation, so most CASes succeed and some race.
	known []uint64
}

// workload runs the clients of a cluster.
type workload struct {
	c       *Cluster
	cfg     WorkloadConfig
	keys    []string
	clients []*client
	rec     recorder
	stopped bool
	// observe, if set, sees the latency of every definite answer.
	observe func(time.Duration)
}

func newWorkload(c *Cluster, cfg WorkloadConfig, hist *History, stats *OpStats) *workload {
	wl := &workload{c: c, cfg: cfg, rec: recorder{hist: hist, stats: stats, tr: &c.w.Trace}}
	for k := 0; k < cfg.Keys; k++ {
		wl.keys = append(wl.keys, fmt.Sprintf("k%d", k))
	}
	r := NewRand(c.w.Seed, StreamWorkload)
	for _, pp := range c.prop {
		for j := 0; j < cfg.ClientsPerNode; j++ {
			cl := &client{
				wl: wl, pp: pp, r: rand.New(rand.NewPCG(r.Uint64(), r.Uint64())),
				name: fmt.Sprintf("p%d.c%d", pp.slot, j), known: make([]uint64, len(wl.keys)),
			}
			wl.clients = append(wl.clients, cl)
			c.w.Attach(pp.node, cl)
		}
	}
	return wl
}

// start schedules every client's first operation.
func (wl *workload) start() {
	for _, cl := range wl.clients {
		cl.begin(cl.firstDelay())
	}
}

// stop ends the workload: no client issues another operation.
func (wl *workload) stop() { wl.stopped = true }

func (cl *client) firstDelay() time.Duration {
	if cl.wl.cfg.HeartbeatBurst {
		return cl.untilBurst()
	}
	if cl.wl.cfg.HeartbeatEvery > 0 {
		return time.Duration(cl.r.Int64N(int64(cl.wl.cfg.HeartbeatEvery)))
	}
	return cl.think()
}

func (cl *client) think() time.Duration {
	cfg := &cl.wl.cfg
	if cfg.HeartbeatBurst {
		return cl.untilBurst()
	}
	if cfg.HeartbeatEvery > 0 {
		j := (2*cl.r.Float64() - 1) * cfg.HeartbeatJitter
		return time.Duration(float64(cfg.HeartbeatEvery) * (1 + j))
	}
	return time.Duration(uniform(cl.r, int64(cfg.ThinkMin), int64(cfg.ThinkMax)+1))
}

// untilBurst returns the time to the next multiple of HeartbeatEvery,
// strictly after now.
func (cl *client) untilBurst() time.Duration {
	now, every := cl.wl.c.w.Now(), cl.wl.cfg.HeartbeatEvery
	return (now/every+1)*every - now
}

func (cl *client) begin(after time.Duration) {
	cl.hid = cl.wl.rec.hist.NewClient()
	cl.busy = false
	cl.wl.c.w.Sched.After(after, cl.pp.node, cl, uint64(cl.inc))
}

// Fire issues the next operation.
func (cl *client) Fire(now time.Duration, arg uint64) {
	wl := cl.wl
	if uint32(arg) != cl.inc || cl.busy || wl.stopped || !wl.c.w.Live(cl.pp.node) {
		return
	}
	if wl.rec.hist.Full() {
		return
	}
	cl.seq++
	k := cl.r.IntN(len(wl.keys))
	if wl.cfg.HeartbeatOneKey {
		k = 0
	}
	in := regInput{Key: wl.keys[k]}
	switch {
	case wl.cfg.HeartbeatEvery > 0:
		// The count must grow across restarts too: incarnation in the high bits.
		in.Kind, in.Slot, in.Slots = opBeat, cl.pp.slot, len(wl.c.prop)
		in.N = uint64(cl.inc)<<32 | cl.seq
	case cl.r.Float64() < wl.cfg.ReadFraction:
		in.Kind = opRead
	default:
		in.Kind = opCAS
		in.Expected = cl.known[k]
		in.Data = fmt.Sprintf("%s-%d.%d", cl.name, cl.inc, cl.seq)
	}
	cl.in = in
	cl.idx = wl.rec.call(cl.hid, in, now)
	cl.busy = true
	if err := cl.pp.submit(cl, uint64(cl.inc), in.Key, changeFor(in)); err != nil {
		wl.rec.stats.Issued--
		wl.rec.stats.Refused++
		wl.rec.hist.Discard(cl.idx)
		cl.busy = false
		wl.c.w.Sched.After(cl.think(), cl.pp.node, cl, uint64(cl.inc))
	}
}

func (cl *client) opDone(tag uint64, res caspaxos.Result) {
	wl := cl.wl
	now := wl.c.w.Now()
	if uint32(tag) != cl.inc || !cl.busy {
		return
	}
	cl.busy = false
	if wl.rec.done(cl.idx, cl.in, res, now) && wl.observe != nil {
		wl.observe(res.End - res.Start)
	}
	// Learn versions only from definite answers. An unknown outcome may
	// carry a mismatch too, but the history does not record what it saw,
	// and a CAS against a version the checker never saw observed breaks
	// the pruning of unobserved unknown writes (History.Operations).
	k := keyIndex(cl.in.Key)
	var vm *caspaxos.VersionMismatchError
	switch {
	case res.Err == nil:
		cl.known[k] = res.Value.Version
	case errors.Is(res.Err, caspaxos.ErrUnknownOutcome):
	case errors.As(res.Err, &vm):
		cl.known[k] = vm.Current.Version
	}
	if !wl.stopped {
		wl.c.w.Sched.After(cl.think(), cl.pp.node, cl, uint64(cl.inc))
	}
}

func (cl *client) opLost(tag uint64) {
	if uint32(tag) != cl.inc || !cl.busy {
		return
	}
	cl.busy = false
	cl.wl.rec.lost(cl.idx, cl.in, cl.wl.c.w.Now())
}

// Crash ends the session (its pending operation was reported by the proposer).
func (cl *client) Crash(now time.Duration) {
	cl.inc++
	cl.busy = false
}

// Restart starts a new session.
func (cl *client) Restart(now time.Duration) {
	if !cl.wl.stopped {
		cl.begin(cl.think())
	}
}

// keyIndex parses "k<n>" back to n (keys are generated, so this is total).
func keyIndex(key string) int {
	n := 0
	for i := 1; i < len(key); i++ {
		n = n*10 + int(key[i]-'0')
	}
	return n
}
