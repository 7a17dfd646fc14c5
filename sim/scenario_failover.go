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

// The command's defaults for region-outage: the paper's drill, 4300
// partitions and a 30-minute outage (about 5 minutes of wall time on two
// cores; --partitions 500 runs in about 20 s).
const (
	DrillPartitions = 4300
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
	// foNodeFailure powers off one node of the write-heavy region, which
	// has two nodes: only the partitions whose write replica it hosts may
	// move.
	foNodeFailure
	// foWriteRegionIsolated cuts the write-heavy region off from the other
	// regions, but not from its own clients: it must stop acknowledging
	// writes once its lease lapses.
	foWriteRegionIsolated
	// foTwoRegion powers off the write region of a two-region deployment
	// whose tie-breaker is a witness node (acceptor and manager only).
	foTwoRegion
	// foFlapping cuts and heals the write-heavy region's links to the
	// others every few seconds: hysteresis must bound the failovers.
	foFlapping
)

// Flapping: each cut and each healed spell lasts between these bounds,
// drawn from the scenario's seeded stream.
const (
	foFlapMin = 2 * time.Second
	foFlapMax = 6 * time.Second
	// foIsoStep is how finely a cut is watched for new acknowledgements
	// (see watchLease): the finer, the tighter an acknowledgement's date.
	foIsoStep = 20 * time.Millisecond
)

func failoverScenarios() []Scenario {
	list := []Scenario{
		failoverScenario{name: "region-outage", fault: foRegionOutage,
			desc: "the paper's drill: the write region of most partitions powered off for --outage, then back (detection, failover, RPO, re-sync)"},
		failoverScenario{name: "node-failure", fault: foNodeFailure,
			desc: "two nodes per region; one node hosting write replicas powered off for --outage: only its partitions fail over, the others keep epoch 1"},
		failoverScenario{name: "write-region-isolated", fault: foWriteRegionIsolated,
			desc: "the write-heavy region cut from the other regions (not from its clients) for --outage: no write acknowledged there after its lease, failover, heal"},
		failoverScenario{name: "two-region", fault: foTwoRegion,
			desc: "two regions (minimum durability 1) and a witness node (acceptor and manager, no replicas); the write region powered off: failover, RPO 0"},
		failoverScenario{name: "flapping", fault: foFlapping,
			desc: "the write-heavy region's links cut and healed every few seconds for --outage (fast profile by default): failovers per partition bounded by hysteresis"},
		failbackScenario{},
		drainScenario{},
		clusterScenario{},
		grayScenario{},
		azScenario{},
	}
	return append(list, clusterEdgeScenarios()...)
}

func (s failoverScenario) Name() string        { return s.name }
func (s failoverScenario) Description() string { return s.desc }

// foDrill is one failover run: the world and what the fault script
// observed, for the scenario's own checks and for tests.
type foDrill struct {
	fw      *foWorld
	profile failover.Config
	// down: the nodes the fault powers off or cuts off (the write region
	// side); crash: powered off rather than cut.
	down  []bool
	crash bool
	cut   CutSet
	// Cuts: acknowledgements of writes of an epoch whose write region
	// was the cut-off one, made during the fault, the latest one's time,
	// the latest lease end (virtual time) a cut-off node held, and the
	// longest one-way trip (to date acknowledgements conservatively).
	isoAcks     int
	isoLastAck  time.Duration
	isoLeaseEnd time.Duration
	maxOneWay   time.Duration
	lastPoll    time.Duration
	// lateAcks counts acknowledgements after the lease (lateFirst is the
	// first); leaseStrict makes each a violation. The partition core does
	// not gate writes on the lease: a write region whose lease lapsed
	// while cut off acknowledges again as soon as the cut heals, before
	// its followers hear of the new epoch. A long cut (isolation) is
	// failed over and fenced by then; flapping cuts are not, so there
	// the count is reported and the lost-write check (RPO) is the gate.
	lateAcks    int
	lateFirst   string
	leaseStrict bool
	// Flapping: the cut/heal cycles and the failover epochs seen per
	// partition (from the register's bounded history, polled often
	// enough that no entry is missed).
	flaps         int
	failoverEpoch []map[failover.Epoch]bool
	faultFrom     time.Duration
}

func (s failoverScenario) Run(cfg Config) (Result, error) {
	res, _, err := s.run(cfg)
	return res, err
}

// spec shapes the world each fault needs.
func (s failoverScenario) spec(parts int, prof failover.Config) foSpec {
	spec := foSpec{regions: 3, nodesPerRegion: 1, partitions: parts, profile: prof,
		writeShare: []float64{0.6, 0.25, 0.15}, minDurability: 1, clientsPerPartition: 2,
		thinkMin: 20 * time.Second, thinkMax: 40 * time.Second, readFraction: 0.3, maxHistory: 4 << 20}
	switch s.fault {
	case foNodeFailure:
		spec.nodesPerRegion = 2
	case foTwoRegion:
		spec.regions, spec.witness = 2, true
		spec.writeShare = []float64{0.7, 0.3}
	}
	return spec
}

func (s failoverScenario) run(cfg Config) (Result, *foDrill, error) {
	defProfile := "paper"
	if s.fault == foFlapping {
		defProfile = "fast" // seconds-long flaps mean nothing to 30 s heartbeats
	}
	profName, prof, parts, outage, warm, err := foRunParams(cfg, defProfile)
	if err != nil {
		return Result{}, nil, err
	}
	spec := s.spec(parts, prof)
	if cfg.Layout != nil {
		cfg.Layout.apply(&spec)
	}
	fw, err := newFoWorld(cfg, spec)
	if err != nil {
		return Result{}, nil, err
	}
	if err := fw.preload(preloadBytes(cfg)); err != nil {
		return Result{}, nil, err
	}
	// Write regions gate acknowledgements on their lease, so an
	// acknowledgement after the lease is a violation in every scenario.
	d := &foDrill{fw: fw, profile: prof, leaseStrict: true}
	fw.testDoublePromote = cfg.testDoublePromote
	e := fw.e
	planFoStages(e, "outage", warm, outage)
	e.mark("setup")
	e.stage("setup")
	if !fw.initRegisters(time.Minute) {
		e.viol.add(e.w.Now(), ViolationLiveness, "registers not initialised within a minute")
		return fw.finish(cfg, profName, s.name), d, nil
	}
	e.stage("warm-up")
	fw.warmUp(prof, warm)

	e.mark("safety")
	e.stage("outage")
	d.faultStart(s.fault)
	d.faultRun(s.fault, e.w.Now()+outage)
	d.faultEnd()
	back := e.w.Now()
	e.stage("recovery")
	// What the returning replicas hold once back (after a restart, what
	// survived on disk) sizes the data they lack.
	rs := fw.resyncMark(d.down)
	// After a plain outage each partition only has to catch up once (with
	// thousands of partitions under load they are never all idle at one
	// instant). Other faults may leave partitions mid-recovery (hold-offs,
	// switchovers) right after the heal, so they wait for all to be idle.
	settled := fw.converged
	if s.fault == foRegionOutage {
		settled = fw.caughtUpSince()
	}
	if !d.runUntil(back+foConvergeBound, settled) {
		e.viol.add(e.w.Now(), ViolationLiveness, "not converged within %v of the region's return: %s", foConvergeBound, fw.unconverged(fw.partCaughtUp))
	}
	resync := e.w.Now() - back
	fw.m.resyncOn = false
	var fig ScenarioFigures
	rs.figures(fw, &fig)

	e.mark("liveness")
	e.stage("settle")
	fw.clientsOn = false
	d.runUntil(e.w.Now()+time.Minute, func() bool { return fw.pendingClientOps() == 0 })
	if bound := fw.livenessBound(); !d.runUntil(e.w.Now()+bound, fw.converged) {
		e.viol.add(e.w.Now(), ViolationLiveness, "not converged within %v (%s) after the clients stopped: %s", bound, fw.livenessBoundWhy(), fw.unconverged(fw.partConverged))
	}
	d.check(s.fault)
	if d.lateAcks > 0 {
		e.cfg.Logger.Debug("acknowledged after the lease", "count", d.lateAcks, "first", d.lateFirst)
	}
	res := fw.finish(cfg, profName, s.name)
	res.FailoverReport.ResyncSeconds = resync.Seconds()
	res.ScenarioFigures = &fig
	return res, d, nil
}

// faultStart injects the scenario's fault.
func (d *foDrill) faultStart(f foFault) {
	fw := d.fw
	w := fw.e.w
	d.down = make([]bool, len(fw.nodes))
	d.faultFrom = fw.now()
	switch f {
	case foRegionOutage, foTwoRegion, foWriteRegionIsolated, foFlapping:
		// Region 0 is the write-heavy one (writeShare puts the most there).
		for i := range fw.nodes {
			d.down[i] = w.Nodes[i].Region == 0
		}
	case foNodeFailure:
		d.down[fw.busiestWriteNode(0)] = true
	}
	d.crash = f == foRegionOutage || f == foTwoRegion || f == foNodeFailure
	if f == foWriteRegionIsolated || f == foFlapping {
		for _, row := range w.Topo.RTT {
			for _, rtt := range row {
				d.maxOneWay = max(d.maxOneWay, rtt/2+rtt/20+1) // fw.oneWay's jitter is under a tenth of rtt/2
			}
		}
		all := make([]int32, len(fw.nodes))
		for i := range all {
			all[i] = int32(i)
		}
		// The clients of a region stand on its nodes' links, so cutting
		// region 0 from the others leaves its own clients connected.
		d.cut = isolateRegion(len(fw.nodes), all, func(x int32) bool { return d.down[x] })
	}
	if f == foFlapping {
		d.failoverEpoch = make([]map[failover.Epoch]bool, len(fw.parts))
		for i := range d.failoverEpoch {
			d.failoverEpoch[i] = map[failover.Epoch]bool{}
		}
	}
	n := fw.m.startOutage(fw, d.down, fw.now())
	fw.e.cfg.Logger.Debug("fault", "nodes", d.down, "affected", n)
	if d.crash {
		for i, x := range d.down {
			if x {
				w.Crash(int32(i))
			}
		}
	} else {
		w.Links.Apply(d.cut, +1)
	}
	fw.startFaults()
	fw.startProbes()
}

// faultRun lets the fault last until the given time: the isolation
// scenario watches acknowledgements closely, the flapping one heals and
// cuts again.
func (d *foDrill) faultRun(f foFault, until time.Duration) {
	fw := d.fw
	switch f {
	case foWriteRegionIsolated:
		d.stepWatching(until, d.ackSeen())
	case foFlapping:
		seen := d.ackSeen()
		cut := true // faultStart cut the links
		d.flaps = 1
		for fw.now() < until {
			spell := time.Duration(uniform(fw.rng, int64(foFlapMin), int64(foFlapMax)))
			d.stepWatching(min(until, fw.now()+spell), seen)
			if fw.now() >= until {
				break
			}
			if cut {
				fw.e.w.Links.Apply(d.cut, -1)
			} else {
				fw.e.w.Links.Apply(d.cut, +1)
				d.flaps++
			}
			cut = !cut
		}
		if !cut {
			// faultEnd heals the cut; re-apply so it removes exactly one.
			fw.e.w.Links.Apply(d.cut, +1)
		}
	default:
		fw.e.run(until)
	}
}

// ackSeen is how many acknowledgements each partition has so far.
func (d *foDrill) ackSeen() []int {
	seen := make([]int, len(d.fw.parts))
	for i := range seen {
		seen[i] = len(d.fw.m.acks[i])
	}
	return seen
}

// watchLease looks, after every step of a cut, at the writes newly
// acknowledged in an epoch whose write region is the cut-off region 0:
// such a write must be acknowledged while that region's node holds its
// lease (plus the drift bound), or a region that lost its lease keeps
// acknowledging writes that the new write region may not have. An
// acknowledgement is dated no later than it happened: the start of the
// step less the longest one-way trip a reply takes to its client.
func (d *foDrill) watchLease(seen []int, stepFrom time.Duration) {
	fw := d.fw
	w := fw.e.w
	for i, n := range fw.nodes {
		if d.down[i] {
			d.isoLeaseEnd = max(d.isoLeaseEnd, w.VirtualAt(int32(i), n.lease))
		}
	}
	earliest := stepFrom - d.maxOneWay
	for i := range fw.parts {
		acks := fw.m.acks[i]
		node := fw.parts[i].nodeOfReg[0]
		for _, a := range acks[seen[i]:] {
			if !fw.writtenBy(i, failover.Epoch(a.Epoch), 0) {
				continue
			}
			d.isoAcks++
			d.isoLastAck = fw.now()
			lease := w.VirtualAt(node, fw.nodes[node].lease)
			if earliest > lease+d.profile.MaxClockDrift {
				msg := fmt.Sprintf("partition %s: write %d:%d acknowledged by %s after %v, its lease ended at %v",
					fw.parts[i].name, a.Epoch, a.LSN, fw.regions[0], earliest, lease)
				d.lateAcks++
				if d.lateFirst == "" {
					d.lateFirst = msg
				}
				if d.leaseStrict {
					fw.e.viol.add(fw.now(), ViolationInvariant, "%s", msg)
				}
			}
		}
		seen[i] = len(acks)
	}
}

// writtenBy reports whether region r was partition i's write region at
// epoch e (its first, or promoted at e).
func (fw *foWorld) writtenBy(i int, e failover.Epoch, r int) bool {
	if e == 1 {
		return fw.parts[i].initial == fw.regions[r]
	}
	p, ok := fw.promoted[foEpochKey{part: i, epoch: e}]
	return ok && p == fw.regions[r]
}

// stepWatching runs until the given time in steps of foIsoStep, watching
// the leases of the cut-off region.
func (d *foDrill) stepWatching(until time.Duration, seen []int) {
	fw := d.fw
	for fw.now() < until {
		from := fw.now()
		fw.e.run(min(until, from+foIsoStep))
		d.watchLease(seen, from)
		if d.failoverEpoch != nil && fw.now()-d.lastPoll >= foPollEvery {
			d.lastPoll = fw.now()
			d.recordFailovers()
		}
	}
}

// faultEnd heals the fault; re-sync bytes to the returning nodes count from here.
func (d *foDrill) faultEnd() {
	fw := d.fw
	fw.m.resyncOn, fw.m.resyncNodes = true, d.down
	defer fw.stopFaults()
	if !d.crash {
		fw.e.w.Links.Apply(d.cut, -1)
		return
	}
	for i, x := range d.down {
		if x {
			fw.e.w.Restart(int32(i))
		}
	}
}

// runUntil is fw.runUntil, polling the flapping scenario's failover
// record at every step.
func (d *foDrill) runUntil(deadline time.Duration, done func() bool) bool {
	if d.failoverEpoch == nil {
		return d.fw.runUntil(deadline, done)
	}
	return d.fw.runUntil(deadline, func() bool {
		d.recordFailovers()
		return done()
	})
}

// recordFailovers notes the epochs that automatic failovers started, from
// each register's history (MaxHistory entries: more than a poll interval
// ever adds).
func (d *foDrill) recordFailovers() {
	for i := range d.fw.reg {
		for _, t := range d.fw.reg[i].state.History {
			if t.Kind == failover.DecideFailover {
				d.failoverEpoch[i][t.Epoch] = true
			}
		}
	}
}

// busiestWriteNode is the node of region r hosting the most write
// replicas (the lowest index on a tie): the node whose failure matters.
func (fw *foWorld) busiestWriteNode(r int) int {
	count := make([]int, len(fw.nodes))
	for i := range fw.parts {
		if fw.regionIndex(fw.reg[i].state.WriteRegion) == r {
			count[fw.parts[i].nodeOfReg[r]]++
		}
	}
	best := -1
	for i, c := range count {
		if fw.e.w.Nodes[i].Region == r && (best < 0 || c > count[best]) {
			best = i
		}
	}
	return best
}

// maxFailovers is the most automatic failovers the hysteresis allows one
// partition within span: two without a hold-off, then each waits
// HoldOffBase * 2^(n-2) after the n-th (capped at HoldOffMax), counting
// only failovers within FlapWindow (so span should not exceed it).
func maxFailovers(cfg failover.Config, span time.Duration) int {
	n, t := 2, time.Duration(0)
	for k := 0; ; k++ {
		hold := cfg.HoldOffBase << min(k, 30)
		if hold > cfg.HoldOffMax || hold <= 0 {
			hold = cfg.HoldOffMax
		}
		if t += hold; t > span {
			return n
		}
		n++
	}
}

// check runs the fault's own checks after the run.
func (d *foDrill) check(f foFault) {
	fw := d.fw
	e := fw.e
	now := fw.now()
	if f != foFlapping {
		// A fault that takes the write region away must move it.
		for i := range fw.parts {
			if fw.m.affected[i] && fw.m.complete[i] == 0 {
				e.viol.add(now, ViolationLiveness, "partition %s did not fail over", fw.parts[i].name)
			}
		}
	}
	switch {
	case !fw.alone():
		// Background faults move other partitions too.
	case f == foNodeFailure:
		// Only the failed node's partitions may move: every other one
		// keeps its first epoch and write region, and was never promoted.
		for i := range fw.parts {
			if fw.m.affected[i] {
				continue
			}
			if st := fw.reg[i].state; st.Epoch != 1 || st.WriteRegion != fw.parts[i].initial {
				e.viol.add(now, ViolationInvariant, "partition %s moved to epoch %d/%s though its write replica was not on the failed node",
					fw.parts[i].name, st.Epoch, st.WriteRegion)
			}
		}
	}
	if f == foFlapping {
		d.recordFailovers()
		bound := maxFailovers(d.profile, now-d.faultFrom)
		for i := range fw.parts {
			if n := len(d.failoverEpoch[i]); n > bound {
				e.viol.add(now, ViolationLiveness, "partition %s failed over %d times in %v (hysteresis allows %d)",
					fw.parts[i].name, n, now-d.faultFrom, bound)
			}
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
	e.stage("check")
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
	faults := "scripted"
	if cfg.Faults != FaultsNone {
		faults = "scripted+" + cfg.Faults.String()
	}
	res := Result{
		Seed: cfg.Seed, Scenario: name, Faults: faults, Profile: profName,
		SimSeconds: e.w.Now().Seconds(), Events: e.w.Events(), FaultsInjected: e.w.Faults.Map(),
		Ops: e.ops, Metrics: e.metrics, FailoverReport: rep, GuardsFired: e.guards.Map(),
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

// planFoStages is the progress plan of a failover run (see env.stage):
// the registers' set-up, the warm-up, the fault (named fault), the
// re-sync after it, the liveness phase (the clients' last operations
// return, then convergence) and the checks.
func planFoStages(e *env, fault string, warm, outage time.Duration) {
	e.planStages(
		progressStage{"setup", time.Minute},
		progressStage{"warm-up", warm},
		progressStage{fault, outage},
		progressStage{"recovery", foConvergeBound},
		progressStage{"settle", time.Minute + e.cfg.LivenessBound},
		progressStage{"check", 0},
	)
}

// foRunParams resolves the failover scenarios' run parameters from cfg:
// the timing profile (defProfile when none is given), the partition
// count, the fault's length and the warm-up before it.
func foRunParams(cfg Config, defProfile string) (profName string, prof failover.Config, parts int, outage, warm time.Duration, err error) {
	profName = cfg.FailoverProfile
	if profName == "" {
		profName = defProfile
	}
	if prof, err = failover.Profile(profName); err != nil {
		return "", failover.Config{}, 0, 0, 0, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	parts, outage, warm = cfg.Partitions, cfg.Outage, foWarmup
	if parts == 0 {
		parts = foDefaultPartitions
	}
	if outage == 0 {
		outage = foDefaultOutage
	}
	if cfg.Duration > 0 {
		warm = cfg.Duration
	}
	return profName, prof, parts, outage, warm, nil
}

// warmUp starts the clients and runs the steady phase for warm: leases and
// views settle within a heartbeat round or two, then the steady window
// (where register writes are counted as steady-state ones) runs to the end
// of warm, where the fault starts.
func (fw *foWorld) warmUp(prof failover.Config, warm time.Duration) {
	e := fw.e
	fw.startClients()
	e.mark("steady")
	settle := 2 * (prof.HeartbeatInterval + prof.LeaseDuration)
	e.run(e.w.Now() + min(settle, warm/2))
	fw.m.steadyOn, fw.m.steadyFrom = true, e.w.Now()
	e.run(e.w.Now() + warm - min(settle, warm/2))
	fw.m.steadyOn, fw.m.steadyTo = false, e.w.Now()
}
