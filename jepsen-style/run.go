package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/agent"
)

// runConfig is one run.
type runConfig struct {
	Seed            uint64
	Duration        time.Duration
	Nodes           int
	Partitions      int
	Clients         int
	KeysPerPart     int
	MaxOps          int
	ConvergeBound   time.Duration
	NegativeControl bool
	ClockBeyond     bool
	Kinds           []string
	Bin             string
	Dir             string // the run's directory: kept on failure
	Log             *slog.Logger
}

// runResult is the JSON line of one run.
type runResult struct {
	Seed            uint64         `json:"seed"`
	Nodes           int            `json:"nodes"`
	DurationS       float64        `json:"duration_s"`
	NegativeControl bool           `json:"negative_control,omitempty"`
	Ops             int            `json:"ops"`
	OK              int            `json:"ok"`
	Failed          int            `json:"failed"`
	Unknown         int            `json:"unknown"`
	OpsByKind       map[string]int `json:"ops_by_kind"`
	Faults          map[string]int `json:"faults"`
	// Gossip and DNS show that the faults cut them (evidence.go).
	Gossip gossipEvidence `json:"gossip"`
	DNS    dnsEvidence    `json:"dns"`
	verdict
	Passed    bool   `json:"passed"`
	Error     string `json:"error,omitempty"`
	Artifacts string `json:"artifacts,omitempty"`
	Replay    string `json:"replay"`
}

func replayCommand(cfg runConfig) string {
	s := fmt.Sprintf("go run ./jepsen-style --runs 1 --duration %s --seed %d --nodes %d --partitions %d --clients %d",
		cfg.Duration, cfg.Seed, cfg.Nodes, cfg.Partitions, cfg.Clients)
	if cfg.NegativeControl {
		s += " --negative-control"
	}
	if cfg.ClockBeyond {
		s += " --clock-beyond"
	}
	if len(cfg.Kinds) > 0 && len(cfg.Kinds) != len(nemesisKinds) {
		s += " --faults " + strings.Join(cfg.Kinds, ",")
	}
	return s
}

// runOnce runs one cluster through the workload and the nemesis, then
// heals, reads back, stops every agent and checks. Every agent is dead
// when it returns, whatever happened.
func runOnce(ctx context.Context, cfg runConfig) (res runResult) {
	res = runResult{Seed: cfg.Seed, Nodes: cfg.Nodes, DurationS: cfg.Duration.Seconds(), NegativeControl: cfg.NegativeControl,
		Faults: map[string]int{}, OpsByKind: map[string]int{}, Replay: replayCommand(cfg)}
	res.Linearizable = "skipped"
	prof := failover.FastConfig()
	var logMu sync.Mutex
	var logLines []string
	logf := func(s string) {
		logMu.Lock()
		logLines = append(logLines, time.Now().UTC().Format("15:04:05.000")+" "+s)
		logMu.Unlock()
		cfg.Log.Info(s)
	}
	diskNode := 0
	kinds := cfg.Kinds
	if len(kinds) == 0 {
		kinds = nemesisKinds
	}
	for _, k := range kinds {
		if k == fDiskFull {
			diskNode = cfg.Nodes
		}
	}
	c, err := newCluster(clusterConfig{Bin: cfg.Bin, Dir: cfg.Dir, Nodes: cfg.Nodes, Partitions: cfg.Partitions, DiskNode: diskNode, Log: cfg.Log})
	if err != nil {
		res.Error = err.Error()
		return res
	}
	if diskNode != 0 && !c.nodes[diskNode-1].tmpfs {
		kinds = without(kinds, fDiskFull)
		logf("disk-full skipped: no tmpfs could be mounted (needs root and mount privilege)")
	}
	defer c.unmount()
	defer func() {
		if err := c.closeAll(); err != nil && res.Error == "" {
			res.Error = err.Error()
		}
	}()

	faults := schedule(scheduleConfig{Seed: cfg.Seed, Duration: cfg.Duration, Nodes: cfg.Nodes, Partitions: cfg.Partitions,
		Kinds: kinds, KillAll: cfg.NegativeControl, Drift: prof.MaxClockDrift, Lease: prof.LeaseDuration, ClockBeyond: cfg.ClockBeyond})
	for _, f := range faults {
		logf("schedule: " + f.String())
	}

	// Start and initialise.
	for _, n := range c.nodes {
		if err := c.start(n); err != nil {
			res.Error = err.Error()
			return res
		}
	}
	// Generous: nine agents starting on a loaded machine take a while to
	// find each other; this is setup, not the system under test.
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := c.waitAll(sctx, agent.PathHealthz); err != nil {
		res.Error = "agents never answered: " + err.Error()
		return res
	}
	spec, err := c.initSpec(sctx)
	if err != nil {
		res.Error = "init: " + err.Error()
		return res
	}
	if err := c.waitAll(sctx, agent.PathReadyz); err != nil {
		res.Error = "agents never ready: " + err.Error()
		return res
	}
	keys, err := workloadKeys(cfg.Partitions, cfg.KeysPerPart)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	logf(fmt.Sprintf("cluster ready: %d agents, %d partitions, %d keys, profile %s", cfg.Nodes, spec.Partitions, len(keys), spec.Profile.Name))

	// Workload and nemesis, bounded by the duration.
	h := &history{start: time.Now(), maxOps: cfg.MaxOps}
	wctx, wcancel := context.WithTimeout(ctx, cfg.Duration)
	defer wcancel()
	nm := &nemesis{c: c, start: h.start, counts: res.Faults}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); nm.run(wctx, faults, logf) }()
	wc := workloadConfig{Clients: cfg.Clients, KeysPerPartition: cfg.KeysPerPart, Partitions: cfg.Partitions, OpTimeout: 5 * time.Second, Seed: cfg.Seed}
	if _, err := runWorkload(wctx, c, wc, keys, h); err != nil {
		res.Error = err.Error()
	}
	wg.Wait()

	// Heal, then measure convergence: every agent ready and every key
	// read back strongly.
	for _, note := range nm.healAll() {
		logf("heal: " + note)
	}
	healed := time.Now()
	logf("healed everything")
	cctx, ccancel := context.WithTimeout(ctx, cfg.ConvergeBound)
	defer ccancel()
	readyErr := c.waitAll(cctx, agent.PathReadyz)
	final, finalErr := finalReads(cctx, c, keys, h, 5*time.Second)
	res.RecoveryS = time.Since(healed).Seconds()
	res.Converged = readyErr == nil && finalErr == nil
	for _, f := range final {
		h.ops = append(h.ops, f)
	}

	// Stop every agent, then check.
	if err := c.closeAll(); err != nil {
		logf("close: " + err.Error())
	}
	ops := h.snapshot()
	for _, op := range ops {
		if op.Kind == kindFinal {
			continue
		}
		res.Ops++
		res.OpsByKind[op.Kind]++
		switch op.Result {
		case resOK:
			res.OK++
		case resFail, resCondFailed:
			res.Failed++
		case resUnknown:
			res.Unknown++
		}
	}
	v := &res.verdict
	if !res.Converged {
		v.violate("no convergence within %v of the heal: readyz: %v; read-back: %v", cfg.ConvergeBound, readyErr, finalErr)
	}
	checkLinearizable(ops, time.Minute, cfg.Dir, v)
	checkLostWrites(ops, final, keys, v)
	checkSessions(ops, v)
	checkStaleness(ops, time.Duration(spec.MaxStaleness)+time.Second, v)
	tmp, err := os.MkdirTemp(cfg.Dir, "stores-")
	if err == nil {
		checkStores(c, tmp, ops, v)
		_ = os.RemoveAll(tmp)
	}
	checkFailStop(c, v)
	res.Gossip, res.DNS = collectEvidence(c, nm.applied, h.start)
	for _, f := range nm.applied {
		if f.Kind == fClockBeyond {
			v.Unsafe = append(v.Unsafe, fmt.Sprintf("node %d's clock ran at rate %v, drifting %v over one lease of %v, beyond max_clock_drift %v: leases are not safe then",
				f.Nodes[0], f.Rate, time.Duration(float64(prof.LeaseDuration)*(1-f.Rate)), prof.LeaseDuration, prof.MaxClockDrift))
		}
	}
	res.Passed = !v.failed() && res.Error == "" && len(v.Unsafe) == 0
	if !res.Passed {
		res.Artifacts = cfg.Dir
		writeArtifacts(cfg, res, ops, nm.applied, logLines)
	}
	return res
}

func without(s []string, x string) []string {
	var out []string
	for _, k := range s {
		if k != x {
			out = append(out, k)
		}
	}
	return out
}

// writeArtifacts leaves, next to the agents' logs (n*/agent.log) and
// porcupine.html, the schedule, the history, the verdict and the replay
// command.
func writeArtifacts(cfg runConfig, res runResult, ops []histOp, faults []fault, log []string) {
	put := func(name string, v any) {
		b, _ := json.MarshalIndent(v, "", "  ")
		_ = os.WriteFile(filepath.Join(cfg.Dir, name), b, 0o644)
	}
	put("result.json", res)
	put("schedule.json", faults)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Invoke < ops[j].Invoke })
	put("history.json", ops)
	_ = os.WriteFile(filepath.Join(cfg.Dir, "harness.log"), []byte(strings.Join(log, "\n")+"\n"), 0o644)
	_ = os.WriteFile(filepath.Join(cfg.Dir, "REPLAY"), []byte(res.Replay+"\n"), 0o644)
}
