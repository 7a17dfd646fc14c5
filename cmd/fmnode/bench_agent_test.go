package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/proctest"
)

// TestBenchAgentSmoke runs `fmnode bench agent` briefly against real
// agent processes (the built binary) and checks its JSON: writes were
// acknowledged, none of them lost, and the partition benchmark ran next
// to it. Nothing is asserted of the figures' size.
func TestBenchAgentSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("real agent processes")
	}
	bin := proctest.Build(t, "github.com/fmnode/fmnode/cmd/fmnode")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := runBenchAgentWith(ctx, []string{"--partitions", "8", "--writers", "4", "--duration", "1s",
		"--warmup", "200ms", "--data", t.TempDir(), "--json"}, &out, &errb, bin)
	require.Equal(t, 0, code, errb.String())
	var res agentBenchOutput
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	a := res.Agent
	require.Equal(t, 8, a.Partitions)
	require.Equal(t, 4, a.Writers)
	require.Positive(t, a.Writes)
	require.Greater(t, a.WritesPerSec, 0.0)
	require.GreaterOrEqual(t, a.P99Ms, a.P50Ms)
	require.Positive(t, a.Verified, "the acknowledged writes are read back")
	require.Zero(t, a.Lost, "an acknowledged write was lost")
	require.Zero(t, a.VerifyErrors)
	require.Greater(t, a.DNSRoutesPublishedS, 0.0)
	require.Equal(t, 8, res.Partition.Partitions)
	require.Equal(t, 4, res.Partition.Clients)
	require.Greater(t, res.Partition.WritesPerSec, 0.0)
	require.Greater(t, res.RatioWritesPerSec, 0.0)
	require.Contains(t, out.String(), `"ratio_writes_per_sec"`)
}

func TestBenchAgentFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--partitions", "0"}, "--partitions"},
		{[]string{"--writers", "0"}, "--writers"},
		{[]string{"--duration", "0s"}, "--duration"},
		{[]string{"--warmup", "-1s"}, "--warmup"},
		{[]string{"--value-bytes", "-1"}, "--value-bytes"},
		{[]string{"--profile", "slow"}, "--profile"},
	} {
		var out, errb bytes.Buffer
		require.Equal(t, 2, runBenchAgentWith(context.Background(), tc.args, &out, &errb, "/nonexistent/fmnode"), tc.args)
		require.Contains(t, errb.String(), tc.flag)
		require.Empty(t, out.String())
	}
}
