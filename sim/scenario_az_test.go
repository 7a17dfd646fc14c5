package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAZOutageScenario(t *testing.T) {
	tests := []struct {
		profile string
		maxP99  float64
	}{
		{"fast", 3},
		{"paper", 55},
	}
	for _, tt := range tests {
		t.Run(tt.profile, func(t *testing.T) {
			res, err := Run(Config{Scenario: "az-outage", Seed: 1, Partitions: 45, FailoverProfile: tt.profile, Outage: 2 * time.Minute, Duration: time.Minute})
			require.NoError(t, err)
			require.NotNil(t, res.ScenarioFigures)
			f := res.ScenarioFigures.AZ
			require.NotNil(t, f)
			require.Empty(t, res.Violations)
			require.Equal(t, LinOK, res.Linearizable)
			// Only the zone's write replicas moved; a third of the region's.
			require.Positive(t, f.Affected)
			require.Positive(t, f.FollowerOnly)
			require.Zero(t, f.Moved)
			require.Equal(t, f.Affected, res.FailoverReport.AffectedPartitions)
			require.Zero(t, res.FailoverReport.NotFailedOver)
			require.LessOrEqual(t, res.FailoverReport.FailoverCompletion.P99, tt.maxP99)
			require.Zero(t, res.FailoverReport.RPO.Max)
		})
	}
}
