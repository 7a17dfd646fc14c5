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
	// Clients that read weaker than their partition promises must be caught.
	r, err := Run(Config{Scenario: "replication", Seed: 2, Canary: true})
	require.NoError(t, err)
	assert.True(t, r.Failed(), "the weak-read canary went unnoticed")
}
