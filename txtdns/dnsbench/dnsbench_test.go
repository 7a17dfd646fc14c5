package dnsbench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const childEnv = "FMNODE_DNSBENCH_CHILD"

// TestMain lets the test binary be the child server: run() re-executes it
// with childEnv set.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr, nil))
	}
	os.Exit(m.Run())
}

func TestBenchAgainstChildProcess(t *testing.T) {
	t.Setenv(childEnv, "1")
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"--duration", "300ms", "--warmup", "100ms", "--clients", "4", "--partitions", "5000", "--json"},
		&out, &errb, []string{os.Args[0]})
	require.Equal(t, 0, code, "stderr: %s", errb.String())
	var res Result
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	assert.Equal(t, "dns", res.Bench)
	assert.Positive(t, res.Queries)
	assert.Positive(t, res.QueriesPerSec)
	assert.Positive(t, res.P50Ms)
	assert.GreaterOrEqual(t, res.P99Ms, res.P50Ms)
	assert.Zero(t, res.Errors)
	assert.NotZero(t, res.ServerPID)
	assert.NotEqual(t, os.Getpid(), res.ServerPID, "the server runs in another process")
	t.Logf("%s", out.String())
}

func TestFlags(t *testing.T) {
	tests := []struct {
		args []string
		code int
	}{
		{[]string{"--clients", "0"}, 2},
		{[]string{"--duration", "-1s"}, 2},
		{[]string{"--partitions", "0"}, 2},
		{[]string{"extra"}, 2},
		{[]string{"--help"}, 0},
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		assert.Equal(t, tc.code, Main(context.Background(), tc.args, &out, &errb, nil), "%v: %s", tc.args, errb.String())
	}
}
