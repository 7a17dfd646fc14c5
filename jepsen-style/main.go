// Command jepsen-style runs real `fmnode agent` processes under a seeded
// nemesis and checks what their clients saw, and what their stores hold,
// with porcupine and the data plane's own records. See doc.go.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fmnode/fmnode/failover"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// summary is the last JSON line.
type summary struct {
	Summary         bool           `json:"summary"`
	Runs            int            `json:"runs"`
	Passed          int            `json:"passed"`
	Failed          int            `json:"failed"`
	HarnessErrors   int            `json:"harness_errors"` // runs that failed to set up or tear down (not a verdict)
	NegativeControl bool           `json:"negative_control,omitempty"`
	Ops             int            `json:"ops"`
	OK              int            `json:"ok"`
	FailedOps       int            `json:"failed_ops"`
	Unknown         int            `json:"unknown"`
	Faults          map[string]int `json:"faults"`
	OpsByKind       map[string]int `json:"ops_by_kind"`
	Gossip          gossipEvidence `json:"gossip"`
	DNS             dnsEvidence    `json:"dns"`
	Linearizable    bool           `json:"linearizable"`
	LostAckedWrites int            `json:"lost_acked_writes"`
	DualWriters     int            `json:"dual_writers"`
	Violations      int            `json:"violations"`
	MaxRecoveryS    float64        `json:"recovery_s_max"`
	FailedSeeds     []uint64       `json:"failed_seeds,omitempty"`
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("jepsen-style", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		runs     = fs.Int("runs", 1, "runs (run i uses seed+i)")
		duration = fs.Duration("duration", 30*time.Second, "workload and nemesis time per run")
		seed     = fs.Uint64("seed", uint64(time.Now().UnixNano()%1e9), "seed of the first run's schedule")
		nodes    = fs.Int("nodes", 6, "agents (3..30, round-robin over east, north, west)")
		parts    = fs.Int("partitions", 6, "partitions")
		clients  = fs.Int("clients", 8, "clients (at most 10: porcupine's cost grows with clients per key)")
		perPart  = fs.Int("keys-per-partition", 2, "keys per partition")
		maxOps   = fs.Int("max-ops", 200_000, "bound on the operations of a run")
		converge = fs.Duration("converge", 60*time.Second, "bound on recovery after the heal")
		negative = fs.Bool("negative-control", false, "run the negative-control build (-tags fmnode_negative_control); the run must fail")
		beyond   = fs.Bool("clock-beyond", false, "add a clock skew beyond max_clock_drift (the run is flagged unsafe)")
		faultsF  = fs.String("faults", "", "comma-separated fault kinds (default: all): "+strings.Join(nemesisKinds, ","))
		dir      = fs.String("dir", "", "where runs keep their files (default: a temporary directory; failed runs' are kept)")
		bin      = fs.String("bin", "", "an fmnode binary to use instead of building one")
		verbose  = fs.Bool("v", false, "log the harness's progress to stderr")
		keep     = fs.Bool("keep", false, "keep every run's directory (agent logs), not only the failed ones'")
		expectF  = fs.Bool("expect-fail", false, "exit 0 only if every run's checker found a violation (and no run failed to set up): the negative control's mode")
		printS   = fs.Bool("print-schedule", false, "print each run's nemesis schedule and exit")
		explainF = fs.String("explain", "", "print the non-linearizable keys' operations of a failed run's history.json, and exit")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case *runs < 1 || *runs > 1000:
		fmt.Fprintln(stderr, "--runs must be in 1..1000")
		return 2
	case *duration < 10*time.Second || *duration > 30*time.Minute:
		fmt.Fprintln(stderr, "--duration must be in 10s..30m")
		return 2
	case *clients < 1 || *clients > 10:
		fmt.Fprintln(stderr, "--clients must be in 1..10")
		return 2
	case *parts < 1 || *parts > 256 || *perPart < 1 || *perPart > 16:
		fmt.Fprintln(stderr, "--partitions must be in 1..256 and --keys-per-partition in 1..16")
		return 2
	case *maxOps < 1 || *maxOps > 2_000_000:
		fmt.Fprintln(stderr, "--max-ops must be in 1..2000000")
		return 2
	}
	var kinds []string
	if *faultsF != "" {
		known := map[string]bool{}
		for _, k := range nemesisKinds {
			known[k] = true
		}
		for _, k := range strings.Split(*faultsF, ",") {
			if !known[k] {
				fmt.Fprintf(stderr, "--faults: unknown kind %q (known: %s)\n", k, strings.Join(nemesisKinds, ","))
				return 2
			}
			kinds = append(kinds, k)
		}
	}
	if *explainF != "" {
		if err := explain(*explainF, stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	}
	if *printS {
		prof := failover.FastConfig()
		for i := 0; i < *runs; i++ {
			k := kinds
			if len(k) == 0 {
				k = nemesisKinds
			}
			fmt.Fprintf(stdout, "run seed %d:\n", *seed+uint64(i))
			for _, f := range schedule(scheduleConfig{Seed: *seed + uint64(i), Duration: *duration, Nodes: *nodes, Partitions: *parts,
				Kinds: k, KillAll: *negative, Drift: prof.MaxClockDrift, Lease: prof.LeaseDuration, ClockBeyond: *beyond}) {
				fmt.Fprintln(stdout, "  "+f.String())
			}
		}
		return 0
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	// The whole invocation is bounded: every run's time, its setup,
	// heal and check, and the build.
	bound := time.Duration(*runs)*(*duration+*converge+3*time.Minute) + 10*time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	root := *dir
	if root == "" {
		var err error
		if root, err = os.MkdirTemp("", "jepsen-style-"); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	} else if err := os.MkdirAll(root, 0o755); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	path := *bin
	if path == "" {
		tags := ""
		if *negative {
			tags = "fmnode_negative_control"
		}
		var err error
		if path, err = buildBinary(ctx, root, tags); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	sum := summary{Summary: true, Runs: *runs, NegativeControl: *negative, Faults: map[string]int{}, OpsByKind: map[string]int{}, Linearizable: true}
	enc := json.NewEncoder(stdout)
	caught := 0
	for i := 0; i < *runs && ctx.Err() == nil; i++ {
		s := *seed + uint64(i)
		rdir := filepath.Join(root, fmt.Sprintf("run-%d", s))
		if err := os.MkdirAll(rdir, 0o755); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		res := runOnce(ctx, runConfig{Seed: s, Duration: *duration, Nodes: *nodes, Partitions: *parts, Clients: *clients,
			KeysPerPart: *perPart, MaxOps: *maxOps, ConvergeBound: *converge, NegativeControl: *negative, ClockBeyond: *beyond,
			Kinds: kinds, Bin: path, Dir: rdir, Log: log})
		_ = enc.Encode(res)
		sum.Ops += res.Ops
		sum.OK += res.OK
		sum.FailedOps += res.Failed
		sum.Unknown += res.Unknown
		for k, n := range res.Faults {
			sum.Faults[k] += n
		}
		for k, n := range res.OpsByKind {
			sum.OpsByKind[k] += n
		}
		sum.Gossip.add(res.Gossip)
		sum.DNS.add(res.DNS)
		sum.Linearizable = sum.Linearizable && res.Linearizable == "ok"
		sum.LostAckedWrites += res.LostAckedWrites
		sum.DualWriters += res.DualWriters
		sum.Violations += len(res.Violations)
		sum.MaxRecoveryS = max(sum.MaxRecoveryS, res.RecoveryS)
		if res.Error == "" && res.failed() {
			caught++
		}
		if res.Error != "" {
			sum.HarnessErrors++
		}
		if res.Passed {
			sum.Passed++
			if !*keep {
				_ = os.RemoveAll(rdir)
			}
		} else {
			sum.Failed++
			sum.FailedSeeds = append(sum.FailedSeeds, s)
			fmt.Fprintf(stderr, "run %d failed; artifacts in %s; replay: %s\n", s, rdir, res.Replay)
		}
	}
	_ = enc.Encode(sum)
	if *dir == "" && sum.Failed == 0 && !*keep {
		_ = os.RemoveAll(root)
	}
	if *expectF {
		if caught != *runs {
			fmt.Fprintf(stderr, "expected every run to be caught by the checker: %d of %d were\n", caught, *runs)
			return 1
		}
		return 0
	}
	if sum.Failed > 0 {
		return 1
	}
	return 0
}
