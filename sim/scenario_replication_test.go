package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReplicationScenario(t *testing.T) {
	for _, f := range []FaultLevel{FaultsNone, FaultsLight, FaultsSwarm} {
		r, err := Run(Config{Scenario: "replication", Seed: 4, Faults: f})
		require.NoError(t, err)
		assert.False(t, r.Failed(), "%v: %v (replay: %s)", f, r.Violations, r.Replay)
		assert.Positive(t, r.Metrics["strong_ops_checked"])
		again, err := Run(Config{Scenario: "replication", Seed: 4, Faults: f})
		require.NoError(t, err)
		assert.Equal(t, r.TraceHash, again.TraceHash, "a seed replays exactly")
	}
	// Heavy faults move the write regions through the failover core.
	r, err := Run(Config{Scenario: "replication", Seed: 1, Faults: FaultsHeavy})
	require.NoError(t, err)
	assert.False(t, r.Failed(), "heavy: %v (replay: %s)", r.Violations, r.Replay)
	assert.Positive(t, r.Metrics["takeovers"], "heavy: no takeover")
	assert.Positive(t, r.Metrics["switchovers"], "heavy: no switchover")
	again, err := Run(Config{Scenario: "replication", Seed: 1, Faults: FaultsHeavy})
	require.NoError(t, err)
	assert.Equal(t, r.TraceHash, again.TraceHash, "a seed with failovers replays exactly")
	// Clients that read weaker than their partition promises must be caught.
	r, err = Run(Config{Scenario: "replication", Seed: 2, Canary: true})
	require.NoError(t, err)
	assert.True(t, r.Failed(), "the weak-read canary went unnoticed")
}
