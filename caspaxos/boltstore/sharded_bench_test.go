package boltstore

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/fmnode/fmnode/caspaxos"
)

// benchShardCounts returns the shard counts the sharded benchmarks
// compare; shards=1 is the sharded wrapper over one file, for its overhead.
func benchShardCounts() []int { return []int{1, 4, 8} }

// BenchmarkShardedApplyParallel: BenchmarkApplyParallel (1-record batches,
// 64 writers) against the sharded store. Each Apply touches one shard, so
// the writers spread over the shards' committers and fsyncs overlap.
func BenchmarkShardedApplyParallel(b *testing.B) {
	for _, n := range benchShardCounts() {
		b.Run(fmt.Sprintf("shards=%d", n), func(b *testing.B) {
			s, err := OpenSharded(b.TempDir(), n, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var seq atomic.Uint64
			data := make([]byte, 64)
			b.SetParallelism(benchParallelism)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.Apply(caspaxos.Batch{Put: []caspaxos.Record{benchRecord(seq.Add(1), data)}}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			reportRates(b, s.Fsyncs())
		})
	}
}

// BenchmarkShardedApplyBatch is the acceptor driver's pattern: one Apply
// at a time, each a group of 64 records (one Ready). Here the shards run
// one batch's parts in parallel; records/sec is the figure to compare.
func BenchmarkShardedApplyBatch(b *testing.B) {
	const perBatch = 64
	for _, n := range benchShardCounts() {
		b.Run(fmt.Sprintf("shards=%d", n), func(b *testing.B) {
			s, err := OpenSharded(b.TempDir(), n, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			data := make([]byte, 64)
			batch := caspaxos.Batch{Put: make([]caspaxos.Record, perBatch)}
			var seq uint64
			b.ResetTimer()
			for range b.N {
				for i := range batch.Put {
					seq++
					batch.Put[i] = benchRecord(seq, data)
				}
				if err := s.Apply(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportRates(b, s.Fsyncs())
			b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "records/sec")
		})
	}
}
