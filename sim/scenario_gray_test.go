package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/failover"
)

func TestGrayFailureScenario(t *testing.T) {
	res, err := Run(Config{Scenario: "gray-failure", Seed: 1, Partitions: 40, FailoverProfile: "fast", Outage: time.Minute, Duration: time.Minute})
	require.NoError(t, err)
	require.NotNil(t, res.ScenarioFigures)
	g := res.ScenarioFigures.Gray
	require.NotNil(t, g)
	t.Logf("%s%s", res.FailoverReport.Table(), g.table())
	require.Empty(t, res.Violations)
	require.Equal(t, LinOK, res.Linearizable)
	require.Positive(t, g.Affected)
	// Every affected partition moved, on gray evidence only, not before
	// GrayStall, and nothing acknowledged was lost.
	require.Equal(t, g.Affected, g.ByGray)
	require.Zero(t, g.BySilence)
	require.Zero(t, res.FailoverReport.NotFailedOver)
	require.GreaterOrEqual(t, res.FailoverReport.Detection.P50, failover.FastConfig().GrayStall.Seconds())
	require.Zero(t, res.FailoverReport.RPO.Max)
	// Partitions written elsewhere dropped the stalled follower.
	require.Positive(t, g.StalledShrinks)
}
