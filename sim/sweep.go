package sim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// ErrSeedRange reports a malformed --seeds value.
var ErrSeedRange = errors.New("sim: invalid seed range")

// MaxSweep bounds the seeds of one sweep.
const MaxSweep = 1_000_000

// ParseSeedRange parses "A..B" (inclusive) or a single seed "A".
func ParseSeedRange(s string) (lo, hi uint64, err error) {
	a, b, found := strings.Cut(s, "..")
	lo, err = strconv.ParseUint(strings.TrimSpace(a), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %q: %w", ErrSeedRange, s, err)
	}
	hi = lo
	if found {
		hi, err = strconv.ParseUint(strings.TrimSpace(b), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%w: %q: %w", ErrSeedRange, s, err)
		}
	}
	if hi < lo || hi-lo >= MaxSweep {
		return 0, 0, fmt.Errorf("%w: %q (want A..B with A <= B and at most %d seeds)", ErrSeedRange, s, MaxSweep)
	}
	return lo, hi, nil
}

// SweepResult is one seed of a sweep.
type SweepResult struct {
	Result Result
	Err    error
}

// Sweep runs base for every seed in [lo, hi] on workers goroutines. Each
// run is independent and single-threaded, so running them side by side
// changes nothing in any of them. emit receives the results in seed order
// (a finished seed waits for the ones before it), so the output of a sweep
// is the same whatever the number of workers. When ctx ends no new seed
// starts; the ones running finish and are emitted.
func Sweep(ctx context.Context, base Config, lo, hi uint64, workers int, emit func(SweepResult)) {
	if workers < 1 {
		workers = 1
	}
	n := hi - lo + 1
	if uint64(workers) > n {
		workers = int(n)
	}
	seeds := make(chan uint64)
	type done struct {
		seed uint64
		res  SweepResult
	}
	results := make(chan done, workers)
	// window bounds how far ahead of the oldest unfinished seed the
	// workers may run, so the reorder buffer below stays bounded even
	// when one seed is much slower than the rest.
	window := make(chan struct{}, 4*workers)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range seeds {
				cfg := base
				cfg.Seed = s
				r, err := Run(cfg)
				results <- done{seed: s, res: SweepResult{Result: r, Err: err}}
			}
		}()
	}
	go func() {
	feed:
		for s := lo; ; s++ {
			select {
			case window <- struct{}{}:
			case <-ctx.Done():
				break feed
			}
			select {
			case seeds <- s:
			case <-ctx.Done():
				break feed
			}
			if s == hi {
				break
			}
		}
		close(seeds)
		wg.Wait()
		close(results)
	}()
	// Reorder: hold finished seeds until their predecessors are out.
	waiting := make(map[uint64]SweepResult, workers)
	next := lo
	for d := range results {
		waiting[d.seed] = d.res
		for {
			r, ok := waiting[next]
			if !ok {
				break
			}
			delete(waiting, next)
			emit(r)
			<-window
			if next == hi {
				break
			}
			next++
		}
	}
}
