package sim

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/quorum"
)

// membershipScenario changes the acceptor set under load and faults: grow
// 3 -> 4 -> 5, shrink 5 -> 4 -> 3 (removing members at random, so the
// original ones leave too), and again, for the whole safety phase. The
// register must stay linearizable throughout and converge once healed.
type membershipScenario struct{}

func (membershipScenario) Name() string { return "membership" }
func (membershipScenario) Description() string {
	return "grow the acceptor set 3->4->5 and shrink 5->3 under load and faults, repeatedly (quorum plans, rescans)"
}

// Membership scenario defaults.
const (
	membershipAcceptors = 5
	membershipStart     = 3
	membershipProposers = 6
	membershipKeys      = 6
	membershipDuration  = 30 * time.Second
	coordinatorTick     = 50 * time.Millisecond
)

func (membershipScenario) Run(cfg Config) (Result, error) {
	proposers, keys := membershipProposers, membershipKeys
	if cfg.Keys > 0 {
		keys = cfg.Keys
	}
	if cfg.Proposers > 0 {
		proposers = cfg.Proposers
	}
	d := cfg.Duration
	if d == 0 {
		d = membershipDuration
	}
	wcfg := WorkloadConfig{Keys: keys, ClientsPerNode: 2, ReadFraction: 0.3, ThinkMax: 200 * time.Millisecond, MaxHistory: 50000}
	e, err := newEnv(cfg, envSpec{topo: DefaultWAN(), nodeRegion: regionsRoundRobin(max(membershipAcceptors, proposers), 3), maxHistory: wcfg.MaxHistory})
	if err != nil {
		return Result{}, err
	}
	pc := caspaxos.DefaultProposerConfig(1, quorum.Config{})
	pc.DisableFastPath = cfg.DisableFastPath
	members := make([]caspaxos.NodeID, 0, membershipStart)
	for i := 1; i <= membershipStart; i++ {
		members = append(members, caspaxos.NodeID(i))
	}
	cl, err := newCluster(e.w, ClusterConfig{
		Acceptors: membershipAcceptors, Members: members, Proposers: proposers, Proposer: pc,
		FsyncMin: 200 * time.Microsecond, FsyncMax: 2 * time.Millisecond, SlowFsync: 0.01,
	}, &e.viol)
	if err != nil {
		return Result{}, err
	}
	wl := newWorkload(cl, wcfg, e.hist, &e.ops)
	co := newCoordinator(e, cl, wl.keys)
	wl.start()
	co.start()
	e.safety(d)
	e.heal()
	wl.stop()
	co.stop()
	e.settleCluster(cl, wl.keys, 0, co.pending)
	clusterMetrics(e, cl)
	e.metrics["plans_completed"] = float64(co.plans)
	e.metrics["steps_completed"] = float64(co.steps)
	e.metrics["rescans"] = float64(co.rescans)
	e.metrics["final_acceptors"] = float64(len(cl.Quorum().Acceptors()))
	if cfg.Faults == FaultsNone && !cfg.Canary && !cfg.CanaryControl && e.ops.TimedOut > 0 {
		// Without faults a quorum of the current configuration is always
		// up: a membership change must never make an operation time out.
		e.viol.add(e.w.Now(), ViolationLiveness, "%d operations timed out with no fault injected", e.ops.TimedOut)
	}
	return e.result("membership"), nil
}

type coordState uint8

const (
	coordIdle coordState = iota
	coordStep
	coordRescan
	coordDrain
)

// coordinator is the operator that runs membership plans: for each step it
// runs the rescan the planner asks for (an identity proposal of every key
// under the current configuration), then moves every proposer to the
// step's configuration, then waits until no proposer can still run a
// round under the old one before the next step. It is outside the cluster
// (no node), like an operator's control plane; it stops starting plans when
// the safety phase ends and must finish the one in progress.
type coordinator struct {
	e    *env
	cl   *Cluster
	keys []string
	r    *rand.Rand
	rec  recorder

	state    coordState
	plan     []quorum.Step
	step     int
	growing  bool
	nextPlan time.Duration
	stopped  bool

	// drain: live time each proposer slot still has to run, and the
	// incarnation it had at the switch (a restart ends its old rounds).
	drainLeft []time.Duration
	drainInc  []uint32
	drainTime time.Duration

	rescanDone []bool
	rescanIdx  []int
	rescanOut  int
	rescanned  bool
	turn       int

	plans, steps, rescans uint64
}

func newCoordinator(e *env, cl *Cluster, keys []string) *coordinator {
	pc := cl.cfg.Proposer
	// A round lasts at most phase 1 plus phase 2 of local time; drifting
	// clocks and the scheduler's resolution get a margin on top.
	drain := 2*(pc.Phase1Timeout+pc.Phase2Timeout) + time.Second
	return &coordinator{
		e: e, cl: cl, keys: keys, r: NewRand(e.w.Seed, StreamScenario),
		rec:       recorder{hist: e.hist, stats: &e.ops, tr: &e.w.Trace},
		growing:   true,
		drainLeft: make([]time.Duration, len(cl.prop)),
		drainInc:  make([]uint32, len(cl.prop)),
		drainTime: drain,
	}
}

func (co *coordinator) start() {
	co.nextPlan = co.e.w.Now() + time.Duration(uniform(co.r, int64(500*time.Millisecond), int64(2*time.Second)))
	co.e.w.Sched.After(coordinatorTick, NoNode, co, 0)
}

func (co *coordinator) stop() { co.stopped = true }

// pending is 1 while a plan is in progress: the liveness phase waits for it.
func (co *coordinator) pending() int {
	if co.state == coordIdle {
		return 0
	}
	return 1
}

// Fire advances the coordinator every tick.
func (co *coordinator) Fire(now time.Duration, _ uint64) {
	switch co.state {
	case coordIdle:
		if !co.stopped && now >= co.nextPlan {
			co.newPlan(now)
		}
	case coordStep:
		co.beginStep(now)
	case coordRescan:
		co.pollRescan(now)
	case coordDrain:
		co.pollDrain(now)
	}
	if co.stopped && co.state == coordIdle {
		return
	}
	co.e.w.Sched.After(coordinatorTick, NoNode, co, 0)
}

func (co *coordinator) newPlan(now time.Duration) {
	cur := co.cl.Quorum()
	members := cur.Acceptors()
	if len(members) >= membershipAcceptors {
		co.growing = false
	}
	if len(members) <= membershipStart {
		co.growing = true
	}
	var plan []quorum.Step
	var err error
	if co.growing {
		add := caspaxos.NodeID(0)
		for id := caspaxos.NodeID(1); id <= membershipAcceptors; id++ {
			if !slices.Contains(members, id) {
				add = id
				break
			}
		}
		plan, err = quorum.PlanGrow(cur, add)
	} else {
		plan, err = quorum.PlanShrink(cur, members[co.r.IntN(len(members))])
	}
	if err != nil {
		co.e.viol.add(now, ViolationProtocol, "membership plan from %v: %v", cur, err)
		co.stopped = true
		return
	}
	co.plan, co.step, co.state = plan, 0, coordStep
}

func (co *coordinator) beginStep(now time.Duration) {
	st := co.plan[co.step]
	if st.RescanBefore && !co.rescanned {
		co.rescans++
		co.rescanDone = make([]bool, len(co.keys))
		co.rescanIdx = make([]int, len(co.keys))
		co.state = coordRescan
		co.issueRescan(now)
		return
	}
	co.rescanned = false
	if err := co.cl.SetQuorum(st.Config); err != nil {
		co.e.viol.add(now, ViolationProtocol, "membership step %q: %v", st.Why, err)
		co.stopped, co.state = true, coordIdle
		return
	}
	for i, p := range co.cl.prop {
		co.drainLeft[i] = co.drainTime
		co.drainInc[i] = p.inc
	}
	co.state = coordDrain
}

// issueRescan submits an identity proposal for every key not yet rescanned,
// through the next live proposer.
func (co *coordinator) issueRescan(now time.Duration) {
	pp := co.liveProposer()
	if pp == nil {
		return // every proposer down: try again next tick
	}
	for k, key := range co.keys {
		if co.rescanDone[k] {
			continue
		}
		in := regInput{Kind: opRead, Key: key}
		co.rescanIdx[k] = co.rec.call(co.e.hist.NewClient(), in, now)
		if err := pp.submit(co, uint64(k), key, caspaxos.Read()); err != nil {
			co.rec.stats.Issued--
			co.rec.stats.Refused++
			co.e.hist.Discard(co.rescanIdx[k])
			continue
		}
		co.rescanOut++
	}
}

func (co *coordinator) liveProposer() *proposerProc {
	for i := 0; i < len(co.cl.prop); i++ {
		co.turn++
		pp := co.cl.prop[co.turn%len(co.cl.prop)]
		if pp.p != nil && co.e.w.Live(pp.node) {
			return pp
		}
	}
	return nil
}

func (co *coordinator) pollRescan(now time.Duration) {
	if co.rescanOut > 0 {
		return
	}
	for _, done := range co.rescanDone {
		if !done {
			co.issueRescan(now)
			return
		}
	}
	co.rescanned = true
	co.state = coordStep
}

func (co *coordinator) opDone(tag uint64, res caspaxos.Result) {
	k := int(tag)
	co.rescanOut--
	if co.rec.done(co.rescanIdx[k], regInput{Kind: opRead, Key: co.keys[k]}, res, co.e.w.Now()) {
		co.rescanDone[k] = true
	}
}

func (co *coordinator) opLost(tag uint64) {
	k := int(tag)
	co.rescanOut--
	co.rec.lost(co.rescanIdx[k], regInput{Kind: opRead, Key: co.keys[k]}, co.e.w.Now())
}

func (co *coordinator) pollDrain(now time.Duration) {
	done := true
	for i, p := range co.cl.prop {
		switch {
		case p.inc != co.drainInc[i]:
			co.drainLeft[i] = 0 // restarted: its old rounds died with it
		case co.e.w.Live(p.node):
			co.drainLeft[i] -= coordinatorTick
		}
		if co.drainLeft[i] > 0 {
			done = false
		}
	}
	if !done {
		return
	}
	co.steps++
	co.step++
	if co.step < len(co.plan) {
		co.state = coordStep
		return
	}
	co.plans++
	co.state = coordIdle
	co.nextPlan = now + time.Duration(uniform(co.r, int64(500*time.Millisecond), int64(2*time.Second)))
}
