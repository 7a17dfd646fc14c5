package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos/transport"
)

// TestHelperAcceptorProcess is not a test: it is the acceptor child that
// the bench tests start (the os/exec helper-process pattern), running
// `fmnode <args after -->` in this test binary.
func TestHelperAcceptorProcess(t *testing.T) {
	if os.Getenv("FMNODE_HELPER_PROCESS") != "1" {
		t.Skip("helper process only")
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(dispatch(context.Background(), args, os.Stdout, os.Stderr))
}

func helperCommand(args []string) (*exec.Cmd, error) {
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestHelperAcceptorProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "FMNODE_HELPER_PROCESS=1")
	return cmd, nil
}

func TestBenchCASEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	tests := map[string]casOptions{
		"closed loop bbolt":  {store: "bbolt", clients: 8},
		"bbolt pipelined":    {store: "bbolt", clients: 8, pipeline: 8},
		"closed loop pebble": {store: "pebble", clients: 8},
		"open loop memory":   {store: "memory", clients: 4, rate: 500, maxInflight: 16},
		"two proposers":      {store: "memory", clients: 8, proposers: 2},
	}
	for name, o := range tests {
		t.Run(name, func(t *testing.T) {
			o.acceptors, o.keys, o.duration, o.warmup = 3, 20, 400*time.Millisecond, 100*time.Millisecond
			o.backoff, o.valueBytes, o.maxRetries, o.baseline = "adaptive", 8, 16, 50*time.Millisecond
			o.childLog, o.childTimeout, o.command, o.dataParent = "warn", 15*time.Second, helperCommand, t.TempDir()
			if o.maxInflight == 0 {
				o.maxInflight = 1024
			}
			if o.proposers == 0 {
				o.proposers = 1
			}
			o.json = true
			require.NoError(t, o.validate())
			var buf bytes.Buffer
			stderr := &syncWriter{w: &buf}
			log := slog.New(slog.NewTextHandler(stderr, nil))
			res, err := benchCAS(context.Background(), o, stderr, log)
			require.NoError(t, err, buf.String())
			assert.Positive(t, res.Commits)
			assert.Positive(t, res.CommitsPerSec)
			assert.Positive(t, res.P99Ms)
			assert.GreaterOrEqual(t, res.P99Ms, res.P50Ms)
			if o.proposers == 1 {
				// Proposers racing on 20 keys may run out of attempts;
				// one proposer never races itself, so it has no failed
				// or unknown operation. Its clients do race each other
				// on a key (gave_up, on a loaded machine), which is not
				// an error.
				assert.Zero(t, res.Errors, res.FirstError)
				assert.Zero(t, res.Unknown)
			} else {
				assert.Positive(t, res.Rounds)
			}
			assert.Positive(t, res.FsyncsPerSec)
			assert.Positive(t, res.FsyncBaselinePerSec)
			assert.Positive(t, res.ItemsPerMessage)
			assert.Equal(t, o.pipeline, res.PipelineDepth)
			assert.Positive(t, res.DurableP50Ms, "the acceptors' durability histogram")
			assert.GreaterOrEqual(t, res.DurableP99Ms, res.DurableP50Ms)
			assert.GreaterOrEqual(t, res.DurableMaxMs, res.DurableP99Ms)
			if o.store != "memory" {
				assert.Positive(t, res.RecordsPerCommit)
			}
			switch {
			case o.store != "bbolt":
				assert.Zero(t, res.Shards)
			case o.shards == 0:
				assert.Equal(t, defaultBoltShards, res.Shards)
			default:
				assert.Equal(t, o.shards, res.Shards)
			}
			var out bytes.Buffer
			require.NoError(t, writeJSON(&out, res))
			var decoded map[string]any
			require.NoError(t, json.Unmarshal(out.Bytes(), &decoded))
			for _, field := range []string{"commits_per_sec", "p50_ms", "p99_ms", "conflict_rate", "fsyncs_per_sec",
				"fsync_baseline_per_sec", "store", "shards", "acceptors", "keys", "clients", "duration_s", "rate", "errors", "gave_up", "mismatches"} {
				assert.Contains(t, decoded, field)
			}
			// The temporary data directories are gone.
			entries, err := os.ReadDir(o.dataParent)
			require.NoError(t, err)
			assert.Empty(t, entries)
			var human bytes.Buffer
			printCASResult(&human, res)
			assert.Contains(t, human.String(), "commits")
		})
	}
}

// A child that cannot start (bad store) fails the bench cleanly and the
// already started children are killed.
func TestBenchCASChildFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	started := 0
	o := casOptions{acceptors: 3, keys: 10, clients: 1, proposers: 1, duration: time.Second, store: "memory", backoff: "adaptive",
		maxInflight: 1, childLog: "error", childTimeout: 5 * time.Second, dataParent: t.TempDir(),
		command: func(args []string) (*exec.Cmd, error) {
			started++
			if started == 3 {
				args = slices.Clone(args)
				args[slices.Index(args, "--store")+1] = "nonsense"
			}
			return helperCommand(args)
		}}
	_, err := benchCAS(context.Background(), o, io.Discard, slog.New(slog.DiscardHandler))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "acceptor 3")
	entries, rerr := os.ReadDir(o.dataParent)
	require.NoError(t, rerr)
	assert.Empty(t, entries)
}

func TestRunBenchDispatch(t *testing.T) {
	tests := map[string]struct {
		args []string
		code int
		want string
	}{
		"no args":       {args: nil, code: 2, want: "usage: fmnode bench"},
		"help":          {args: []string{"--help"}, code: 0, want: "cas"},
		"unknown":       {args: []string{"nope"}, code: 2, want: `unknown benchmark "nope"`},
		"bad flag":      {args: []string{"cas", "--acceptors", "0"}, code: 2, want: "--acceptors 0 out of range"},
		"bad store":     {args: []string{"cas", "--store", "tape"}, code: 2, want: `unknown --store "tape"`},
		"bad backoff":   {args: []string{"cas", "--backoff", "later"}, code: 2, want: "unknown backoff"},
		"extra args":    {args: []string{"cas", "extra"}, code: 2, want: "unexpected arguments"},
		"neg rate":      {args: []string{"cas", "--rate", "-1"}, code: 2, want: "--rate"},
		"zero duration": {args: []string{"cas", "--duration", "0s"}, code: 2, want: "--duration"},
		"no proposers":  {args: []string{"cas", "--proposers", "0"}, code: 2, want: "--proposers 0"},
		"shards memory": {args: []string{"cas", "--store", "memory", "--shards", "2"}, code: 2, want: "--shards applies to --store bbolt only"},
		"neg shards":    {args: []string{"cas", "--shards", "-1"}, code: 2, want: "--shards -1 out of range"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runBench(context.Background(), tc.args, &stdout, &stderr)
			assert.Equal(t, tc.code, code)
			assert.Contains(t, stderr.String(), tc.want)
		})
	}
}

func TestLatencyHist(t *testing.T) {
	var h latencyHist
	assert.Zero(t, h.Quantile(0.5))
	r := rand.New(rand.NewPCG(1, 2))
	var vals []time.Duration
	for range 100000 {
		d := time.Duration(r.ExpFloat64() * float64(2*time.Millisecond))
		vals = append(vals, d)
		h.Record(d)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := vals[int(q*float64(len(vals)))-1]
		got := h.Quantile(q)
		assert.InEpsilon(t, float64(exact), float64(got), 0.03, "q=%v exact=%v got=%v", q, exact, got)
	}
	assert.Equal(t, vals[len(vals)-1], h.Max())
	assert.Equal(t, vals[len(vals)-1], h.Quantile(1))
}

func TestHistBuckets(t *testing.T) {
	prev := -1
	for _, ns := range []uint64{0, 1, 1023, 1024, 1500, 2047, 2048, 1e6, 1e9, 1e12, 1 << 62} {
		i := histIndex(ns)
		assert.GreaterOrEqual(t, i, prev, "monotonic at %d", ns)
		prev = i
		if ns >= histMinNs && ns < 1<<40 {
			up := histValue(i)
			assert.GreaterOrEqual(t, up, ns, "upper bound of %d", ns)
			assert.LessOrEqual(t, float64(up-ns)/float64(ns), 1.0/histSub+1e-9, "relative error at %d", ns)
		}
	}
	assert.Less(t, histIndex(1<<63), 64*histSub)
}

func TestMsRounding(t *testing.T) {
	assert.Equal(t, 1.235, ms(1234567*time.Nanosecond))
	assert.True(t, strings.HasPrefix(time.Duration(0).String(), "0"))
}

func TestDurableQuantiles(t *testing.T) {
	tests := map[string]struct {
		hist         []uint64
		p50, p99, mx float64
	}{
		"empty":          {hist: make([]uint64, transport.DurableHistBuckets)},
		"one bucket":     {hist: []uint64{0, 0, 10}, p50: 0.256, p99: 0.256, mx: 0.256},
		"tail bucket":    {hist: []uint64{98, 0, 0, 2}, p50: 0.064, p99: 0.512, mx: 0.512},
		"1% in the tail": {hist: []uint64{0, 99, 0, 0, 1}, p50: 0.128, p99: 1.024, mx: 1.024},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			qs, mx := durableQuantiles(tc.hist, 0.5, 0.99)
			assert.Equal(t, []float64{tc.p50, tc.p99}, qs)
			assert.Equal(t, tc.mx, mx)
		})
	}
}
