package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/boltstore"
	"github.com/fmnode/fmnode/caspaxos/transport"
	"github.com/fmnode/fmnode/quorum"
)

// acceptorUnderTest runs serveAcceptor with piped stdin and stdout.
type acceptorUnderTest struct {
	stdin *io.PipeWriter
	lines chan string
	done  chan error
}

func startAcceptorUnderTest(t *testing.T, ctx context.Context, o acceptorOptions) *acceptorUnderTest {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	a := &acceptorUnderTest{stdin: inW, lines: make(chan string, 16), done: make(chan error, 1)}
	go func() {
		a.done <- serveAcceptor(ctx, o, inR, outW, slog.New(slog.DiscardHandler))
		_ = outW.Close()
	}()
	go func() {
		defer close(a.lines)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			a.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { _ = inW.Close() })
	return a
}

func (a *acceptorUnderTest) line(t *testing.T) string {
	t.Helper()
	select {
	case l := <-a.lines:
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("no line from the acceptor")
		return ""
	}
}

func parseStats(t *testing.T, line string) acceptorStats {
	t.Helper()
	js, ok := strings.CutPrefix(line, statsPrefix)
	require.True(t, ok, "not a stats line: %q", line)
	var s acceptorStats
	require.NoError(t, json.Unmarshal([]byte(js), &s))
	return s
}

func TestServeAcceptorControlStdin(t *testing.T) {
	tests := []struct {
		store      string
		shards     int
		wantShards int
	}{
		{store: "bbolt", wantShards: defaultBoltShards},
		{store: "bbolt", shards: 3, wantShards: 3},
		{store: "memory"},
	}
	for _, tt := range tests {
		store := tt.store
		t.Run(fmt.Sprintf("%s/shards=%d", store, tt.shards), func(t *testing.T) {
			a := startAcceptorUnderTest(t, context.Background(), acceptorOptions{
				id: 1, listen: "127.0.0.1:0", store: store, dir: t.TempDir(), shards: tt.shards,
				maxFrame: transport.DefaultMaxFrameBytes, control: true,
			})
			addr, ok := strings.CutPrefix(a.line(t), "listening ")
			require.True(t, ok)

			tr, err := transport.DialTCP(transport.ClientConfig{Peers: map[caspaxos.NodeID]string{1: addr}})
			require.NoError(t, err)
			defer tr.Close()
			require.NoError(t, tr.WaitConnected(context.Background()))
			n, err := transport.NewProposerNode(transport.NodeConfig{
				Proposer: caspaxos.DefaultProposerConfig(9, quorum.MajorityConfig(1))}, tr)
			require.NoError(t, err)
			defer n.Close()
			v, err := n.Propose(context.Background(), "k", caspaxos.CAS(0, []byte("v")))
			require.NoError(t, err)
			assert.Equal(t, uint64(1), v.Version)

			_, err = io.WriteString(a.stdin, "stats\n")
			require.NoError(t, err)
			s := parseStats(t, a.line(t))
			assert.Equal(t, uint64(1), s.ID)
			assert.Equal(t, store, s.Store)
			assert.Equal(t, tt.wantShards, s.Shards)
			assert.Positive(t, s.Fsyncs)
			assert.Positive(t, s.Messages)
			assert.Positive(t, s.Records)

			require.NoError(t, a.stdin.Close()) // EOF on stdin: shut down
			final := parseStats(t, a.line(t))
			assert.GreaterOrEqual(t, final.Fsyncs, s.Fsyncs)
			require.NoError(t, <-a.done)
		})
	}
}

func TestServeAcceptorMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	metricsAddr := ln.Addr().String()
	require.NoError(t, ln.Close())
	a := startAcceptorUnderTest(t, ctx, acceptorOptions{id: 3, listen: "127.0.0.1:0", store: "memory",
		maxFrame: transport.DefaultMaxFrameBytes, metrics: metricsAddr})
	require.True(t, strings.HasPrefix(a.line(t), "listening "))
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Contains(t, string(body), "fmnode_acceptor_connections")
	assert.Contains(t, string(body), "go_goroutines")
	cancel()
	require.NoError(t, <-a.done)
}

func TestServeAcceptorStopsOnContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	a := startAcceptorUnderTest(t, ctx, acceptorOptions{id: 2, listen: "127.0.0.1:0", store: "memory",
		maxFrame: transport.DefaultMaxFrameBytes})
	require.True(t, strings.HasPrefix(a.line(t), "listening 127.0.0.1:"))
	cancel()
	select {
	case err := <-a.done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("acceptor did not stop on context cancellation")
	}
	parseStats(t, a.line(t))
}

func TestRunAcceptorFlags(t *testing.T) {
	tests := map[string]struct {
		args []string
		code int
		want string
	}{
		"no id":         {args: []string{"--store", "memory"}, code: 2, want: "--id must be non-zero"},
		"bad level":     {args: []string{"--id", "1", "--log-level", "loud"}, code: 2, want: "bad --log-level"},
		"unknown store": {args: []string{"--id", "1", "--store", "tape"}, code: 1, want: `unknown --store \"tape\"`},
		"bbolt no dir":  {args: []string{"--id", "1", "--store", "bbolt"}, code: 1, want: "--data is required"},
		"shards memory": {args: []string{"--id", "1", "--store", "memory", "--shards", "2"}, code: 1, want: "--shards applies to --store bbolt only"},
		"bad listen":    {args: []string{"--id", "1", "--store", "memory", "--listen", "256.0.0.1:x"}, code: 1, want: "listen"},
		"tiny frames":   {args: []string{"--id", "1", "--store", "memory", "--max-frame-bytes", "10"}, code: 1, want: "MaxFrameBytes"},
		"help":          {args: []string{"-h"}, code: 0, want: "control-stdin"},
		"pipeline and group wait": {args: []string{"--id", "1", "--store", "memory", "--group-wait", "1ms", "--pipeline-depth", "4"},
			code: 1, want: "PipelineDepth"},
		"pipeline too deep": {args: []string{"--id", "1", "--store", "memory", "--pipeline-depth", "5000"}, code: 1, want: "PipelineDepth"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runAcceptor(context.Background(), tc.args, &stdout, &stderr)
			assert.Equal(t, tc.code, code)
			assert.Contains(t, stderr.String(), tc.want)
		})
	}
}

func TestOpenStore(t *testing.T) {
	dir := t.TempDir()
	st, err := openStore("bbolt", dir, 0, boltstore.LayoutAuto, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, st.Apply(caspaxos.Batch{Put: []caspaxos.Record{{Key: "k", Promised: caspaxos.Ballot{Counter: 1, Proposer: 1}}}}))
	assert.Positive(t, st.fsyncs())
	require.NoError(t, st.Close())

	mem, err := openStore("memory", "", 0, boltstore.LayoutAuto, nil)
	require.NoError(t, err)
	require.NoError(t, mem.Apply(caspaxos.Batch{Put: []caspaxos.Record{{Key: "k", Promised: caspaxos.Ballot{Counter: 1, Proposer: 1}}}}))
	assert.Equal(t, uint64(1), mem.fsyncs())

	_, err = openStore("floppy", dir, 0, boltstore.LayoutAuto, nil)
	assert.Error(t, err)
	_, err = openStore("memory", "", 4, boltstore.LayoutAuto, nil)
	assert.ErrorContains(t, err, "--shards applies to --store bbolt only")
	_, err = openStore("memory", "", 0, boltstore.LayoutLog, nil)
	assert.ErrorContains(t, err, "--bolt-layout applies to --store bbolt only")
}

// TestOpenStoreLayout: --bolt-layout picks the layout of a new store, auto
// reopens whatever is there, and the other layout is refused, not migrated.
func TestOpenStoreLayout(t *testing.T) {
	dir := t.TempDir()
	st, err := openStore("bbolt", dir, 0, boltstore.LayoutInPlace, nil)
	require.NoError(t, err)
	rec := caspaxos.Record{Key: "k", Promised: caspaxos.Ballot{Counter: 1, Proposer: 1}}
	require.NoError(t, st.Apply(caspaxos.Batch{Put: []caspaxos.Record{rec}}))
	require.NoError(t, st.Close())

	_, err = openStore("bbolt", dir, 0, boltstore.LayoutLog, nil)
	require.ErrorIs(t, err, boltstore.ErrWrongLayout)

	st, err = openStore("bbolt", dir, 0, boltstore.LayoutAuto, nil)
	require.NoError(t, err)
	loaded, err := st.Load()
	require.NoError(t, err)
	assert.Equal(t, []caspaxos.Record{rec}, loaded.Records)
	require.NoError(t, st.Close())
}

// TestOpenStoreSharded: --shards picks the sharded store, and a later open
// without --shards finds it again.
func TestOpenStoreSharded(t *testing.T) {
	dir := t.TempDir()
	st, err := openStore("bbolt", dir, 4, boltstore.LayoutAuto, nil)
	require.NoError(t, err)
	assert.Equal(t, 4, st.shards)
	rec := caspaxos.Record{Key: "k", Promised: caspaxos.Ballot{Counter: 1, Proposer: 1}}
	require.NoError(t, st.Apply(caspaxos.Batch{Put: []caspaxos.Record{rec}}))
	assert.Positive(t, st.fsyncs())
	require.NoError(t, st.Close())
	assert.FileExists(t, boltstore.ManifestPath(filepath.Join(dir, boltShardsDir)))

	st, err = openStore("bbolt", dir, 0, boltstore.LayoutAuto, nil)
	require.NoError(t, err)
	assert.Equal(t, 4, st.shards)
	loaded, err := st.Load()
	require.NoError(t, err)
	assert.Equal(t, []caspaxos.Record{rec}, loaded.Records)
	require.NoError(t, st.Close())

	_, err = openStore("bbolt", dir, 8, boltstore.LayoutAuto, nil)
	require.ErrorIs(t, err, caspaxos.ErrInvalidConfig, "the shard count is fixed at creation")
}

func TestResolveBoltShards(t *testing.T) {
	single := func(t *testing.T, dir string) {
		t.Helper()
		s, err := boltstore.Open(filepath.Join(dir, boltFileName), boltstore.Options{})
		require.NoError(t, err)
		require.NoError(t, s.Close())
	}
	sharded := func(t *testing.T, dir string) {
		t.Helper()
		s, err := boltstore.OpenSharded(filepath.Join(dir, boltShardsDir), 4, boltstore.Options{})
		require.NoError(t, err)
		require.NoError(t, s.Close())
	}
	both := func(t *testing.T, dir string) { single(t, dir); sharded(t, dir) }
	tests := []struct {
		name    string
		layout  func(t *testing.T, dir string)
		shards  int
		want    int
		wantErr string
	}{
		{name: "new, default", shards: 0, want: defaultBoltShards},
		{name: "new, explicit", shards: 8, want: 8},
		{name: "new, single file", shards: 1, want: 1},
		{name: "single file kept", layout: single, shards: 0, want: 1},
		{name: "single file, --shards 1", layout: single, shards: 1, want: 1},
		{name: "single file, --shards 4", layout: single, shards: 4, wantErr: "open it with --shards 1"},
		{name: "sharded kept", layout: sharded, shards: 0, want: 4},
		{name: "sharded, same count", layout: sharded, shards: 4, want: 4},
		{name: "sharded, --shards 1", layout: sharded, shards: 1, wantErr: "open it with --shards 4"},
		{name: "both layouts", layout: both, shards: 0, wantErr: "refusing to pick one"},
		{name: "negative", shards: -1, wantErr: "out of range"},
		{name: "too many", shards: boltstore.MaxShards + 1, wantErr: "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.layout != nil {
				tt.layout(t, dir)
			}
			got, err := resolveBoltShards(dir, tt.shards)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestDefaultPipelineDepth(t *testing.T) {
	tests := map[string]struct {
		store     string
		groupWait time.Duration
		want      int
	}{
		"pebble pipelines":         {store: "pebble", want: transport.DefaultPipelineDepth},
		"memory pipelines":         {store: "memory", want: transport.DefaultPipelineDepth},
		"bbolt one at a time":      {store: "bbolt", want: 1},
		"group wait one at a time": {store: "pebble", groupWait: time.Millisecond, want: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, defaultPipelineDepth(tc.store, tc.groupWait))
		})
	}
}
