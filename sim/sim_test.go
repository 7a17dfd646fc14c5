package sim

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// short keeps every run of these tests small: the sweeps below run many
// seeds, and `go test ./sim/` must stay well under a minute on two cores.
func short(scenario string, seed uint64, f FaultLevel) Config {
	c := Config{Scenario: scenario, Seed: seed, Faults: f}
	if strings.HasPrefix(scenario, "contention") {
		c.Duration, c.Interval = 10*time.Minute, 10*time.Second
	}
	return c
}

func run(t *testing.T, cfg Config) Result {
	t.Helper()
	r, err := Run(cfg)
	require.NoError(t, err)
	return r
}

func TestDeterminism(t *testing.T) {
	for _, sc := range ScenarioNames() {
		t.Run(sc, func(t *testing.T) {
			a := run(t, short(sc, 7, FaultsSwarm))
			b := run(t, short(sc, 7, FaultsSwarm))
			assert.Equal(t, a.TraceHash, b.TraceHash, "same seed, same trace")
			assert.Equal(t, a.Events, b.Events)
			assert.Equal(t, a.Ops, b.Ops)
			assert.Equal(t, a.FaultsInjected, b.FaultsInjected)
			c := run(t, short(sc, 8, FaultsSwarm))
			assert.NotEqual(t, a.TraceHash, c.TraceHash, "another seed, another trace")
		})
	}
}

func TestSweepMatchesSingleRuns(t *testing.T) {
	hashes := map[uint64]string{}
	Sweep(context.Background(), short("register", 0, FaultsHeavy), 1, 6, runtime.NumCPU(), func(r SweepResult) {
		require.NoError(t, r.Err)
		hashes[r.Result.Seed] = r.Result.TraceHash
	})
	for seed := uint64(1); seed <= 6; seed++ {
		assert.Equal(t, run(t, short("register", seed, FaultsHeavy)).TraceHash, hashes[seed], "seed %d: running beside others changes nothing", seed)
	}
}

// TestScenariosPass is the sweep CI runs, scaled down: the real cores must
// pass every seed of every scenario at every fault level.
func TestScenariosPass(t *testing.T) {
	tests := []struct {
		scenario string
		faults   FaultLevel
		seeds    uint64
	}{
		{"register", FaultsNone, 5},
		{"register", FaultsLight, 10},
		{"register", FaultsHeavy, 10},
		{"register", FaultsSwarm, 40},
		{"membership", FaultsNone, 5},
		{"membership", FaultsLight, 10},
		{"membership", FaultsSwarm, 30},
		{"contention", FaultsNone, 3},
		{"contention", FaultsSwarm, 5},
		{"contention-burst", FaultsNone, 2},
		{"contention-burst", FaultsSwarm, 3},
	}
	for _, tt := range tests {
		t.Run(tt.scenario+"/"+tt.faults.String(), func(t *testing.T) {
			Sweep(context.Background(), short(tt.scenario, 0, tt.faults), 1, tt.seeds, runtime.NumCPU(), func(r SweepResult) {
				require.NoError(t, r.Err)
				res := r.Result
				assert.False(t, res.Failed(), "seed %d: %v (lin %s)\nreplay: %s", res.Seed, res.Violations, res.Linearizable, res.Replay)
				assert.Positive(t, res.Ops.OK, "seed %d did some work", res.Seed)
			})
		})
	}
}

func TestEveryFaultKindInjected(t *testing.T) {
	var total FaultCounts
	for _, f := range []FaultLevel{FaultsHeavy, FaultsSwarm} {
		Sweep(context.Background(), short("register", 0, f), 1, 6, runtime.NumCPU(), func(r SweepResult) {
			require.NoError(t, r.Err)
			for _, k := range FaultKinds() {
				total[k] += r.Result.FaultsInjected[k.String()]
			}
		})
	}
	for _, k := range FaultKinds() {
		assert.Positive(t, total[k], "fault kind %v never injected", k)
	}
	none := run(t, short("register", 1, FaultsNone))
	for k, v := range none.FaultsInjected {
		assert.Zero(t, v, "--faults none injected %s", k)
	}
}

func TestCanaryDetected(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		cfg := short("register", seed, FaultsLight)
		cfg.Canary, cfg.OutDir = true, t.TempDir()
		r := run(t, cfg)
		assert.True(t, r.Failed(), "seed %d: the broken acceptor went unnoticed", seed)
		assert.Equal(t, LinIllegal, r.Linearizable, "seed %d", seed)
		assert.FileExists(t, r.Visualization)
		assert.Contains(t, r.Replay, "--canary")
		assert.Positive(t, r.FaultsInjected["crash"])

		// The same workload and faults with the real acceptor pass: it is
		// the acceptor that fails, not the setting.
		cfg.Canary, cfg.CanaryControl = false, true
		c := run(t, cfg)
		assert.False(t, c.Failed(), "seed %d control: %v", seed, c.Violations)
	}
}

func TestLivenessFailureDetected(t *testing.T) {
	cfg := short("register", 3, FaultsLight)
	cfg.BreakLiveness = true
	cfg.LivenessBound = 20 * time.Second
	r := run(t, cfg)
	require.True(t, r.Failed())
	found := false
	for _, v := range r.Violations {
		found = found || strings.HasPrefix(v, ViolationLiveness)
	}
	assert.True(t, found, "violations: %v", r.Violations)
}

func TestRunRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"unknown scenario", Config{Scenario: "nope"}},
		{"negative duration", Config{Scenario: "register", Duration: -1}},
		{"too many keys", Config{Scenario: "register", Keys: MaxKeys + 1}},
		{"too many proposers", Config{Scenario: "register", Proposers: MaxProposers + 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(tt.cfg)
			assert.ErrorIs(t, err, ErrConfig)
		})
	}
}

func TestResultJSON(t *testing.T) {
	r := run(t, short("register", 1, FaultsLight))
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{"seed", "scenario", "sim_seconds", "wall_seconds", "events", "faults_injected", "violations", "linearizable", "trace_hash", "replay"} {
		assert.Contains(t, m, k)
	}
	assert.Equal(t, "go run ./cmd/fmnode sim --scenario register --seed 1 --faults light", r.Replay)
}

func TestContentionReportsEveryBackoff(t *testing.T) {
	r := run(t, short("contention", 1, FaultsNone))
	for _, k := range []string{"none", "exponential", "adaptive", "turns"} {
		assert.Contains(t, r.Metrics, "conflict_rate_"+k)
		assert.Contains(t, r.Metrics, "goodput_per_second_"+k)
		assert.Positive(t, r.Metrics["rounds_"+k])
	}
}

func TestMembershipChangesConfigurations(t *testing.T) {
	r := run(t, short("membership", 2, FaultsNone))
	assert.GreaterOrEqual(t, r.Metrics["plans_completed"], 3.0, "grew to five and shrank")
	assert.Positive(t, r.Metrics["rescans"])
}
