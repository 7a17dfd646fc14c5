package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/fmnode/fmnode/internal/agent"
)

// `fmnode demo --profile-dir D`: the agents' runtime profiles over the
// failover and the burst after its commit, from their admin API's
// /debug/pprof/ (admin.enable_pprof, on in every demo agent), and this
// process's own CPU profile over the same window. Files: D/<node>.cpu.pprof,
// <node>.mutex.pprof, <node>.block.pprof (deltas over the window),
// <node>.goroutine-<t>s.txt (every stack at t s after the kill) and
// demo.cpu.pprof. `go tool pprof -top D/n2.cpu.pprof` reads them (the
// agents' binary is the demo's own).

// The profile window, from the kill: the detection (lease + drift, about
// 2.1 s in the fast profile) and the commit come first, the burst after
// it ends with the last writer's first new-epoch write (5-6 s at 1000
// partitions on this machine).
const (
	demoProfileFrom    = 1 * time.Second
	demoProfileSeconds = 6
)

// demoGoroutineAt are the instants after the kill of the goroutine
// dumps: just after the commit and in the middle of the burst.
func demoGoroutineAt() []time.Duration {
	return []time.Duration{2500 * time.Millisecond, 3500 * time.Millisecond, 4500 * time.Millisecond}
}

// profileBurst takes the profiles of the surviving agents (and this
// process) over the window; it returns at once and the returned wait
// blocks until every file is written (bounded by the window plus 20 s).
// Failures are reported to note, not returned: a profile is an aid, the
// drill goes on without it.
func (d *demoRun) profileBurst(ctx context.Context, killAt time.Time, survivors []*localNode, note func(format string, args ...any)) (wait func()) {
	dir := d.o.profileDir
	ctx, cancel := context.WithTimeout(ctx, demoProfileFrom+demoProfileSeconds*time.Second+20*time.Second)
	var wg sync.WaitGroup
	fetch := func(n *localNode, at time.Duration, path, file string) {
		defer wg.Done()
		if sleepCtx(ctx, time.Until(killAt.Add(at))); ctx.Err() != nil {
			return
		}
		if err := d.fetchProfile(ctx, n, path, filepath.Join(dir, file)); err != nil {
			note("profile %s of %s: %v", path, n.name, err)
		}
	}
	win := fmt.Sprintf("?seconds=%d", demoProfileSeconds)
	for _, n := range survivors {
		wg.Add(3)
		go fetch(n, demoProfileFrom, agent.PathPprof+"profile"+win, n.name+".cpu.pprof")
		go fetch(n, demoProfileFrom, agent.PathPprof+"mutex"+win, n.name+".mutex.pprof")
		go fetch(n, demoProfileFrom, agent.PathPprof+"block"+win, n.name+".block.pprof")
		for _, at := range demoGoroutineAt() {
			wg.Add(1)
			go fetch(n, at, agent.PathPprof+"goroutine?debug=1", fmt.Sprintf("%s.goroutine-%.1fs.txt", n.name, at.Seconds()))
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := profileSelf(ctx, killAt.Add(demoProfileFrom), demoProfileSeconds*time.Second, filepath.Join(dir, "demo.cpu.pprof")); err != nil {
			note("profile of the demo process: %v", err)
		}
	}()
	return func() {
		wg.Wait()
		cancel()
	}
}

// fetchProfile saves what GET path on n's API answers to file.
func (d *demoRun) fetchProfile(ctx context.Context, n *localNode, path, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+n.api+path, nil)
	if err != nil {
		return err
	}
	resp, err := d.lc.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	// Profiles are bounded by the runtime (a CPU profile of seconds, a
	// goroutine dump of the agent's goroutines); 256 MiB is a backstop.
	if _, err := io.Copy(f, io.LimitReader(resp.Body, 256<<20)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// profileSelf writes this process's CPU profile from `from` for d.
func profileSelf(ctx context.Context, from time.Time, d time.Duration, file string) error {
	if sleepCtx(ctx, time.Until(from)); ctx.Err() != nil {
		return ctx.Err()
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	sleepCtx(ctx, d)
	pprof.StopCPUProfile()
	return f.Close()
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// dumpTrace writes the writers' traced attempts to file.
func (d *demoRun) dumpTrace(file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := d.trace.dump(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
