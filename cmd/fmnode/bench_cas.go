package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/boltstore"
	"github.com/fmnode/fmnode/caspaxos/transport"
	"github.com/fmnode/fmnode/quorum"
)

// casOptions are the flags of `fmnode bench cas`.
type casOptions struct {
	acceptors    int
	keys         int
	clients      int
	duration     time.Duration
	warmup       time.Duration
	store        string
	shards       int
	boltLayout   string
	json         bool
	rate         float64
	backoff      string
	valueBytes   int
	maxInflight  int
	maxRetries   int
	baseline     time.Duration
	dataParent   string
	cpuProfile   string
	accProfile   string
	childLog     string
	noFastPath   bool
	childTimeout time.Duration
	childProcs   int
	groupWait    time.Duration
	groupWaitFr  float64
	pipeline     int
	proposers    int
	// command builds the command that runs `fmnode <args>` (tests swap
	// in a helper process); nil re-executes this binary.
	command func(args []string) (*exec.Cmd, error)
}

func selfCommand(args []string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	return exec.Command(exe, args...), nil
}

// casResult is the one JSON object `fmnode bench cas --json` prints.
type casResult struct {
	Benchmark string `json:"benchmark"`
	Store     string `json:"store"`
	// Shards is the bbolt files per acceptor (1: the single-file store);
	// 0 for other stores.
	Shards int `json:"shards"`
	// BoltLayout is the bbolt file layout (log, in-place); empty for other stores.
	BoltLayout string  `json:"bolt_layout,omitempty"`
	Acceptors  int     `json:"acceptors"`
	Keys       int     `json:"keys"`
	Clients    int     `json:"clients"`
	Proposers  int     `json:"proposers"`
	Mode       string  `json:"mode"`
	Rate       float64 `json:"rate"`
	Backoff    string  `json:"backoff"`
	FastPath   bool    `json:"fast_path"`
	DurationS  float64 `json:"duration_s"`
	WarmupS    float64 `json:"warmup_s"`
	ValueBytes int     `json:"value_bytes"`

	Commits       uint64  `json:"commits"`
	CommitsPerSec float64 `json:"commits_per_sec"`
	P50Ms         float64 `json:"p50_ms"`
	P90Ms         float64 `json:"p90_ms"`
	P99Ms         float64 `json:"p99_ms"`
	P999Ms        float64 `json:"p999_ms"`
	MaxMs         float64 `json:"max_ms"`
	MeanMs        float64 `json:"mean_ms"`
	// Mismatches are CAS attempts that found another version (a
	// conflict-driven retry of the read-modify-write), Errors are
	// operations that failed (no quorum, timeout, ...), GaveUp are
	// operations that lost every one of their MaxRetries+1 CAS attempts to
	// other clients of the same key: contention between this bench's own
	// clients, not a fault (any two clients of one key race, even through
	// one proposer).
	Mismatches   uint64  `json:"mismatches"`
	MismatchRate float64 `json:"mismatch_rate"`
	Errors       uint64  `json:"errors"`
	GaveUp       uint64  `json:"gave_up"`
	// Unknown are operations whose CAS may or may not have committed
	// (caspaxos.ErrUnknownOutcome: a round that sent the write was then
	// refused or timed out); they happen under contention between proposers.
	Unknown    uint64 `json:"unknown_outcomes"`
	FirstError string `json:"first_error,omitempty"`
	// ConflictRate is proposer rounds ended by a NAK over rounds started.
	ConflictRate   float64 `json:"conflict_rate"`
	Rounds         uint64  `json:"rounds"`
	NAKs           uint64  `json:"naks"`
	Timeouts       uint64  `json:"timeouts"`
	FastPathRounds uint64  `json:"fast_path_rounds"`
	SendErrors     uint64  `json:"send_errors"`

	FsyncsPerSec        float64 `json:"fsyncs_per_sec"`
	FsyncBaselinePerSec float64 `json:"fsync_baseline_per_sec"`
	CommitsPerFsync     float64 `json:"commits_per_fsync"`
	AcceptorBatches     uint64  `json:"acceptor_batches"`
	RecordsPerBatch     float64 `json:"records_per_batch"`
	ItemsPerMessage     float64 `json:"items_per_message"`
	ApplyMsMean         float64 `json:"apply_ms_mean"`
	// FsyncsPerRecord is store commits (fsyncs_per_sec's unit; a bbolt
	// commit is two fdatasyncs) per record written, over all acceptors.
	FsyncsPerRecord float64 `json:"fsyncs_per_record"`
	// GroupWaitMs is the acceptors' group wait setting; GroupWaits the
	// groups they held back, GroupWaitsPaid those judged worth it, and
	// GroupWaitMsMean the mean time held.
	GroupWaitMs     float64 `json:"group_wait_ms"`
	GroupWaits      uint64  `json:"group_waits"`
	GroupWaitsPaid  uint64  `json:"group_waits_paid"`
	GroupWaitMsMean float64 `json:"group_wait_ms_mean"`
	// PipelineDepth is --acceptor-pipeline-depth (0: the acceptors'
	// default); StoreCommits the acceptors' store commits over the window,
	// which with pipelining differ from acceptor_batches (groups handed
	// over): records_per_commit is records per store commit.
	PipelineDepth int `json:"pipeline_depth"`
	// DurableP50Ms, DurableP99Ms and DurableMaxMs are the upper bounds of
	// the histogram buckets (powers of two from 64 µs) holding the median,
	// the 99th percentile and the slowest of the time the acceptors' groups
	// took to become durable, over all acceptors: the store's share of the
	// latency. Compare with p99_ms to see whether the tail is the store's.
	DurableP50Ms     float64 `json:"acceptor_durable_p50_ms"`
	DurableP99Ms     float64 `json:"acceptor_durable_p99_ms"`
	DurableMaxMs     float64 `json:"acceptor_durable_max_ms"`
	RecordsPerCommit float64 `json:"records_per_commit"`
	Late             uint64  `json:"late_starts,omitempty"`

	NumCPU             int `json:"num_cpu"`
	GoMaxProcs         int `json:"gomaxprocs"`
	AcceptorGoMaxProcs int `json:"acceptor_gomaxprocs"`
}

func runBenchCAS(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o casOptions
	fs := flag.NewFlagSet("fmnode bench cas", flag.ContinueOnError)
	fs.IntVar(&o.acceptors, "acceptors", 3, "acceptor processes to start")
	fs.IntVar(&o.keys, "keys", 1000, "registers, drawn uniformly")
	fs.IntVar(&o.clients, "clients", 64, "closed-loop client goroutines")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load before the measured time")
	fs.StringVar(&o.store, "store", "bbolt", "acceptor store: bbolt, pebble or memory")
	fs.IntVar(&o.shards, "shards", 0, fmt.Sprintf("bbolt files per acceptor; 1 is the single-file store (0: %d)", defaultBoltShards))
	fs.StringVar(&o.boltLayout, "bolt-layout", "auto", "bbolt file layout of the acceptors: log or in-place (auto: log, the default for new files)")
	fs.BoolVar(&o.json, "json", false, "print one JSON object")
	fs.Float64Var(&o.rate, "rate", 0, "open loop: operations per second on a fixed schedule (0: closed loop)")
	fs.StringVar(&o.backoff, "backoff", "adaptive", "proposer backoff: adaptive, exponential or none")
	fs.IntVar(&o.valueBytes, "value-bytes", 16, "bytes written per CAS")
	fs.IntVar(&o.maxInflight, "max-inflight", 1024, "open loop: bound on operations in progress")
	fs.IntVar(&o.maxRetries, "max-retries", 16, "CAS retries after a version mismatch before an operation gives up")
	fs.DurationVar(&o.baseline, "baseline", time.Second, "time spent measuring the bbolt fsync baseline (0: skip)")
	fs.StringVar(&o.dataParent, "data", "", "parent of the temporary data directories (default: the system temp dir)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write the client's CPU profile (measured window) to this file")
	fs.StringVar(&o.accProfile, "acceptor-cpuprofile", "", "write each acceptor's CPU profile to this path + .ID")
	fs.StringVar(&o.childLog, "acceptor-log-level", "warn", "log level of the acceptor processes")
	fs.BoolVar(&o.noFastPath, "no-fast-path", false, "disable the proposer's one-round-trip path")
	fs.DurationVar(&o.childTimeout, "acceptor-timeout", 15*time.Second, "how long to wait for an acceptor process to start or stop")
	fs.IntVar(&o.proposers, "proposers", 1, "proposer nodes (each with its own connections); clients are spread over them, so with more than one they compete for keys")
	fs.DurationVar(&o.groupWait, "acceptor-group-wait", 0, "the acceptors' --group-wait (0: never hold a group back)")
	fs.Float64Var(&o.groupWaitFr, "acceptor-group-wait-fraction", transport.DefaultGroupWaitFraction, "the acceptors' --group-wait-fraction, in (0, 1]")
	fs.IntVar(&o.pipeline, "acceptor-pipeline-depth", 0, "the acceptors' --pipeline-depth: groups in flight to the store; 1 is one store apply at a time (0: the acceptor's default)")
	fs.IntVar(&o.childProcs, "acceptor-gomaxprocs", 1, "GOMAXPROCS of each acceptor process (0: Go's default); the acceptors and the client share the machine")
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(stderr, "fmnode bench cas:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	res, err := benchCAS(ctx, o, stderr, log)
	if err != nil {
		fmt.Fprintln(stderr, "fmnode bench cas:", err)
		return 1
	}
	if o.json {
		if err := writeJSON(stdout, res); err != nil {
			fmt.Fprintln(stderr, "fmnode bench cas:", err)
			return 1
		}
		return 0
	}
	printCASResult(stdout, res)
	return 0
}

func (o casOptions) validate() error {
	switch {
	case o.acceptors < 1 || o.acceptors > 9:
		return fmt.Errorf("--acceptors %d out of range [1, 9]", o.acceptors)
	case o.keys < 1:
		return fmt.Errorf("--keys must be positive")
	case o.clients < 1:
		return fmt.Errorf("--clients must be positive")
	case o.duration <= 0:
		return fmt.Errorf("--duration must be positive")
	case o.warmup < 0:
		return fmt.Errorf("--warmup must not be negative")
	case o.rate < 0:
		return fmt.Errorf("--rate must not be negative")
	case o.valueBytes < 0 || o.valueBytes > caspaxos.MaxValueBytes:
		return fmt.Errorf("--value-bytes out of range")
	case o.maxInflight < 1:
		return fmt.Errorf("--max-inflight must be positive")
	case o.maxRetries < 0:
		return fmt.Errorf("--max-retries must not be negative")
	case o.proposers < 1 || o.proposers > 64:
		return fmt.Errorf("--proposers %d out of range [1, 64]", o.proposers)
	case o.childProcs < 0:
		return fmt.Errorf("--acceptor-gomaxprocs must not be negative")
	case o.pipeline < 0 || o.pipeline > transport.MaxPipelineDepth:
		return fmt.Errorf("--acceptor-pipeline-depth %d out of range [0, %d]", o.pipeline, transport.MaxPipelineDepth)
	case o.groupWait < 0 || o.groupWait > transport.MaxGroupWait:
		return fmt.Errorf("--acceptor-group-wait %v out of range [0, %v]", o.groupWait, transport.MaxGroupWait)
	case o.groupWaitFr < 0 || o.groupWaitFr > 1:
		return fmt.Errorf("--acceptor-group-wait-fraction %v out of range (0, 1]", o.groupWaitFr)
	case o.shards < 0 || o.shards > boltstore.MaxShards:
		return fmt.Errorf("--shards %d out of range [1, %d]", o.shards, boltstore.MaxShards)
	case o.shards != 0 && o.store != "bbolt" && o.store != "bolt":
		return fmt.Errorf("--shards applies to --store bbolt only")
	case o.boltLayout != "auto" && o.boltLayout != "" && o.store != "bbolt" && o.store != "bolt":
		return fmt.Errorf("--bolt-layout applies to --store bbolt only")
	}
	if o.boltLayout != "" {
		if _, err := boltstore.ParseLayout(o.boltLayout); err != nil {
			return fmt.Errorf("--bolt-layout: %w", err)
		}
	}
	if _, err := caspaxos.ParseBackoffKind(o.backoff); err != nil {
		return err
	}
	if _, err := parseLogLevel(o.childLog); err != nil {
		return err
	}
	switch o.store {
	case "bbolt", "bolt", "pebble", "memory", "mem":
	default:
		return fmt.Errorf("unknown --store %q (bbolt, pebble, memory)", o.store)
	}
	return nil
}

// casWorkload is the shared state of the client goroutines.
type casWorkload struct {
	nodes      []*transport.ProposerNode
	keys       []string
	versions   []atomic.Uint64 // highest version seen per key, by any client
	value      []byte
	maxRetries int

	measuring  atomic.Bool
	hist       latencyHist
	commits    atomic.Uint64
	mismatches atomic.Uint64
	errors     atomic.Uint64
	gaveUp     atomic.Uint64
	unknown    atomic.Uint64
	late       atomic.Uint64
	firstErr   atomic.Pointer[string]
}

func (w *casWorkload) observe(k int, v uint64) {
	for {
		cur := w.versions[k].Load()
		if v <= cur || w.versions[k].CompareAndSwap(cur, v) {
			return
		}
	}
}

// op is one read-modify-write: CAS against the last version any client
// saw for the key; on a mismatch (whose error carries the committed
// current value) retry against that. Latency runs from intended, which
// is the scheduled start in the open loop.
func (w *casWorkload) op(ctx context.Context, node *transport.ProposerNode, k int, intended time.Time) {
	for range w.maxRetries + 1 {
		expected := w.versions[k].Load()
		v, err := node.Propose(ctx, w.keys[k], caspaxos.CAS(expected, w.value))
		measuring := w.measuring.Load()
		if err == nil {
			w.observe(k, v.Version)
			if measuring {
				w.commits.Add(1)
				w.hist.Record(time.Since(intended))
			}
			return
		}
		var mm *caspaxos.VersionMismatchError
		if errors.As(err, &mm) && !errors.Is(err, caspaxos.ErrUnknownOutcome) {
			w.observe(k, mm.Current.Version)
			if measuring {
				w.mismatches.Add(1)
			}
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if measuring && errors.Is(err, caspaxos.ErrUnknownOutcome) {
			w.unknown.Add(1)
			return
		}
		if measuring {
			w.errors.Add(1)
			msg := err.Error()
			w.firstErr.CompareAndSwap(nil, &msg)
		}
		return
	}
	if w.measuring.Load() {
		w.gaveUp.Add(1)
	}
}

func benchCAS(ctx context.Context, o casOptions, stderr io.Writer, log *slog.Logger) (res casResult, err error) {
	backoff, _ := caspaxos.ParseBackoffKind(o.backoff)
	res = casResult{
		Benchmark: "cas", Store: o.store, Acceptors: o.acceptors, Keys: o.keys, Clients: o.clients, Proposers: o.proposers,
		Mode: "closed", Rate: o.rate, Backoff: backoff.String(), FastPath: !o.noFastPath,
		DurationS: o.duration.Seconds(), WarmupS: o.warmup.Seconds(), ValueBytes: o.valueBytes,
		NumCPU: runtime.NumCPU(), GoMaxProcs: runtime.GOMAXPROCS(0), AcceptorGoMaxProcs: o.childProcs,
	}
	if o.rate > 0 {
		res.Mode = "open"
	}
	if o.store == "bbolt" || o.store == "bolt" {
		// The acceptors' data directories are new, so 0 means the default.
		res.Shards = o.shards
		if res.Shards == 0 {
			res.Shards = defaultBoltShards
		}
		res.BoltLayout = o.boltLayout
		if res.BoltLayout == "" || res.BoltLayout == "auto" {
			res.BoltLayout = boltstore.LayoutLog.String()
		}
	}
	tmp, err := os.MkdirTemp(o.dataParent, "fmnode-bench-*")
	if err != nil {
		return res, fmt.Errorf("temp dir: %w", err)
	}
	defer func() {
		if rerr := os.RemoveAll(tmp); err == nil && rerr != nil {
			err = fmt.Errorf("remove %s: %w", tmp, rerr)
		}
	}()
	if o.baseline > 0 {
		if res.FsyncBaselinePerSec, err = boltstore.FsyncBaseline(tmp, o.baseline); err != nil {
			return res, err
		}
	}

	// Acceptor processes: killed on every path out of here.
	command := o.command
	if command == nil {
		command = selfCommand
	}
	if _, isFile := stderr.(*os.File); !isFile {
		stderr = &syncWriter{w: stderr} // exec copies each child's stderr in its own goroutine
	}
	children := make([]*childProcess, 0, o.acceptors)
	defer func() {
		for _, c := range children {
			c.kill()
		}
	}()
	peers := make(map[caspaxos.NodeID]string, o.acceptors)
	ids := make([]quorum.ID, 0, o.acceptors)
	for i := 1; i <= o.acceptors; i++ {
		args := []string{"acceptor", "--id", strconv.Itoa(i), "--listen", "127.0.0.1:0", "--store", o.store,
			"--data", filepath.Join(tmp, fmt.Sprintf("acceptor-%d", i)), "--control-stdin", "--log-level", o.childLog}
		if res.Shards > 0 {
			args = append(args, "--shards", strconv.Itoa(res.Shards), "--bolt-layout", res.BoltLayout)
		}
		if o.accProfile != "" {
			args = append(args, "--cpuprofile", fmt.Sprintf("%s.%d", o.accProfile, i))
		}
		args = append(args, "--group-wait", o.groupWait.String())
		if o.pipeline != 0 {
			args = append(args, "--pipeline-depth", strconv.Itoa(o.pipeline))
		}
		if o.groupWaitFr != 0 {
			args = append(args, "--group-wait-fraction", strconv.FormatFloat(o.groupWaitFr, 'g', -1, 64))
		}
		cmd, err := command(args)
		if err != nil {
			return res, err
		}
		if o.childProcs > 0 {
			if cmd.Env == nil {
				cmd.Env = os.Environ()
			}
			cmd.Env = append(cmd.Env, fmt.Sprintf("GOMAXPROCS=%d", o.childProcs))
		}
		c, err := startChild(ctx, cmd, i, stderr)
		if err != nil {
			return res, err
		}
		children = append(children, c)
		peers[caspaxos.NodeID(i)] = c.addr
		ids = append(ids, quorum.ID(i))
	}

	// Proposer nodes, each with its own connections.
	nodes := make([]*transport.ProposerNode, 0, o.proposers)
	transports := make([]*transport.TCPTransport, 0, o.proposers)
	defer func() {
		for _, n := range nodes {
			_ = n.Close()
		}
		for _, tr := range transports {
			_ = tr.Close()
		}
	}()
	for i := range o.proposers {
		tr, err := transport.DialTCP(transport.ClientConfig{Peers: peers, Logger: log})
		if err != nil {
			return res, err
		}
		transports = append(transports, tr)
		wctx, cancel := context.WithTimeout(ctx, o.childTimeout)
		err = tr.WaitConnected(wctx)
		cancel()
		if err != nil {
			return res, err
		}
		pcfg := caspaxos.DefaultProposerConfig(caspaxos.NodeID(1000+i), quorum.MajorityConfig(ids...))
		pcfg.Backoff = backoff
		pcfg.DisableFastPath = o.noFastPath
		node, err := transport.NewProposerNode(transport.NodeConfig{Proposer: pcfg, Logger: log}, tr)
		if err != nil {
			return res, err
		}
		nodes = append(nodes, node)
	}

	w := &casWorkload{nodes: nodes, keys: make([]string, o.keys), versions: make([]atomic.Uint64, o.keys),
		value: make([]byte, o.valueBytes), maxRetries: o.maxRetries}
	for i := range w.keys {
		w.keys[i] = fmt.Sprintf("k%06d", i)
	}
	for i := range w.value {
		w.value[i] = 'a' + byte(i%26)
	}

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var wg sync.WaitGroup
	stopIssuing := make(chan struct{})
	if o.rate > 0 {
		startOpenLoop(runCtx, w, o, stopIssuing, &wg)
	} else {
		startClosedLoop(runCtx, w, o, stopIssuing, &wg)
	}

	select {
	case <-time.After(o.warmup):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	before, err := snapshotCAS(children, nodes)
	if err != nil {
		return res, err
	}
	stopProfile, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return res, err
	}
	w.measuring.Store(true)
	t0 := time.Now()
	select {
	case <-time.After(o.duration):
	case <-ctx.Done():
		_ = stopProfile()
		return res, ctx.Err()
	}
	w.measuring.Store(false)
	window := time.Since(t0)
	if err := stopProfile(); err != nil {
		return res, err
	}
	after, err := snapshotCAS(children, nodes)
	if err != nil {
		return res, err
	}
	close(stopIssuing)
	// Let operations in flight finish, but not forever.
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(5 * time.Second):
		stopRun()
		<-drained
	}

	secs := window.Seconds()
	res.Commits = w.commits.Load()
	res.CommitsPerSec = float64(res.Commits) / secs
	res.P50Ms, res.P90Ms = ms(w.hist.Quantile(0.50)), ms(w.hist.Quantile(0.90))
	res.P99Ms, res.P999Ms = ms(w.hist.Quantile(0.99)), ms(w.hist.Quantile(0.999))
	res.MaxMs, res.MeanMs = ms(w.hist.Max()), ms(w.hist.Mean())
	res.Mismatches, res.Errors, res.Unknown, res.Late = w.mismatches.Load(), w.errors.Load(), w.unknown.Load(), w.late.Load()
	res.GaveUp = w.gaveUp.Load()
	if attempts := res.Commits + res.Mismatches; attempts > 0 {
		res.MismatchRate = float64(res.Mismatches) / float64(attempts)
	}
	if p := w.firstErr.Load(); p != nil {
		res.FirstError = *p
	}
	d := after.sub(before)
	res.Rounds, res.NAKs, res.Timeouts, res.FastPathRounds = d.proposer.Rounds, d.proposer.NAKs, d.proposer.Timeouts, d.proposer.FastPath
	if d.proposer.Rounds > 0 {
		res.ConflictRate = float64(d.proposer.NAKs) / float64(d.proposer.Rounds)
	}
	res.SendErrors = d.sendErrors
	res.FsyncsPerSec = float64(d.acc.Fsyncs) / secs
	if d.acc.Fsyncs > 0 {
		res.CommitsPerFsync = float64(res.Commits) * float64(o.acceptors) / float64(d.acc.Fsyncs)
	}
	res.AcceptorBatches = d.acc.Batches
	if d.acc.Batches > 0 {
		res.RecordsPerBatch = float64(d.acc.Records) / float64(d.acc.Batches)
		res.ApplyMsMean = d.acc.ApplyS * 1e3 / float64(d.acc.Batches)
	}
	res.PipelineDepth = o.pipeline
	if qs, maxMs := durableQuantiles(d.acc.DurableHist, 0.5, 0.99); maxMs > 0 {
		res.DurableP50Ms, res.DurableP99Ms, res.DurableMaxMs = qs[0], qs[1], maxMs
	}
	if d.acc.Fsyncs > 0 {
		res.RecordsPerCommit = float64(d.acc.Records) / float64(d.acc.Fsyncs)
	}
	if d.acc.Records > 0 {
		res.FsyncsPerRecord = float64(d.acc.Fsyncs) / float64(d.acc.Records)
	}
	res.GroupWaitMs = float64(o.groupWait) / 1e6
	res.GroupWaits, res.GroupWaitsPaid = d.acc.GroupWaits, d.acc.GroupWaitsPaid
	if d.acc.GroupWaits > 0 {
		res.GroupWaitMsMean = d.acc.GroupWaitS * 1e3 / float64(d.acc.GroupWaits)
	}
	if d.acc.Messages > 0 {
		res.ItemsPerMessage = float64(d.acc.Items) / float64(d.acc.Messages)
	}

	// Orderly shutdown: the nodes, the transports, then the children.
	for _, n := range nodes {
		_ = n.Close()
	}
	for _, tr := range transports {
		_ = tr.Close()
	}
	var stopErrs []error
	for _, c := range children {
		if _, err := c.stop(o.childTimeout); err != nil {
			stopErrs = append(stopErrs, err)
		}
	}
	return res, errors.Join(stopErrs...)
}

func startClosedLoop(ctx context.Context, w *casWorkload, o casOptions, stop <-chan struct{}, wg *sync.WaitGroup) {
	for i := range o.clients {
		node := w.nodes[i%len(w.nodes)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				w.op(ctx, node, rng.IntN(len(w.keys)), time.Now())
			}
		}()
	}
}

type scheduledOp struct {
	key      int
	intended time.Time
}

// startOpenLoop issues operations on a fixed schedule, independent of how
// fast they complete; a pool of maxInflight workers runs them. When the
// pool is saturated operations queue, and since latency is measured from
// the scheduled time the queueing shows in the result.
func startOpenLoop(ctx context.Context, w *casWorkload, o casOptions, stop <-chan struct{}, wg *sync.WaitGroup) {
	queue := make(chan scheduledOp, 1<<16)
	for i := range o.maxInflight {
		node := w.nodes[i%len(w.nodes)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case op := <-queue:
					w.op(ctx, node, op.key, op.intended)
				case <-stop:
					return
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
		interval := time.Duration(float64(time.Second) / o.rate)
		start := time.Now()
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		var issued int64
		for {
			select {
			case <-tick.C:
			case <-stop:
				return
			case <-ctx.Done():
				return
			}
			due := int64(time.Since(start) / interval)
			for ; issued < due; issued++ {
				op := scheduledOp{key: rng.IntN(len(w.keys)), intended: start.Add(time.Duration(issued) * interval)}
				select {
				case queue <- op:
				default:
					// The queue is full: block, and count the start as late.
					w.late.Add(1)
					select {
					case queue <- op:
					case <-stop:
						return
					case <-ctx.Done():
						return
					}
				}
			}
		}
	}()
}

// casSnapshot is the counters the result is computed from.
type casSnapshot struct {
	proposer   caspaxos.ProposerStats
	sendErrors uint64
	acc        acceptorStats // summed over acceptors
}

func snapshotCAS(children []*childProcess, nodes []*transport.ProposerNode) (casSnapshot, error) {
	var s casSnapshot
	for _, n := range nodes {
		p := n.Stats()
		s.proposer.Proposals += p.Proposals
		s.proposer.Commits += p.Commits
		s.proposer.Failures += p.Failures
		s.proposer.Unknown += p.Unknown
		s.proposer.Rounds += p.Rounds
		s.proposer.NAKs += p.NAKs
		s.proposer.Timeouts += p.Timeouts
		s.proposer.FastPath += p.FastPath
		s.proposer.Fenced += p.Fenced
		s.sendErrors += n.SendErrors()
	}
	for _, c := range children {
		st, err := c.stats()
		if err != nil {
			return s, err
		}
		s.acc.Fsyncs += st.Fsyncs
		s.acc.Batches += st.Batches
		s.acc.Messages += st.Messages
		s.acc.Items += st.Items
		s.acc.Records += st.Records
		s.acc.ApplyS += st.ApplyS
		s.acc.GroupWaits += st.GroupWaits
		s.acc.GroupWaitsPaid += st.GroupWaitsPaid
		s.acc.GroupWaitS += st.GroupWaitS
		if len(s.acc.DurableHist) < len(st.DurableHist) {
			s.acc.DurableHist = append(s.acc.DurableHist, make([]uint64, len(st.DurableHist)-len(s.acc.DurableHist))...)
		}
		for i, n := range st.DurableHist {
			s.acc.DurableHist[i] += n
		}
	}
	return s, nil
}

func (s casSnapshot) sub(o casSnapshot) casSnapshot {
	return casSnapshot{
		proposer: caspaxos.ProposerStats{
			Proposals: s.proposer.Proposals - o.proposer.Proposals,
			Commits:   s.proposer.Commits - o.proposer.Commits,
			Failures:  s.proposer.Failures - o.proposer.Failures,
			Unknown:   s.proposer.Unknown - o.proposer.Unknown,
			Rounds:    s.proposer.Rounds - o.proposer.Rounds,
			NAKs:      s.proposer.NAKs - o.proposer.NAKs,
			Timeouts:  s.proposer.Timeouts - o.proposer.Timeouts,
			FastPath:  s.proposer.FastPath - o.proposer.FastPath,
			Fenced:    s.proposer.Fenced - o.proposer.Fenced,
		},
		sendErrors: s.sendErrors - o.sendErrors,
		acc: acceptorStats{
			Fsyncs:   s.acc.Fsyncs - o.acc.Fsyncs,
			Batches:  s.acc.Batches - o.acc.Batches,
			Messages: s.acc.Messages - o.acc.Messages,
			Items:    s.acc.Items - o.acc.Items,
			Records:  s.acc.Records - o.acc.Records,
			ApplyS:   s.acc.ApplyS - o.acc.ApplyS,

			GroupWaits:     s.acc.GroupWaits - o.acc.GroupWaits,
			GroupWaitsPaid: s.acc.GroupWaitsPaid - o.acc.GroupWaitsPaid,
			GroupWaitS:     s.acc.GroupWaitS - o.acc.GroupWaitS,
			DurableHist:    subHist(s.acc.DurableHist, o.acc.DurableHist),
		},
	}
}

// subHist returns the bucket counts of s minus those of o.
func subHist(s, o []uint64) []uint64 {
	out := append([]uint64(nil), s...)
	for i := range min(len(o), len(out)) {
		out[i] -= o[i]
	}
	return out
}

// durableQuantiles returns the upper bounds, in ms, of the buckets of hist
// (transport.DurableHistBound) holding quantiles qs and the slowest group.
func durableQuantiles(hist []uint64, qs ...float64) (bounds []float64, maxMs float64) {
	var total uint64
	for _, n := range hist {
		total += n
	}
	bounds = make([]float64, len(qs))
	if total == 0 {
		return bounds, 0
	}
	for qi, q := range qs {
		rank := uint64(q * float64(total))
		var seen uint64
		for i, n := range hist {
			seen += n
			if seen > rank || i == len(hist)-1 {
				bounds[qi] = ms(transport.DurableHistBound(i))
				break
			}
		}
	}
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i] > 0 {
			return bounds, ms(transport.DurableHistBound(i))
		}
	}
	return bounds, 0
}

func printCASResult(w io.Writer, r casResult) {
	mode := "closed loop"
	if r.Mode == "open" {
		mode = fmt.Sprintf("open loop at %.0f ops/s", r.Rate)
	}
	store := r.Store
	if r.Shards > 0 {
		store = fmt.Sprintf("%s, %d shards, %s layout", r.Store, r.Shards, r.BoltLayout)
	}
	fmt.Fprintf(w, "cas: %d acceptors (%s), %d keys, %d clients on %d proposer(s), %s, backoff %s, %.1fs measured\n",
		r.Acceptors, store, r.Keys, r.Clients, r.Proposers, mode, r.Backoff, r.DurationS)
	fmt.Fprintf(w, "  commits      %d (%.0f/s)\n", r.Commits, r.CommitsPerSec)
	fmt.Fprintf(w, "  latency      p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms\n",
		r.P50Ms, r.P90Ms, r.P99Ms, r.P999Ms, r.MaxMs)
	fmt.Fprintf(w, "  mismatches   %d (%.2f%% of CAS attempts), errors %d, unknown outcomes %d, gave up %d (every retry mismatched)\n",
		r.Mismatches, 100*r.MismatchRate, r.Errors, r.Unknown, r.GaveUp)
	fmt.Fprintf(w, "  proposer     %d rounds, %.4f%% NAK, %d timeouts, %d fast-path rounds, %.1f items/message\n",
		r.Rounds, 100*r.ConflictRate, r.Timeouts, r.FastPathRounds, r.ItemsPerMessage)
	fmt.Fprintf(w, "  acceptors    %.0f fsyncs/s in total (baseline %.0f/s for one writer), %.1f commits/fsync, %.1f records/batch, apply %.2f ms\n",
		r.FsyncsPerSec, r.FsyncBaselinePerSec, r.CommitsPerFsync, r.RecordsPerBatch, r.ApplyMsMean)
	fmt.Fprintf(w, "  durable      groups durable within p50 %.3g ms, p99 %.3g ms, max %.3g ms (bucket bounds), pipeline depth %d (0: default)\n",
		r.DurableP50Ms, r.DurableP99Ms, r.DurableMaxMs, r.PipelineDepth)
	fmt.Fprintf(w, "  group wait   %d waits (%d paid), %.3f ms mean, bound %.3f ms\n",
		r.GroupWaits, r.GroupWaitsPaid, r.GroupWaitMsMean, r.GroupWaitMs)
	if r.FirstError != "" {
		fmt.Fprintf(w, "  first error  %s\n", r.FirstError)
	}
}
