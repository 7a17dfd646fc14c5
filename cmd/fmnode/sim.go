package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fmnode/fmnode/sim"
)

// simSummary closes the output of `fmnode sim`: what the sweep ran and how
// fast (seeds per minute, simulated seconds per wall second over all cores).
type simSummary struct {
	Summary            bool     `json:"summary"`
	Scenario           string   `json:"scenario"`
	Faults             string   `json:"faults"`
	Canary             bool     `json:"canary,omitempty"`
	Runs               int      `json:"runs"`
	Failed             int      `json:"failed"`
	Errors             int      `json:"errors"`
	FailedSeeds        []uint64 `json:"failed_seeds"`
	WallSeconds        float64  `json:"wall_seconds"`
	SimSeconds         float64  `json:"sim_seconds"`
	Events             uint64   `json:"events"`
	SeedsPerMinute     float64  `json:"seeds_per_minute"`
	SimSecondsPerWallS float64  `json:"sim_seconds_per_wall_second"`
	// CPU time of the whole process (getrusage, user + system, GC workers
	// included): on a shared machine the wall figure moves with the load,
	// this one much less.
	CPUSeconds        float64           `json:"cpu_seconds"`
	SimSecondsPerCPUS float64           `json:"sim_seconds_per_cpu_second"`
	MaxRSSMiB         float64           `json:"max_rss_mib"`
	LoadAvg1Start     float64           `json:"load_avg_1_start"`
	LoadAvg1End       float64           `json:"load_avg_1_end"`
	FaultsInjected    map[string]uint64 `json:"faults_injected"`
	Workers           int               `json:"workers"`
	// GuardsFired sums the runs' guards_fired: which guards and reject
	// paths of the cores the sweep reached (package guard; sim/ci.sh
	// fails when a required one never fired).
	GuardsFired map[string]uint64 `json:"guards_fired"`
	// Failovers: automatic write-region moves (failover scenarios).
	Failovers uint64 `json:"failovers"`
	// The cluster scenario's operator switchovers, those aborted, the
	// register conflict rate (NAKed rounds over all rounds of the nodes'
	// register proposers) and the partitions left stuck (must be 0).
	Switchovers          int     `json:"switchovers"`
	AbortedSwitchovers   int     `json:"aborted_switchovers"`
	RegisterRounds       uint64  `json:"register_rounds"`
	RegisterConflictRate float64 `json:"register_conflict_rate"`
	StuckPartitions      int     `json:"stuck_partitions"`
	registerNAKs         uint64
	// LongestSeed is the run with the most wall time, and its wall time
	// and events.
	LongestSeed       uint64  `json:"longest_seed"`
	LongestSeedWallS  float64 `json:"longest_seed_wall_s"`
	LongestSeedEvents uint64  `json:"longest_seed_events"`
}

// add counts one run into the summary.
func (s *simSummary) add(res sim.Result) {
	s.SimSeconds += res.SimSeconds
	s.Events += res.Events
	for k, v := range res.FaultsInjected {
		s.FaultsInjected[k] += v
	}
	for k, v := range res.GuardsFired {
		s.GuardsFired[k] += v
	}
	if res.WallSeconds > s.LongestSeedWallS {
		s.LongestSeed, s.LongestSeedWallS, s.LongestSeedEvents = res.Seed, res.WallSeconds, res.Events
	}
	if res.FailoverReport != nil {
		s.Failovers += res.FailoverReport.Failovers
	}
	if res.ScenarioFigures != nil && res.ScenarioFigures.Cluster != nil {
		c := res.ScenarioFigures.Cluster
		s.Switchovers += c.Switchovers
		s.AbortedSwitchovers += c.AbortedSwitchovers
		s.StuckPartitions += c.StuckPartitions
		s.RegisterRounds += c.RegisterRounds
		s.registerNAKs += c.RegisterNAKs
		if s.RegisterRounds > 0 {
			s.RegisterConflictRate = float64(s.registerNAKs) / float64(s.RegisterRounds)
		}
	}
}

// runSim is `fmnode sim`: run one seed or a sweep of a scenario on the
// deterministic simulator and report every run. The exit code is 1 when any
// run found a violation (or, under --canary, when every run caught the
// broken acceptor, the expected outcome), 2 on bad usage.
// simGCPercent is the sweep's GOGC: flag if set, else 200 up to
// simGCLargePartitions partitions and the runtime's 100 above. A simulated
// world's heap is mostly long-lived (stores, replicas, the history) while
// each event leaves a little garbage, so at 100 the collector re-marks the
// same live heap each time it grows by its own size: at 200 the
// 4300-partition drill took about 6% less CPU for about a third more peak
// RSS (1.1 -> 1.45 GB; docs/BENCHMARKS.md, "Drill speed, session 3").
// Beyond 20,000 partitions a third more is gigabytes, so those keep 100.
func simGCPercent(flag, partitions int) int {
	switch {
	case flag != 0:
		return flag
	case partitions > simGCLargePartitions:
		return 100
	}
	return 200
}

// simGCLargePartitions is where simGCPercent's default drops back to 100.
const simGCLargePartitions = 20000

func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fmnode sim", flag.ContinueOnError)
	scenario := fs.String("scenario", "register", "scenario to run (see the list below)")
	seed := fs.Uint64("seed", 1, "seed of a single run")
	seeds := fs.String("seeds", "", "inclusive seed range A..B to sweep (overrides --seed)")
	faults := fs.String("faults", "light", "fault level: none, light, heavy or swarm (swarm draws a mix per seed); failover scenarios: background faults during their scripted fault (default there: none)")
	asJSON := fs.Bool("json", false, "print one JSON object per run and a summary object")
	canary := fs.Bool("canary", false, "swap in a deliberately broken acceptor: every run must report a violation")
	canaryControl := fs.Bool("canary-control", false, "the canary's workload and faults with the real acceptor (must pass)")
	out := fs.String("out", "", "directory for porcupine visualisations of failures (default: the temp dir)")
	duration := fs.Duration("duration", 0, "simulated length of the safety phase (0: the scenario's default)")
	liveness := fs.Duration("liveness", sim.DefaultLivenessBound, "simulated time the healed system has to converge")
	keys := fs.Int("keys", 0, "registers the workload uses (0: the scenario's default)")
	proposers := fs.Int("proposers", 0, "proposers (0: the scenario's default)")
	interval := fs.Duration("interval", 0, "contention: heartbeat interval of each proposer (0: 30s)")
	noFast := fs.Bool("no-fast-path", false, "run proposers without the one-round-trip path")
	noKnown := fs.Bool("no-known-writers", false, "contention: the adaptive variant's proposers learn the key's writers from ballots instead of being told them up front")
	workers := fs.Int("workers", runtime.NumCPU(), "parallel runs in a sweep (each run is single-threaded)")
	checkTimeout := fs.Duration("check-timeout", sim.DefaultCheckTimeout, "bound on the linearizability check of one run")
	verbose := fs.Bool("v", false, "log phase changes to stderr")
	partitions := fs.Int("partitions", 0, "failover scenarios: partitions (0: region-outage 4300, the paper's drill; cluster 36; others 60)")
	profile := fs.String("profile", "", "failover scenarios: timing profile paper or fast (default paper)")
	outage := fs.Duration("outage", 0, "failover scenarios: how long the fault lasts (0: region-outage 30m, cluster 90s of faults after 20s of warm-up, others 3m)")
	dnsTTL := fs.Duration("dns-ttl", 0, "failover scenarios: TTL of the simulated DNS records (0: 5s, the server's default)")
	dnsStale := fs.Duration("dns-stale", 0, "failover scenarios: how long past the TTL a client's resolver serves an answer (0: 10s)")
	preload := fs.Int("preload-bytes", 0, "failover scenarios: data bulk-loaded into each partition before the clients start, the base of the full-copy figure (0: 8 KiB; negative: none)")
	rerouteTrace := fs.Int("trace-reroute", 0, "failover scenarios: report the routing steps of this many slowest client reroutes (client_reroute_trace)")
	layRegions := fs.Int("regions", 3, "region-outage with a layout: data regions (2..3)")
	layNodes := fs.Int("nodes-per-region", 1, "region-outage: nodes per region (a layout, as fmnode demo predicts its cluster with)")
	layMinDur := fs.Int("min-durability", 1, "region-outage with a layout: every register's minimum durability")
	layRTT := fs.Duration("rtt", 0, "region-outage with a layout: round trip between any two nodes (0: the WAN's)")
	layFirst := fs.Bool("first-region-writes", false, "region-outage with a layout: every partition's first write region is the first region")
	layNoPollWait := fs.Bool("no-poll-wait", false, "region-outage with a layout: replicas answer the clients' polls of a pending failover at once instead of holding them until the route moves")
	layKill := fs.Bool("process-kill", false, "region-outage with a layout: the outage kills processes, machines stay up (clients are refused at once, no timeout)")
	laySlots := fs.Int("service-slots", 0, "region-outage with a layout: the nodes share one machine that serves this many client requests at once (with --request-service; 0: not modelled)")
	layService := fs.Duration("request-service", 0, "region-outage with a layout: how long each client request a node serves holds one of the --service-slots (0: not modelled)")
	layHeld := fs.Duration("held-poll-service", 0, "region-outage with a layout: what a held poll's answer holds a slot for instead, at most --request-service (it was received while held; 0: --request-service)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole sweep to this file")
	memProfile := fs.String("memprofile", "", "write a heap profile (after the sweep) to this file")
	summaryOut := fs.String("summary-out", "", "append the sweep's summary object (one JSON line) to this file")
	checkGuardsFile := fs.String("check-guards", "", "sum guards_fired over the summary objects in this file (JSON lines) and fail if a guard the CI sweep must reach never fired; runs nothing")
	gcPercent := fs.Int("gc-percent", 0, "the collector's GOGC for the sweep (0: 200, or 100 above 20,000 partitions; negative: off); a GOGC in the environment wins")
	fs.Usage = func() { simUsage(fs) }
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *checkGuardsFile != "" {
		return checkGuards(*checkGuardsFile, stdout, stderr)
	}
	if sim.Scripted(*scenario) && !flagSet(fs, "faults") {
		// A scripted scenario runs its own fault alone unless background
		// faults are asked for.
		*faults = "none"
	}
	level, err := sim.ParseFaultLevel(*faults)
	if err != nil {
		fmt.Fprintf(stderr, "fmnode sim: %v\n", err)
		return 2
	}
	if _, ok := sim.Lookup(*scenario); !ok {
		fmt.Fprintf(stderr, "fmnode sim: unknown scenario %q (have %s)\n", *scenario, strings.Join(sim.ScenarioNames(), ", "))
		return 2
	}
	if *canary && *scenario != "register" {
		fmt.Fprintf(stderr, "fmnode sim: --canary runs the register scenario only\n")
		return 2
	}
	lo, hi := *seed, *seed
	if *seeds != "" {
		if lo, hi, err = sim.ParseSeedRange(*seeds); err != nil {
			fmt.Fprintf(stderr, "fmnode sim: %v\n", err)
			return 2
		}
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if *scenario == "region-outage" {
		// The paper's drill unless told otherwise (the scenario's own
		// defaults are a small drill for tests and sweeps).
		if *partitions == 0 {
			*partitions = sim.DrillPartitions
		}
		if *outage == 0 {
			*outage = sim.DrillOutage
		}
		if *duration == 0 {
			*duration = sim.DrillWarmup
		}
	}
	base := sim.Config{
		Scenario: *scenario, Faults: level, Canary: *canary, CanaryControl: *canaryControl,
		Duration: *duration, LivenessBound: *liveness, Keys: *keys, Proposers: *proposers,
		Interval: *interval, DisableFastPath: *noFast, UnknownWriters: *noKnown, OutDir: *out, CheckTimeout: *checkTimeout, Logger: logger,
		DNSTTL: *dnsTTL, DNSStale: *dnsStale, RerouteTrace: *rerouteTrace,
		Partitions: *partitions, FailoverProfile: *profile, Outage: *outage, PreloadBytes: *preload,
	}
	for _, name := range []string{"regions", "nodes-per-region", "min-durability", "rtt", "first-region-writes", "process-kill", "service-slots", "request-service", "held-poll-service", "no-poll-wait"} {
		if flagSet(fs, name) {
			base.Layout = &sim.FailoverLayout{Regions: *layRegions, NodesPerRegion: *layNodes, MinDurability: *layMinDur,
				RTT: *layRTT, FirstRegionWrites: *layFirst, ProcessKill: *layKill, ServiceSlots: *laySlots, RequestService: *layService,
				HeldPollService: *layHeld, NoPollWait: *layNoPollWait}
		}
	}
	sum := simSummary{Summary: true, Scenario: *scenario, Faults: level.String(), Canary: *canary,
		Workers: *workers, FaultsInjected: make(map[string]uint64), GuardsFired: make(map[string]uint64), FailedSeeds: []uint64{}}
	if !*asJSON {
		fmt.Fprintf(stdout, "%-8s %-11s %-7s %9s %8s %10s %7s %-8s %5s  %s\n",
			"seed", "scenario", "faults", "sim_s", "wall_s", "events", "faults", "lin", "viol", "trace_hash")
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "fmnode sim: %v\n", err)
			return 2
		}
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintf(stderr, "fmnode sim: %v\n", err)
			}
		}()
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(simGCPercent(*gcPercent, *partitions))
	}
	sum.LoadAvg1Start = loadAvg1()
	cpu0 := processCPU()
	start := time.Now() // wall time of the whole sweep, outside every run
	// A long run shows its progress on a terminal's stderr (not under
	// --json, whose reader wants stdout alone, nor -v, whose log lines
	// would break the line up). The wall clock is read here only.
	var prog *progressLine
	if !*asJSON && !*verbose && isTerminal(stderr) {
		prog = newProgressLine(stderr, hi-lo+1, time.Now)
		base.Progress = prog.report
	}
	enc := json.NewEncoder(stdout)
	emitRun := func(r sim.SweepResult) {
		sum.Runs++
		if r.Err != nil {
			sum.Errors++
			fmt.Fprintf(stderr, "fmnode sim: %v\n", r.Err)
			return
		}
		res := r.Result
		sum.add(res)
		if res.Failed() {
			sum.Failed++
			sum.FailedSeeds = append(sum.FailedSeeds, res.Seed)
		}
		if *asJSON {
			if err := enc.Encode(res); err != nil {
				fmt.Fprintf(stderr, "fmnode sim: %v\n", err)
			}
			return
		}
		printRun(stdout, res, *canary)
	}
	sim.Sweep(ctx, base, lo, hi, *workers, func(r sim.SweepResult) {
		if prog != nil {
			// Print with the line out of the way (it is redrawn by the
			// next report).
			prog.emit(r.Result.Seed, r.Result.Events, func() { emitRun(r) })
			return
		}
		emitRun(r)
	})
	if prog != nil {
		prog.close()
	}
	sum.WallSeconds = time.Since(start).Seconds()
	sum.CPUSeconds = (processCPU() - cpu0).Seconds()
	sum.LoadAvg1End = loadAvg1()
	sum.MaxRSSMiB = float64(processMaxRSS()) / (1 << 20)
	if sum.CPUSeconds > 0 {
		sum.SimSecondsPerCPUS = sum.SimSeconds / sum.CPUSeconds
	}
	if *memProfile != "" {
		if err := writeHeapProfile(*memProfile); err != nil {
			fmt.Fprintf(stderr, "fmnode sim: %v\n", err)
		}
	}
	if sum.WallSeconds > 0 {
		sum.SeedsPerMinute = float64(sum.Runs) / sum.WallSeconds * 60
		sum.SimSecondsPerWallS = sum.SimSeconds / sum.WallSeconds
	}
	if *asJSON {
		if err := enc.Encode(sum); err != nil {
			fmt.Fprintf(stderr, "fmnode sim: %v\n", err)
		}
	} else {
		printSummary(stdout, sum)
	}
	if *summaryOut != "" {
		if err := appendSummary(*summaryOut, sum); err != nil {
			fmt.Fprintf(stderr, "fmnode sim: %v\n", err)
			return 2
		}
	}
	return simExitCode(stdout, sum, *canary, *asJSON)
}

// simExitCode: 2 when a run could not be set up, 1 when a run failed.
// Under --canary failing is what must happen, on every seed: exit 1 then
// (so CI runs `! fmnode sim --canary ...`), and 0 if any seed let the
// broken acceptor through, which CI's `!` turns into a failure.
func simExitCode(stdout io.Writer, sum simSummary, canary, quiet bool) int {
	if sum.Errors > 0 {
		return 2
	}
	if canary {
		if sum.Runs > 0 && sum.Failed == sum.Runs {
			if !quiet {
				fmt.Fprintf(stdout, "canary: violation detected as expected in %d of %d runs\n", sum.Failed, sum.Runs)
			}
			return 1
		}
		if !quiet {
			fmt.Fprintf(stdout, "canary: NOT detected in %d of %d runs: the simulator missed a broken acceptor\n", sum.Runs-sum.Failed, sum.Runs)
		}
		return 0
	}
	if sum.Failed > 0 {
		return 1
	}
	return 0
}

func printRun(w io.Writer, r sim.Result, canary bool) {
	var faults uint64
	for _, v := range r.FaultsInjected {
		faults += v
	}
	fmt.Fprintf(w, "%-8d %-11s %-7s %9.1f %8.3f %10d %7d %-8s %5d  %s\n",
		r.Seed, r.Scenario, r.Faults, r.SimSeconds, r.WallSeconds, r.Events, faults, r.Linearizable, len(r.Violations), r.TraceHash)
	if strings.HasPrefix(r.Scenario, "contention") {
		printContention(w, r)
	}
	if r.FailoverReport != nil {
		fmt.Fprint(w, r.FailoverReport.Table())
		if r.ScenarioFigures != nil {
			fmt.Fprint(w, r.ScenarioFigures.Table())
		}
		fmt.Fprintf(w, "sim s/wall s %.0f\n", r.SimPerWall)
	}
	if r.ExpectedUnsafe && !r.Failed() {
		// Driven past a configured bound: finding it unsafe is the pass.
		fmt.Fprintf(w, "  expected unsafe, found unsafe: seed %d (%s)\n", r.Seed, r.Profile)
		for _, v := range r.Violations {
			fmt.Fprintf(w, "    %s\n", v)
		}
		return
	}
	if !r.Failed() {
		return
	}
	label := "FAIL"
	if canary {
		label = "canary caught"
	}
	if r.ExpectedUnsafe {
		label = "FAIL (expected unsafe, but no checker found it)"
	}
	fmt.Fprintf(w, "  %s seed %d (%s)\n", label, r.Seed, r.Profile)
	for _, v := range r.Violations {
		fmt.Fprintf(w, "    %s\n", v)
	}
	if r.Visualization != "" {
		fmt.Fprintf(w, "    history: %s\n", r.Visualization)
	}
	fmt.Fprintf(w, "    replay:  %s\n", r.Replay)
}

// printContention shows the three backoff kinds side by side, then the
// adaptive backoff with turns.
func printContention(w io.Writer, r sim.Result) {
	fmt.Fprintf(w, "  %-12s %14s %10s %8s %8s %8s %13s %12s %9s %9s\n",
		"backoff", "conflict_rate", "rounds", "naks", "first", "retry", "after_warmup", "goodput/s", "p50_ms", "p99_ms")
	for _, k := range []string{"none", "exponential", "adaptive", "turns"} {
		m := r.Metrics
		fmt.Fprintf(w, "  %-12s %13.4f%% %10.0f %8.0f %8.0f %8.0f %12.4f%% %12.4f %9.0f %9.0f\n", k,
			100*m["conflict_rate_"+k], m["rounds_"+k], m["naks_"+k], m["first_attempt_naks_"+k], m["retry_naks_"+k],
			100*m["conflict_rate_warm_"+k], m["goodput_per_second_"+k], m["latency_p50_ms_"+k], m["latency_p99_ms_"+k])
	}
}

func printSummary(w io.Writer, s simSummary) {
	fmt.Fprintf(w, "runs %d  failed %d  errors %d  wall %.2fs  seeds/min %.0f  sim s/wall s %.0f (on %d workers)\n",
		s.Runs, s.Failed, s.Errors, s.WallSeconds, s.SeedsPerMinute, s.SimSecondsPerWallS, s.Workers)
	fmt.Fprintf(w, "cpu %.2fs  sim s/cpu s %.0f  max rss %.0f MiB  load avg %.2f -> %.2f\n",
		s.CPUSeconds, s.SimSecondsPerCPUS, s.MaxRSSMiB, s.LoadAvg1Start, s.LoadAvg1End)
	kinds := make([]string, 0, len(s.FaultsInjected))
	for k, v := range s.FaultsInjected {
		if v > 0 {
			kinds = append(kinds, fmt.Sprintf("%s=%d", k, v))
		}
	}
	slices.Sort(kinds)
	if len(kinds) > 0 {
		fmt.Fprintf(w, "faults injected: %s\n", strings.Join(kinds, " "))
	}
	if len(s.FailedSeeds) > 0 {
		fmt.Fprintf(w, "failed seeds: %v\n", s.FailedSeeds)
	}
}

func simUsage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintln(w, "usage: fmnode sim [--scenario NAME] [--seed N | --seeds A..B] [--faults none|light|heavy|swarm] [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Runs the real cores on a simulated clock, network and disk from one seed: a")
	fmt.Fprintln(w, "safety phase under faults, then a liveness phase in which faults heal and the")
	fmt.Fprintln(w, "system must converge. A seed at one commit replays exactly (same trace_hash).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "scenarios:")
	for _, s := range sim.Scenarios() {
		fmt.Fprintf(w, "  %-11s %s\n", s.Name(), s.Description())
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "flags:")
	fs.PrintDefaults()
}

// writeHeapProfile writes the live heap (after a GC, so it shows what is
// retained rather than garbage) to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("memprofile: %w", err)
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("memprofile: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("memprofile: %w", err)
	}
	return nil
}

// processMaxRSS is the peak resident set size of the process in bytes (0 if
// unavailable); Linux reports ru_maxrss in KiB.
func processMaxRSS() uint64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return uint64(ru.Maxrss) * 1024
}

// flagSet reports whether the command line set flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
