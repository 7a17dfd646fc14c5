package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/agent"
	"github.com/fmnode/fmnode/internal/clusterspec"
	"github.com/fmnode/fmnode/sim"
	"github.com/fmnode/fmnode/txtdns/kv"
	"github.com/fmnode/fmnode/txtdns/routing"
)

// `fmnode demo`: a real cluster of `fmnode agent` child processes on
// loopback (mutual TLS, certificates made for it in a temporary
// directory), a real region outage (SIGKILL of every agent of the region
// that is write region of most partitions), and the figures of
// `fmnode sim --scenario region-outage` measured from the clients and the
// agents, beside the simulator's prediction for the same layout run in
// the same command and the paper's figures.

type demoOptions struct {
	partitions     int
	regions        int
	nodesPerRegion int
	profile        string
	json, keep     bool
	dataParent     string
	bin            string
	// profileDir, when set, receives the surviving agents' runtime
	// profiles over the failover and the burst after it (demo_profile.go).
	profileDir string

	// Not flags: the test's smaller run and its hooks.
	warmup     time.Duration // steady load before the kill
	burst      bool          // measure the prediction's service time (demo_burst.go)
	hold       time.Duration // the outage's length after every partition wrote again
	thinkMin   time.Duration
	thinkMax   time.Duration
	valueBytes int
	preload    int // bytes preloaded into every partition
	// failoverBound and returnBound bound the wait for every partition
	// to write again after the kill, and for the returning agents to be
	// back in every write quorum after their restart.
	failoverBound, returnBound time.Duration
	// onCluster sees the cluster once it is laid out; onPhase each phase
	// as it starts.
	onCluster func(*localCluster)
	onPhase   func(name string)
}

// demoRegionNames name the demo's regions, in priority order (the sim's
// layout names them alike).
func demoRegionNames() []string { return []string{"east", "north", "west", "south", "central"} }

const (
	demoZone     = "fm.demo."
	demoDNSTTL   = time.Second
	demoMaxNodes = maxLocalNodes
	// demoSetup bounds each setup step (agents up, init, routes, preload)
	// and the read-back.
	demoSetup = 3 * time.Minute
	// demoKeepLifetime bounds a --keep cluster: the watchdog kills it
	// then.
	demoKeepLifetime = 8 * time.Hour
)

func defaultDemoOptions() demoOptions {
	return demoOptions{partitions: 1000, regions: 3, nodesPerRegion: 3, profile: "fast",
		warmup: 10 * time.Second, burst: true, hold: 5 * time.Second, thinkMin: 2 * time.Second, thinkMax: 4 * time.Second,
		valueBytes: 100, preload: sim.DefaultPreloadBytes, failoverBound: 90 * time.Second, returnBound: 2 * time.Minute}
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "fmnode demo:", err)
		return 1
	}
	o := defaultDemoOptions()
	o.bin = exe
	return runDemoWith(ctx, args, stdout, stderr, o)
}

// runDemoWith is runDemo from o's defaults (a test's agents run a built
// binary, not the test).
func runDemoWith(ctx context.Context, args []string, stdout, stderr io.Writer, o demoOptions) int {
	fs := flag.NewFlagSet("fmnode demo", flag.ContinueOnError)
	fs.IntVar(&o.partitions, "partitions", o.partitions, "partitions of the cluster")
	fs.IntVar(&o.regions, "regions", o.regions, "regions (3..5): east, north, west, south, central, in priority order")
	fs.IntVar(&o.nodesPerRegion, "nodes-per-region", o.nodesPerRegion, "agents per region")
	fs.StringVar(&o.profile, "profile", o.profile, "failover timing profile: fast or paper")
	fs.BoolVar(&o.json, "json", false, "print one JSON object (progress stays on stderr)")
	fs.BoolVar(&o.keep, "keep", false, "leave the cluster running after the drill (until Ctrl-C) and print how to reach it")
	fs.StringVar(&o.dataParent, "data", "", "parent of the temporary directory (default: the system temp dir)")
	fs.StringVar(&o.profileDir, "profile-dir", "", "save the surviving agents' CPU, mutex, block profiles and goroutine dumps of the 1-7 s after the kill (and this process's CPU profile) in this directory")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: fmnode demo [flags]")
		fmt.Fprintln(fs.Output())
		fmt.Fprintln(fs.Output(), "Starts a real cluster of `fmnode agent` processes on 127.0.0.1 (mutual TLS, certificates")
		fmt.Fprintln(fs.Output(), "made in a temporary directory), SIGKILLs every agent of the region that is write region of")
		fmt.Fprintln(fs.Output(), "most partitions while clients write, restarts them, reads every acknowledged write back and")
		fmt.Fprintln(fs.Output(), "prints the figures next to the simulator's prediction and the paper's. Exit 1 if an")
		fmt.Fprintln(fs.Output(), "acknowledged write was lost or the drill failed. Every child is killed at the end.")
		fmt.Fprintln(fs.Output())
		fs.PrintDefaults()
	}
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(stderr, "fmnode demo:", err)
		return 2
	}
	res, err := runDemoDrill(ctx, o, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "fmnode demo:", err)
		return 1
	}
	if res.LostAckedWrites > 0 || res.UnreadableWrites > 0 || res.NotFailedOver > 0 || res.ReturnError != "" {
		return 1
	}
	return 0
}

func (o demoOptions) validate() error {
	agents := o.regions * o.nodesPerRegion
	switch {
	case o.partitions < 1 || o.partitions > clusterspec.MaxPartitions:
		return fmt.Errorf("--partitions %d: must be in 1..%d", o.partitions, clusterspec.MaxPartitions)
	case o.regions < 3 || o.regions > len(demoRegionNames()):
		// Two regions lose the register's majority with either: a
		// witness node would break the tie, which the demo does not run.
		return fmt.Errorf("--regions %d: must be in 3..%d (two regions need a witness to survive losing one)", o.regions, len(demoRegionNames()))
	case o.nodesPerRegion < 1 || o.nodesPerRegion > sim.MaxLayoutNodesPerRegion:
		return fmt.Errorf("--nodes-per-region %d: must be in 1..%d", o.nodesPerRegion, sim.MaxLayoutNodesPerRegion)
	case agents > demoMaxNodes:
		return fmt.Errorf("--regions %d x --nodes-per-region %d = %d agents: at most %d", o.regions, o.nodesPerRegion, agents, demoMaxNodes)
	case o.profile != "fast" && o.profile != "paper":
		return fmt.Errorf("--profile %q: must be fast or paper", o.profile)
	case o.bin == "":
		return errors.New("no fmnode executable")
	case o.profileDir != "" && !isDir(o.profileDir):
		return fmt.Errorf("--profile-dir %s: not a directory", o.profileDir)
	case o.thinkMin <= 0 || o.thinkMax < o.thinkMin:
		return fmt.Errorf("think time %v..%v: must be positive and ordered", o.thinkMin, o.thinkMax)
	case o.warmup <= 0 || o.hold < 0 || o.failoverBound <= 0 || o.returnBound <= 0:
		return errors.New("warm-up, failover and return bounds must be positive, the hold not negative")
	}
	return nil
}

// minDurability is the spec's: two regions hold every strong write (what
// `fmnode init` defaults to), so that losing any one region loses no
// acknowledged write.
func (o demoOptions) minDurability() int { return 2 }

// simConfig is the simulator's drill of the same layout, its round trip
// rtt.
//
// The simulated outage starts half a heartbeat interval after a heartbeat:
// the simulator's nodes beat on multiples of the interval and its warm-up
// is a whole number of them, so an outage at the end of the warm-up
// falls on a beat, and detection (lease + drift after the last renewal)
// comes at its latest. A real kill lands anywhere between two beats;
// half an interval is its mean. The outage kills processes (clients are
// refused at once), as the demo's SIGKILL on loopback does.
func (o demoOptions) simConfig(rtt, requestService time.Duration) sim.Config {
	warm := 30 * time.Second
	if prof, err := failover.Profile(o.profile); err == nil {
		warm += prof.HeartbeatInterval / 2
	}
	slots := 0
	if requestService > 0 {
		slots = 1
	}
	return sim.Config{Scenario: "region-outage", Seed: 1, Faults: sim.FaultsNone, Partitions: o.partitions, FailoverProfile: o.profile,
		Outage: time.Minute, Duration: warm, DNSTTL: demoDNSTTL,
		Layout: &sim.FailoverLayout{Regions: o.regions, NodesPerRegion: o.nodesPerRegion, FirstRegionWrites: true,
			MinDurability: o.minDurability(), RTT: rtt, ProcessKill: true, ServiceSlots: slots, RequestService: requestService,
			HeldPollService: heldPollService(requestService)}}
}

// heldPollService is what the prediction charges a held poll's answer:
// half the service time, the answer's half of one exchange (the
// reception was paid while the poll was held; sim's failover_service.go
// says why half).
func heldPollService(requestService time.Duration) time.Duration { return requestService / 2 }

// Bounds of the prediction's round trip.
const (
	demoMinRTT = 500 * time.Microsecond
	demoMaxRTT = 200 * time.Millisecond
)

// demoRTT is the round trip the prediction models: half the steady strong
// write's median latency as the clients measured it (a simulated strong
// write costs two round trips, client to write region and write region
// to the quorum, plus fsyncs), so that the model's network and disks are
// as slow as this machine's loopback under its load; bounded. The
// write's service time (requestService), which the prediction charges
// apart, is taken out first.
func demoRTT(steadyP50 float64, requestService time.Duration) time.Duration {
	d := (time.Duration(steadyP50*float64(time.Second)) - requestService) / 2
	return min(demoMaxRTT, max(demoMinRTT, d))
}

// predict runs the simulator's drill of the same layout in process.
func (d *demoRun) predict() error {
	d.prog.phase("prediction", "the simulator's drill of the same layout, in process")
	t0 := time.Now()
	rtt := demoRTT(d.res.SteadyWriteLatency.P50, d.requestService)
	pred, err := sim.Run(d.o.simConfig(rtt, d.requestService))
	if err != nil {
		return fmt.Errorf("prediction: %w", err)
	}
	if pred.FailoverReport == nil {
		return errors.New("prediction: the simulator reported no failover figures")
	}
	d.res.Prediction, d.res.Paper, d.res.PredictionRTTMs = &pred, pred.Paper, msOf(rtt)
	d.res.PredictionRequestServiceMs = msOf(d.requestService)
	d.res.PredictionHeldPollServiceMs = msOf(heldPollService(d.requestService))
	d.res.Phases["prediction"] = time.Since(t0).Seconds()
	return nil
}

// demoRun is one drill's state: the cluster, its processes, the clients.
type demoRun struct {
	o       demoOptions
	prog    *demoProgress
	lc      *localCluster
	regions []string
	mu      sync.Mutex
	procs   map[*localNode]*localProc
	res     *demoResult
	// trace records the writers' HTTP attempts from the kill on.
	trace *demoTracer
	// requestService is the service time per write measured on a burst
	// before the kill (demo_burst.go), the prediction's.
	requestService time.Duration
}

// runDemoDrill runs the whole drill, prints its report on stdout and
// kills every child before it returns (with --keep, once ctx ends: the
// report comes first).
func runDemoDrill(ctx context.Context, o demoOptions, stdout, stderr io.Writer) (res *demoResult, err error) {
	d := &demoRun{o: o, prog: newDemoProgress(stderr, o.onPhase, demoPhases(o.burst)), procs: map[*localNode]*localProc{},
		regions: demoRegionNames()[:o.regions]}
	agents := o.regions * o.nodesPerRegion
	d.res = &demoResult{Demo: "region-outage", Agents: agents, Regions: d.regions, NodesPerRegion: o.nodesPerRegion,
		Partitions: o.partitions, Profile: o.profile, Consistency: clusterspec.ConsistencyStrong, MinDurability: o.minDurability(),
		NumCPU: runtime.NumCPU(), LoadAvg1Start: loadAvg1(), Phases: map[string]float64{}}
	res = d.res
	started := time.Now()

	defer func() {
		if d.lc == nil {
			return
		}
		if err != nil {
			d.printLogs(stderr)
		}
		if o.keep && err == nil {
			d.keep(ctx, stderr, d.lc.cfg.Dir)
		}
		if cerr := d.lc.close(); cerr != nil && err == nil {
			err = cerr
		}
		os.RemoveAll(d.lc.cfg.Dir)
	}()
	if err := d.drill(ctx); err != nil {
		return res, err
	}
	// The prediction once the writers are done (with --keep the agents
	// idle meanwhile), calibrated by the writes' latency.
	if err := d.predict(); err != nil {
		return res, err
	}
	res.Measures = demoMeasures()
	res.targets()
	res.WallS = time.Since(started).Seconds()
	res.LoadAvg1End = loadAvg1()
	if o.json {
		if err := writeJSON(stdout, res); err != nil {
			return res, err
		}
	} else {
		printDemo(stdout, res)
	}
	return res, nil
}

// drill is every phase after the prediction.
func (d *demoRun) drill(ctx context.Context) error {
	o, res := d.o, d.res
	var lc *localCluster
	step := func(name string, f func(ctx context.Context) error) error {
		sctx, cancel := context.WithTimeout(ctx, demoSetup)
		defer cancel()
		t0 := time.Now()
		err := f(sctx)
		res.Phases[name] = time.Since(t0).Seconds()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}

	d.prog.phase("agents", fmt.Sprintf("starting %d agents (%d regions x %d nodes) on 127.0.0.1 with mutual TLS", res.Agents, o.regions, o.nodesPerRegion))
	if err := step("agents", d.startCluster); err != nil {
		return err
	}
	lc = d.lc

	d.prog.phase("init", fmt.Sprintf("cluster spec: %d partitions, %s profile, strong, minimum durability %d", o.partitions, o.profile, o.minDurability()))
	spec := clusterspec.Spec{Format: clusterspec.Format, Regions: d.regions, Partitions: o.partitions,
		Consistency: clusterspec.ConsistencyStrong, MinDurability: o.minDurability(), Profile: clusterspec.Profile{Name: o.profile}}
	if err := step("init", func(ctx context.Context) error {
		_, err := lc.init(ctx, lc.nodes[len(lc.nodes)-1], agent.InitRequest{Spec: spec, ExpectNodes: res.Agents, WaitSeconds: 120})
		return err
	}); err != nil {
		return err
	}

	d.prog.phase("ready", "waiting for every partition's route in DNS and every agent's /readyz")
	resolver, err := routing.NewDNSResolver(routing.DNSResolverConfig{Servers: lc.dnsServers(), Timeout: time.Second})
	if err != nil {
		return err
	}
	if err := step("ready", func(ctx context.Context) error {
		if err := waitDNSRoutes(ctx, resolver, demoZone, o.partitions); err != nil {
			return err
		}
		return d.waitAll(ctx, lc.nodes, agent.PathReadyz)
	}); err != nil {
		return err
	}
	d.prog.note("status page: %s (client certificate %s)", d.statusURL(), lc.cl.CertFile)

	// The Go client's own transport with the demo's client certificate:
	// HTTP/2, one connection per agent for all the writers (kv.NewTransport
	// says why a failover needs that).
	tr := kv.NewTransport(lc.tlsCfg)
	defer tr.CloseIdleConnections()
	d.trace = newDemoTracer(tr)
	cl, err := kv.New(kv.Config{HTTP: &http.Client{Transport: d.trace},
		Routing: routing.Config{Zone: demoZone, Resolver: resolver, PartitionCount: uint32(o.partitions)}})
	if err != nil {
		return err
	}
	dc, err := newDemoClients(cl, o.partitions, o.valueBytes, o.thinkMin, o.thinkMax)
	if err != nil {
		return err
	}

	d.prog.phase("preload", fmt.Sprintf("%d bytes into every partition (what a full copy would ship)", o.preload))
	var preload []demoPreload
	if err := step("preload", func(ctx context.Context) error {
		preload, err = demoPreloadAll(ctx, cl, o.partitions, o.preload)
		return err
	}); err != nil {
		return err
	}

	d.prog.phase("steady", fmt.Sprintf("%d writers (one per partition, strong Puts through the Go client, %v..%v apart)", len(dc.writers), o.thinkMin, o.thinkMax))
	wctx, stopWriters := context.WithCancel(ctx)
	defer stopWriters()
	dc.start(wctx)
	defer dc.halt()
	// The CPU the agents and this process use under the steady load,
	// measured over its second half (the first spreads the writers out).
	var agentsCPU0, selfCPU0 time.Duration
	var cpuFrom time.Time
	if err := d.prog.countdown(ctx, "steady load", o.warmup, func() string {
		n, _ := dc.acks()
		if cpuFrom.IsZero() {
			cpuFrom, agentsCPU0, selfCPU0 = time.Now(), childrenCPU(d.procMap()), processCPU()
		}
		return fmt.Sprintf("%d writes acknowledged", n)
	}, nil); err != nil {
		return err
	}
	if secs := time.Since(cpuFrom).Seconds(); secs > 0 {
		res.AgentsCPUCores = (childrenCPU(d.procMap()) - agentsCPU0).Seconds() / secs
		res.DemoCPUCores = (processCPU() - selfCPU0).Seconds() / secs
	}
	res.SteadyWriteLatency = dc.steadyLatency()
	if o.burst {
		// The prediction's service time, measured on a burst like the
		// one after the commit (demo_burst.go), once the steady latency
		// is taken; then the burst's tail settles before the kill.
		d.prog.phase("burst", fmt.Sprintf("one write to each of %d partitions at once: how fast this machine drains a burst, for the prediction", o.partitions))
		n0, _ := dc.acks()
		b0 := burstSample{at: time.Now(), acks: n0}
		n, err := calibrationBurst(ctx, cl, o.partitions, o.valueBytes)
		if err != nil {
			return fmt.Errorf("burst: %w", err)
		}
		n1, _ := dc.acks()
		b1 := burstSample{at: time.Now(), acks: n1 + n}
		d.requestService = requestService(b0, b1)
		res.BurstS, res.BurstAcked = b1.at.Sub(b0.at).Seconds(), n
		if sleepCtx(ctx, time.Second); ctx.Err() != nil {
			return ctx.Err()
		}
	}
	res.LoadAvg1Kill = loadAvg1()

	// The region to kill: write region of the most partitions, as the
	// agents report the registers.
	sts, errs := demoStatuses(ctx, lc, lc.nodes)
	if len(errs) > 0 {
		return fmt.Errorf("status before the kill: %v", errs)
	}
	regs := demoRegisters(sts)
	if len(regs) != o.partitions {
		return fmt.Errorf("status before the kill: %d of %d partitions reported", len(regs), o.partitions)
	}
	killRegion, _ := busiestRegion(regs, d.regions)
	killed, survivors := nodesIn(lc.nodes, killRegion)
	epoch0 := map[uint32]uint64{}
	for id, r := range regs {
		if r.writeRegion == killRegion {
			epoch0[id] = r.epoch
		}
	}
	res.KilledRegion, res.AffectedPartitions = killRegion, len(epoch0)
	for _, n := range killed {
		res.KilledAgents = append(res.KilledAgents, n.name)
	}
	dc.markAffected(epoch0)

	d.prog.phase("kill", fmt.Sprintf("SIGKILL every agent of %s (%v): write region of %d of %d partitions", killRegion, res.KilledAgents, len(epoch0), o.partitions))
	killAt := time.Now()
	d.trace.outageAt.Store(killAt.UnixNano())
	for _, n := range killed {
		d.proc(n).killGroup()
	}
	dc.startOutage(killAt)
	profiled := func() {}
	if o.profileDir != "" {
		profiled = d.profileBurst(ctx, killAt, survivors, d.prog.note)
	}
	for _, n := range killed {
		if err := d.proc(n).wait(10 * time.Second); err != nil {
			return err
		}
	}

	d.prog.phase("failover", "the surviving agents detect the loss, fail the partitions over; the clients follow")
	bound := o.failoverBound
	err = d.prog.countdown(ctx, "failover", bound, func() string {
		done, all := dc.recovered()
		return fmt.Sprintf("%d/%d partitions writing again", done, all)
	}, func() bool {
		done, all := dc.recovered()
		return done == all
	})
	recoveredBy := time.Since(killAt)
	if err != nil && !errors.Is(err, errCountdownOver) {
		return err
	}
	res.Phases["failover"] = recoveredBy.Seconds()
	if done, all := dc.recovered(); done < all {
		d.prog.note("%d of %d partitions took no write in a new epoch within %v", all-done, all, bound)
	}
	// What the surviving agents saw (their epoch marks).
	sts, errs = demoStatuses(ctx, lc, survivors)
	if len(errs) > 0 {
		return fmt.Errorf("status after the failover: %v", errs)
	}
	marks := demoMarks(sts, epoch0)
	d.figures(dc, killAt, epoch0, marks)
	profiled()
	if o.profileDir != "" {
		if err := d.dumpTrace(filepath.Join(o.profileDir, "attempts.jsonl")); err != nil {
			d.prog.note("trace of the writers' attempts: %v", err)
		}
	}

	if o.hold > 0 {
		d.prog.phase("outage", fmt.Sprintf("%s stays down %v more while the clients write (what it will lack)", killRegion, o.hold))
		if err := d.prog.countdown(ctx, "outage", o.hold, nil, nil); err != nil {
			return err
		}
	}

	d.prog.phase("return", fmt.Sprintf("restarting %v; waiting until they caught up and are back in every write quorum", res.KilledAgents))
	restartAt := time.Now()
	res.OutageS = restartAt.Sub(killAt).Seconds()
	for _, n := range killed {
		if _, err := d.start(n); err != nil {
			return err
		}
	}
	prev := map[uint32]uint64{}
	var caughtAt, lastLook time.Time
	var why string
	err = d.prog.countdown(ctx, "return", o.returnBound, func() string {
		if caughtAt.IsZero() {
			return "catching up"
		}
		return fmt.Sprintf("caught up after %.1f s; growing the write quorums", caughtAt.Sub(restartAt).Seconds())
	}, func() bool {
		// A look reads every agent's status, which holds each node's
		// loop while it is built: every 2 s at most.
		if time.Since(lastLook) < 2*time.Second {
			return false
		}
		lastLook = time.Now()
		sts, _ := demoStatuses(ctx, lc, lc.nodes)
		caught, inQuorum, w := demoCatchUp(sts, killed, o.regions, prev)
		why = w
		if caught && caughtAt.IsZero() {
			caughtAt = time.Now()
			res.ResyncS = caughtAt.Sub(restartAt).Seconds()
			res.ResyncBytes, res.ResyncSnapshots = demoDataBytes(sts, killed)
			_, acked := dc.acks()
			res.FullCopyBytes = acked + demoPreloadBytes(preload)
			res.ChangedBytes = dc.changedBytes()
		}
		if inQuorum {
			res.BackInWriteQuorumS = time.Since(restartAt).Seconds()
		}
		return inQuorum
	})
	if err != nil {
		if !errors.Is(err, errCountdownOver) {
			return err
		}
		// Reported, and the drill goes on to the read-back: what was
		// acknowledged must be there all the same.
		res.ReturnError = fmt.Sprintf("the returning agents were not back in every write quorum within %v: %s", o.returnBound, why)
		d.prog.note("%s", res.ReturnError)
	}

	d.prog.phase("read-back", "stopping the writers; reading every acknowledged write back, strongly")
	stopWriters()
	dc.halt()
	dc.mu.Lock()
	res.WriteErrors, res.UnknownOutcomes, res.FirstError = dc.errs, dc.unknown, dc.firstErr
	dc.mu.Unlock()
	err = step("read-back", func(ctx context.Context) error {
		lost, _, unreadable := dc.verify(ctx, 64)
		plost, _, punreadable := demoVerifyPreload(ctx, dc, preload)
		for p, n := range plost {
			lost[p] += n
		}
		n, _ := dc.acks()
		res.AckedWrites = n + uint64(len(preload))
		for _, n := range lost {
			res.LostAckedWrites += uint64(n)
		}
		res.UnreadableWrites = unreadable + punreadable
		d.rpo(lost, epoch0)
		return nil
	})
	if err != nil {
		return err
	}
	// Interrupted during the read-back: no report.
	return ctx.Err()
}

// demoStartAttempts bounds the layouts tried when another process took
// one of the ports picked (they are free when picked, not reserved).
const demoStartAttempts = 3

// startCluster lays the cluster out in a new temporary directory and
// starts every agent until each answers /healthz; an agent that could not
// bind a port another process took meanwhile makes it start over on new
// ports.
func (d *demoRun) startCluster(ctx context.Context) error {
	o := d.o
	lifetime := 30 * time.Minute
	if o.keep {
		lifetime = demoKeepLifetime
	}
	var dnsNodes []int
	for i := 1; i <= o.regions; i++ {
		dnsNodes = append(dnsNodes, i) // the first node of every region
	}
	for attempt := 1; ; attempt++ {
		dir, err := os.MkdirTemp(o.dataParent, "fmnode-demo-")
		if err != nil {
			return err
		}
		lc, err := newLocalCluster(localClusterConfig{Bin: o.bin, Dir: dir, Nodes: d.res.Agents, Cluster: "demo", Regions: d.regions,
			Zone: demoZone, DNSNodes: dnsNodes, DNSTTL: demoDNSTTL, LogLevel: "warn", Lifetime: lifetime, ClientName: "demo",
			Pprof: true})
		if err != nil {
			os.RemoveAll(dir)
			return err
		}
		d.mu.Lock()
		d.lc, d.procs = lc, map[*localNode]*localProc{}
		d.mu.Unlock()
		if o.onCluster != nil {
			o.onCluster(lc)
		}
		err = d.startAgents(ctx)
		if err == nil || attempt == demoStartAttempts || !d.portTaken() {
			return err
		}
		d.prog.note("a port was taken by another process meanwhile; starting over on new ports (%v)", err)
		if cerr := lc.close(); cerr != nil {
			return errors.Join(err, cerr)
		}
		os.RemoveAll(dir)
	}
}

func (d *demoRun) startAgents(ctx context.Context) error {
	for _, n := range d.lc.nodes {
		if _, err := d.start(n); err != nil {
			return err
		}
	}
	return d.waitAll(ctx, d.lc.nodes, agent.PathHealthz)
}

// portTaken reports whether an agent's log says it could not bind.
func (d *demoRun) portTaken() bool {
	for _, n := range d.lc.nodes {
		if p := d.proc(n); p != nil && strings.Contains(p.tail(4<<10), "address already in use") {
			return true
		}
	}
	return false
}

// figures fills the failover figures: per affected partition, detection
// and completion from the agents' marks, write recovery from the
// clients; per client, reroute from the commit.
func (d *demoRun) figures(dc *demoClients, killAt time.Time, epoch0 map[uint32]uint64, marks map[uint32]demoMark) {
	res := d.res
	var det, comp, rec, reroute, promo []float64
	events := map[uint32]demoRerouteEvents{}
	within := 0
	for _, w := range dc.writers {
		w.mu.Lock()
		affected, firstNew := w.affected, w.firstNew
		w.mu.Unlock()
		if !affected {
			continue
		}
		m := marks[w.part]
		if !m.proposed.IsZero() {
			det = append(det, m.proposed.Sub(killAt).Seconds())
		}
		if !m.promoted.IsZero() && !m.committed.IsZero() {
			promo = append(promo, max(0, m.promoted.Sub(m.committed).Seconds()))
		}
		if m.committed.IsZero() {
			res.NotFailedOver++
		} else {
			c := m.committed.Sub(killAt).Seconds()
			comp = append(comp, c)
			if c <= 60 {
				within++
			}
		}
		if firstNew.IsZero() {
			res.ClientRerouteMissing++
			continue
		}
		rec = append(rec, firstNew.Sub(killAt).Seconds())
		if !m.committed.IsZero() {
			reroute = append(reroute, max(0, firstNew.Sub(m.committed).Seconds()))
			events[w.part] = demoRerouteEvents{commit: m.committed, promoted: m.promoted, acked: firstNew}
		}
	}
	res.Detection, res.FailoverCompletion, res.WriteRecovery, res.ClientReroute = demoDist(det), demoDist(comp), demoDist(rec), demoDist(reroute)
	res.Promotion = demoDist(promo)
	if d.trace != nil {
		split := d.trace.split(events)
		res.RerouteSplit = &split
	}
	if res.AffectedPartitions > 0 {
		res.FailedOverWithin60s = float64(within) / float64(res.AffectedPartitions)
	}
}

// rpo is the acknowledged writes lost per affected partition (and any
// other that lost some), as the simulator counts rpo_ops.
func (d *demoRun) rpo(lost map[uint32]int, epoch0 map[uint32]uint64) {
	var xs []float64
	for p := uint32(1); p <= uint32(d.o.partitions); p++ {
		if _, affected := epoch0[p]; affected || lost[p] > 0 {
			xs = append(xs, float64(lost[p]))
		}
	}
	dd := demoDist(xs)
	d.res.RPO = sim.RPODist{Mean: dd.Mean, P99: dd.P99, Max: dd.Max}
}

func (d *demoRun) start(n *localNode) (*localProc, error) {
	p, err := d.lc.start(n)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.procs[n] = p
	d.mu.Unlock()
	return p, nil
}

// procMap is a copy of the current process of every node.
func (d *demoRun) procMap() map[*localNode]*localProc {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[*localNode]*localProc, len(d.procs))
	for n, p := range d.procs {
		out[n] = p
	}
	return out
}

func (d *demoRun) proc(n *localNode) *localProc {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.procs[n]
}

// waitAll waits until every node answers path with 2xx.
func (d *demoRun) waitAll(ctx context.Context, nodes []*localNode, path string) error {
	errc := make(chan error, len(nodes))
	for _, n := range nodes {
		go func() { errc <- d.lc.waitHTTP(ctx, n, path, d.proc(n).exited()) }()
	}
	var errs []error
	for range nodes {
		if err := <-errc; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// statusURL is the status page of an agent outside the preferred region
// (the one the drill will most likely kill).
func (d *demoRun) statusURL() string {
	n := d.lc.nodes[len(d.lc.nodes)-1]
	for _, m := range d.lc.nodes {
		if m.region != d.regions[0] {
			n = m
			break
		}
	}
	return "https://" + n.api + "/ui/"
}

// printLogs shows the end of every agent's log after a failure.
func (d *demoRun) printLogs(w io.Writer) {
	for _, n := range d.lc.nodes {
		if p := d.proc(n); p != nil {
			fmt.Fprintf(w, "--- %s (%s) log, last lines:\n%s\n", n.name, n.region, p.tail(2<<10))
		}
	}
}

// keep leaves the cluster running until ctx ends, after printing how to
// reach it.
func (d *demoRun) keep(ctx context.Context, w io.Writer, dir string) {
	lc := d.lc
	var addrs string
	for i, n := range lc.nodes {
		if i > 0 {
			addrs += ","
		}
		addrs += n.api
	}
	fmt.Fprintf(w, "\nThe cluster keeps running (data in %s) until Ctrl-C (at most %v). Point the CLI at it:\n", dir, demoKeepLifetime)
	fmt.Fprintf(w, "  fmnode status --addr %s --ca-file %s --cert-file %s --key-file %s\n", addrs, lc.cl.CAFile, lc.cl.CertFile, lc.cl.KeyFile)
	fmt.Fprintf(w, "  (the same flags for explain, history, switchover, drain, pause, resume)\n")
	fmt.Fprintf(w, "Status page: %s\n", d.statusURL())
	fmt.Fprintf(w, "  it asks for the client certificate: curl --cacert %s --cert %s --key %s %s\n", lc.cl.CAFile, lc.cl.CertFile, lc.cl.KeyFile, d.statusURL())
	fmt.Fprintf(w, "DNS: dig @127.0.0.1 -p %s TXT p-1.%s\n", portOf(lc.dnsServers()[0]), demoZone)
	<-ctx.Done()
	fmt.Fprintln(w, "stopping the cluster")
}

func portOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[i+1:]
		}
	}
	return addr
}

// demoPreload is one preloaded key.
type demoPreload struct {
	key  string
	part uint32
	size int
}

// demoPreloadAll writes one value of size bytes into every partition
// (16 at a time), each retried until it is acknowledged.
func demoPreloadAll(ctx context.Context, cl *kv.Client, partitions, size int) ([]demoPreload, error) {
	hp, err := routing.NewOneBasedHashPartitioner(uint32(partitions))
	if err != nil {
		return nil, err
	}
	out := make([]demoPreload, partitions)
	for i, k := range keyPerPartition(hp, "preload-", partitions) {
		out[i] = demoPreload{key: k, part: uint32(i + 1), size: size}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	errs := make([]error, partitions)
	for i := range out {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			for {
				err := cl.Put(ctx, out[i].key, agentBenchValue(out[i].key, size))
				if err == nil {
					return
				}
				if ctx.Err() != nil {
					errs[i] = fmt.Errorf("partition %d never took its preload: %w", out[i].part, err)
					return
				}
				sleepCtx(ctx, 50*time.Millisecond)
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// keyPerPartition names one key of every partition, prefix and a number:
// key i falls in partition i+1.
func keyPerPartition(hp routing.Partitioner, prefix string, partitions int) []string {
	out := make([]string, partitions)
	found := 0
	for i := 0; found < partitions; i++ {
		k := prefix + strconv.Itoa(i)
		if p := hp.Partition(k); out[p-1] == "" {
			out[p-1] = k
			found++
		}
	}
	return out
}

func demoPreloadBytes(ps []demoPreload) uint64 {
	var sum uint64
	for _, p := range ps {
		sum += uint64(len(p.key) + p.size)
	}
	return sum
}

// demoVerifyPreload reads the preloaded keys back strongly.
func demoVerifyPreload(ctx context.Context, dc *demoClients, ps []demoPreload) (lost map[uint32]int, verified, unreadable uint64) {
	lost = map[uint32]int{}
	for _, p := range ps {
		got, found, err := dc.readBack(ctx, p.key)
		switch {
		case err != nil:
			unreadable++
		case !found || string(got) != string(agentBenchValue(p.key, p.size)):
			lost[p.part]++
		default:
			verified++
		}
	}
	return lost, verified, unreadable
}

// demoLease is the profile's lease plus one second: the write-recovery
// target.
func demoLease(profile string) time.Duration {
	c, err := failover.Profile(profile)
	if err != nil {
		return 0
	}
	return c.LeaseDuration + time.Second
}
