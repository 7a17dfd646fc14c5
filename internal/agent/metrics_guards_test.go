package agent

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/guard"
)

// Every guard has its series from the start; Fire counts the one named.
func TestGuardCountersExportEveryGuard(t *testing.T) {
	g := newGuardCounters()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(g))
	assert.Equal(t, int(guard.NumNames)-1, testutil.CollectAndCount(g, "fmnode_guard_fired_total"))
	g.Fire(guard.LeaseGateAck)
	g.Fire(guard.LeaseGateAck)
	g.Fire(0) // no guard: ignored
	assert.Equal(t, 2.0, testutil.ToFloat64(g.vec.WithLabelValues("lease_gate_ack")))
	assert.Equal(t, 0.0, testutil.ToFloat64(g.vec.WithLabelValues("no_candidate")))
}
