package sim

import (
	"fmt"
	"time"

	"github.com/fmnode/fmnode/failover"
)

// Failover scenario defaults when Config leaves them zero: a small drill
// that every test and sweep can afford. `fmnode sim` asks for the paper's
// timeline (a 30-minute outage, 5 minutes of warm-up) with DrillPartitions
// partitions.
const (
	foDefaultPartitions = 60
	foDefaultOutage     = 3 * time.Minute
	foWarmup            = 3 * time.Minute
	foConvergeBound     = 10 * time.Minute
	foPollEvery         = time.Second
)

// The command's defaults for region-outage: the paper's timeline. The
// paper's 4300 partitions (--partitions 4300) fail over within the targets
// but do not yet converge within the bound after the region returns (the
// re-sync floods the returning region), so the default drill is 500
// partitions, which converges in about 20 s of wall time.
const (
	DrillPartitions = 500
	DrillOutage     = 30 * time.Minute
	DrillWarmup     = 5 * time.Minute
)

// failoverScenario runs the failover system (managers, register, partition
// replicas, clients) through one fault script.
type failoverScenario struct {
	name, desc string
	fault      foFault
}

// foFault says what goes wrong at the outage time.
type foFault uint8

const (
	foRegionOutage foFault = iota + 1
)

func failoverScenarios() []Scenario {
	return []Scenario{
		failoverScenario{name: "region-outage", fault: foRegionOutage,
			desc: "the paper's drill: the write region of most partitions powered off for --outage, then back (detection, failover, RPO, re-sync)"},
	}
}

func (s failoverScenario) Name() string        { return s.name }
func (s failoverScenario) Description() string { return s.desc }

func (s failoverScenario) Run(cfg Config) (Result, error) {
	profName := cfg.FailoverProfile
	if profName == "" {
		profName = "paper"
	}
	prof, err := failover.Profile(profName)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	parts := cfg.Partitions
	if parts == 0 {
		parts = foDefaultPartitions
	}
	outage := cfg.Outage
	if outage == 0 {
		outage = foDefaultOutage
	}
	warm := foWarmup
	if cfg.Duration > 0 {
		warm = cfg.Duration
	}
	spec := foSpec{regions: 3, nodesPerRegion: 1, partitions: parts, profile: prof,
		writeShare: []float64{0.6, 0.25, 0.15}, minDurability: 1, clientsPerPartition: 2,
		thinkMin: 20 * time.Second, thinkMax: 40 * time.Second, readFraction: 0.3, maxHistory: 4 << 20}
	fw, err := newFoWorld(cfg, spec)
	if err != nil {
		return Result{}, err
	}
	fw.testDoublePromote = cfg.testDoublePromote
	e := fw.e
	e.mark("setup")
	if !fw.initRegisters(time.Minute) {
		e.viol.add(e.w.Now(), ViolationLiveness, "registers not initialised within a minute")
		return fw.finish(cfg, profName, s.name), nil
	}
	fw.startClients()
	e.mark("steady")
	// Leases and views settle within a heartbeat round or two; the
	// steady window starts after that and ends at the outage.
	settle := 2 * (prof.HeartbeatInterval + prof.LeaseDuration)
	e.run(e.w.Now() + min(settle, warm/2))
	fw.m.steadyOn, fw.m.steadyFrom = true, e.w.Now()
	e.run(e.w.Now() + warm - min(settle, warm/2))
	fw.m.steadyOn, fw.m.steadyTo = false, e.w.Now()

	e.mark("safety")
	down := fw.faultStart(s.fault)
	e.run(e.w.Now() + outage)
	fw.faultEnd(s.fault, down)
	back := e.w.Now()
	if !fw.runUntil(back+foConvergeBound, fw.converged) {
		e.viol.add(e.w.Now(), ViolationLiveness, "not converged within %v of the region's return", foConvergeBound)
	}
	resync := e.w.Now() - back
	fw.m.resyncOn = false

	e.mark("liveness")
	fw.clientsOn = false
	fw.runUntil(e.w.Now()+time.Minute, func() bool { return fw.pendingClientOps() == 0 })
	if !fw.runUntil(e.w.Now()+cfg.LivenessBound, fw.converged) {
		e.viol.add(e.w.Now(), ViolationLiveness, "not converged within %v after the clients stopped", cfg.LivenessBound)
	}
	res := fw.finish(cfg, profName, s.name)
	res.FailoverReport.ResyncSeconds = resync.Seconds()
	return res, nil
}

// faultStart injects the scenario's fault and returns the nodes it took down.
func (fw *foWorld) faultStart(f foFault) []bool {
	down := make([]bool, len(fw.nodes))
	switch f {
	case foRegionOutage:
		for i := range fw.nodes {
			if fw.e.w.Nodes[i].Region == 0 {
				down[i] = true
			}
		}
	}
	n := fw.m.startOutage(fw, down, fw.now())
	fw.e.cfg.Logger.Debug("outage", "nodes", down, "affected", n)
	for i, d := range down {
		if d {
			fw.e.w.Crash(int32(i))
		}
	}
	return down
}

// faultEnd heals the fault; re-sync bytes to the returning nodes count from here.
func (fw *foWorld) faultEnd(f foFault, down []bool) {
	fw.m.resyncOn, fw.m.resyncNodes = true, down
	for i, d := range down {
		if d {
			fw.e.w.Restart(int32(i))
		}
	}
}

// runUntil runs in steps of foPollEvery until done or the deadline: a
// convergence check looks at every partition, so it runs once a second.
func (fw *foWorld) runUntil(deadline time.Duration, done func() bool) bool {
	for {
		if done() {
			return true
		}
		if fw.now() >= deadline {
			return false
		}
		fw.e.run(min(deadline, fw.now()+foPollEvery))
		if len(fw.e.viol.list) > 0 && fw.e.viol.list[0].Kind == ViolationSimulator {
			return false
		}
	}
}

// finish runs the final checks and assembles the result.
func (fw *foWorld) finish(cfg Config, profName, name string) Result {
	e := fw.e
	fw.checkHosts()
	lost := fw.checkLineage()
	fw.checkConvergence()
	rep := fw.m.report(fw, profName, lost)
	for i := range fw.parts {
		if kv, err := readAllKV(fw.nodes[fw.parts[i].nodeOfReg[1]].store, fw.parts[i].id); err == nil {
			for k, v := range kv {
				rep.FullCopyBytes += uint64(len(k) + len(v))
			}
		}
	}
	res := Result{
		Seed: cfg.Seed, Scenario: name, Faults: "scripted", Profile: profName,
		SimSeconds: e.w.Now().Seconds(), Events: e.w.Events(), FaultsInjected: e.w.Faults.Map(),
		Ops: e.ops, Metrics: e.metrics, FailoverReport: rep,
	}
	res.Linearizable = checkKV(e.hist.Operations(), cfg.CheckTimeout)
	if res.Linearizable != LinOK {
		e.viol.add(e.w.Now(), ViolationLinearizability, "porcupine verdict %s over %d operations", res.Linearizable, e.hist.Len())
	}
	res.Violations = e.viol.strings()
	res.TraceHash = e.w.Trace.String()
	return res
}

// withDefaults fills the bounds a Config gets from Run (for tests that
// build a failover world directly).
func (c Config) withDefaults() Config {
	_ = c.normalize()
	return c
}
