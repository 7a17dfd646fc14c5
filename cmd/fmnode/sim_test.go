package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/sim"
)

func simCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runSim(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestSimHelpListsScenarios(t *testing.T) {
	code, _, stderr := simCmd(t, "--help")
	assert.Equal(t, 0, code)
	for _, s := range sim.Scenarios() {
		assert.Contains(t, stderr, s.Name())
		assert.Contains(t, stderr, s.Description())
	}
}

func TestSimUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown scenario", []string{"--scenario", "nope"}, "unknown scenario"},
		{"bad fault level", []string{"--faults", "medium"}, "unknown fault level"},
		{"bad seed range", []string{"--seeds", "9..3"}, "invalid seed range"},
		{"canary on another scenario", []string{"--canary", "--scenario", "contention"}, "register scenario only"},
		{"stray argument", []string{"extra"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := simCmd(t, tt.args...)
			assert.Equal(t, 2, code)
			assert.Contains(t, stderr, tt.want)
		})
	}
}

func TestSimJSON(t *testing.T) {
	code, stdout, _ := simCmd(t, "--scenario", "register", "--seeds", "1..3", "--faults", "heavy", "--duration", "5s", "--json", "--out", t.TempDir())
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		lines = append(lines, m)
	}
	require.Len(t, lines, 4, "three runs and a summary")
	for i, run := range lines[:3] {
		assert.EqualValues(t, i+1, run["seed"], "runs come in seed order")
		for _, k := range []string{"scenario", "sim_seconds", "wall_seconds", "events", "faults_injected", "violations", "linearizable", "trace_hash"} {
			assert.Contains(t, run, k)
		}
	}
	sum := lines[3]
	assert.Equal(t, true, sum["summary"])
	assert.EqualValues(t, 3, sum["runs"])
	for _, k := range []string{"seeds_per_minute", "sim_seconds_per_wall_second", "failed_seeds"} {
		assert.Contains(t, sum, k)
	}
	// The exit code follows the runs: 1 exactly when one failed.
	assert.Equal(t, sum["failed"].(float64) > 0, code == 1)
}

func TestSimTableIsDeterministic(t *testing.T) {
	hashes := func(out string) []string {
		var hs []string
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) == 10 && f[1] == "membership" {
				hs = append(hs, f[0]+" "+f[9])
			}
		}
		return hs
	}
	_, a, _ := simCmd(t, "--scenario", "membership", "--seeds", "1..3", "--faults", "swarm", "--duration", "10s", "--out", t.TempDir())
	_, b, _ := simCmd(t, "--scenario", "membership", "--seeds", "1..3", "--faults", "swarm", "--duration", "10s", "--workers", "1", "--out", t.TempDir())
	require.Len(t, hashes(a), 3)
	assert.Equal(t, hashes(a), hashes(b), "same seeds, same hashes, whatever the workers")
}

func TestSimCanaryFailsAsExpected(t *testing.T) {
	code, stdout, _ := simCmd(t, "--canary", "--seeds", "1..2", "--out", t.TempDir())
	assert.Equal(t, 1, code, "CI runs `! fmnode sim --canary`")
	assert.Contains(t, stdout, "canary: violation detected as expected")
	assert.Contains(t, stdout, "replay:  go run ./cmd/fmnode sim --scenario register --seed 1")
}

// A run driven past a configured bound (cluster-edge-drift-beyond) is
// expected unsafe: it exits 0 because the checker found the violation,
// and says so in the JSON and the table.
func TestSimExpectedUnsafeExitsZeroWhenFound(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster seed takes seconds")
	}
	code, stdout, _ := simCmd(t, "--scenario", "cluster-edge-drift-beyond", "--seed", "1", "--json", "--out", t.TempDir())
	assert.Equal(t, 0, code, stdout)
	var run map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.SplitN(stdout, "\n", 2)[0]), &run))
	assert.Equal(t, true, run["expected_unsafe"])
	assert.Equal(t, true, run["unsafe_found"])
	assert.NotEmpty(t, run["violations"])
	code, stdout, _ = simCmd(t, "--scenario", "cluster-edge-drift-beyond", "--seed", "1", "--out", t.TempDir())
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "expected unsafe, found unsafe: seed 1")
}

func TestSimGCPercent(t *testing.T) {
	for _, c := range []struct{ flag, partitions, want int }{
		{0, 0, 200}, {0, 4300, 200}, {0, 20000, 200}, {0, 20001, 100}, {0, 100000, 100},
		{150, 4300, 150}, {100, 100000, 100}, {-1, 60, -1},
	} {
		if got := simGCPercent(c.flag, c.partitions); got != c.want {
			t.Errorf("simGCPercent(%d, %d) = %d, want %d", c.flag, c.partitions, got, c.want)
		}
	}
}

// A failover scenario runs its scripted fault alone unless --faults asks
// for background faults, which the run then reports as injected.
func TestSimScriptedFaults(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		faults string
		some   bool
	}{
		{nil, "scripted", false},
		{[]string{"--faults", "none"}, "scripted", false},
		{[]string{"--faults", "heavy"}, "scripted+heavy", true},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append([]string{"--scenario", "region-outage", "--seed", "1", "--partitions", "20", "--profile", "fast",
				"--outage", "1m", "--duration", "1m", "--json", "--out", t.TempDir()}, tc.args...)
			code, stdout, stderr := simCmd(t, args...)
			require.Equal(t, 0, code, stderr)
			var run map[string]any
			require.NoError(t, json.Unmarshal([]byte(strings.SplitN(stdout, "\n", 2)[0]), &run))
			assert.Equal(t, tc.faults, run["faults"])
			injected, _ := run["faults_injected"].(map[string]any)
			total := 0.0
			for _, v := range injected {
				total += v.(float64)
			}
			assert.Equal(t, tc.some, total > 0, "faults injected: %v", injected)
		})
	}
}
