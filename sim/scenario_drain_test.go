package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/failover"
)

func TestGracefulDrainScenario(t *testing.T) {
	tests := []struct {
		name    string
		profile string
		parts   int
	}{
		{"fast", "fast", 60},
		{"paper", "paper", 80},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Run(Config{Scenario: "graceful-drain", Seed: 1, Partitions: tt.parts, FailoverProfile: tt.profile,
				Outage: 2 * time.Minute, Duration: time.Minute})
			require.NoError(t, err)
			require.NotNil(t, res.ScenarioFigures)
			f := res.ScenarioFigures.Drain
			require.NotNil(t, f)
			t.Logf("%s", f.table())
			require.Empty(t, res.Violations)
			require.Equal(t, LinOK, res.Linearizable)
			require.Zero(t, res.FailoverReport.RPO.Max, "RPO 0")
			require.Positive(t, f.Partitions)
			require.Zero(t, f.NotDrained)
			require.Equal(t, f.Partitions, f.PerPart.N)
			// Paced by the rate limit: never more than the cap at once,
			// never more than the burst plus a second's worth of starts
			// in a second (the scenario replays the bucket exactly).
			require.Positive(t, f.MaxRunning)
			require.LessOrEqual(t, f.MaxRunning, failover.DefaultDrainConcurrency)
			require.GreaterOrEqual(t, f.Starts, f.Partitions)
			require.LessOrEqual(t, f.MaxStartsIn1S, failover.DefaultDrainBurst+int(failover.DefaultDrainRate))
			require.LessOrEqual(t, f.StartedPerS, failover.DefaultDrainRate+float64(failover.DefaultDrainBurst))
			// Interrupted midway and resumed to the end.
			require.Greater(t, f.RemainingAtRestart, 0)
			require.Less(t, f.RemainingAtRestart, f.Partitions)
		})
	}
}
