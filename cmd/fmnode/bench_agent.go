package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fmnode/fmnode/internal/agent"
	"github.com/fmnode/fmnode/internal/clusterspec"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/txtdns"
	"github.com/fmnode/fmnode/txtdns/kv"
	"github.com/fmnode/fmnode/txtdns/routing"
)

type agentBenchOptions struct {
	partitions int
	writers    int
	duration   time.Duration
	warmup     time.Duration
	valueBytes int
	profile    string
	dataParent string
	json       bool
	bin        string // the fmnode executable the agents run
}

// agentBenchResult is the agent half of `fmnode bench agent`'s output.
type agentBenchResult struct {
	Benchmark  string   `json:"benchmark"`
	Agents     int      `json:"agents"`
	Regions    []string `json:"regions"`
	Profile    string   `json:"profile"`
	Partitions int      `json:"partitions"`
	Writers    int      `json:"writers"`
	ValueBytes int      `json:"value_bytes"`
	DurationS  float64  `json:"duration_s"`
	// Writes are the strong Puts acknowledged within the measured window;
	// the latencies are theirs (a histogram with ~1% buckets).
	Writes       uint64  `json:"writes"`
	WritesPerSec float64 `json:"writes_per_sec"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	MaxMs        float64 `json:"max_ms"`
	MeanMs       float64 `json:"mean_ms"`
	// Errors are the Puts that failed within the window, UnknownOutcomes
	// those of them that were *kv.UnknownOutcomeError; FirstError is the
	// first failure of the whole run, warm-up included.
	Errors          uint64 `json:"errors"`
	UnknownOutcomes uint64 `json:"unknown_outcomes"`
	FirstError      string `json:"first_error,omitempty"`
	// Every write acknowledged (warm-up included) is read back strongly
	// after the run: Lost were not found or held another value,
	// VerifyErrors could not be read.
	Verified     uint64 `json:"verified"`
	Lost         uint64 `json:"lost"`
	VerifyErrors uint64 `json:"verify_errors"`
	// DNSRoutesPublishedS is the time from init's reply until the DNS
	// server answered a route (a write region) for every partition;
	// ReadyS until a strong Put to every partition had succeeded.
	DNSRoutesPublishedS float64 `json:"dns_routes_published_s"`
	ReadyS              float64 `json:"ready_s"`
	// CPU per acknowledged write in the window: the three agent processes
	// together, and this process (the Go client and its writers).
	AgentsCPUMicrosPerOp float64 `json:"agents_cpu_us_per_op"`
	ClientCPUMicrosPerOp float64 `json:"client_cpu_us_per_op"`
	LoadAvg1             float64 `json:"loadavg_1m"`
	NumCPU               int     `json:"num_cpu"`
}

// agentBenchOutput is what `fmnode bench agent --json` prints.
type agentBenchOutput struct {
	Agent     agentBenchResult     `json:"agent"`
	Partition partitionBenchResult `json:"partition"`
	// RatioWritesPerSec is agent writes/s over partition writes/s,
	// measured in the same run on the same machine: the comparable
	// figure across machines.
	RatioWritesPerSec float64 `json:"ratio_writes_per_sec"`
}

func runBenchAgent(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "fmnode bench agent:", err)
		return 1
	}
	return runBenchAgentWith(ctx, args, stdout, stderr, exe)
}

// runBenchAgentWith is runBenchAgent with the agents running bin (a test
// binary is not fmnode).
func runBenchAgentWith(ctx context.Context, args []string, stdout, stderr io.Writer, bin string) int {
	o := agentBenchOptions{bin: bin}
	fs := flag.NewFlagSet("fmnode bench agent", flag.ContinueOnError)
	fs.IntVar(&o.partitions, "partitions", 64, "partitions of the cluster (and of the partition benchmark)")
	fs.IntVar(&o.writers, "writers", 64, "concurrent client goroutines, each a closed loop of strong Puts to keys of its own")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time (of each benchmark)")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load before the measured time (of each benchmark)")
	fs.IntVar(&o.valueBytes, "value-bytes", 100, "bytes per written value")
	fs.StringVar(&o.profile, "profile", "fast", "the cluster's failover timing profile: paper or fast")
	fs.StringVar(&o.dataParent, "data", "", "parent of the temporary directories (default: the system temp dir)")
	fs.BoolVar(&o.json, "json", false, "print one JSON object")
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(stderr, "fmnode bench agent:", err)
		return 2
	}
	ares, err := benchAgent(ctx, o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "fmnode bench agent:", err)
		return 1
	}
	// The agents are gone: the in-process benchmark has the machine.
	pres, err := benchPartition(ctx, o.partitionOptions(), stderr)
	if err != nil {
		fmt.Fprintln(stderr, "fmnode bench agent: partition benchmark:", err)
		return 1
	}
	out := agentBenchOutput{Agent: ares, Partition: pres}
	if pres.WritesPerSec > 0 {
		out.RatioWritesPerSec = ares.WritesPerSec / pres.WritesPerSec
	}
	if o.json {
		if err := writeJSON(stdout, out); err != nil {
			fmt.Fprintln(stderr, "fmnode bench agent:", err)
			return 1
		}
		return 0
	}
	printAgentBench(stdout, out)
	return 0
}

func (o agentBenchOptions) validate() error {
	switch {
	case o.partitions < 1 || o.partitions > clusterspec.MaxPartitions:
		return fmt.Errorf("--partitions %d: must be in 1..%d", o.partitions, clusterspec.MaxPartitions)
	case o.writers < 1 || o.writers > 100000:
		return fmt.Errorf("--writers %d: must be in 1..100000", o.writers)
	case o.duration <= 0:
		return fmt.Errorf("--duration %v: must be positive", o.duration)
	case o.warmup < 0:
		return fmt.Errorf("--warmup %v: must not be negative", o.warmup)
	case o.valueBytes < 0 || o.valueBytes > partition.DefaultMaxOpBytes-1024:
		return fmt.Errorf("--value-bytes %d: must be in 0..%d", o.valueBytes, partition.DefaultMaxOpBytes-1024)
	case o.profile != "paper" && o.profile != "fast":
		return fmt.Errorf("--profile %q: must be paper or fast", o.profile)
	}
	return o.partitionOptions().validate()
}

// partitionOptions is the in-process benchmark of the same load: the same
// partitions, writers (its clients), value size and times, three regions,
// strong; no idle-memory measurement.
func (o agentBenchOptions) partitionOptions() partitionBenchOptions {
	return partitionBenchOptions{partitions: o.partitions, regions: 3, consistency: "strong", duration: o.duration,
		warmup: o.warmup, clients: o.writers, keys: 1000, valueBytes: o.valueBytes, dataParent: o.dataParent, json: true}
}

const (
	agentBenchZone   = "fm.bench."
	agentBenchAgents = 3
	// agentBenchSetup bounds each setup step (start, init, DNS, first
	// writes) and the read-back.
	agentBenchSetup = 90 * time.Second
)

// benchAgent runs the three agents, the load and the read-back, and kills
// the agents before it returns.
func benchAgent(ctx context.Context, o agentBenchOptions, stderr io.Writer) (res agentBenchResult, err error) {
	res = agentBenchResult{Benchmark: "agent", Agents: agentBenchAgents, Regions: localRegions[:agentBenchAgents],
		Profile: o.profile, Partitions: o.partitions, Writers: o.writers, ValueBytes: o.valueBytes, NumCPU: runtime.NumCPU()}
	dir, err := os.MkdirTemp(o.dataParent, "fmnode-bench-agent-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	lc, err := newLocalCluster(localClusterConfig{Bin: o.bin, Dir: dir, Nodes: agentBenchAgents, Cluster: "bench",
		Zone: agentBenchZone, DNSNode: 2, LogLevel: "warn",
		Lifetime: 5*agentBenchSetup + o.warmup + o.duration + time.Minute})
	if err != nil {
		return res, err
	}
	procs := map[*localNode]*localProc{}
	defer func() {
		if err != nil {
			for _, n := range lc.nodes {
				if p := procs[n]; p != nil {
					fmt.Fprintf(stderr, "--- %s (%s) log, last lines:\n%s\n", n.name, n.region, p.tail(4<<10))
				}
			}
		}
		if cerr := lc.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	for _, n := range lc.nodes {
		p, err := lc.start(n)
		if err != nil {
			return res, err
		}
		procs[n] = p
	}
	step := func(f func(ctx context.Context) error) error {
		sctx, cancel := context.WithTimeout(ctx, agentBenchSetup)
		defer cancel()
		return f(sctx)
	}
	for _, n := range lc.nodes {
		if err := step(func(ctx context.Context) error {
			return lc.waitHTTP(ctx, n, agent.PathHealthz, procs[n].exited())
		}); err != nil {
			return res, err
		}
	}

	spec := clusterspec.Spec{Format: clusterspec.Format, Regions: res.Regions, Partitions: o.partitions,
		Consistency: clusterspec.ConsistencyStrong, MinDurability: 2, Profile: clusterspec.Profile{Name: o.profile}}
	if err := step(func(ctx context.Context) error {
		_, err := lc.init(ctx, lc.nodes[len(lc.nodes)-1], agent.InitRequest{Spec: spec, ExpectNodes: agentBenchAgents, WaitSeconds: 60})
		return err
	}); err != nil {
		return res, fmt.Errorf("init: %w", err)
	}
	initAt := time.Now()

	dnsAddr := lc.dnsNode().dns
	resolver, err := routing.NewDNSResolver(routing.DNSResolverConfig{Servers: []string{dnsAddr}, Timeout: time.Second})
	if err != nil {
		return res, err
	}
	if err := step(func(ctx context.Context) error { return waitDNSRoutes(ctx, resolver, agentBenchZone, o.partitions) }); err != nil {
		return res, err
	}
	res.DNSRoutesPublishedS = time.Since(initAt).Seconds()
	for _, n := range lc.nodes {
		if err := step(func(ctx context.Context) error {
			return lc.waitHTTP(ctx, n, agent.PathReadyz, procs[n].exited())
		}); err != nil {
			return res, err
		}
	}

	tr := kv.NewTransport(lc.tlsCfg) // the Go client's default: HTTP/2
	defer tr.CloseIdleConnections()
	cl, err := kv.New(kv.Config{HTTP: &http.Client{Transport: tr},
		Routing: routing.Config{Zone: agentBenchZone, Resolver: resolver, PartitionCount: uint32(o.partitions)}})
	if err != nil {
		return res, err
	}
	if err := step(func(ctx context.Context) error { return writeEveryPartition(ctx, cl, o.partitions) }); err != nil {
		return res, err
	}
	res.ReadyS = time.Since(initAt).Seconds()

	// The load: each writer a closed loop of strong Puts, every key new.
	var (
		measuring, stop     atomic.Bool
		writes, errs, unkns atomic.Uint64
		firstErr            atomic.Pointer[string]
		hist                latencyHist
		wg                  sync.WaitGroup
	)
	acked := make([][]uint32, o.writers) // per writer, the sequence numbers acknowledged
	for w := range o.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := uint32(1); !stop.Load() && ctx.Err() == nil; seq++ {
				key := agentBenchKey(w, seq)
				t0 := time.Now()
				err := cl.Put(ctx, key, agentBenchValue(key, o.valueBytes))
				d := time.Since(t0)
				m := measuring.Load()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
					if m {
						errs.Add(1)
						var uo *kv.UnknownOutcomeError
						if errors.As(err, &uo) {
							unkns.Add(1)
						}
					}
					continue
				}
				acked[w] = append(acked[w], seq)
				if m {
					writes.Add(1)
					hist.Record(d)
				}
			}
		}()
	}
	sleepCtx(ctx, o.warmup)
	agentsCPU0, clientCPU0 := childrenCPU(procs), processCPU()
	measuring.Store(true)
	t0 := time.Now()
	sleepCtx(ctx, o.duration)
	measuring.Store(false)
	elapsed := time.Since(t0)
	agentsCPU1, clientCPU1 := childrenCPU(procs), processCPU()
	res.LoadAvg1 = loadAvg1()
	stop.Store(true)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if p := firstErr.Load(); p != nil {
		res.FirstError = *p
	}
	res.DurationS = elapsed.Seconds()
	res.Writes, res.Errors, res.UnknownOutcomes = writes.Load(), errs.Load(), unkns.Load()
	res.WritesPerSec = float64(res.Writes) / elapsed.Seconds()
	res.P50Ms, res.P99Ms, res.MaxMs, res.MeanMs = msOf(hist.Quantile(0.5)), msOf(hist.Quantile(0.99)), msOf(hist.Max()), msOf(hist.Mean())
	if res.Writes > 0 {
		res.AgentsCPUMicrosPerOp = float64(agentsCPU1-agentsCPU0) / float64(time.Microsecond) / float64(res.Writes)
		res.ClientCPUMicrosPerOp = float64(clientCPU1-clientCPU0) / float64(time.Microsecond) / float64(res.Writes)
	}

	// Read back every acknowledged write, strongly.
	err = step(func(ctx context.Context) error {
		res.Verified, res.Lost, res.VerifyErrors = verifyAgentBench(ctx, cl, acked, o.valueBytes)
		return ctx.Err()
	})
	if err != nil {
		return res, fmt.Errorf("read-back: %w", err)
	}
	return res, nil
}

func agentBenchKey(writer int, seq uint32) string {
	return "w" + strconv.Itoa(writer) + "-" + strconv.FormatUint(uint64(seq), 10)
}

// agentBenchValue is key's value: the key repeated over n bytes, so that
// the read-back knows what each key must hold.
func agentBenchValue(key string, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = key[i%len(key)]
	}
	return b
}

// waitDNSRoutes polls the DNS server until it answers a route with a
// write region for every partition 1..n (a run record covers several).
func waitDNSRoutes(ctx context.Context, res routing.TXTResolver, zone string, n int) error {
	zone, err := txtdns.CanonicalZone(zone)
	if err != nil {
		return err
	}
	next := uint32(1) // partitions below next have a route
	var last error
	for next <= uint32(n) {
		r, err := res.LookupTXT(ctx, txtdns.PartitionName(zone, next))
		advanced := false
		if err == nil {
			for _, rec := range r.Records {
				run, derr := txtdns.DecodeRun(rec)
				if derr != nil {
					err = derr
					continue
				}
				if run.Contains(next) && run.WriteRegion != "" {
					next, advanced = run.Hi+1, true
					break
				}
			}
			if !advanced && err == nil {
				err = fmt.Errorf("no route with a write region for partition %d", next)
			}
		}
		if advanced {
			continue
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("DNS: routes of partitions %d..%d not published: %w (last: %v)", next, n, ctx.Err(), last)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// writeEveryPartition makes one strong Put succeed in every partition
// 1..n: each then has a write region that takes writes.
func writeEveryPartition(ctx context.Context, cl *kv.Client, n int) error {
	hp, err := routing.NewOneBasedHashPartitioner(uint32(n))
	if err != nil {
		return err
	}
	keys := make([]string, n+1) // by partition
	for i, found := 0, 0; found < n; i++ {
		k := "ready-" + strconv.Itoa(i)
		if p := hp.Partition(k); keys[p] == "" {
			keys[p], found = k, found+1
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	errs := make([]error, n+1)
	for p := 1; p <= n; p++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			for {
				err := cl.Put(ctx, keys[p], []byte("ready"))
				if err == nil {
					return
				}
				if ctx.Err() != nil {
					errs[p] = fmt.Errorf("partition %d never took a strong write: %w", p, err)
					return
				}
				sleepCtx(ctx, 50*time.Millisecond)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// verifyAgentBench reads every acknowledged key back strongly, with as
// many readers as there were writers.
func verifyAgentBench(ctx context.Context, cl *kv.Client, acked [][]uint32, valueBytes int) (verified, lost, failed uint64) {
	var v, l, f atomic.Uint64
	var wg sync.WaitGroup
	for w, seqs := range acked {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, seq := range seqs {
				if ctx.Err() != nil {
					f.Add(1)
					continue
				}
				key := agentBenchKey(w, seq)
				got, found, err := cl.Get(ctx, key, routing.ConsistencyStrong)
				switch {
				case err != nil:
					f.Add(1)
				case !found || !bytes.Equal(got, agentBenchValue(key, valueBytes)):
					l.Add(1)
				default:
					v.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return v.Load(), l.Load(), f.Load()
}

// childrenCPU is the user+system CPU time of the agents so far (0 for
// one that cannot be read).
func childrenCPU(procs map[*localNode]*localProc) time.Duration {
	var sum time.Duration
	for _, p := range procs {
		sum += pidCPU(p.pid)
	}
	return sum
}

// pidCPU reads a process's utime+stime from /proc/PID/stat, in clock
// ticks of 1/100 s (USER_HZ, 100 on every Linux Go runs on).
func pidCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces: the fields start after its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	// f[0] is field 3 (state): utime is field 14, stime 15.
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func printAgentBench(w io.Writer, out agentBenchOutput) {
	a, p := out.Agent, out.Partition
	fmt.Fprintf(w, "agent bench: %d agents (%s), %d partitions, %d writers, %d-byte values, profile %s, %.1f s measured\n",
		a.Agents, strings.Join(a.Regions, ", "), a.Partitions, a.Writers, a.ValueBytes, a.Profile, a.DurationS)
	fmt.Fprintf(w, "  %-36s %10s %8s %8s %8s %7s\n", "", "writes/s", "p50 ms", "p99 ms", "max ms", "errors")
	fmt.Fprintf(w, "  %-36s %10.0f %8.2f %8.2f %8.2f %7d\n", "agents, Go client, mTLS, loopback", a.WritesPerSec, a.P50Ms, a.P99Ms, a.MaxMs, a.Errors)
	fmt.Fprintf(w, "  %-36s %10.0f %8.2f %8.2f %8.2f %7d\n", "partition, in process", p.WritesPerSec, p.P50Ms, p.P99Ms, p.MaxMs, p.Errors)
	fmt.Fprintf(w, "  ratio agent/partition writes/s: %.3f\n", out.RatioWritesPerSec)
	fmt.Fprintf(w, "  agents: %d unknown outcomes; %d acknowledged writes read back, %d lost, %d unreadable\n",
		a.UnknownOutcomes, a.Verified, a.Lost, a.VerifyErrors)
	fmt.Fprintf(w, "  after init: every route in DNS at %.3f s, every partition written at %.3f s\n", a.DNSRoutesPublishedS, a.ReadyS)
	fmt.Fprintf(w, "  CPU per write: agents %.0f µs, client %.0f µs; load average %.2f on %d CPUs\n",
		a.AgentsCPUMicrosPerOp, a.ClientCPUMicrosPerOp, a.LoadAvg1, a.NumCPU)
	if a.FirstError != "" {
		fmt.Fprintf(w, "  first error: %s\n", a.FirstError)
	}
}
