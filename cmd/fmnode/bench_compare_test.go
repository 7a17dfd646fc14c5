package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/failover"
)

// A tiny bench compare: both systems run every figure, the JSON has the
// keys issue 18 names, and the values are sane (counts, not timings:
// the machine is shared).
func TestBenchCompareEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes, real sockets and fsyncs")
	}
	o := compareOptions{partitions: 12, writers: 4, duration: 500 * time.Millisecond, warmup: 100 * time.Millisecond,
		steadyProfile: "fast", outageTimeout: time.Minute, dataParent: t.TempDir(), command: helperCommand}
	require.NoError(t, o.validate())
	var stderr bytes.Buffer
	out, err := benchCompare(context.Background(), o, &syncWriter{w: &stderr})
	require.NoError(t, err, stderr.String())

	var buf bytes.Buffer
	require.NoError(t, writeJSON(&buf, out))
	var m map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &m))
	for _, side := range []string{"caspaxos", "raft"} {
		s, ok := m[side].(map[string]any)
		require.True(t, ok, "no %q object in %s", side, buf.String())
		for _, k := range []string{"updates_per_sec", "update_p50_ms", "update_p99_ms", "steady_writes_per_partition_hour",
			"store_cpu_seconds", "store_bytes_written"} {
			assert.Contains(t, s, k, side)
		}
		fc, ok := s["failover_completion_s"].(map[string]any)
		require.True(t, ok, side)
		for _, k := range []string{"p50", "p99", "max"} {
			assert.Contains(t, fc, k, side)
		}
	}
	r, ok := m["ratios"].(map[string]any)
	require.True(t, ok)
	assert.Contains(t, r, "updates_per_sec")
	assert.Contains(t, r, "failover_completion_p99")

	for name, s := range map[string]compareSide{"caspaxos": out.CASPaxos, "raft": out.Raft} {
		assert.Positive(t, s.UpdatesPerSec, name)
		assert.GreaterOrEqual(t, s.UpdateP99Ms, s.UpdateP50Ms, name)
		assert.Equal(t, o.partitions, s.FailedOver, name)
		f := s.FailoverCompletionS
		assert.True(t, f.P50 <= f.P99 && f.P99 <= f.Max, "%s: %+v", name, f)
		// Nobody fails over before the takeover delay (lease + drift)
		// from the last heartbeat heard, at most one interval before
		// the kill.
		fast := failover.FastConfig()
		assert.GreaterOrEqual(t, f.P50, (fast.TakeoverDelay() - fast.HeartbeatInterval).Seconds(), name)
		assert.Positive(t, s.StoreCPUSeconds, name)
	}
	// The design writes nothing in steady state; the baseline writes one
	// heartbeat record per replica per interval: 3 replicas every 500 ms.
	assert.Zero(t, out.CASPaxos.SteadyWrites)
	assert.InDelta(t, 3*3600/0.5, out.Raft.SteadyWritesPerPartitionHour, 3*3600/0.5*0.5)
	assert.Positive(t, out.Raft.ElectionS)
	assert.InDelta(t, out.CASPaxos.UpdatesPerSec/out.Raft.UpdatesPerSec, out.Ratios.UpdatesPerSec, 1e-9)
	assert.InDelta(t, out.Raft.FailoverCompletionS.P99/out.CASPaxos.FailoverCompletionS.P99, out.Ratios.FailoverCompletionP99, 1e-9)
}

func TestBenchCompareFlags(t *testing.T) {
	for name, args := range map[string][]string{
		"partitions": {"--partitions", "0"},
		"writers":    {"--writers", "0"},
		"profile":    {"--steady-profile", "slow"},
		"duration":   {"--duration", "0s"},
	} {
		var stdout, stderr bytes.Buffer
		code := runBenchCompare(context.Background(), args, &stdout, &stderr)
		assert.Equal(t, 2, code, name)
		assert.NotEmpty(t, stderr.String(), name)
	}
	o := compareOptions{partitions: 1, writers: 1, duration: time.Second, steadyProfile: "paper", outageTimeout: time.Second}
	require.NoError(t, o.validate())
	assert.Equal(t, 45*time.Second, o.steadySettle, "1.5 paper heartbeats")
	assert.Equal(t, time.Minute, o.steadyWindow, "2 paper heartbeats")
}

func TestCompletion(t *testing.T) {
	ds := make([]time.Duration, 0, 100)
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Second)
	}
	c := completion(ds)
	assert.Equal(t, completionFigure{P50: 50, P99: 99, Max: 100}, c)
	assert.Equal(t, completionFigure{}, completion(nil))
}
