package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBenchPartitionJSON(t *testing.T) {
	var out, errb bytes.Buffer
	code := runBenchPartition(context.Background(), []string{
		"--partitions", "30", "--regions", "3", "--consistency", "strong", "--duration", "300ms",
		"--warmup", "100ms", "--clients", "16", "--idle-partitions", "2000", "--data", t.TempDir(), "--json",
	}, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	var res map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	for _, k := range []string{"writes_per_sec", "p50_ms", "p99_ms", "bytes_per_op", "rss_bytes_per_partition"} {
		require.Contains(t, res, k)
	}
	require.Greater(t, res["writes_per_sec"].(float64), 0.0)
	require.Greater(t, res["bytes_per_op"].(float64), 0.0)
	require.Equal(t, float64(0), res["errors"].(float64))
}

func TestBenchPartitionFlags(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 2, runBenchPartition(context.Background(), []string{"--consistency", "linear"}, &out, &errb))
	require.Contains(t, errb.String(), "unknown consistency")
	require.Equal(t, 2, runBenchPartition(context.Background(), []string{"--partitions", "0"}, &out, &errb))
}
