package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/node"
	"github.com/fmnode/fmnode/partition/pebblestore"
	"github.com/fmnode/fmnode/quorum"
)

type partitionBenchOptions struct {
	partitions  int
	regions     int
	consistency string
	duration    time.Duration
	warmup      time.Duration
	clients     int
	keys        int
	valueBytes  int
	idle        int
	dataParent  string
	noSync      bool
	json        bool
	cpuProfile  string
	maxEvents   int
}

type partitionBenchResult struct {
	Benchmark    string  `json:"benchmark"`
	Partitions   int     `json:"partitions"`
	Regions      int     `json:"regions"`
	Consistency  string  `json:"consistency"`
	Clients      int     `json:"clients"`
	ValueBytes   int     `json:"value_bytes"`
	DurationS    float64 `json:"duration_s"`
	Sync         bool    `json:"sync"`
	Writes       uint64  `json:"writes"`
	Errors       uint64  `json:"errors"`
	WritesPerSec float64 `json:"writes_per_sec"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	MaxMs        float64 `json:"max_ms"`
	// BytesPerOp is the bytes written to the write-ahead logs of all
	// regions' pebble stores per acknowledged write.
	BytesPerOp float64 `json:"bytes_per_op"`
	// NetBytesPerOp estimates replication traffic per write (message
	// headers plus op payloads, as a binary wire format would carry them).
	NetBytesPerOp float64 `json:"net_bytes_per_op"`
	Fsyncs        uint64  `json:"fsyncs"`
	WritesPerSync float64 `json:"partition_writes_per_fsync"`
	CommitMsMean  float64 `json:"commit_ms_mean"`
	// CPUMicrosPerOp is the process's user+system CPU time per write
	// during the measured window (all three regions and the clients).
	CPUMicrosPerOp float64 `json:"cpu_us_per_op"`
	// LoadAvg1 is the machine's 1-minute load average at the end: other
	// processes compete for the same cores.
	LoadAvg1 float64 `json:"loadavg_1m"`
	// Memory per idle hosted partition: IdlePartitions were created in a
	// pebble store, the process was measured, the partitions were loaded
	// into a host (as at a node restart) and measured again after GC.
	RSSBytesPerPartition  float64 `json:"rss_bytes_per_partition"`
	HeapBytesPerPartition float64 `json:"heap_bytes_per_partition"`
	IdlePartitions        int     `json:"idle_partitions"`
	MemoryMethod          string  `json:"memory_method"`
	NumCPU                int     `json:"num_cpu"`
	GoMaxProcs            int     `json:"gomaxprocs"`
}

func runBenchPartition(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o partitionBenchOptions
	fs := flag.NewFlagSet("fmnode bench partition", flag.ContinueOnError)
	fs.IntVar(&o.partitions, "partitions", 1000, "partitions, each with a replica in every region")
	fs.IntVar(&o.regions, "regions", 3, "regions (one node each, in this process, over an in-memory transport)")
	fs.StringVar(&o.consistency, "consistency", "strong", "strong, bounded, session or eventual")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load before the measured time")
	fs.IntVar(&o.clients, "clients", 256, "closed-loop client goroutines writing to random partitions")
	fs.IntVar(&o.keys, "keys", 1000, "keys per partition")
	fs.IntVar(&o.valueBytes, "value-bytes", 100, "bytes per written value")
	fs.IntVar(&o.idle, "idle-partitions", 100000, "idle partitions hosted for the memory measurement (0: skip)")
	fs.StringVar(&o.dataParent, "data", "", "parent of the temporary pebble directories (default: the system temp dir)")
	fs.BoolVar(&o.noSync, "nosync", false, "commit without fsync (CPU path only; not durable)")
	fs.BoolVar(&o.json, "json", false, "print one JSON object")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured window to this file")
	fs.IntVar(&o.maxEvents, "max-events", 0, "bound on events a node steps per commit (0: default)")
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(stderr, "fmnode bench partition:", err)
		return 2
	}
	res, err := benchPartition(ctx, o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "fmnode bench partition:", err)
		return 1
	}
	if o.json {
		b, err := json.Marshal(res)
		if err != nil {
			fmt.Fprintln(stderr, "fmnode bench partition:", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	fmt.Fprintf(stdout, "partition bench: %d partitions, %d regions, %s, %d clients, sync=%v\n",
		res.Partitions, res.Regions, res.Consistency, res.Clients, res.Sync)
	fmt.Fprintf(stdout, "  %.0f writes/s (%d writes, %d errors), p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
		res.WritesPerSec, res.Writes, res.Errors, res.P50Ms, res.P99Ms, res.MaxMs)
	fmt.Fprintf(stdout, "  %.0f WAL bytes/op, %.0f net bytes/op, %d fsyncs (%.1f partition writes each, %.2f ms mean)\n",
		res.BytesPerOp, res.NetBytesPerOp, res.Fsyncs, res.WritesPerSync, res.CommitMsMean)
	fmt.Fprintf(stdout, "  %.1f µs CPU per write (process), load average %.2f on %d CPUs\n", res.CPUMicrosPerOp, res.LoadAvg1, res.NumCPU)
	if res.IdlePartitions > 0 {
		fmt.Fprintf(stdout, "  idle: %.0f RSS bytes, %.0f heap bytes per partition (%d partitions)\n",
			res.RSSBytesPerPartition, res.HeapBytesPerPartition, res.IdlePartitions)
	}
	return 0
}

func (o partitionBenchOptions) validate() error {
	switch {
	case o.partitions < 1:
		return fmt.Errorf("--partitions %d must be positive", o.partitions)
	case o.regions < 1 || o.regions > 9:
		return fmt.Errorf("--regions %d out of range [1, 9]", o.regions)
	case o.clients < 1:
		return fmt.Errorf("--clients %d must be positive", o.clients)
	case o.keys < 1:
		return fmt.Errorf("--keys %d must be positive", o.keys)
	case o.valueBytes < 0 || o.valueBytes > partition.DefaultMaxOpBytes-64:
		return fmt.Errorf("--value-bytes %d out of range", o.valueBytes)
	case o.duration <= 0:
		return fmt.Errorf("--duration must be positive")
	case o.idle < 0:
		return fmt.Errorf("--idle-partitions must not be negative")
	}
	if _, err := partition.ParseConsistency(o.consistency); err != nil {
		return err
	}
	return nil
}

func benchRegions(n int) []partition.Region {
	rs := make([]partition.Region, n)
	for i := range rs {
		rs[i] = partition.Region("r" + strconv.Itoa(i+1))
	}
	return rs
}

func benchLevel(c partition.Consistency) partition.Level {
	l := partition.Level{Consistency: c}
	if c == partition.BoundedStaleness {
		l.StalenessOps, l.StalenessTime, l.StalenessHold = 100000, 5*time.Second, time.Second
	}
	return l
}

// countingTransport wraps the in-memory network to count replication bytes.
type countingTransport struct {
	net   *node.MemNetwork
	bytes atomic.Uint64
}

func (c *countingTransport) Send(to partition.Region, msgs []partition.Message) {
	var n uint64
	for i := range msgs {
		n += 48 // type, partition, epoch, regions, positions
		for j := range msgs[i].Entries {
			n += uint64(len(msgs[i].Entries[j].Key) + len(msgs[i].Entries[j].Value) + 12)
		}
	}
	c.bytes.Add(n)
	c.net.Send(to, msgs)
}

func benchPartition(ctx context.Context, o partitionBenchOptions, stderr io.Writer) (partitionBenchResult, error) {
	level, _ := partition.ParseConsistency(o.consistency)
	res := partitionBenchResult{
		Benchmark: "partition", Partitions: o.partitions, Regions: o.regions, Consistency: level.String(),
		Clients: o.clients, ValueBytes: o.valueBytes, Sync: !o.noSync,
		NumCPU: runtime.NumCPU(), GoMaxProcs: runtime.GOMAXPROCS(0),
	}
	root, err := os.MkdirTemp(o.dataParent, "fmnode-bench-partition-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(root)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	regions := benchRegions(o.regions)
	tr := &countingTransport{net: node.NewMemNetwork()}
	var stores []*pebblestore.Store
	var nodes []*node.Node
	defer func() {
		for _, st := range stores {
			_ = st.Close()
		}
	}()
	for i, reg := range regions {
		st, err := pebblestore.Open(pebblestore.Options{Dir: filepath.Join(root, string(reg)), NoSync: o.noSync})
		if err != nil {
			return res, err
		}
		stores = append(stores, st)
		cfg := partition.DefaultConfig(reg, uint64(time.Now().UnixNano())|1)
		cfg.Logger = log
		n, err := node.New(node.Config{Host: cfg, Store: st, Transport: tr, Logger: log, MaxEventsPerCommit: o.maxEvents})
		if err != nil {
			return res, fmt.Errorf("region %s: %w", reg, err)
		}
		tr.net.Attach(n)
		nodes = append(nodes, n)
		_ = i
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	runErr := make(chan error, len(nodes))
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
				runErr <- err
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()

	// Create the partitions: write regions spread round-robin.
	for _, n := range nodes {
		err := n.Do(ctx, func(now time.Duration, h *partition.Host) error {
			for p := 0; p < o.partitions; p++ {
				wq := quorum.WriteQuorum{Replicas: sortedRegions(regions), WriteRegion: regions[p%len(regions)],
					Members: sortedRegions(regions), MinDurability: 1}
				if err := h.Create(now, partition.ID(p), partition.Spec{Level: benchLevel(level), Quorum: wq, Epoch: 1}, 0); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("create partitions: %w", err)
		}
	}

	var measuring atomic.Bool
	var writes, errs atomic.Uint64
	lat := make([][]time.Duration, o.clients)
	value := make([]byte, o.valueBytes)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var cwg sync.WaitGroup
	for c := 0; c < o.clients; c++ {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 42))
			var key []byte
			for loadCtx.Err() == nil {
				p := rng.IntN(o.partitions)
				key = strconv.AppendInt(append(key[:0], 'k'), int64(rng.IntN(o.keys)), 10)
				start := time.Now()
				_, err := nodes[p%len(nodes)].Write(loadCtx, partition.WriteRequest{Partition: partition.ID(p), Epoch: 1, Key: key, Value: value})
				d := time.Since(start)
				if !measuring.Load() {
					continue
				}
				if err != nil {
					if loadCtx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				writes.Add(1)
				if len(lat[c]) < 1<<20 {
					lat[c] = append(lat[c], d)
				}
			}
		}()
	}
	sleepCtx(ctx, o.warmup)
	var walStart uint64
	var fsyncStart, commitNsStart uint64
	for i, st := range stores {
		walStart += st.WALBytes()
		fsyncStart += nodes[i].Stats().Commits.Load()
		commitNsStart += nodes[i].Stats().CommitNanos.Load()
	}
	netStart := tr.bytes.Load()
	var partWritesStart uint64
	for _, n := range nodes {
		partWritesStart += n.Stats().WritesCommitted.Load()
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return res, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return res, err
		}
		defer f.Close()
	}
	cpu0 := processCPU()
	measuring.Store(true)
	t0 := time.Now()
	sleepCtx(ctx, o.duration)
	measuring.Store(false)
	elapsed := time.Since(t0)
	cpu1 := processCPU()
	res.LoadAvg1 = loadAvg1()
	if o.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	var walEnd, fsyncEnd, commitNsEnd, partWritesEnd uint64
	for i, st := range stores {
		walEnd += st.WALBytes()
		fsyncEnd += nodes[i].Stats().Commits.Load()
		commitNsEnd += nodes[i].Stats().CommitNanos.Load()
		partWritesEnd += nodes[i].Stats().WritesCommitted.Load()
	}
	netEnd := tr.bytes.Load()
	stopLoad()
	cwg.Wait()
	select {
	case err := <-runErr:
		return res, err
	default:
	}

	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	res.DurationS = elapsed.Seconds()
	res.Writes, res.Errors = writes.Load(), errs.Load()
	res.WritesPerSec = float64(res.Writes) / elapsed.Seconds()
	if len(all) > 0 {
		res.P50Ms = msOf(all[len(all)/2])
		res.P99Ms = msOf(all[min(len(all)-1, len(all)*99/100)])
		res.MaxMs = msOf(all[len(all)-1])
	}
	if res.Writes > 0 {
		res.CPUMicrosPerOp = float64(cpu1-cpu0) / float64(time.Microsecond) / float64(res.Writes)
		res.BytesPerOp = float64(walEnd-walStart) / float64(res.Writes)
		res.NetBytesPerOp = float64(netEnd-netStart) / float64(res.Writes)
	}
	res.Fsyncs = fsyncEnd - fsyncStart
	if res.Fsyncs > 0 {
		res.WritesPerSync = float64(partWritesEnd-partWritesStart) / float64(res.Fsyncs)
		res.CommitMsMean = float64(commitNsEnd-commitNsStart) / float64(res.Fsyncs) / 1e6
	}
	stop()
	wg.Wait()
	for _, st := range stores {
		_ = st.Close()
	}
	stores = nil

	if o.idle > 0 {
		rss, heap, err := measureIdlePartitions(filepath.Join(root, "idle"), o.idle, regions, level, log)
		if err != nil {
			return res, fmt.Errorf("idle memory: %w", err)
		}
		res.RSSBytesPerPartition, res.HeapBytesPerPartition, res.IdlePartitions = rss, heap, o.idle
		res.MemoryMethod = "idle partitions created in a pebble store; process RSS and Go heap in use measured after GC with the store open, then after listing and loading every partition into a host (as a node does at start, pebble cache included), difference divided by their number; a third lead (write-region state), two thirds follow"
	}
	return res, nil
}

func sortedRegions(rs []partition.Region) []quorum.Region {
	out := slices.Clone(rs)
	slices.Sort(out)
	return out
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// measureIdlePartitions creates n partitions in a fresh pebble store, then
// measures what loading them into a host costs.
func measureIdlePartitions(dir string, n int, regions []partition.Region, level partition.Consistency, log *slog.Logger) (rssPer, heapPer float64, err error) {
	st, err := pebblestore.Open(pebblestore.Options{Dir: dir})
	if err != nil {
		return 0, 0, err
	}
	defer st.Close()
	cfg := partition.DefaultConfig(regions[0], 1)
	cfg.Logger = log
	const chunk = 10000
	for base := 0; base < n; base += chunk {
		h, err := partition.NewHost(cfg)
		if err != nil {
			return 0, 0, err
		}
		for p := base; p < min(n, base+chunk); p++ {
			wq := quorum.WriteQuorum{Replicas: sortedRegions(regions), WriteRegion: regions[p%len(regions)],
				Members: sortedRegions(regions), MinDurability: 1}
			if err := h.Create(0, partition.ID(p), partition.Spec{Level: benchLevel(level), Quorum: wq, Epoch: 1}, 0); err != nil {
				return 0, 0, err
			}
		}
		rd := h.Ready(0)
		if err := st.Commit(rd.Writes); err != nil {
			return 0, 0, err
		}
	}
	if err := st.Flush(); err != nil {
		return 0, 0, err
	}
	settle()
	heap0, rss0 := heapInUse(), processRSS()
	// What a node does at start: list the partitions and load each.
	ids, err := st.Partitions()
	if err != nil {
		return 0, 0, err
	}
	h, err := partition.NewHost(cfg)
	if err != nil {
		return 0, 0, err
	}
	for _, p := range ids {
		rec, err := st.Load(p)
		if err != nil {
			return 0, 0, err
		}
		if err := h.Open(0, rec); err != nil {
			return 0, 0, err
		}
	}
	ids = nil
	// Idle: whatever a Ready holds (nothing to write) is drained once.
	if h.HasReady() {
		rd := h.Ready(0)
		if err := st.Commit(rd.Writes); err != nil {
			return 0, 0, err
		}
		h.Advance(&rd)
	}
	settle()
	heap1, rss1 := heapInUse(), processRSS()
	runtime.KeepAlive(h)
	if h.Len() != n {
		return 0, 0, fmt.Errorf("hosted %d partitions, want %d", h.Len(), n)
	}
	return float64(int64(rss1)-int64(rss0)) / float64(n), float64(int64(heap1)-int64(heap0)) / float64(n), nil
}

func settle() {
	runtime.GC()
	runtime.GC()
	debug.FreeOSMemory()
}

func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// processCPU returns the process's user+system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAvg1 reads the 1-minute load average (0 if unavailable).
func loadAvg1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// processRSS reads the resident set size from /proc/self/statm (0 if unavailable).
func processRSS() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}
