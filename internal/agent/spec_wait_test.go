package agent

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSpecPollBacksOffWhileReadsFail: an agent waiting for the spec reads
// the register every 250 ms only while its reads succeed (or find nothing
// to read); each failed read in a row doubles the wait up to the running
// poll, jittered down to half, so that waiting agents on an overloaded
// machine stop colliding every 250 ms (seed 3002 under a CPU cap: none of
// them read the spec for 3 minutes).
func TestSpecPollBacksOffWhileReadsFail(t *testing.T) {
	tests := []struct {
		name     string
		have     bool
		failures int
		rnd      float64
		want     time.Duration
	}{
		{"with a spec: the running poll", true, 3, 0.99, specPoll},
		{"waiting, no failure, no jitter", false, 0, 0.9999999, specPollWaiting},
		{"waiting, no failure, most jitter", false, 0, 0, specPollWaiting / 2},
		{"one failure doubles", false, 1, 0.9999999, 2 * specPollWaiting},
		{"three failures", false, 3, 0.9999999, 8 * specPollWaiting},
		{"many failures: capped at the running poll", false, 40, 0.9999999, specPoll},
		{"capped, most jitter", false, 40, 0, specPoll / 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.InDelta(t, float64(tt.want), float64(specWait(tt.have, tt.failures, tt.rnd)), float64(time.Millisecond))
		})
	}
}

// TestInitAdoptsTheSpecItCommitted: the agent that ran init runs under
// the spec it committed as soon as init returns, without reading the
// register back. Before, it waited for that read like every other agent,
// and under overload (seed 3002 under a CPU cap) the agent that had
// initialised the cluster stayed "waiting for the cluster spec" for the
// whole 3 minutes of setup.
func TestInitAdoptsTheSpecItCommitted(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets, fsyncs and gossip")
	}
	as := startHealthyAgents(t, 3, nil)
	var sr SpecResponse
	require.Equal(t, http.StatusCreated, post(t, "http://"+as[0].cfg.Bind.APIAddr+PathInit, testInitRequest(3), &sr))
	spec, ver, ok := as[0].a.Spec()
	require.True(t, ok, "the initialising agent has no spec when init returns")
	assert.Equal(t, sr.Version, ver)
	assert.Equal(t, sr.Spec.Partitions, spec.Partitions)
	assert.Regexp(t, `msg="cluster spec" .*version=1 from=init`, as[0].log.String(), "the spec came from a register read, not from init")
	for i := range as {
		waitReady(t, as[i].cfg.Bind.APIAddr)
	}
}
