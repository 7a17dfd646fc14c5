package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/boltstore"
	"github.com/fmnode/fmnode/caspaxos/pebblestore"
	"github.com/fmnode/fmnode/caspaxos/transport"
)

// acceptorStats is the line `fmnode acceptor --control-stdin` prints for a
// "stats" command and once more at shutdown: `stats {json}`. The bench
// reads it to sum fsyncs over its acceptor processes.
type acceptorStats struct {
	ID       uint64  `json:"id"`
	Store    string  `json:"store"`
	Shards   int     `json:"shards,omitempty"`
	Fsyncs   uint64  `json:"fsyncs"`
	Batches  uint64  `json:"batches"`
	Messages uint64  `json:"messages"`
	Items    uint64  `json:"items"`
	Records  uint64  `json:"records"`
	Replies  uint64  `json:"replies"`
	Dropped  uint64  `json:"dropped"`
	ApplyS   float64 `json:"apply_s"`
	// Group waits (transport.AcceptorConfig.GroupWait).
	GroupWaits     uint64  `json:"group_waits"`
	GroupWaitsPaid uint64  `json:"group_waits_paid"`
	GroupWaitS     float64 `json:"group_wait_s"`
	// DurableHist counts groups by the time they took to become durable,
	// in transport.DurableHistBound buckets.
	DurableHist []uint64 `json:"durable_hist"`
}

const statsPrefix = "stats "

// openedStore is a store plus its fsync counter.
type openedStore struct {
	caspaxos.Store
	fsyncs func() uint64
	shards int // bbolt files the store spreads over; 0 for other stores
}

// defaultBoltShards is the shard count of a new bbolt store when --shards
// is not given: 1, the single-file store. Chosen by measurement
// (docs/BENCHMARKS.md, CAS section): on the 2-core build machine, with
// three acceptor processes sharing one disk, every shard count above 1
// lowered `fmnode bench cas` throughput (each shard commit pays its own two
// fdatasyncs and meta page, and those parallel fsyncs did not overlap well
// enough to win it back). Raise it only on a machine where the bench says so.
const defaultBoltShards = 1

// Names inside --data: the single-file bbolt store and the sharded one's
// directory. Different names, so that neither layout can be mistaken for
// the other and a --shards change cannot silently start an empty store.
const (
	boltFileName  = "acceptor.db"
	boltShardsDir = "shards"
)

// resolveBoltShards picks the shard count for the bbolt store in dir.
// shards 0 means "whatever dir already holds, else defaultBoltShards", so
// an upgrade that changes the default keeps opening existing stores. An
// explicit count that contradicts the layout on disk is refused: opening
// the other layout would start an empty store beside the real one, and an
// acceptor that forgets its promises breaks Paxos.
func resolveBoltShards(dir string, shards int) (int, error) {
	if shards < 0 || shards > boltstore.MaxShards {
		return 0, fmt.Errorf("--shards %d out of range [1, %d]", shards, boltstore.MaxShards)
	}
	single := filepath.Join(dir, boltFileName)
	_, err := os.Stat(single)
	hasSingle := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("inspect %s: %w", single, err)
	}
	sharded, err := boltstore.ReadManifest(filepath.Join(dir, boltShardsDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	switch {
	case hasSingle && sharded > 0:
		return 0, fmt.Errorf("%s holds both a single-file bbolt store (%s) and a sharded one (%s): refusing to pick one",
			dir, boltFileName, boltShardsDir)
	case hasSingle && shards > 1:
		return 0, fmt.Errorf("%s holds a single-file bbolt store (%s); open it with --shards 1 (or omit --shards)", dir, single)
	case sharded > 0 && shards == 1:
		return 0, fmt.Errorf("%s holds a bbolt store of %d shards; open it with --shards %d (or omit --shards)", dir, sharded, sharded)
	case shards > 0:
		return shards, nil
	case hasSingle:
		return 1, nil
	case sharded > 0:
		return sharded, nil
	}
	return defaultBoltShards, nil
}

// openStore opens the store kind ("bbolt", "pebble", "memory") under dir.
// shards applies to bbolt only: 1 is the single-file store, more is the
// sharded store, 0 picks (see resolveBoltShards). layout is the bbolt file
// layout (boltstore.LayoutAuto: what the files hold, else the log layout).
func openStore(kind, dir string, shards int, layout boltstore.Layout, log *slog.Logger) (openedStore, error) {
	if shards != 0 && kind != "bbolt" && kind != "bolt" {
		return openedStore{}, fmt.Errorf("--shards applies to --store bbolt only, not %q", kind)
	}
	if layout != boltstore.LayoutAuto && kind != "bbolt" && kind != "bolt" {
		return openedStore{}, fmt.Errorf("--bolt-layout applies to --store bbolt only, not %q", kind)
	}
	switch kind {
	case "bbolt", "bolt":
		if dir == "" {
			return openedStore{}, errors.New("--data is required for --store bbolt")
		}
		n, err := resolveBoltShards(dir, shards)
		if err != nil {
			return openedStore{}, fmt.Errorf("open bbolt store: %w", err)
		}
		if n == 1 {
			st, err := boltstore.Open(filepath.Join(dir, boltFileName), boltstore.Options{Logger: log, Layout: layout})
			if err != nil {
				return openedStore{}, fmt.Errorf("open bbolt store: %w", err)
			}
			return openedStore{Store: st, fsyncs: st.Fsyncs, shards: 1}, nil
		}
		st, err := boltstore.OpenSharded(filepath.Join(dir, boltShardsDir), n, boltstore.Options{Logger: log, Layout: layout})
		if err != nil {
			return openedStore{}, fmt.Errorf("open sharded bbolt store: %w", err)
		}
		return openedStore{Store: st, fsyncs: st.Fsyncs, shards: n}, nil
	case "pebble":
		if dir == "" {
			return openedStore{}, errors.New("--data is required for --store pebble")
		}
		st, err := pebblestore.Open(filepath.Join(dir, "pebble"), pebblestore.Options{Logger: log})
		if err != nil {
			return openedStore{}, fmt.Errorf("open pebble store: %w", err)
		}
		return openedStore{Store: st, fsyncs: st.Fsyncs}, nil
	case "memory", "mem":
		st := caspaxos.NewMemoryStore()
		// A memory store never syncs; count its applies, which is what a
		// disk store without group commit would have synced.
		return openedStore{Store: st, fsyncs: st.Applies}, nil
	}
	return openedStore{}, fmt.Errorf("unknown --store %q (bbolt, pebble, memory)", kind)
}

// defaultPipelineDepth is the acceptor's --pipeline-depth when not given.
// pebble's commit pipeline overlaps its WAL writes with the WAL sync, and
// pipelining cut its open-loop p99 (docs/BENCHMARKS.md, issue 18); bbolt
// commits one transaction at a time behind two fdatasyncs, and there it
// gained no throughput and did not cut the tail in the same measurements,
// so bbolt keeps one store apply at a time (as do the group wait and the
// sharded store) until a measurement says otherwise.
func defaultPipelineDepth(store string, groupWait time.Duration) int {
	switch {
	case groupWait > 0:
		return 1
	case store == "pebble" || store == "memory" || store == "mem":
		return transport.DefaultPipelineDepth
	}
	return 1
}

func parseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("bad --log-level %q: %w", s, err)
	}
	return l, nil
}

// runAcceptor serves one acceptor until ctx ends (SIGTERM/SIGINT) or, with
// --control-stdin, until stdin closes. The first line on stdout is
// "listening ADDR".
func runAcceptor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fmnode acceptor", flag.ContinueOnError)
	id := fs.Uint64("id", 0, "acceptor id (non-zero, unique in the cluster)")
	listen := fs.String("listen", "127.0.0.1:0", "TCP address to listen on")
	storeKind := fs.String("store", "bbolt", "store: bbolt, pebble or memory")
	dataDir := fs.String("data", "", "data directory (bbolt and pebble)")
	shards := fs.Int("shards", 0, fmt.Sprintf("bbolt files to spread records over; 1 is the single-file store (0: what --data holds, else %d)", defaultBoltShards))
	boltLayout := fs.String("bolt-layout", "auto", "bbolt file layout: log, in-place, or auto (what --data holds, else log)")
	maxFrame := fs.Int("max-frame-bytes", transport.DefaultMaxFrameBytes, "largest frame accepted or sent")
	idle := fs.Duration("idle-timeout", transport.DefaultIdleTimeout, "close connections idle this long")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile to this file")
	control := fs.Bool("control-stdin", false, "read commands from stdin (\"stats\" prints a stats line); exit when stdin closes")
	metricsAddr := fs.String("metrics-listen", "", "serve Prometheus metrics on this address at /metrics (empty: off)")
	groupWait := fs.Duration("group-wait", 0, fmt.Sprintf("longest a group is held back for requests to join it after the previous one is durable; 0: never (at most %v)", transport.MaxGroupWait))
	groupWaitFraction := fs.Float64("group-wait-fraction", transport.DefaultGroupWaitFraction, "the group wait's bound as a fraction of the last store apply, in (0, 1]")
	pipelineDepth := fs.Int("pipeline-depth", 0, fmt.Sprintf("groups handed to the store and not yet durable; 1: one store apply at a time (0: %d for pebble and memory, 1 for bbolt and with --group-wait)", transport.DefaultPipelineDepth))
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	level, err := parseLogLevel(*logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "fmnode acceptor:", err)
		return 2
	}
	if *id == 0 {
		fmt.Fprintln(stderr, "fmnode acceptor: --id must be non-zero")
		return 2
	}
	layout, err := boltstore.ParseLayout(*boltLayout)
	if err != nil {
		fmt.Fprintln(stderr, "fmnode acceptor: --bolt-layout:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if err := serveAcceptor(ctx, acceptorOptions{
		id: caspaxos.NodeID(*id), listen: *listen, store: *storeKind, dir: *dataDir, shards: *shards, layout: layout,
		maxFrame: *maxFrame, idle: *idle, cpuProfile: *cpuProfile, control: *control, metrics: *metricsAddr,
		groupWait: *groupWait, groupWaitFraction: *groupWaitFraction, pipelineDepth: *pipelineDepth,
	}, os.Stdin, stdout, log); err != nil {
		log.Error("acceptor failed", "err", err)
		return 1
	}
	return 0
}

type acceptorOptions struct {
	id         caspaxos.NodeID
	listen     string
	store      string
	dir        string
	shards     int
	layout     boltstore.Layout
	maxFrame   int
	idle       time.Duration
	cpuProfile string
	control    bool
	metrics    string
	// groupWait 0 disables the group wait.
	groupWait         time.Duration
	groupWaitFraction float64
	// pipelineDepth 0 is transport's default.
	pipelineDepth int
}

func serveAcceptor(ctx context.Context, o acceptorOptions, stdin io.Reader, stdout io.Writer, log *slog.Logger) (err error) {
	stopProfile, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	defer func() {
		if perr := stopProfile(); err == nil && perr != nil {
			err = fmt.Errorf("cpuprofile: %w", perr)
		}
	}()
	st, err := openStore(o.store, o.dir, o.shards, o.layout, log)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := st.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close store: %w", cerr)
		}
	}()
	depth := o.pipelineDepth
	if depth == 0 {
		depth = defaultPipelineDepth(o.store, o.groupWait)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := transport.ListenAcceptor(transport.ServerConfig{
		AcceptorConfig: transport.AcceptorConfig{
			// The store itself, not the wrapper: the server pipelines
			// groups when it is a caspaxos.PipelineStore.
			ID: o.id, Store: st.Store, Logger: log, Registerer: reg,
			GroupWait: o.groupWait, GroupWaitFraction: o.groupWaitFraction, PipelineDepth: depth,
		},
		Addr:          o.listen,
		MaxFrameBytes: o.maxFrame,
		IdleTimeout:   o.idle,
	})
	if err != nil {
		return err
	}
	if o.metrics != "" {
		stopMetrics, err := serveMetrics(o.metrics, reg, log)
		if err != nil {
			_ = srv.Close()
			return err
		}
		defer stopMetrics()
	}
	out := &lineWriter{w: stdout}
	out.printf("listening %s\n", srv.Addr())

	stats := func() {
		s := srv.Stats()
		b, _ := json.Marshal(acceptorStats{
			ID: uint64(o.id), Store: o.store, Shards: st.shards, Fsyncs: st.fsyncs(), Batches: s.Batches, Messages: s.Messages,
			Items: s.Items, Records: s.Records, Replies: s.Replies, Dropped: s.Dropped, ApplyS: s.ApplyTime.Seconds(),
			GroupWaits: s.GroupWaits, GroupWaitsPaid: s.GroupWaitsPaid, GroupWaitS: s.GroupWaitTime.Seconds(),
			DurableHist: s.DurableHist[:],
		})
		out.printf("%s%s\n", statsPrefix, b)
	}
	stdinClosed := make(chan struct{})
	if o.control {
		go func() {
			// This goroutine may outlive serveAcceptor while blocked on a
			// read of stdin; it touches nothing but out after that.
			defer close(stdinClosed)
			sc := bufio.NewScanner(stdin)
			for sc.Scan() {
				switch strings.TrimSpace(sc.Text()) {
				case "stats":
					stats()
				case "quit":
					return
				}
			}
		}()
	}
	select {
	case <-ctx.Done():
	case <-stdinClosed:
	case <-srv.Dead():
	}
	cerr := srv.Close()
	stats()
	log.Info("acceptor shut down", "fsyncs", st.fsyncs())
	return cerr
}

// serveMetrics serves reg at http://addr/metrics until the returned
// function is called.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server failed", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		<-done
	}, nil
}

// lineWriter serialises whole lines to stdout from several goroutines.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
}
