package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"os/exec"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// benchmarks lists the `fmnode bench` subcommands.
func benchmarks() map[string]command {
	return map[string]command{
		"agent":     {summary: "strong writes per second through the Go client against three agent processes on loopback, next to bench partition", run: runBenchAgent},
		"compare":   {summary: "CASPaxos against the centralised raft baseline: update throughput, steady-state store writes, failover when the leader's region is lost", run: runBenchCompare},
		"cas":       {summary: "CAS throughput and latency against acceptor processes on loopback", run: runBenchCAS},
		"dns":       {summary: "DNS TXT queries per second against a txtdns server process on loopback", run: runBenchDNS},
		"partition": {summary: "strong writes per second across many partitions, 3 regions in one process, pebble with sync", run: runBenchPartition},
	}
}

// runBench dispatches `fmnode bench <name>`.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	subs := benchmarks()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, "usage: fmnode bench <benchmark> [flags]")
		fmt.Fprintln(stderr)
		names := make([]string, 0, len(subs))
		for n := range subs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(stderr, "  %-10s %s\n", n, subs[n].summary)
		}
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, ok := subs[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "fmnode bench: unknown benchmark %q\n", args[0])
		return 2
	}
	return sub.run(ctx, args[1:], stdout, stderr)
}

// writeJSON prints v as one JSON object on one line.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// childProcess is an `fmnode acceptor --control-stdin` child. Its stdout
// carries the "listening ADDR" line and then "stats {json}" lines.
type childProcess struct {
	id    int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // stdout lines after the first; closed at EOF
	addr  string
	exit  chan error // receives cmd.Wait's result once
	done  atomic.Bool
}

// startChild starts cmd (an acceptor with --control-stdin) and waits for
// its listening line.
func startChild(ctx context.Context, cmd *exec.Cmd, id int, stderr io.Writer) (*childProcess, error) {
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("acceptor %d: %w", id, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("acceptor %d: %w", id, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("acceptor %d: start: %w", id, err)
	}
	c := &childProcess{id: id, cmd: cmd, stdin: stdin, lines: make(chan string, 16), exit: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		// Wait closes the stdout pipe, so it may only run once every line
		// has been read; otherwise the final stats line can be lost.
		c.exit <- cmd.Wait()
	}()
	select {
	case line, ok := <-c.lines:
		addr, found := strings.CutPrefix(line, "listening ")
		if !ok || !found {
			c.kill()
			return nil, fmt.Errorf("acceptor %d: expected a listening line, got %q", id, line)
		}
		c.addr = addr
		return c, nil
	case <-time.After(30 * time.Second):
		c.kill()
		return nil, fmt.Errorf("acceptor %d: no listening line within 30s", id)
	case <-ctx.Done():
		c.kill()
		return nil, ctx.Err()
	}
}

// stats asks the child for its counters.
func (c *childProcess) stats() (acceptorStats, error) {
	if _, err := io.WriteString(c.stdin, "stats\n"); err != nil {
		return acceptorStats{}, fmt.Errorf("acceptor %d: stats: %w", c.id, err)
	}
	return c.readStats(10 * time.Second)
}

func (c *childProcess) readStats(timeout time.Duration) (acceptorStats, error) {
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				return acceptorStats{}, fmt.Errorf("acceptor %d: stdout closed", c.id)
			}
			js, found := strings.CutPrefix(line, statsPrefix)
			if !found {
				continue
			}
			var s acceptorStats
			if err := json.Unmarshal([]byte(js), &s); err != nil {
				return acceptorStats{}, fmt.Errorf("acceptor %d: stats line: %w", c.id, err)
			}
			return s, nil
		case <-deadline:
			return acceptorStats{}, fmt.Errorf("acceptor %d: no stats within %v", c.id, timeout)
		}
	}
}

// stop asks the child to exit (closing its stdin), waits for its final
// stats line and exit, and kills it if it takes longer than timeout.
func (c *childProcess) stop(timeout time.Duration) (acceptorStats, error) {
	_ = c.stdin.Close()
	st, serr := c.readStats(timeout)
	select {
	case err := <-c.exit:
		c.done.Store(true)
		if err != nil {
			return st, fmt.Errorf("acceptor %d: %w", c.id, err)
		}
		return st, serr
	case <-time.After(timeout):
		c.kill()
		return st, fmt.Errorf("acceptor %d: did not exit within %v; killed", c.id, timeout)
	}
}

// kill ends the child at once (idempotent; used on every error path).
func (c *childProcess) kill() {
	if c.done.Swap(true) {
		return
	}
	_ = c.cmd.Process.Kill()
	_ = c.stdin.Close()
	go func() {
		for range c.lines { // unblock the reader so that it reaches Wait
		}
	}()
	select {
	case <-c.exit:
	case <-time.After(5 * time.Second):
	}
}

// syncWriter serialises writes from several goroutines (the stderr
// copiers of several child processes) to one writer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// latencyHist is a log-linear histogram of durations, safe for concurrent
// Record calls: each power of two is split into 64 buckets (about 1.1%
// relative error), from 1 µs up; smaller values land in the first bucket.
type latencyHist struct {
	counts [64 * histSub]atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Uint64 // nanoseconds
	max    atomic.Uint64
}

const (
	histSubBits = 6
	histSub     = 1 << histSubBits
	histMinNs   = 1024 // values below ~1 µs share bucket 0
)

func histIndex(ns uint64) int {
	if ns < histMinNs {
		return 0
	}
	exp := bits.Len64(ns) - 1 // ns in [2^exp, 2^(exp+1))
	sub := (ns >> (exp - histSubBits)) & (histSub - 1)
	i := (exp-bits.Len64(histMinNs)+2)*histSub + int(sub)
	return min(i, 64*histSub-1)
}

// histValue returns the upper bound of bucket i, in nanoseconds.
func histValue(i int) uint64 {
	if i < histSub {
		return histMinNs
	}
	exp := i/histSub + bits.Len64(histMinNs) - 2
	sub := uint64(i % histSub)
	return (uint64(1) << exp) + (sub+1)<<(exp-histSubBits)
}

func (h *latencyHist) Record(d time.Duration) {
	ns := uint64(max(d, 0))
	h.counts[histIndex(ns)].Add(1)
	h.n.Add(1)
	h.sum.Add(ns)
	for {
		m := h.max.Load()
		if ns <= m || h.max.CompareAndSwap(m, ns) {
			break
		}
	}
}

// Quantile returns the q-quantile (0 < q <= 1) as a duration.
func (h *latencyHist) Quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			return time.Duration(min(histValue(i), h.max.Load()))
		}
	}
	return time.Duration(h.max.Load())
}

func (h *latencyHist) Mean() time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load() / n)
}

func (h *latencyHist) Max() time.Duration { return time.Duration(h.max.Load()) }

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// startCPUProfile starts a CPU profile into path; the returned stop
// function ends it. An empty path profiles nothing.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
