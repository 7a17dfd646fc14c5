package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProgressDoesNotChangeTheRun: a progress callback only observes: the
// same seed with and without it fires the same events (same trace hash),
// and the reports walk the stages in order with time and events never
// going back.
func TestProgressDoesNotChangeTheRun(t *testing.T) {
	cfg := Config{Scenario: "region-outage", Seed: 3, Partitions: 250, FailoverProfile: "fast",
		Outage: 5 * time.Minute, Duration: 3 * time.Minute}
	off, err := Run(cfg)
	require.NoError(t, err)

	var reps []ProgressReport
	cfg.Progress = func(p ProgressReport) { reps = append(reps, p) }
	on, err := Run(cfg)
	require.NoError(t, err)
	require.Empty(t, on.Violations)
	assert.Equal(t, off.TraceHash, on.TraceHash, "a progress callback does not change the run")
	assert.Equal(t, off.Events, on.Events)
	t.Logf("trace hash %s without and %s with progress, %d events, %d reports", off.TraceHash, on.TraceHash, on.Events, len(reps))

	require.NotEmpty(t, reps)
	stages := []string{"setup", "warm-up", "outage", "recovery", "settle", "check"}
	var seen []string
	periodic := 0
	for i, p := range reps {
		assert.Equal(t, cfg.Seed, p.Seed)
		assert.Equal(t, "region-outage", p.Scenario)
		assert.Positive(t, p.Total)
		if len(seen) == 0 || seen[len(seen)-1] != p.Phase {
			seen = append(seen, p.Phase)
		}
		if p.Events > 0 && p.Events%ProgressEvery == 0 {
			periodic++
		}
		if i > 0 {
			assert.GreaterOrEqual(t, p.SimNow, reps[i-1].SimNow)
			assert.GreaterOrEqual(t, p.Events, reps[i-1].Events)
			assert.LessOrEqual(t, p.Total, reps[i-1].Total, "the planned end only moves closer")
		}
	}
	assert.Equal(t, stages, seen)
	assert.Equal(t, int(on.Events/ProgressEvery), periodic, "one report every ProgressEvery events")
	last := reps[len(reps)-1]
	assert.Equal(t, "check", last.Phase)
	assert.Equal(t, on.Events, last.Events)
	assert.InDelta(t, on.SimSeconds, last.SimNow.Seconds(), 1e-9)
	assert.LessOrEqual(t, last.SimNow, last.Total)
}

// TestProgressRegister: the register-type runs report the traced phases
// and a Total of the safety phase plus the liveness bound, unchanged by
// the callback.
func TestProgressRegister(t *testing.T) {
	cfg := Config{Scenario: "register", Seed: 5, Faults: FaultsHeavy}
	off, err := Run(cfg)
	require.NoError(t, err)
	var reps []ProgressReport
	cfg.Progress = func(p ProgressReport) { reps = append(reps, p) }
	on, err := Run(cfg)
	require.NoError(t, err)
	assert.Equal(t, off.TraceHash, on.TraceHash)
	require.NotEmpty(t, reps)
	last := reps[len(reps)-1]
	assert.Equal(t, "check", last.Phase)
	assert.Equal(t, on.Events, last.Events)
	assert.LessOrEqual(t, last.SimNow, last.Total)
}
