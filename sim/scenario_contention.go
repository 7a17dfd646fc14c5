package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/quorum"
)

// contentionScenario measures the conflict rate the paper's adaptive
// backoff is about: 9 proposers over 3 regions each write one shared
// register about once per heartbeat interval. The same seed runs four
// times, with no backoff, exponential backoff from 100 ms, the
// EMA-adaptive backoff (with its pacing of first attempts and forwarding
// to the key's leader, the proposers told the key's writers up front) and
// the adaptive backoff with turns, and the rates are reported side by
// side.
//
// The steady shape (contention) beats at independent times, each 30 s
// +-20% after the last; the burst shape (contention-burst) has all 9
// proposers beat at the same instant every interval, as every observer of
// a failed region reacts to the same event.
//
// conflict_rate is the paper's figure as the brief reads it: conflicts per
// proposal attempt, that is NAKs (rounds refused for a conflicting ballot)
// over rounds started. It is reported whole, split into first attempts
// (first_attempt_naks over proposals: collisions before any backoff ran)
// and retries (retry_naks over the rounds after a first), and again after
// the warm-up (conflict_rate_warm: the first contentionWarmup, when no
// proposer has seen a rival yet, left out).
type contentionScenario struct{ burst bool }

func (s contentionScenario) Name() string {
	if s.burst {
		return "contention-burst"
	}
	return "contention"
}

func (s contentionScenario) Description() string {
	if s.burst {
		return "9 proposers in 3 regions update one register at the same instant each interval; conflict_rate for none/exponential/adaptive/turns"
	}
	return "9 proposers in 3 regions update one register each heartbeat; conflict_rate for none/exponential/adaptive/turns"
}

// Contention scenario defaults.
const (
	contentionProposers = 9
	contentionAcceptors = 3
	contentionInterval  = 30 * time.Second
	contentionDuration  = time.Hour
	contentionJitter    = 0.2
	// contentionWarmup is left out of conflict_rate_warm (at most half the run).
	contentionWarmup = 10 * time.Minute
)

// contentionVariant is one sub-run of the scenario: a backoff kind, and
// whether contending proposers take turns (caspaxos.ProposerConfig.Turns).
type contentionVariant struct {
	name  string
	kind  caspaxos.BackoffKind
	turns bool
	burst bool // the burst shape
	// forward: proposers of a shared key forward their changes to its
	// leader (caspaxos/forward.go), the adaptive kind's behaviour here.
	forward bool
	// knownWriters: the proposers are told the key's writers up front
	// (ClusterConfig.KnownWriters; session 11), so the smallest id leads
	// from the first event instead of once the proposers have seen each
	// other.
	knownWriters bool
	// killLeader: the node of the key's leader (the smallest proposer id)
	// crashes at the warm-up's end and stays down until the heal, so the
	// run after the warm-up measures the others without it.
	killLeader bool
}

// contentionVariants are the sub-runs, printed side by side: the three
// backoffs as the issue asks (adaptive with its pacing and, since session
// 9, forwarding to the key's leader, told the key's writers up front since
// session 11), then the adaptive backoff with turns, then the adaptive
// backoff again with its leader dead after the warm-up (what a dead known
// writer costs the others: a forward timeout, then the next writer).
func contentionVariants() []contentionVariant {
	return []contentionVariant{
		{name: "none", kind: caspaxos.BackoffNone},
		{name: "exponential", kind: caspaxos.BackoffExponential},
		{name: "adaptive", kind: caspaxos.BackoffAdaptive, forward: true, knownWriters: true},
		{name: "turns", kind: caspaxos.BackoffAdaptive, turns: true},
		{name: "deadleader", kind: caspaxos.BackoffAdaptive, forward: true, knownWriters: true, killLeader: true},
	}
}

func (s contentionScenario) Run(cfg Config) (Result, error) {
	var parts []Result
	var names []string
	for _, v := range contentionVariants() {
		v.burst = s.burst
		v.knownWriters = v.knownWriters && !cfg.UnknownWriters
		r, err := runContention(cfg, v, nil)
		if err != nil {
			return Result{}, fmt.Errorf("%s: %w", v.name, err)
		}
		parts = append(parts, r)
		names = append(names, v.name)
	}
	return mergeResults(s.Name(), names, parts), nil
}

// contentionTap sees every CASPaxos message the network delivers, with its
// delivery time; the NAK diagnosis in the tests uses it.
type contentionTap func(now time.Duration, m caspaxos.Message)

// tapReceiver shows each delivered message to a tap before the cluster gets it.
type tapReceiver struct {
	c   *Cluster
	tap contentionTap
}

func (t tapReceiver) Deliver(now time.Duration, from, to int32, m caspaxos.Message) {
	t.tap(now, m)
	t.c.Deliver(now, from, to, m)
}

func runContention(cfg Config, v contentionVariant, tap contentionTap) (Result, error) {
	return runContentionInspect(cfg, v, tap, nil)
}

// runContentionInspect is runContention with inspect, if set, shown the
// cluster after the run (tests read per-proposer counters from it).
func runContentionInspect(cfg Config, v contentionVariant, tap contentionTap, inspect func(*Cluster)) (Result, error) {
	proposers := contentionProposers
	if cfg.Proposers > 0 {
		proposers = cfg.Proposers
	}
	interval := cfg.Interval
	if interval <= 0 {
		interval = contentionInterval
	}
	d := cfg.Duration
	if d == 0 {
		d = contentionDuration
	}
	e, err := newEnv(cfg, envSpec{topo: DefaultWAN(), nodeRegion: regionsRoundRobin(max(proposers, contentionAcceptors), 3), maxHistory: 200000})
	if err != nil {
		return Result{}, err
	}
	pc := caspaxos.DefaultProposerConfig(1, quorum.Config{})
	pc.Backoff = v.kind
	if v.turns {
		// One turn per proposer (the cluster gives slot i turn i).
		pc.Turns = proposers
	}
	pc.DisableFastPath = cfg.DisableFastPath
	if v.forward {
		pc.Forward, pc.ChangeCodec = true, changeCodec{}
	}
	cl, err := newCluster(e.w, ClusterConfig{
		Acceptors: contentionAcceptors, Proposers: proposers, Proposer: pc, KnownWriters: v.knownWriters,
		FsyncMin: 200 * time.Microsecond, FsyncMax: 2 * time.Millisecond, SlowFsync: 0.01,
	}, &e.viol)
	if err != nil {
		return Result{}, err
	}
	if tap != nil {
		cl.net = NewNetwork[caspaxos.Message](e.w, tapReceiver{c: cl, tap: tap}, cl.cfg.MaxInFlight, summarizeMessage)
	}
	wl := newWorkload(cl, WorkloadConfig{
		Keys: 1, ClientsPerNode: 1, MaxHistory: 200000,
		HeartbeatEvery: interval, HeartbeatJitter: contentionJitter, HeartbeatOneKey: true,
		HeartbeatBurst: v.burst,
	}, e.hist, &e.ops)
	lat := &latencies{}
	wl.observe = lat.add
	warm := &statsAt{cl: cl}
	warmEnd := e.w.Now() + min(contentionWarmup, d/2)
	e.w.Sched.At(warmEnd, NoNode, warm, 0)
	var kill *nodeKill
	if v.killLeader {
		kill = &nodeKill{w: e.w, node: cl.leaderNode()}
		e.w.Sched.At(warmEnd, NoNode, kill, 0)
	}
	wl.start()
	e.safety(d)
	safetyEnd := e.w.Now()
	e.heal()
	if kill != nil {
		e.w.Restart(kill.node)
	}
	wl.stop()
	e.settleCluster(cl, wl.keys, len(cl.prop), nil)
	clusterMetrics(e, cl)
	if inspect != nil {
		inspect(cl)
	}
	s := cl.ProposerStats()
	e.metrics["goodput_per_second"] = float64(s.Commits) / safetyEnd.Seconds()
	if s.Commits > 0 {
		// Rounds per committed beat: 2 means every beat lost one round to a NAK.
		e.metrics["rounds_per_commit"] = float64(s.Rounds) / float64(s.Commits)
	}
	conflictMetrics(e.metrics, s, warm.s)
	e.metrics["interval_seconds"] = interval.Seconds()
	e.metrics["latency_p50_ms"] = lat.quantile(0.5)
	e.metrics["latency_p99_ms"] = lat.quantile(0.99)
	return e.result(contentionScenario{burst: v.burst}.Name()), nil
}

// nodeKill crashes a node when it fires.
type nodeKill struct {
	w    *World
	node int32
}

func (k *nodeKill) Fire(time.Duration, uint64) { k.w.Crash(k.node) }

// statsAt takes the proposers' counters when it fires (the warm-up's end).
type statsAt struct {
	cl *Cluster
	s  caspaxos.ProposerStats
}

func (a *statsAt) Fire(time.Duration, uint64) { a.s = a.cl.ProposerStats() }

// conflictMetrics splits the conflicts of the whole run (s, settling
// included, as clusterMetrics' rounds, naks and conflict_rate): first
// attempts against retries, after the warm-up (s minus warm), and the
// proposals that gave up.
func conflictMetrics(m map[string]float64, s, warm caspaxos.ProposerStats) {
	end := s
	m["proposals"] = float64(s.Proposals)
	m["failures"] = float64(s.Failures)
	m["first_attempt_naks"] = float64(s.FirstNAKs)
	m["retry_naks"] = float64(s.NAKs - s.FirstNAKs)
	m["paced_proposals"] = float64(s.Paced)
	m["forwards"] = float64(s.Forwards)
	m["forwards_served"] = float64(s.ForwardsServed)
	m["forward_timeouts"] = float64(s.ForwardTimeouts)
	m["forward_fallbacks"] = float64(s.ForwardFallbacks)
	if s.Proposals > 0 {
		m["conflict_rate_first"] = float64(s.FirstNAKs) / float64(s.Proposals)
	}
	// Retries are the rounds that were not a request's first: with
	// forwarding a round carries a batch, so Rounds - Proposals can be
	// negative.
	m["first_rounds"] = float64(s.FirstRounds)
	if s.Rounds > s.FirstRounds {
		m["conflict_rate_retry"] = float64(s.NAKs-s.FirstNAKs) / float64(s.Rounds-s.FirstRounds)
	}
	m["rounds_warm"] = float64(end.Rounds - warm.Rounds)
	m["naks_warm"] = float64(end.NAKs - warm.NAKs)
	// Proposals after the warm-up: with forwarding several share a round,
	// so a NAK-free count of rounds bounds the per-proposal rate lower.
	m["proposals_warm"] = float64(end.Proposals - warm.Proposals)
	m["failures_warm"] = float64(end.Failures - warm.Failures)
	m["forward_timeouts_warm"] = float64(end.ForwardTimeouts - warm.ForwardTimeouts)
	if end.Rounds > warm.Rounds {
		m["conflict_rate_warm"] = float64(end.NAKs-warm.NAKs) / float64(end.Rounds-warm.Rounds)
	}
}

// latencies keeps operation latencies for quantiles (bounded by the history).
type latencies struct{ ms []float64 }

func (l *latencies) add(d time.Duration) {
	if len(l.ms) < 1<<20 {
		l.ms = append(l.ms, float64(d)/float64(time.Millisecond))
	}
}

func (l *latencies) quantile(q float64) float64 {
	if len(l.ms) == 0 {
		return 0
	}
	s := slices.Clone(l.ms)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// mergeResults folds the sub-runs of one seed into one result: counts add
// up, the worst verdict wins, violations are labelled with their sub-run,
// metrics are suffixed with it, and the trace hash covers all sub-runs.
func mergeResults(scenario string, names []string, parts []Result) Result {
	out := parts[0]
	out.Scenario = scenario
	out.FaultsInjected = make(map[string]uint64)
	out.Metrics = make(map[string]float64)
	out.Violations = []string{}
	out.Ops = OpStats{}
	out.SimSeconds, out.Events = 0, 0
	t := NewTrace()
	for i, p := range parts {
		name := names[i]
		out.SimSeconds += p.SimSeconds
		out.Events += p.Events
		for k, v := range p.FaultsInjected {
			out.FaultsInjected[k] += v
		}
		for _, v := range p.Violations {
			out.Violations = append(out.Violations, "["+name+"] "+v)
		}
		for k, v := range p.Metrics {
			out.Metrics[k+"_"+name] = v
		}
		out.Ops.Issued += p.Ops.Issued
		out.Ops.OK += p.Ops.OK
		out.Ops.Mismatch += p.Ops.Mismatch
		out.Ops.Failed += p.Ops.Failed
		out.Ops.Unknown += p.Ops.Unknown
		out.Ops.Refused += p.Ops.Refused
		out.Ops.TimedOut += p.Ops.TimedOut
		if rank(p.Linearizable) > rank(out.Linearizable) {
			out.Linearizable = p.Linearizable
		}
		if out.Visualization == "" {
			out.Visualization = p.Visualization
		}
		t.Str(p.TraceHash)
	}
	out.TraceHash = t.String()
	return out
}

func rank(verdict string) int {
	switch verdict {
	case LinIllegal:
		return 3
	case LinUnknown:
		return 2
	case LinOK:
		return 1
	}
	return 0
}
