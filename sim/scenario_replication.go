package sim

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/partitiontest"
	"github.com/fmnode/fmnode/partition/replcheck"
)

// replicationScenario runs the partition data plane's replication checks
// (package replcheck over partitiontest.Cluster, the data plane's own
// deterministic harness): clients at every consistency level with a fixed
// write region under loss, duplication, delay, link cuts and crashes at any
// point; porcupine for strong keys, read-your-writes and monotonic reads
// for session clients, the staleness bound for bounded staleness, and no
// acknowledged strong write lost. The fault level scales the mix; heavy
// faults, and half the swarm seeds, also move every partition's write
// region through the failover core (replcheck's Config.FailoverEvery:
// takeovers by failover.Decide after lease plus drift, graceful
// switchovers, carried out by failover.Reconcile and node.Do); --canary
// makes clients read weaker than promised, which must be caught.
type replicationScenario struct{}

func (replicationScenario) Name() string { return "replication" }
func (replicationScenario) Description() string {
	return "partition data plane: writes and reads at every consistency level under network and crash faults (write region moved by the failover core under heavy and half the swarm seeds)"
}

func (replicationScenario) Run(cfg Config) (Result, error) {
	rc := replcheck.DefaultConfig(cfg.Seed)
	switch cfg.Faults {
	case FaultsNone:
		rc.LossRate, rc.DupRate, rc.CrashAfterCommitRate = 0, 0, 0
		rc.CrashEvery, rc.CutEvery = 0, 0
	case FaultsHeavy:
		rc.LossRate, rc.DupRate, rc.CrashAfterCommitRate = 0.08, 0.03, 0.01
		rc.CrashEvery, rc.CutEvery = time.Second, time.Second
		rc.FailoverEvery = 2 * time.Second
	case FaultsSwarm:
		// Each seed draws its own mix and intensities.
		r := rand.New(rand.NewPCG(cfg.Seed, 0x5157))
		rc.LossRate, rc.DupRate = r.Float64()*0.1, r.Float64()*0.05
		rc.CrashAfterCommitRate = r.Float64() * 0.01
		rc.CrashEvery = time.Duration(500+r.IntN(5000)) * time.Millisecond
		rc.CutEvery = time.Duration(500+r.IntN(5000)) * time.Millisecond
		rc.MaxDelay = time.Duration(2+r.IntN(60)) * time.Millisecond
		if r.IntN(3) == 0 {
			rc.CrashEvery = 0
		}
		// Drawn last: the seeds' other draws stay as they were.
		if r.IntN(2) == 0 {
			rc.FailoverEvery = time.Duration(1000+r.IntN(3000)) * time.Millisecond
		}
	}
	if cfg.Duration > 0 {
		rc.Duration = cfg.Duration
	}
	if cfg.Canary {
		rc.CanaryReadLevel = partition.Eventual
	}
	if cfg.CheckTimeout > 0 {
		rc.LinearizabilityTimeout = cfg.CheckTimeout
	}
	// Every committed write and delivered message goes into the trace hash,
	// so a seed's run can be compared across reruns like the others.
	tr := NewTrace()
	rc.Observe = func(ev partitiontest.ObservedEvent) {
		tr.Begin('R', ev.At)
		tr.Str(string(ev.Region))
		for _, w := range ev.Commit {
			tr.Byte('w')
			tr.U64(uint64(w.Partition))
		}
		if m := ev.Message; m != nil {
			tr.Byte(byte(m.Type))
			tr.U64(uint64(m.Partition))
			tr.U64(uint64(m.Epoch))
			tr.Str(string(m.From))
			tr.Str(string(m.To))
			tr.U64(uint64(m.Prev))
			tr.U64(uint64(len(m.Entries)))
		}
		// The data plane's harness has its own loop: report from its
		// observed events (no phases to name).
		if cfg.Progress != nil && tr.Events()&(ProgressEvery-1) == 0 {
			cfg.Progress(ProgressReport{Seed: cfg.Seed, Scenario: "replication", SimNow: ev.At,
				Total: rc.Duration + rc.Heal, Events: tr.Events()})
		}
	}
	start := time.Now()
	rep, err := replcheck.Run(rc)
	res := Result{
		Seed: cfg.Seed, Scenario: "replication", Faults: cfg.Faults.String(), Canary: cfg.Canary,
		SimSeconds:  (rc.Duration + rc.Heal).Seconds(),
		WallSeconds: time.Since(start).Seconds(),
		Events:      tr.Events(),
		FaultsInjected: map[string]uint64{
			"loss": rep.Cluster.Lost, "duplicate": rep.Cluster.Duplicated, "cut": rep.Cluster.Cut,
			"crash": rep.Cluster.Crashes, "crash_after_commit": rep.Cluster.CrashesAfterCommit,
		},
		Linearizable: LinOK,
		TraceHash:    tr.String(),
		Replay:       ReplayCommand(cfg),
		Metrics: map[string]float64{
			"writes": float64(rep.Writes), "writes_ok": float64(rep.WritesOK), "writes_unknown": float64(rep.WritesUnknown),
			"reads": float64(rep.Reads), "reads_ok": float64(rep.ReadsOK), "strong_ops_checked": float64(rep.StrongOps),
			"session_reads": float64(rep.SessionReads), "bounded_reads": float64(rep.BoundedReads),
			"failovers": float64(rep.Failovers), "takeovers": float64(rep.Takeovers), "switchovers": float64(rep.Switchovers),
			"moves_suppressed": float64(sum(rep.Suppressed)),
		},
	}
	if res.WallSeconds > 0 {
		res.SimPerWall = res.SimSeconds / res.WallSeconds
	}
	if err != nil {
		if !errors.Is(err, replcheck.ErrCheck) {
			return res, err
		}
		res.Violations = append(res.Violations, err.Error())
		if containsFold(err.Error(), "linearizab") {
			res.Linearizable = LinIllegal
		}
	}
	return res, nil
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		match := true
		for j := 0; j < len(sub); j++ {
			a, b := s[i+j], sub[j]
			if 'A' <= a && a <= 'Z' {
				a += 'a' - 'A'
			}
			if a != b {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
