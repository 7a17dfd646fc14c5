package sim

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRerouteTrace: with Config.RerouteTrace the report carries the
// routing steps of the slowest reroutes, slowest first, each ending with
// the write acknowledged in the new epoch; off, no client keeps a trace
// and the run is the same run (same trace hash).
func TestRerouteTrace(t *testing.T) {
	sc, ok := Lookup("region-outage")
	require.True(t, ok)
	fs := sc.(failoverScenario)
	run := func(n int) (Result, *foDrill) {
		cfg := Config{Scenario: "region-outage", Seed: 1, Partitions: 30, FailoverProfile: "fast", Outage: time.Minute,
			Duration: 2 * time.Minute, RerouteTrace: n}
		res, d, err := fs.run(cfg.withDefaults())
		require.NoError(t, err)
		require.Empty(t, res.Violations)
		return res, d
	}
	off, doff := run(0)
	for _, c := range doff.fw.clients {
		require.Nil(t, c.trace, "tracing off: no client keeps a trace")
	}
	assert.Empty(t, off.FailoverReport.ClientRerouteTrace)

	const n = 3
	on, _ := run(n)
	assert.Equal(t, off.TraceHash, on.TraceHash, "tracing does not change the run")
	assert.Equal(t, off.FailoverReport.ClientReroute, on.FailoverReport.ClientReroute)
	ts := on.FailoverReport.ClientRerouteTrace
	require.Len(t, ts, n)
	assert.InDelta(t, on.FailoverReport.ClientReroute.Max, ts[0].RerouteS, 1e-9, "the slowest first")
	for i, tr := range ts {
		if i > 0 {
			assert.LessOrEqual(t, tr.RerouteS, ts[i-1].RerouteS)
		}
		require.NotEmpty(t, tr.Events)
		last := tr.Events[len(tr.Events)-1]
		assert.Contains(t, last, "end ok", "trace %d ends with the write that landed", i)
		acked := tr.Events[len(tr.Events)-2]
		require.Contains(t, acked, "ack from "+tr.NewRegion)
		at, err := strconv.ParseFloat(strings.Fields(acked)[0], 64)
		require.NoError(t, err)
		assert.InDelta(t, tr.RerouteS, at, 1e-3, "event times are from the commit")
		assert.Contains(t, strings.Join(tr.Events, "\n"), "send "+tr.NewRegion)
	}
	assert.Contains(t, on.FailoverReport.Table(), "slowest reroutes")
}
