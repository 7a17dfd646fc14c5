package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/sim"
)

// resources are this process's counters: CPU (user + system) and the
// bytes it caused to be written to storage (/proc/self/io write_bytes:
// every write that reaches the block layer, fsynced or written back).
type resources struct {
	cpu        time.Duration
	writeBytes uint64
}

func takeResources() resources {
	var r resources
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if b, err := os.ReadFile("/proc/self/io"); err == nil {
		for _, line := range bytes.Split(b, []byte("\n")) {
			if v, ok := bytes.CutPrefix(line, []byte("write_bytes: ")); ok {
				r.writeBytes, _ = strconv.ParseUint(string(v), 10, 64)
			}
		}
	}
	return r
}

// closeCASLoop stops the nodes after their figures were taken. A node
// that does not stop in time (its driver inside one long step, as on an
// overloaded machine) does not void the figures: it is named in the
// side's warnings, and its goroutines end with the process.
func closeCASLoop(cl *casLoop, side *compareSide) {
	if err := cl.close(); err != nil {
		side.Warnings = append(side.Warnings, "closing the CASPaxos nodes: "+err.Error())
	}
}

// completionWithMissing counts missing partitions as taking bound.
func completionWithMissing(ds []time.Duration, missing int, bound time.Duration) completionFigure {
	all := slices.Clone(ds)
	for range missing {
		all = append(all, bound)
	}
	return completion(all)
}

// completion is p50, p99 and max of ds, in seconds.
func completion(ds []time.Duration) completionFigure {
	if len(ds) == 0 {
		return completionFigure{}
	}
	slices.Sort(ds)
	q := func(f float64) float64 {
		i := int(f*float64(len(ds))+0.999999) - 1
		return ds[min(max(i, 0), len(ds)-1)].Seconds()
	}
	return completionFigure{P50: q(0.50), P99: q(0.99), Max: ds[len(ds)-1].Seconds()}
}

// steadyWrites is (2): both systems run side by side, at the steady
// profile, with every partition created; after the settle time, the
// writes each makes to its coordination store in the window are counted,
// per replica of the store: for CASPaxos the records its acceptors
// persist (promises and accepts, averaged over the three), for raft the
// map entries one voter's state machine applies (heartbeat records and
// state puts; every entry is also in each voter's log).
func steadyWrites(ctx context.Context, o compareOptions, prof failover.Config, dir string, cas, rft *compareSide) (err error) {
	cl, err := startCASLoop(filepath.Join(dir, "cas-steady"), o.partitions, prof)
	if err != nil {
		return err
	}
	defer closeCASLoop(cl, cas)
	started := time.Now()
	rc, err := startRaftCompare(ctx, filepath.Join(dir, "raft-steady"), prof, nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, rc.Close()) }()
	states, err := compareStates(o.partitions, "east")
	if err != nil {
		return err
	}
	if err := rc.Create(ctx, states, 256); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, o.setupTimeout)
	err = cl.waitKnown(wctx)
	cancel()
	if err != nil {
		return err
	}
	if wait := o.steadySettle - time.Since(started); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	raftWrites := func() uint64 {
		s := rc.Voters[0].FSM().Stats()
		return s.Puts + s.HeartbeatRecords
	}
	casBefore, _ := cl.acceptorRecords()
	raftBefore := raftWrites()
	t0 := time.Now()
	select {
	case <-time.After(o.steadyWindow):
	case <-ctx.Done():
		return ctx.Err()
	}
	window := time.Since(t0)
	casAfter, _ := cl.acceptorRecords()
	raftAfter := raftWrites()
	perHour := func(n uint64) float64 {
		return float64(n) / float64(o.partitions) * float64(time.Hour) / float64(window)
	}
	cas.SteadyWrites = (casAfter - casBefore) / uint64(len(cl.nodes))
	rft.SteadyWrites = raftAfter - raftBefore
	cas.SteadyWindowS, rft.SteadyWindowS = window.Seconds(), window.Seconds()
	cas.SteadyWritesPerPartitionHour, rft.SteadyWritesPerPartitionHour = perHour(cas.SteadyWrites), perHour(rft.SteadyWrites)
	return nil
}

// casOutage is (3, 4) for CASPaxos: east, write region of every
// partition, stops; completion is when a surviving node first knows the
// partition's committed failover.
func casOutage(ctx context.Context, o compareOptions, dir string, side *compareSide) (err error) {
	cl, err := startCASLoop(filepath.Join(dir, "cas-outage"), o.partitions, failover.FastConfig())
	if err != nil {
		return err
	}
	defer closeCASLoop(cl, side)
	wctx, cancel := context.WithTimeout(ctx, o.setupTimeout)
	defer cancel()
	if err := cl.waitKnown(wctx); err != nil {
		return err
	}
	select {
	case <-time.After(o.outageSettle):
	case <-ctx.Done():
		return ctx.Err()
	}
	before := takeResources()
	recBefore, bytesBefore := cl.acceptorRecords()
	killed := time.Now()
	if err := cl.sever(0); err != nil {
		return fmt.Errorf("stop east: %w", err)
	}
	fctx, fcancel := context.WithTimeout(ctx, o.outageTimeout)
	defer fcancel()
	took, left, err := cl.failedOver(fctx, "east", killed)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	after := takeResources()
	recAfter, bytesAfter := cl.acceptorRecords()
	if err := cl.reap(0); err != nil {
		side.Warnings = append(side.Warnings, "stop east: "+err.Error())
	}
	side.FailoverCompletionS = completion(took)
	side.FailedOver, side.NotFailedOver = len(took), left
	if left > 0 {
		// Those not failed over took longer than the bound: the figures
		// are lower bounds, and say so.
		side.FailoverCompletionS = completionWithMissing(took, left, o.outageTimeout)
		side.CompletionLowerBound = true
	}
	side.OutageWindowS = time.Since(killed).Seconds()
	side.StoreCPUSeconds = (after.cpu - before.cpu).Seconds()
	side.StoreBytesWritten = after.writeBytes - before.writeBytes
	side.StoreLogicalBytes = bytesAfter - bytesBefore
	side.OutageStoreWrites = (recAfter - recBefore) / 2
	side.FailoverMachinery = "3 internal/noderun nodes in this process (real node, nodenet TCP on loopback, bbolt acceptors with fsync, in-memory partition stores); east's driver stopped; completion when a surviving node knows the committed failover"
	return nil
}

// simOutage is (3) for CASPaxos from the simulator: its region-outage
// drill (the real node's code, single-threaded, simulated time and
// network) in the fast profile at the same partition count, seed 1, no
// background faults. The simulator models no CPU or disk, so (4) is not
// measured this way (reported as 0).
func simOutage(ctx context.Context, o compareOptions, _ string, side *compareSide) error {
	res, err := sim.Run(sim.Config{Scenario: "region-outage", Seed: 1, Faults: sim.FaultsNone, Partitions: o.partitions,
		FailoverProfile: "fast", Outage: time.Minute, Duration: sim.DrillWarmup, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r := res.FailoverReport
	if r == nil {
		return fmt.Errorf("the region-outage scenario reported no failover figures")
	}
	if len(res.Violations) > 0 {
		return fmt.Errorf("the simulator found %d violations (seed 1)", len(res.Violations))
	}
	side.FailoverCompletionS = completionFigure{P50: r.FailoverCompletion.P50, P99: r.FailoverCompletion.P99, Max: r.FailoverCompletion.Max}
	side.FailedOver, side.NotFailedOver = r.AffectedPartitions-r.NotFailedOver, r.NotFailedOver
	side.FailoverMachinery = fmt.Sprintf("simulator region-outage drill, fast profile, seed 1: %d of %d partitions had the lost region as write region; simulated time, store CPU and bytes not modelled",
		r.AffectedPartitions, o.partitions)
	return nil
}
