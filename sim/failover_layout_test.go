package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFailoverLayout: a layout's first region holds every write region,
// so the outage affects every partition, on nine nodes; the run replays
// from its command; a bad layout is refused naming what is wrong.
func TestFailoverLayout(t *testing.T) {
	lay := &FailoverLayout{Regions: 3, NodesPerRegion: 3, FirstRegionWrites: true, MinDurability: 2, RTT: time.Millisecond, ProcessKill: true}
	cfg := Config{Scenario: "region-outage", Seed: 4, Partitions: 30, FailoverProfile: "fast", Outage: time.Minute,
		Duration: 30 * time.Second, Layout: lay}
	res, err := Run(cfg)
	require.NoError(t, err)
	require.Empty(t, res.Violations)
	require.NotNil(t, res.FailoverReport)
	assert.Equal(t, 30, res.AffectedPartitions, "every write region starts in the first region")
	assert.Zero(t, res.NotFailedOver)
	assert.Contains(t, res.Replay, "--regions 3 --nodes-per-region 3 --min-durability 2 --rtt 1ms --first-region-writes --process-kill")
	// A loopback round trip commits a failover within a few of them of
	// its proposal.
	assert.Less(t, res.FailoverCompletion.Max-res.Detection.Max, 0.1)

	for _, bad := range []FailoverLayout{
		{Regions: 4, NodesPerRegion: 1, MinDurability: 1}, // four regions need a uniform RTT
		{Regions: 6, NodesPerRegion: 1, MinDurability: 1, RTT: time.Millisecond},
		{Regions: 3, NodesPerRegion: 0, MinDurability: 1},
		{Regions: 3, NodesPerRegion: 1, MinDurability: 4},
		{Regions: 3, NodesPerRegion: 1, MinDurability: 1, RTT: -time.Millisecond},
	} {
		_, err := Run(Config{Scenario: "region-outage", Seed: 1, Partitions: 5, Layout: &bad})
		assert.ErrorIs(t, err, ErrConfig, "%+v", bad)
	}
	res, err = Run(Config{Scenario: "region-outage", Seed: 2, Partitions: 10, FailoverProfile: "fast", Outage: time.Minute,
		Duration: 30 * time.Second, Layout: &FailoverLayout{Regions: 5, NodesPerRegion: 1, MinDurability: 2, RTT: time.Millisecond}})
	require.NoError(t, err)
	require.Empty(t, res.Violations)
	assert.Zero(t, res.NotFailedOver, "five regions, one lost")
	_, err = Run(Config{Scenario: "node-failure", Seed: 1, Layout: lay})
	assert.ErrorIs(t, err, ErrConfig, "a layout shapes region-outage only")
}

// TestFailoverLayoutProcessKill: with the processes killed and the
// machines up, the clients' first attempts to the dead write region are
// refused at once instead of timing out, which the traces show.
func TestFailoverLayoutProcessKill(t *testing.T) {
	for _, kill := range []bool{false, true} {
		lay := &FailoverLayout{Regions: 3, NodesPerRegion: 1, FirstRegionWrites: true, MinDurability: 2, RTT: time.Millisecond, ProcessKill: kill}
		res, err := Run(Config{Scenario: "region-outage", Seed: 3, Partitions: 12, FailoverProfile: "fast", Outage: time.Minute,
			Duration: 30 * time.Second, Layout: lay, RerouteTrace: 12})
		require.NoError(t, err)
		require.Empty(t, res.Violations)
		var refused, timeouts int
		for _, tr := range res.ClientRerouteTrace {
			for _, step := range tr.Events {
				if strings.HasSuffix(step, " refused") {
					refused++
				}
				if strings.HasSuffix(step, " timeout") { // not "send ... timeout 1s ..."
					timeouts++
				}
			}
		}
		if kill {
			assert.Positive(t, refused, "killed processes refuse")
			assert.Zero(t, timeouts, "nothing times out")
		} else {
			assert.Zero(t, refused, "powered-off machines do not refuse")
			assert.Positive(t, timeouts, "attempts to powered-off machines time out")
		}
	}
}
