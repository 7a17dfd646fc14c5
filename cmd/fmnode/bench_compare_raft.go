package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/raftbaseline"
	"github.com/fmnode/fmnode/partition"
)

// The raft side of `fmnode bench compare`: internal/raftbaseline's three
// voters in this process, on raft's TCP transport over loopback, raft-wal
// with fsync.

func compareStates(n int, write failover.Region) ([]failover.State, error) {
	out := make([]failover.State, 0, n)
	for p := 1; p <= n; p++ {
		s, err := failover.NewState(partition.RegisterKey(partition.ID(p)), write, compareRegions, failover.Strong, 2)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func startRaftCompare(ctx context.Context, dir string, prof failover.Config, onState func(string, failover.State, uint64)) (*raftbaseline.Cluster, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return raftbaseline.StartLoopback(sctx, raftbaseline.ClusterConfig{Regions: compareRegions, Dir: dir,
		Voter: raftbaseline.Config{Failover: prof, OnState: onState}})
}

// raftThroughput is (1) for raft: o.writers goroutines, each a closed
// loop of version-guarded puts of a partition's state, Applied on the
// leader (the writers run next to it, so no forwarding hop is paid).
func raftThroughput(ctx context.Context, o compareOptions, dir string, side *compareSide) (err error) {
	c, err := startRaftCompare(ctx, filepath.Join(dir, "raft-throughput"), failover.DefaultConfig(), nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	states, err := compareStates(o.partitions, "east")
	if err != nil {
		return err
	}
	if err := c.Create(ctx, states, 256); err != nil {
		return err
	}
	l, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	var (
		hist            latencyHist
		measuring       atomic.Bool
		ups, mism, errs atomic.Uint64
		firstErr        atomic.Pointer[string]
		stop            = make(chan struct{})
		wg              sync.WaitGroup
	)
	for range o.writers {
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
				i := rng.IntN(len(states))
				t0 := time.Now()
				for range 17 { // as bench cas: 16 retries after a mismatch
					_, ver, _ := l.FSM().State(states[i].Partition)
					_, err := l.PutState(ctx, raftbaseline.PutState{Key: states[i].Partition, Expect: ver, State: states[i]})
					if raftbaseline.IsMismatch(err) {
						if measuring.Load() {
							mism.Add(1)
						}
						continue
					}
					if measuring.Load() {
						if err != nil {
							errs.Add(1)
							msg := err.Error()
							firstErr.CompareAndSwap(nil, &msg)
						} else {
							ups.Add(1)
							hist.Record(time.Since(t0))
						}
					}
					break
				}
			}
		}()
	}
	time.Sleep(o.warmup)
	measuring.Store(true)
	t0 := time.Now()
	select {
	case <-time.After(o.duration):
	case <-ctx.Done():
	}
	measuring.Store(false)
	window := time.Since(t0)
	close(stop)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	side.Updates, side.UpdateMismatches, side.UpdateErrors = ups.Load(), mism.Load(), errs.Load()
	side.UpdatesPerSec = float64(side.Updates) / window.Seconds()
	side.UpdateP50Ms, side.UpdateP99Ms = ms(hist.Quantile(0.5)), ms(hist.Quantile(0.99))
	side.ThroughputMachinery = "3 raft voters in this process (raft-wal, fsync, TCP transport on loopback), writers Apply on the leader"
	if side.Updates == 0 {
		if p := firstErr.Load(); p != nil {
			return fmt.Errorf("no update committed: %s", *p)
		}
		return fmt.Errorf("no update committed")
	}
	return nil
}

// raftOutage is (3, 4) for raft: every partition's write region is the
// leader's region; that voter stops; completion is when a surviving
// voter's state machine applies the partition's failover.
func raftOutage(ctx context.Context, o compareOptions, dir string, side *compareSide) (err error) {
	prof := failover.FastConfig()
	var (
		mu     sync.Mutex
		lost   failover.Region
		killed time.Time
		took   = map[string]time.Duration{}
		all    = make(chan struct{})
	)
	onState := func(key string, s failover.State, _ uint64) {
		mu.Lock()
		defer mu.Unlock()
		if killed.IsZero() || s.Epoch < 2 || s.WriteRegion == lost {
			return
		}
		if _, ok := took[key]; !ok {
			took[key] = time.Since(killed)
			if len(took) == o.partitions {
				close(all)
			}
		}
	}
	c, err := startRaftCompare(ctx, filepath.Join(dir, "raft-outage"), prof, onState)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	l, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	states, err := compareStates(o.partitions, l.Region())
	if err != nil {
		return err
	}
	if err := c.Create(ctx, states, 256); err != nil {
		return err
	}
	time.Sleep(o.outageSettle)
	if !l.IsLeader() {
		return fmt.Errorf("leadership moved from %s during the settle time", l.Region())
	}
	var rest []*raftbaseline.Voter
	for _, v := range c.Voters {
		if v != l {
			rest = append(rest, v)
		}
	}
	before := takeResources()
	writesBefore := rest[0].FSM().Stats()
	mu.Lock()
	lost, killed = l.Region(), time.Now()
	mu.Unlock()
	if err := l.Close(); err != nil {
		return fmt.Errorf("stop leader: %w", err)
	}
	var elected time.Duration
	go func() {
		if nl, err := c.Leader(ctx); err == nil && nl != l {
			mu.Lock()
			elected = time.Since(killed)
			mu.Unlock()
		}
	}()
	select {
	case <-all:
	case <-time.After(o.outageTimeout):
	case <-ctx.Done():
		return ctx.Err()
	}
	after := takeResources()
	writesAfter := rest[0].FSM().Stats()
	mu.Lock()
	defer mu.Unlock()
	ds := make([]time.Duration, 0, len(took))
	for _, d := range took {
		ds = append(ds, d)
	}
	side.FailoverCompletionS = completion(ds)
	side.FailedOver, side.NotFailedOver = len(ds), o.partitions-len(ds)
	if side.NotFailedOver > 0 {
		side.FailoverCompletionS = completionWithMissing(ds, side.NotFailedOver, o.outageTimeout)
		side.CompletionLowerBound = true
	}
	side.OutageWindowS = time.Since(killed).Seconds()
	side.StoreCPUSeconds = (after.cpu - before.cpu).Seconds()
	side.StoreBytesWritten = after.writeBytes - before.writeBytes
	side.OutageStoreWrites = (writesAfter.Puts + writesAfter.HeartbeatRecords) - (writesBefore.Puts + writesBefore.HeartbeatRecords)
	side.ElectionS = elected.Seconds()
	side.FailoverMachinery = "3 raft voters in this process; the leader's voter stopped; completion when a surviving voter applies the partition's failover"
	return nil
}
