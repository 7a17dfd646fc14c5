package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/failover"
)

func TestFailbackScenario(t *testing.T) {
	res, err := Run(Config{Scenario: "failback", Seed: 1, Partitions: 40, FailoverProfile: "fast", Outage: time.Minute, Duration: time.Minute})
	require.NoError(t, err)
	t.Logf("%s%s", res.FailoverReport.Table(), res.ScenarioFigures.Table())
	require.Empty(t, res.Violations)
	require.Equal(t, LinOK, res.Linearizable)
	fb := res.ScenarioFigures.Failback
	require.NotNil(t, fb)
	// Found by the progress table, all of it in the conflict records.
	require.Positive(t, fb.FalseProgressOps)
	require.Equal(t, fb.FalseProgressOps, fb.ConflictRecords)
	require.Equal(t, fb.ConflictRecords, fb.ByTruncate+fb.ByLogMatching)
	// Only the delta: no snapshot, bytes within changed + 1% of a copy.
	f := res.ScenarioFigures
	require.Zero(t, f.ResyncSnapshots)
	require.True(t, f.ResyncTargetMet)
	require.Positive(t, f.ChangedBytes)
	require.LessOrEqual(t, f.ResyncFraction, f.ChangedFraction+0.01)
	// Back on the preferred region, after the sustained health.
	require.Zero(t, fb.NotFailedBack)
	require.Equal(t, res.FailoverReport.AffectedPartitions, fb.Done.N)
	cfg := failover.FastConfig()
	require.GreaterOrEqual(t, fb.Start.P50+1e-9, (cfg.FailbackAfter - cfg.MaxClockDrift).Seconds())
}

func TestRegionOutagePreloadResync(t *testing.T) {
	tests := []struct {
		name    string
		preload int
		minFull uint64 // per partition
	}{
		{"default 8 KiB", 0, DefaultPreloadBytes},
		{"64 KiB", 64 << 10, 64 << 10},
		{"none", -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Run(Config{Scenario: "region-outage", Seed: 3, Partitions: 20, FailoverProfile: "fast",
				Outage: time.Minute, Duration: time.Minute, PreloadBytes: tt.preload})
			require.NoError(t, err)
			require.Empty(t, res.Violations)
			f := res.ScenarioFigures
			require.NotNil(t, f)
			require.GreaterOrEqual(t, f.ReturningFullCopyBytes, 20*tt.minFull)
			if tt.preload >= 0 {
				require.True(t, f.ResyncTargetMet, "re-sync %.4f, changed %.4f", f.ResyncFraction, f.ChangedFraction)
				require.Zero(t, f.ResyncSnapshots)
			}
		})
	}
}
