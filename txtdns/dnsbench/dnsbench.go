package dnsbench

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fmnode/fmnode/txtdns"
)

// Bounds of the flags.
const (
	maxClients    = 4096
	maxPartitions = 1 << 22
	maxDuration   = time.Hour
	// maxSamplesPerClient bounds the latency samples one client keeps.
	maxSamplesPerClient = 1 << 20
	distinctQueries     = 4096
	zone                = "bench.fmnode."
	readyPrefix         = "listening "
)

type options struct {
	duration   time.Duration
	warmup     time.Duration
	clients    int
	partitions int
	timeout    time.Duration
	jsonOut    bool
	serve      bool
	addr       string
	serverProc int
	serverProf string
}

// Result is the JSON output.
type Result struct {
	Bench         string  `json:"bench"`
	DurationS     float64 `json:"duration_s"`
	Clients       int     `json:"clients"`
	Partitions    int     `json:"partitions"`
	Queries       int64   `json:"queries"`
	QueriesPerSec float64 `json:"queries_per_sec"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	MaxMs         float64 `json:"max_ms"`
	Errors        int64   `json:"errors"`
	Timeouts      int64   `json:"timeouts"`
	// CPU time both processes used in the measured window, per answered
	// query, and the throughput that CPU cost allows on all the machine's
	// CPUs: a load-independent view when other processes share the machine.
	ServerCPUS          float64 `json:"server_cpu_s"`
	LoadgenCPUS         float64 `json:"loadgen_cpu_s"`
	ServerCPUUsPerQuery float64 `json:"server_cpu_us_per_query"`
	TotalCPUUsPerQuery  float64 `json:"total_cpu_us_per_query"`
	CPUBoundQPS         float64 `json:"cpu_bound_queries_per_sec"`
	ServerPID           int     `json:"server_pid"`
	ServerProcs         int     `json:"server_gomaxprocs"`
	ClientProcs         int     `json:"client_gomaxprocs"`
	CPUs                int     `json:"cpus"`
}

func parse(args []string, stderr io.Writer) (options, int, bool) {
	var o options
	fs := flag.NewFlagSet("fmnode bench dns", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "how long to load the server (after the warm-up)")
	fs.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "load before measuring")
	fs.IntVar(&o.clients, "clients", 64, "concurrent UDP clients, each with one query in flight")
	fs.IntVar(&o.partitions, "partitions", 100000, "partitions the server publishes")
	fs.DurationVar(&o.timeout, "timeout", time.Second, "per-query timeout")
	fs.BoolVar(&o.jsonOut, "json", false, "print the result as JSON")
	fs.BoolVar(&o.serve, "serve", false, "internal: run the DNS server (the child process)")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:0", "address the child server binds (UDP and TCP)")
	fs.IntVar(&o.serverProc, "server-procs", 0, "GOMAXPROCS of the child server (0: the Go default)")
	fs.StringVar(&o.serverProf, "server-cpuprofile", "", "write the child server's CPU profile to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, 0, false
		}
		return o, 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fmnode bench dns: unexpected arguments %q\n", fs.Args())
		return o, 2, false
	}
	check := func(ok bool, flagName string, v any) bool {
		if !ok {
			fmt.Fprintf(stderr, "fmnode bench dns: --%s %v out of range\n", flagName, v)
		}
		return ok
	}
	if !check(o.duration > 0 && o.duration <= maxDuration, "duration", o.duration) ||
		!check(o.warmup >= 0 && o.warmup <= maxDuration, "warmup", o.warmup) ||
		!check(o.clients >= 1 && o.clients <= maxClients, "clients", o.clients) ||
		!check(o.partitions >= 1 && o.partitions <= maxPartitions, "partitions", o.partitions) ||
		!check(o.timeout > 0 && o.timeout <= time.Minute, "timeout", o.timeout) ||
		!check(o.serverProc >= 0 && o.serverProc <= 1024, "server-procs", o.serverProc) {
		return o, 2, false
	}
	return o, 0, true
}

// Main runs the command. self is the command line that re-executes this
// command in a child process (for fmnode: the executable, "bench", "dns").
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, self []string) int {
	o, code, ok := parse(args, stderr)
	if !ok {
		return code
	}
	if o.serve {
		if err := serve(ctx, o, os.Stdin, stdout); err != nil {
			fmt.Fprintf(stderr, "fmnode bench dns --serve: %v\n", err)
			return 1
		}
		return 0
	}
	if len(self) == 0 {
		fmt.Fprintln(stderr, "fmnode bench dns: no command to start the server with")
		return 1
	}
	res, err := run(ctx, o, self, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "fmnode bench dns: %v\n", err)
		return 1
	}
	if o.jsonOut {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(res); err != nil {
			return 1
		}
		return 0
	}
	fmt.Fprintf(stdout, "dns: %d clients, %.1fs: %.0f queries/s, p50 %.3f ms, p99 %.3f ms, max %.3f ms, errors %d, timeouts %d (server pid %d)\n",
		res.Clients, res.DurationS, res.QueriesPerSec, res.P50Ms, res.P99Ms, res.MaxMs, res.Errors, res.Timeouts, res.ServerPID)
	if res.TotalCPUUsPerQuery > 0 {
		fmt.Fprintf(stdout, "cpu: server %.1f µs/query, server+loadgen %.1f µs/query: %.0f queries/s if they had the %d CPUs to themselves\n",
			res.ServerCPUUsPerQuery, res.TotalCPUUsPerQuery, res.CPUBoundQPS, res.CPUs)
	}
	return 0
}

// Publish fills p with partitions whose write region changes every 1,000
// partitions and epoch every 300 (so answers are runs of various lengths)
// and three regions.
func Publish(p *txtdns.Publisher, partitions int) error {
	regions := []string{"eastus", "westus", "northeu"}
	routes := make([]txtdns.Route, 0, 4096)
	for i := 0; i < partitions; i++ {
		w := regions[(i/1000)%len(regions)]
		routes = append(routes, txtdns.Route{Partition: uint32(i), Epoch: uint64(1 + (i/300)%3), WriteRegion: w, Priority: regions, ConfigVersion: 1})
		if len(routes) == cap(routes) || i == partitions-1 {
			if _, err := p.Apply(routes...); err != nil {
				return err
			}
			routes = routes[:0]
		}
	}
	for i, r := range regions {
		if _, err := p.SetRegions(txtdns.RegionInfo{Region: r, ConfigVersion: 1,
			Endpoints: []string{fmt.Sprintf("127.%d.0.1:7000", i), fmt.Sprintf("127.%d.0.2:7000", i)}}); err != nil {
			return err
		}
	}
	return nil
}

// serve runs the server until ctx is done or stdin closes (the parent
// went away), after printing "listening <addr>" on stdout.
func serve(ctx context.Context, o options, stdin io.Reader, stdout io.Writer) error {
	if o.serverProc > 0 {
		runtime.GOMAXPROCS(o.serverProc)
	}
	pub, err := txtdns.NewPublisher(txtdns.PublisherConfig{Zone: zone, MaxPartitions: max(o.partitions, 1)})
	if err != nil {
		return err
	}
	if err := Publish(pub, o.partitions); err != nil {
		return err
	}
	srv, err := txtdns.NewServer(txtdns.ServerConfig{Addr: o.addr, Authority: pub, Registerer: prometheus.NewRegistry()})
	if err != nil {
		return err
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	// Profile serving only, not publishing.
	if o.serverProf != "" {
		f, err := os.Create(o.serverProf)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The parent keeps our stdin open while it needs us: EOF means it is
	// gone. This reader ends when the pipe closes or the process exits.
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	if _, err := fmt.Fprintf(stdout, "%s%s\n", readyPrefix, srv.Addr()); err != nil {
		return err
	}
	return srv.Serve(ctx)
}

// run starts the child server, loads it and stops it.
func run(ctx context.Context, o options, self []string, stderr io.Writer) (Result, error) {
	childArgs := append(slices.Clone(self[1:]), "--serve", "--addr", o.addr,
		"--partitions", fmt.Sprint(o.partitions), "--server-procs", fmt.Sprint(o.serverProc))
	if o.serverProf != "" {
		childArgs = append(childArgs, "--server-cpuprofile", o.serverProf)
	}
	cmd := exec.Command(self[0], childArgs...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return Result{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return Result{}, err
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("start server: %w", err)
	}
	waited := make(chan error, 1)
	stop := func() {
		_ = stdin.Close()
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
		}
	}
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		addr := ""
		if sc.Scan() {
			addr = strings.TrimPrefix(sc.Text(), readyPrefix)
		}
		addrCh <- addr
		_, _ = io.Copy(io.Discard, stdout)
		waited <- cmd.Wait()
	}()
	var addr string
	select {
	case addr = <-addrCh:
	case <-time.After(60 * time.Second):
		stop()
		return Result{}, errors.New("server did not start within 60 s")
	case <-ctx.Done():
		stop()
		return Result{}, ctx.Err()
	}
	defer stop()
	if addr == "" {
		return Result{}, errors.New("server exited before listening")
	}
	res, err := load(ctx, o, addr, cmd.Process.Pid)
	res.ServerPID = cmd.Process.Pid
	res.ServerProcs = o.serverProc
	return res, err
}

type clientStats struct {
	ok, errors, timeouts int64
	samples              []uint32 // nanoseconds
}

// load runs o.clients UDP clients against addr: warm-up, then the measured
// window. Each client keeps one query in flight.
func load(ctx context.Context, o options, addr string, serverPID int) (Result, error) {
	queries, err := buildQueries(o.partitions)
	if err != nil {
		return Result{}, err
	}
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return Result{}, err
	}
	conns := make([]*net.UDPConn, o.clients)
	for i := range conns {
		if conns[i], err = net.DialUDP("udp", nil, raddr); err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			return Result{}, err
		}
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	measureFrom := start.Add(o.warmup)
	end := measureFrom.Add(o.duration)
	stats := make([]clientStats, o.clients)
	var wg sync.WaitGroup
	for i := range o.clients {
		wg.Go(func() { runClient(ctx, conns[i], queries, uint64(i), measureFrom, end, o.timeout, &stats[i]) })
	}
	// Sample both processes' CPU time at the edges of the measured window.
	var srv0, self0, srv1, self1 time.Duration
	cpuOK := sleepUntil(ctx, measureFrom)
	if cpuOK {
		var ok1, ok2 bool
		srv0, ok1 = processCPU(serverPID)
		self0, ok2 = selfCPU()
		cpuOK = ok1 && ok2 && sleepUntil(ctx, end)
	}
	if cpuOK {
		var ok1, ok2 bool
		srv1, ok1 = processCPU(serverPID)
		self1, ok2 = selfCPU()
		cpuOK = ok1 && ok2
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	var res Result
	var all []uint32
	for i := range stats {
		res.Queries += stats[i].ok
		res.Errors += stats[i].errors
		res.Timeouts += stats[i].timeouts
		all = append(all, stats[i].samples...)
	}
	slices.Sort(all)
	pct := func(q float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(q*float64(len(all))))]) / 1e6
	}
	res.Bench = "dns"
	res.DurationS = o.duration.Seconds()
	res.Clients = o.clients
	res.Partitions = o.partitions
	res.QueriesPerSec = float64(res.Queries) / o.duration.Seconds()
	res.P50Ms, res.P99Ms = pct(0.50), pct(0.99)
	if len(all) > 0 {
		res.MaxMs = float64(all[len(all)-1]) / 1e6
	}
	if cpuOK && res.Queries > 0 {
		res.ServerCPUS = (srv1 - srv0).Seconds()
		res.LoadgenCPUS = (self1 - self0).Seconds()
		res.ServerCPUUsPerQuery = res.ServerCPUS / float64(res.Queries) * 1e6
		res.TotalCPUUsPerQuery = (res.ServerCPUS + res.LoadgenCPUS) / float64(res.Queries) * 1e6
		if res.TotalCPUUsPerQuery > 0 {
			res.CPUBoundQPS = float64(runtime.NumCPU()) * 1e6 / res.TotalCPUUsPerQuery
		}
	}
	res.ClientProcs = runtime.GOMAXPROCS(0)
	res.CPUs = runtime.NumCPU()
	if res.Queries == 0 {
		return res, fmt.Errorf("no query answered (errors %d, timeouts %d)", res.Errors, res.Timeouts)
	}
	return res, nil
}

// sleepUntil waits until t; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// buildQueries packs TXT queries for random partitions (and a few block
// and region names), with EDNS like dig sends.
func buildQueries(partitions int) ([][]byte, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([][]byte, distinctQueries)
	for i := range out {
		name := txtdns.PartitionName(zone, uint32(rng.IntN(partitions)))
		switch i % 64 {
		case 0:
			name = txtdns.RegionName(zone, "westus")
		case 1:
			name = txtdns.BlockName(zone, uint32(rng.IntN((partitions+txtdns.DefaultBlockSize-1)/txtdns.DefaultBlockSize)))
		}
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeTXT)
		m.RecursionDesired = false
		m.SetEdns0(1232, false)
		b, err := m.Pack()
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

func runClient(ctx context.Context, conn *net.UDPConn, queries [][]byte, seed uint64, measureFrom, end time.Time, timeout time.Duration, st *clientStats) {
	rng := rand.New(rand.NewPCG(seed, 7))
	buf := make([]byte, 65536)
	q := make([]byte, 0, 512)
	id := uint16(seed * 7919)
	for ctx.Err() == nil {
		now := time.Now()
		if !now.Before(end) {
			return
		}
		id++
		q = append(q[:0], queries[rng.IntN(len(queries))]...)
		binary.BigEndian.PutUint16(q, id)
		measured := !now.Before(measureFrom)
		if _, err := conn.Write(q); err != nil {
			if measured {
				st.errors++
			}
			continue
		}
		_ = conn.SetReadDeadline(now.Add(timeout))
		for {
			n, err := conn.Read(buf)
			if err != nil {
				if measured {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						st.timeouts++
					} else {
						st.errors++
					}
				}
				break
			}
			if n < 12 || binary.BigEndian.Uint16(buf) != id {
				continue // a late answer to an earlier, timed-out query
			}
			rcode := buf[3] & 0x0f
			if measured {
				if rcode != dns.RcodeSuccess {
					st.errors++
				} else {
					st.ok++
					if len(st.samples) < maxSamplesPerClient {
						st.samples = append(st.samples, uint32(min(time.Since(now), time.Duration(1<<32-1))))
					}
				}
			}
			break
		}
	}
}
