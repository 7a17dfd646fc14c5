package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/proctest"
)

// demoTestOptions is a test-sized drill: 3 regions x 2 nodes, 24
// partitions, a short warm-up and outage.
func demoTestOptions(t *testing.T) demoOptions {
	o := defaultDemoOptions()
	o.bin = proctest.Build(t, "github.com/fmnode/fmnode/cmd/fmnode")
	o.dataParent = t.TempDir()
	o.warmup, o.hold = 3*time.Second, time.Second
	o.thinkMin, o.thinkMax = 500*time.Millisecond, time.Second
	o.preload = 1 << 10
	o.failoverBound, o.returnBound = 60*time.Second, 60*time.Second
	return o
}

// TestDemo runs `fmnode demo --json` on a small cluster: it exits 0 with
// every key the issue names, every acknowledged write read back, every
// affected partition failed over; and afterwards no agent process and no
// port of the cluster is left.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("real agent processes")
	}
	t.Parallel()
	o := demoTestOptions(t)
	var lc *localCluster
	o.onCluster = func(c *localCluster) { lc = c }
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code := runDemoWith(ctx, []string{"--json", "--partitions", "24", "--nodes-per-region", "2"}, &stdout, &stderr, o)
	require.Equal(t, 0, code, "stderr:\n%s\nstdout:\n%s", stderr.String(), stdout.String())
	require.NotNil(t, lc)

	var got map[string]any
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &got), stdout.String())
	for _, k := range []string{"detection_s", "failover_completion_s", "write_recovery_s", "client_reroute_s"} {
		d, ok := got[k].(map[string]any)
		require.True(t, ok, "%s: %v", k, got[k])
		for _, q := range []string{"mean", "p50", "p99", "max"} {
			require.Contains(t, d, q, k)
		}
		assert.Positive(t, d["p50"], "%s.p50", k)
	}
	for _, k := range []string{"rpo_ops", "failed_over_within_60s_fraction", "resync_bytes", "full_copy_bytes",
		"acked_writes", "lost_acked_writes", "agents", "partitions", "profile", "prediction"} {
		require.Contains(t, got, k)
	}
	var res demoResult
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &res))
	assert.Equal(t, 6, res.Agents)
	assert.Equal(t, 24, res.Partitions)
	assert.Equal(t, "fast", res.Profile)
	assert.Equal(t, "east", res.KilledRegion, "the preferred region is every partition's first write region")
	assert.Len(t, res.KilledAgents, 2)
	assert.Equal(t, 24, res.AffectedPartitions)
	assert.Zero(t, res.NotFailedOver)
	assert.Equal(t, 24, res.WriteRecovery.N, "every affected partition wrote again")
	assert.Positive(t, res.AckedWrites)
	assert.Zero(t, res.LostAckedWrites)
	assert.Zero(t, res.UnreadableWrites)
	assert.Zero(t, res.RPO.Max)
	assert.Equal(t, 1.0, res.FailedOverWithin60s)
	assert.Positive(t, res.ResyncBytes)
	assert.Less(t, res.ResyncBytes, res.FullCopyBytes, "the returning agents catch up by delta")
	// Detection comes before completion, which comes before the first
	// write in the new epoch, for every statistic.
	assert.LessOrEqual(t, res.Detection.P50, res.FailoverCompletion.P50)
	assert.LessOrEqual(t, res.FailoverCompletion.P50, res.WriteRecovery.P50)
	require.NotNil(t, res.Prediction)
	require.NotNil(t, res.Prediction.FailoverReport)
	assert.Equal(t, 24, res.Prediction.AffectedPartitions, "the prediction has the same layout")
	assert.Contains(t, res.Prediction.Replay, "--nodes-per-region 2")
	// The prediction's queue was measured on the burst before the kill.
	assert.Equal(t, uint64(24), res.BurstAcked, "every partition took its burst write")
	assert.Positive(t, res.PredictionRequestServiceMs)
	assert.Contains(t, res.Prediction.Replay, "--service-slots 1 --request-service ")
	assert.InDelta(t, res.PredictionRequestServiceMs/2, res.PredictionHeldPollServiceMs, 0.001, "a held poll's answer costs half")
	assert.Contains(t, res.Prediction.Replay, " --held-poll-service ")
	assert.Contains(t, stderr.String(), "failover:", "the progress shows the phase")
	assert.Contains(t, stderr.String(), "s left", "the progress counts down")
	assert.Contains(t, stderr.String(), " 12/12 prediction:", "the phase count ends at its total")

	requireNothingLeft(t, lc, o.dataParent)
}

// TestDemoInterrupted: Ctrl-C (the context ending) in the middle of the
// drill stops every child and frees every port; the exit code is not 0.
func TestDemoInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("real agent processes")
	}
	t.Parallel()
	o := demoTestOptions(t)
	var lc *localCluster
	o.onCluster = func(c *localCluster) { lc = c }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o.onPhase = func(name string) {
		if name == "steady" {
			go func() {
				time.Sleep(500 * time.Millisecond)
				cancel()
			}()
		}
	}
	var stdout, stderr bytes.Buffer
	code := runDemoWith(ctx, []string{"--partitions", "12", "--nodes-per-region", "1"}, &stdout, &stderr, o)
	require.NotEqual(t, 0, code, stderr.String())
	require.NotNil(t, lc)
	requireNothingLeft(t, lc, o.dataParent)
}

// TestDemoFlags: bad flags are refused with the reason, exit 2.
func TestDemoFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--regions", "2"},
		{"--nodes-per-region", "0"},
		{"--regions", "5", "--nodes-per-region", "7"},
		{"--profile", "slow"},
		{"--partitions", "0"},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		o := defaultDemoOptions()
		o.bin = "/nonexistent"
		assert.Equal(t, 2, runDemoWith(context.Background(), args, &stdout, &stderr, o), "%v: %s", args, stderr.String())
		assert.NotEmpty(t, stderr.String(), "%v", args)
	}
}

// requireNothingLeft: no process runs with a config of the demo's
// directory, and every port of the cluster can be bound again.
func requireNothingLeft(t *testing.T, lc *localCluster, dataParent string) {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	require.NoError(t, err)
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		assert.NotContains(t, cmd, dataParent, "a child outlived the demo: %s (%s)", cmd, p)
	}
	for _, n := range lc.nodes {
		for _, addr := range []string{n.api, n.node, n.gossip} {
			ln, err := net.Listen("tcp", addr)
			if assert.NoError(t, err, "%s's port %s is still taken", n.name, addr) {
				ln.Close()
			}
		}
		if n.dns != "" {
			pc, err := net.ListenPacket("udp", n.dns)
			if assert.NoError(t, err, "%s's DNS port %s is still taken", n.name, n.dns) {
				pc.Close()
			}
		}
	}
	_, err = os.Stat(lc.cfg.Dir)
	assert.True(t, os.IsNotExist(err), "the demo's directory %s is left", lc.cfg.Dir)
}
