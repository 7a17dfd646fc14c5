package noderun

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/partition"
)

// BenchmarkLoopbackWriteBurst: three drivers over TCP on loopback with the
// real bbolt and pebble stores (as TestLoopbackFailover), 256 partitions
// written in east; each iteration is one burst of one strong write per
// partition at once, the shape of the writes that arrive at a new write
// region after a failover. It reports the burst's time and the writes'
// p50 and p99 latency: the committer's pipelining (apply the next Ready
// while the last one's fsync runs) shows here as the stores merging the
// fsyncs of the Readys a burst produces.
//
//	go test ./internal/noderun -run '^$' -bench LoopbackWriteBurst -benchtime 20x
func BenchmarkLoopbackWriteBurst(b *testing.B) {
	const parts = 256
	places := loopPlacements(parts)
	var ns []*lnode
	for i := range loopRegions {
		ns = append(ns, startLoopNode(b, node.NodeID(i+1), b.TempDir(), places, failover.FastConfig()))
	}
	defer func() {
		for _, ln := range ns {
			ln.stop(b)
		}
	}()
	for i, a := range ns {
		for j, c := range ns {
			if i != j {
				require.NoError(b, a.tr.SetPeer(node.NodeID(j+1), c.tr.Addr().String()))
			}
		}
	}
	ctx := context.Background()
	write := func(p partition.ID, k int) error {
		r, err := ns[0].drv.Write(ctx, partition.WriteRequest{Partition: p, Epoch: 1,
			Key: []byte(fmt.Sprintf("k%d", k)), Value: []byte("v")})
		if err != nil {
			return err
		}
		return r.Err
	}
	// Every partition writable (registers learnt, leases formed).
	deadline := time.Now().Add(60 * time.Second)
	for p := partition.ID(1); p <= parts; p++ {
		for write(p, 0) != nil {
			if time.Now().After(deadline) {
				b.Fatalf("partition %d not writable within 60s", p)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var lat []time.Duration
	var mu sync.Mutex
	commitsBefore := func() (n uint64) {
		for _, ln := range ns {
			n += ln.drv.Stats().Commits.Load()
		}
		return n
	}
	before := commitsBefore()
	b.ResetTimer()
	for i := range b.N {
		var wg sync.WaitGroup
		for p := partition.ID(1); p <= parts; p++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				err := write(p, i+1)
				d := time.Since(t0)
				if err != nil {
					b.Errorf("partition %d: %v", p, err)
					return
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
	b.ReportMetric(float64(commitsBefore()-before)/float64(b.N), "commits/burst")
}
