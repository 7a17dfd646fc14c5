package sim

import (
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/quorum"
)

// registerScenario: closed-loop clients run random CAS and reads over many
// keys through many proposers, under the run's faults.
type registerScenario struct{}

func (registerScenario) Name() string { return "register" }
func (registerScenario) Description() string {
	return "random CAS and reads over many keys and proposers under faults (linearizability, liveness)"
}

// Register scenario defaults.
const (
	registerAcceptors = 5
	registerProposers = 6
	registerKeys      = 8
	registerDuration  = 20 * time.Second
	canaryDuration    = 180 * time.Second
)

func (registerScenario) Run(cfg Config) (Result, error) {
	acceptors, proposers, keys := registerAcceptors, registerProposers, registerKeys
	wcfg := WorkloadConfig{ClientsPerNode: 2, ReadFraction: 0.3, ThinkMin: 0, ThinkMax: 200 * time.Millisecond, MaxHistory: 50000}
	factory := AcceptorFactory(NewAcceptor)
	separate := false
	var crashable []int32
	if cfg.Canary || cfg.CanaryControl {
		// Three acceptors restarting often, proposers on nodes of their own
		// (their clients never lose an operation to a crash), few keys and
		// eager clients: the forgetful acceptor's window, a restart between
		// a promise and the accept it guards, is hit many times a run.
		acceptors, keys, separate = 3, 4, true
		crashable = []int32{0, 1, 2}
		wcfg.ClientsPerNode, wcfg.ThinkMin, wcfg.ThinkMax = 1, 50*time.Millisecond, 300*time.Millisecond
		if cfg.Canary {
			factory = ForgetfulAcceptor
		}
	}
	if cfg.Keys > 0 {
		keys = cfg.Keys
	}
	if cfg.Proposers > 0 {
		proposers = cfg.Proposers
	}
	wcfg.Keys = keys
	d := cfg.Duration
	if d == 0 {
		d = registerDuration
		if cfg.Canary || cfg.CanaryControl {
			// Ballots that start from the clock make competing rounds on
			// one key rarer, so the forgetful acceptor's window needs a
			// longer run to be hit on every seed.
			d = canaryDuration
		}
	}
	nodes := max(acceptors, proposers)
	if separate {
		nodes = acceptors + proposers
	}
	e, err := newEnv(cfg, envSpec{topo: DefaultWAN(), nodeRegion: regionsRoundRobin(min(nodes, MaxNodes), 3), maxHistory: wcfg.MaxHistory, crashable: crashable})
	if err != nil {
		return Result{}, err
	}
	pc := caspaxos.DefaultProposerConfig(1, quorum.Config{})
	if cfg.Canary || cfg.CanaryControl {
		// The canary's window needs competing rounds on a key; pacing
		// (caspaxos/pacing.go) orders rivals so that they stop competing,
		// and would leave seeds where the broken acceptor is never hit.
		// The control runs the same proposers.
		pc.PaceMemory = 0
	}
	cl, err := newCluster(e.w, ClusterConfig{
		Acceptors: acceptors, Proposers: proposers, SeparateProposers: separate,
		Proposer: pc,
		Factory:  factory,
		FsyncMin: 200 * time.Microsecond, FsyncMax: 2 * time.Millisecond, SlowFsync: 0.01,
	}, &e.viol)
	if err != nil {
		return Result{}, err
	}
	wl := newWorkload(cl, wcfg, e.hist, &e.ops)
	wl.start()
	e.safety(d)
	e.heal()
	wl.stop()
	e.settleCluster(cl, wl.keys, 0, nil)
	clusterMetrics(e, cl)
	return e.result("register"), nil
}
