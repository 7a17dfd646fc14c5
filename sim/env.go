package sim

import (
	"fmt"
	"time"

	"github.com/fmnode/fmnode/guard"
)

// env is the scaffolding every scenario shares: the world, the nemesis,
// the client history and the violations, and the two phases of a run.
type env struct {
	cfg     Config
	profile FaultProfile
	w       *World
	nem     *Nemesis
	hist    *History
	ops     OpStats
	viol    violations
	metrics map[string]float64
	// guards counts the cores' guards as they fire (every node of the
	// world shares it: one thread runs them all).
	guards guard.Counts
	poll   poller
	phase  string
	// The progress display's view (see stage): never part of the run.
	stages    []progressStage
	stageName string
	total     time.Duration
}

// envSpec is what a scenario decides about its world.
type envSpec struct {
	topo       Topology
	nodeRegion []int
	maxHistory int
	// crashable limits crashes and pauses to these nodes (nil: all).
	crashable []int32
	// faults, when set, adapts the seed's fault profile to the scenario
	// (a failover scenario keeps crashes for its script and bounds drift
	// by its leases).
	faults func(FaultProfile) FaultProfile
}

// regionsRoundRobin places n nodes over r regions: node i in region i%r.
func regionsRoundRobin(n, r int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i % r
	}
	return out
}

func newEnv(cfg Config, spec envSpec) (*env, error) {
	p := ProfileFor(cfg.Faults, cfg.Seed)
	if cfg.Canary || cfg.CanaryControl {
		p = CanaryProfile()
	}
	if spec.faults != nil {
		p = spec.faults(p)
	}
	w, err := NewWorld(WorldConfig{Seed: cfg.Seed, Topology: spec.topo, NodeRegion: spec.nodeRegion, DriftBound: p.DriftBound})
	if err != nil {
		return nil, err
	}
	e := &env{cfg: cfg, profile: p, w: w, hist: NewHistory(spec.maxHistory), metrics: make(map[string]float64)}
	e.nem = NewNemesis(w, p, spec.crashable)
	e.poll = poller{w: w}
	if cfg.Progress != nil {
		w.progress = e.report
	}
	return e, nil
}

// safety runs the workload under faults for d.
func (e *env) safety(d time.Duration) {
	e.mark("safety")
	if e.stages == nil {
		// The register-type runs: the safety phase, then at most the
		// liveness bound (settleCluster).
		e.total = e.w.Now() + d + e.cfg.LivenessBound
	}
	e.nem.Start()
	e.run(e.w.Now() + d)
}

// heal ends the safety phase: every fault heals, crashed nodes restart,
// paused ones resume. Under the BreakLiveness hook every link is cut
// instead, which no system can converge through.
func (e *env) heal() {
	e.mark("liveness")
	e.nem.Stop()
	if e.cfg.BreakLiveness {
		n := len(e.w.Nodes)
		all := make(CutSet, 0, n*n)
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				if i != j {
					all = append(all, int32(i*n+j))
				}
			}
		}
		e.w.Links.Apply(all, +1)
	}
}

func (e *env) mark(phase string) {
	e.phase = phase
	e.w.Trace.Begin(tracePhase, e.w.Now())
	e.w.Trace.Str(phase)
	e.cfg.Logger.Debug("sim phase", "seed", e.cfg.Seed, "phase", phase, "at", e.w.Now())
}

func (e *env) run(until time.Duration) {
	if err := e.w.Run(until); err != nil && len(e.viol.list) == 0 {
		e.viol.add(e.w.Now(), ViolationSimulator, "%v", err)
	}
}

// runUntil runs until done holds (checked every pollEvery of virtual time)
// or the deadline passes; it reports done().
func (e *env) runUntil(deadline time.Duration, done func() bool) bool {
	if done() {
		return true
	}
	e.poll.start(done)
	e.run(deadline)
	e.poll.stop()
	return done()
}

// pollEvery is the resolution of liveness checks.
const pollEvery = 10 * time.Millisecond

// poller stops the world when a condition holds.
type poller struct {
	w    *World
	done func() bool
	gen  uint64
}

func (p *poller) start(done func() bool) {
	p.gen++
	p.done = done
	p.w.Sched.After(pollEvery, NoNode, p, p.gen)
}

func (p *poller) stop() { p.gen++; p.done = nil }

// Fire checks the condition.
func (p *poller) Fire(now time.Duration, arg uint64) {
	if arg != p.gen || p.done == nil {
		return
	}
	if p.done() {
		p.w.Stop()
		return
	}
	p.w.Sched.After(pollEvery, NoNode, p, p.gen)
}

// result assembles the run's report, running the linearizability check.
func (e *env) result(scenario string) Result {
	e.stage("check")
	res := Result{
		Seed:           e.cfg.Seed,
		Scenario:       scenario,
		Faults:         e.cfg.Faults.String(),
		Profile:        e.profile.String(),
		Canary:         e.cfg.Canary,
		SimSeconds:     e.w.Now().Seconds(),
		Events:         e.w.Events(),
		FaultsInjected: e.w.Faults.Map(),
		Ops:            e.ops,
		Metrics:        e.metrics,
		GuardsFired:    e.guards.Map(),
	}
	name := fmt.Sprintf("fmnode-sim-%s-%d", scenario, e.cfg.Seed)
	if e.cfg.Canary {
		name += "-canary"
	}
	verdict, viz, err := checkLinearizable(e.hist.Operations(), e.cfg.CheckTimeout, e.cfg.OutDir, name)
	if err != nil {
		e.viol.add(e.w.Now(), ViolationSimulator, "%v", err)
	}
	if verdict != LinOK {
		e.viol.add(e.w.Now(), ViolationLinearizability, "porcupine verdict %s over %d operations", verdict, e.hist.Len())
	}
	res.Linearizable = verdict
	res.Visualization = viz
	res.Violations = e.viol.strings()
	res.TraceHash = e.w.Trace.String()
	return res
}
