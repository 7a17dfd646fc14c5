package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"time"

	"github.com/fmnode/fmnode/caspaxos/transport"
	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
)

// compareOptions are the flags of `fmnode bench compare`.
type compareOptions struct {
	partitions    int
	writers       int
	duration      time.Duration
	warmup        time.Duration
	steadyProfile string
	steadySettle  time.Duration
	steadyWindow  time.Duration
	outageSettle  time.Duration
	outageTimeout time.Duration
	setupTimeout  time.Duration
	casOutage     string
	dataParent    string
	json          bool
	// command builds the acceptor children of the CAS throughput run
	// (tests swap in a helper process); nil re-executes this binary.
	command func(args []string) (*exec.Cmd, error)
}

// compareSide is one system's figures; the keys are issue 18's.
type compareSide struct {
	UpdatesPerSec                float64          `json:"updates_per_sec"`
	UpdateP50Ms                  float64          `json:"update_p50_ms"`
	UpdateP99Ms                  float64          `json:"update_p99_ms"`
	SteadyWritesPerPartitionHour float64          `json:"steady_writes_per_partition_hour"`
	FailoverCompletionS          completionFigure `json:"failover_completion_s"`
	StoreCPUSeconds              float64          `json:"store_cpu_seconds"`
	StoreBytesWritten            uint64           `json:"store_bytes_written"`
	// The counts behind the figures.
	Updates          uint64  `json:"updates"`
	UpdateMismatches uint64  `json:"update_mismatches"`
	UpdateErrors     uint64  `json:"update_errors"`
	SteadyWrites     uint64  `json:"steady_writes"`
	SteadyWindowS    float64 `json:"steady_window_s"`
	FailedOver       int     `json:"failed_over"`
	// NotFailedOver partitions had not failed over within
	// --outage-timeout; the completion figures then count them at the
	// bound and CompletionLowerBound is set.
	NotFailedOver        int     `json:"not_failed_over"`
	CompletionLowerBound bool    `json:"completion_lower_bound,omitempty"`
	OutageWindowS        float64 `json:"outage_window_s"`
	StoreLogicalBytes    uint64  `json:"store_logical_bytes,omitempty"`
	OutageStoreWrites    uint64  `json:"outage_store_writes"`
	ElectionS            float64 `json:"election_s,omitempty"`
	ValueBytes           int     `json:"value_bytes"`
	ThroughputMachinery  string  `json:"throughput_machinery"`
	// Warnings are what went wrong after a figure was taken.
	Warnings          []string `json:"warnings,omitempty"`
	FailoverMachinery string   `json:"failover_machinery"`
}

// completionFigure is failover completion over the affected partitions,
// in seconds from the kill.
type completionFigure struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// compareRatios are measured in the same run, on the same machine.
type compareRatios struct {
	// UpdatesPerSec is caspaxos over raft; FailoverCompletionP99 raft
	// over caspaxos; the store ratios raft over caspaxos.
	UpdatesPerSec         float64 `json:"updates_per_sec"`
	FailoverCompletionP99 float64 `json:"failover_completion_p99"`
	StoreCPUSeconds       float64 `json:"store_cpu_seconds"`
	StoreBytesWritten     float64 `json:"store_bytes_written"`
}

// compareOutput is what `fmnode bench compare --json` prints.
type compareOutput struct {
	Benchmark     string        `json:"benchmark"`
	Partitions    int           `json:"partitions"`
	Writers       int           `json:"writers"`
	DurationS     float64       `json:"duration_s"`
	SteadyProfile string        `json:"steady_profile"`
	CASOutage     string        `json:"caspaxos_outage"`
	OutageProfile string        `json:"outage_profile"`
	CASPaxos      compareSide   `json:"caspaxos"`
	Raft          compareSide   `json:"raft"`
	Ratios        compareRatios `json:"ratios"`
	LoadAvg1Start float64       `json:"loadavg_1m_start"`
	LoadAvg1End   float64       `json:"loadavg_1m_end"`
	NumCPU        int           `json:"num_cpu"`
	TookS         float64       `json:"took_s"`
}

func runBenchCompare(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o compareOptions
	fs := flag.NewFlagSet("fmnode bench compare", flag.ContinueOnError)
	fs.IntVar(&o.partitions, "partitions", 4300, "partitions (registers for CASPaxos, map entries for raft)")
	fs.IntVar(&o.writers, "writers", 64, "concurrent writers of the throughput figure")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time of each throughput run")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load before each throughput run")
	fs.StringVar(&o.steadyProfile, "steady-profile", "paper", "failover profile of the steady-state figure: paper or fast")
	fs.DurationVar(&o.steadySettle, "steady-settle", 0, "time from start to the steady window (0: 1.5 heartbeat intervals, so the window holds whole raft heartbeat rounds)")
	fs.DurationVar(&o.steadyWindow, "steady-window", 0, "steady-state window (0: 2 heartbeat intervals)")
	fs.DurationVar(&o.outageSettle, "outage-settle", 0, "time from every partition known to the kill (0: 2x the fast profile's takeover delay)")
	fs.DurationVar(&o.outageTimeout, "outage-timeout", 2*time.Minute, "bound on every partition failing over, from the kill")
	fs.DurationVar(&o.setupTimeout, "setup-timeout", 5*time.Minute, "bound on each cluster's setup (every register known to every node)")
	fs.StringVar(&o.casOutage, "caspaxos-outage", "node", "CASPaxos side of the outage: node (three real nodes in this process, measured) or sim (the simulator's region-outage drill, simulated time; no CPU or bytes)")
	fs.StringVar(&o.dataParent, "data", "", "parent of the temporary data directories (default: the system temp dir)")
	fs.BoolVar(&o.json, "json", false, "print one JSON object")
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(stderr, "fmnode bench compare:", err)
		return 2
	}
	out, err := benchCompare(ctx, o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "fmnode bench compare:", err)
		return 1
	}
	if o.json {
		if err := writeJSON(stdout, out); err != nil {
			fmt.Fprintln(stderr, "fmnode bench compare:", err)
			return 1
		}
		return 0
	}
	printCompare(stdout, out)
	return 0
}

func (o *compareOptions) validate() error {
	switch {
	case o.partitions < 1 || o.partitions > 100000:
		return fmt.Errorf("--partitions %d: must be in 1..100000", o.partitions)
	case o.writers < 1 || o.writers > 4096:
		return fmt.Errorf("--writers %d: must be in 1..4096", o.writers)
	case o.duration <= 0:
		return fmt.Errorf("--duration %v: must be positive", o.duration)
	case o.warmup < 0:
		return fmt.Errorf("--warmup %v: must not be negative", o.warmup)
	case o.steadySettle < 0 || o.steadyWindow < 0 || o.outageSettle < 0:
		return fmt.Errorf("--steady-settle, --steady-window and --outage-settle must not be negative")
	case o.outageTimeout <= 0:
		return fmt.Errorf("--outage-timeout %v: must be positive", o.outageTimeout)
	case o.setupTimeout < 0:
		return fmt.Errorf("--setup-timeout %v: must not be negative", o.setupTimeout)
	case o.casOutage == "":
		o.casOutage = "node"
	case o.casOutage != "node" && o.casOutage != "sim":
		return fmt.Errorf("--caspaxos-outage %q: must be node or sim", o.casOutage)
	}
	prof, err := failover.Profile(o.steadyProfile)
	if err != nil {
		return fmt.Errorf("--steady-profile: %w", err)
	}
	if o.steadySettle == 0 {
		o.steadySettle = prof.HeartbeatInterval * 3 / 2
	}
	if o.steadyWindow == 0 {
		o.steadyWindow = 2 * prof.HeartbeatInterval
	}
	if o.setupTimeout == 0 {
		o.setupTimeout = 5 * time.Minute
	}
	if o.outageSettle == 0 {
		o.outageSettle = 2 * failover.FastConfig().TakeoverDelay()
	}
	return nil
}

// benchCompare runs both systems, one figure at a time, in this process
// and its acceptor children.
func benchCompare(ctx context.Context, o compareOptions, stderr io.Writer) (out compareOutput, err error) {
	start := time.Now()
	steady, _ := failover.Profile(o.steadyProfile)
	out = compareOutput{Benchmark: "compare", Partitions: o.partitions, Writers: o.writers, DurationS: o.duration.Seconds(),
		SteadyProfile: o.steadyProfile, OutageProfile: "fast", CASOutage: o.casOutage, NumCPU: runtime.NumCPU(), LoadAvg1Start: loadAvg1()}
	dir, err := os.MkdirTemp(o.dataParent, "fmnode-bench-compare-")
	if err != nil {
		return out, err
	}
	defer func() {
		if rerr := os.RemoveAll(dir); err == nil && rerr != nil {
			err = rerr
		}
	}()
	sample, err := failover.NewState(partition.RegisterKey(1), "east", compareRegions, failover.Strong, 2)
	if err != nil {
		return out, err
	}
	enc, err := failover.Encode(nil, sample)
	if err != nil {
		return out, err
	}
	progress := func(format string, args ...any) {
		fmt.Fprintf(stderr, "bench compare: "+format+"\n", args...)
	}

	// (1) State updates per second at o.writers concurrent writers.
	progress("throughput: CASPaxos CAS on bbolt, %d writers over %d registers", o.writers, o.partitions)
	cas, err := benchCAS(ctx, o.casOptions(len(enc), dir), stderr, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return out, fmt.Errorf("CASPaxos throughput: %w", err)
	}
	out.CASPaxos.UpdatesPerSec, out.CASPaxos.UpdateP50Ms, out.CASPaxos.UpdateP99Ms = cas.CommitsPerSec, cas.P50Ms, cas.P99Ms
	out.CASPaxos.Updates, out.CASPaxos.UpdateMismatches, out.CASPaxos.UpdateErrors = cas.Commits, cas.Mismatches, cas.Errors+cas.Unknown
	out.CASPaxos.ValueBytes = len(enc)
	out.CASPaxos.ThroughputMachinery = "bench cas: 3 acceptor processes (bbolt, fsync), one proposer in this process, CAS read-modify-write"
	progress("throughput: raft Apply, %d writers over %d map entries", o.writers, o.partitions)
	if err := raftThroughput(ctx, o, dir, &out.Raft); err != nil {
		return out, fmt.Errorf("raft throughput: %w", err)
	}
	out.Raft.ValueBytes = len(enc)

	// (2) Steady-state writes to the coordination store, both systems at
	// once (the figure is a count, not a speed).
	progress("steady state: %s profile, %v settle, %v window", o.steadyProfile, o.steadySettle, o.steadyWindow)
	if err := steadyWrites(ctx, o, steady, dir, &out.CASPaxos, &out.Raft); err != nil {
		return out, fmt.Errorf("steady state: %w", err)
	}

	// (3, 4) The region holding the raft leader (and every write region)
	// is lost, fast profile; one system at a time, so each has the
	// machine and the process counters are its own.
	progress("outage: CASPaxos (%s), %d partitions", o.casOutage, o.partitions)
	outage := casOutage
	if o.casOutage == "sim" {
		outage = simOutage
	}
	if err := outage(ctx, o, dir, &out.CASPaxos); err != nil {
		return out, fmt.Errorf("CASPaxos outage: %w", err)
	}
	progress("outage: raft, %d partitions", o.partitions)
	if err := raftOutage(ctx, o, dir, &out.Raft); err != nil {
		return out, fmt.Errorf("raft outage: %w", err)
	}

	r := &out.Ratios
	r.UpdatesPerSec = ratio(out.CASPaxos.UpdatesPerSec, out.Raft.UpdatesPerSec)
	r.FailoverCompletionP99 = ratio(out.Raft.FailoverCompletionS.P99, out.CASPaxos.FailoverCompletionS.P99)
	r.StoreCPUSeconds = ratio(out.Raft.StoreCPUSeconds, out.CASPaxos.StoreCPUSeconds)
	r.StoreBytesWritten = ratio(float64(out.Raft.StoreBytesWritten), float64(out.CASPaxos.StoreBytesWritten))
	out.LoadAvg1End = loadAvg1()
	out.TookS = time.Since(start).Seconds()
	return out, nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// casOptions is bench cas's run for the CASPaxos side of (1): the same
// machinery, the same keys and writers, values of a failover state's size.
func (o compareOptions) casOptions(valueBytes int, dir string) casOptions {
	return casOptions{acceptors: 3, keys: o.partitions, clients: o.writers, duration: o.duration, warmup: o.warmup,
		store: "bbolt", boltLayout: "auto", backoff: "adaptive", valueBytes: valueBytes, maxInflight: 1024, maxRetries: 16,
		dataParent: dir, childLog: "warn", childTimeout: 15 * time.Second, childProcs: 1,
		groupWaitFr: transport.DefaultGroupWaitFraction, proposers: 1, command: o.command}
}

func printCompare(w io.Writer, out compareOutput) {
	fmt.Fprintf(w, "compare: %d partitions, %d writers, %.0fs per throughput run (load %.1f → %.1f, %d CPUs, %.0fs)\n",
		out.Partitions, out.Writers, out.DurationS, out.LoadAvg1Start, out.LoadAvg1End, out.NumCPU, out.TookS)
	row := func(name string, c, r float64, unit string) {
		fmt.Fprintf(w, "  %-34s caspaxos %12.3f  raft %12.3f  %s\n", name, c, r, unit)
	}
	row("updates/s", out.CASPaxos.UpdatesPerSec, out.Raft.UpdatesPerSec, fmt.Sprintf("(ratio %.2fx)", out.Ratios.UpdatesPerSec))
	row("update p50 ms", out.CASPaxos.UpdateP50Ms, out.Raft.UpdateP50Ms, "")
	row("update p99 ms", out.CASPaxos.UpdateP99Ms, out.Raft.UpdateP99Ms, "")
	row("steady writes/partition/hour ("+out.SteadyProfile+")", out.CASPaxos.SteadyWritesPerPartitionHour, out.Raft.SteadyWritesPerPartitionHour, "")
	row("failover completion p50 s", out.CASPaxos.FailoverCompletionS.P50, out.Raft.FailoverCompletionS.P50, "")
	row("failover completion p99 s", out.CASPaxos.FailoverCompletionS.P99, out.Raft.FailoverCompletionS.P99, fmt.Sprintf("(raft/caspaxos %.2fx)", out.Ratios.FailoverCompletionP99))
	row("failover completion max s", out.CASPaxos.FailoverCompletionS.Max, out.Raft.FailoverCompletionS.Max, "")
	row("store CPU s during the outage", out.CASPaxos.StoreCPUSeconds, out.Raft.StoreCPUSeconds, fmt.Sprintf("(raft/caspaxos %.2fx)", out.Ratios.StoreCPUSeconds))
	for _, w2 := range append(out.CASPaxos.Warnings, out.Raft.Warnings...) {
		fmt.Fprintf(w, "  warning: %s\n", w2)
	}
	row("store bytes written (MB)", float64(out.CASPaxos.StoreBytesWritten)/1e6, float64(out.Raft.StoreBytesWritten)/1e6, fmt.Sprintf("(raft/caspaxos %.2fx)", out.Ratios.StoreBytesWritten))
}
