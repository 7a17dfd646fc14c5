package sim

import (
	"time"

	"github.com/fmnode/fmnode/failover"
)

// foScript is a failover scenario whose fault script runs on the common
// skeleton of runScripted: build the world (with preloaded data), start
// the clients, a steady window, the fault until the outage ends, the heal,
// re-sync until every partition caught up once, the script's own wait,
// then the liveness phase with the clients stopped and the standard
// checks (one writer per epoch and epochs only grow, checked as values
// are learned; no acknowledged write lost; porcupine per key; convergence)
// followed by the script's checks.
type foScript interface {
	Scenario
	// shape adjusts the world (regions, nodes, load).
	shape(spec *foSpec)
	// profile is the timing profile when the command names none.
	profile() string
	// inject starts the fault, run lasts it until `until`, heal ends it.
	inject(r *foRun)
	run(r *foRun, until time.Duration)
	heal(r *foRun)
	// settle runs after the re-sync window (failback waits for the
	// return to the preferred region here); it may add violations.
	settle(r *foRun)
	// check runs the script's checks after the standard ones and fills
	// its figures.
	check(r *foRun)
}

// foRun is one scripted run: the world and what the script observed.
type foRun struct {
	fw      *foWorld
	cfg     Config
	profile failover.Config
	// down marks the nodes the fault takes away (powered off, cut off,
	// stalled); back is when the fault healed.
	down   []bool
	cut    CutSet
	crash  bool
	back   time.Duration
	resync *foResync
	fig    ScenarioFigures
	// resyncDone is when every partition had caught up once after the heal.
	resyncDone time.Duration
	// The scripts' own records.
	fb      *foFailbackState
	drain   *foDrainState
	gray    *foGrayState
	cluster *clusterState
}

func (r *foRun) violation(kind, format string, args ...any) {
	r.fw.e.viol.add(r.fw.now(), kind, format, args...)
}

// runScripted is the skeleton every foScript runs on.
func runScripted(s foScript, cfg Config) (Result, *foRun, error) {
	profName, prof, parts, outage, warm, err := foRunParams(cfg, s.profile())
	if err != nil {
		return Result{}, nil, err
	}
	spec := failoverScenario{}.spec(parts, prof)
	s.shape(&spec)
	fw, err := newFoWorld(cfg, spec)
	if err != nil {
		return Result{}, nil, err
	}
	if err := fw.preload(preloadBytes(cfg)); err != nil {
		return Result{}, nil, err
	}
	r := &foRun{fw: fw, cfg: cfg, profile: prof, down: make([]bool, len(fw.nodes))}
	fw.testDoublePromote = cfg.testDoublePromote
	e := fw.e
	planFoStages(e, "fault", warm, outage)
	e.mark("setup")
	e.stage("setup")
	if !fw.initRegisters(time.Minute) {
		e.viol.add(e.w.Now(), ViolationLiveness, "registers not initialised within a minute")
		res := fw.finish(cfg, profName, s.Name())
		return res, r, nil
	}
	e.stage("warm-up")
	fw.warmUp(prof, warm)

	e.mark("safety")
	e.stage("fault")
	s.inject(r)
	fw.startFaults()
	// The affected partitions' clients write without think time from the
	// fault on, as in region-outage, so that write recovery and reroute
	// are measured the same way in every scripted scenario.
	fw.startProbes()
	s.run(r, e.w.Now()+outage)
	s.heal(r)
	fw.stopFaults()
	r.back = e.w.Now()
	e.stage("recovery")
	if r.resync == nil {
		r.resync = fw.resyncMark(r.down)
	}
	fw.m.resyncOn, fw.m.resyncNodes = true, r.down
	if !fw.runUntil(r.back+foConvergeBound, fw.caughtUpSince()) {
		r.violation(ViolationLiveness, "not every partition caught up within %v of the heal: %s", foConvergeBound, fw.unconverged(fw.partCaughtUp))
	}
	r.resyncDone = e.w.Now()
	fw.m.resyncOn = false
	r.resync.figures(fw, &r.fig)
	s.settle(r)

	e.mark("liveness")
	e.stage("settle")
	fw.clientsOn = false
	fw.runUntil(e.w.Now()+time.Minute, func() bool { return fw.pendingClientOps() == 0 })
	if bound := fw.livenessBound(); !fw.runUntil(e.w.Now()+bound, fw.converged) {
		r.violation(ViolationLiveness, "not converged within %v (%s) after the clients stopped: %s", bound, fw.livenessBoundWhy(), fw.unconverged(fw.partConverged))
	}
	res := fw.finish(cfg, profName, s.Name())
	res.FailoverReport.ResyncSeconds = (r.resyncDone - r.back).Seconds()
	s.check(r)
	res.ScenarioFigures = &r.fig
	res.Violations = e.viol.strings()
	return res, r, nil
}

// downRegion marks every node of region index ri as down.
func (r *foRun) downRegion(ri int) {
	for i := range r.fw.nodes {
		r.down[i] = r.fw.e.w.Nodes[i].Region == ri
	}
}

// cutDown cuts the down nodes from every other node (their clients stand
// on their nodes' links, so clients of the down side still reach it).
func (r *foRun) cutDown() {
	all := make([]int32, len(r.fw.nodes))
	for i := range all {
		all[i] = int32(i)
	}
	r.cut = isolateRegion(len(r.fw.nodes), all, func(x int32) bool { return r.down[x] })
	r.fw.e.w.Links.Apply(r.cut, +1)
}

// crashDown powers off the down nodes.
func (r *foRun) crashDown() {
	r.crash = true
	for i, x := range r.down {
		if x {
			r.fw.e.w.Crash(int32(i))
		}
	}
}

// healDown undoes cutDown or crashDown.
func (r *foRun) healDown() {
	if !r.crash {
		r.fw.e.w.Links.Apply(r.cut, -1)
		return
	}
	for i, x := range r.down {
		if x {
			r.fw.e.w.Restart(int32(i))
		}
	}
}

// requireFailedOver is the check every fault that takes write regions
// away shares: each affected partition moved.
func (r *foRun) requireFailedOver() {
	fw := r.fw
	for i := range fw.parts {
		if fw.m.affected[i] && fw.m.complete[i] == 0 {
			r.violation(ViolationLiveness, "partition %s did not fail over", fw.parts[i].name)
		}
	}
}

// secsSince turns per-partition virtual times (0: none) into seconds from t0.
func secsSince(ts []time.Duration, t0 time.Duration) []float64 {
	var out []float64
	for _, t := range ts {
		if t > 0 {
			out = append(out, (t - t0).Seconds())
		}
	}
	return out
}
