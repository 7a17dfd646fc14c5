package pebblestore

// Measured 2026-11-29 on the 2-core build machine under a load average of
// 10-12 from concurrent builds (fsync rates far below a quiet box's):
//
//	go test -run XXX -bench 'ApplyParallel|ApplySerial' -benchtime 2s -count 3 ./caspaxos/pebblestore/
//
// 1-record batches, 64-byte values over 4096 keys; "parallel" is
// b.SetParallelism(32) = 64 writers; fsyncs are counted at the file system
// (syncCountingFS). Medians of 3 (the spread was wide: 10.8k-25.1k/s):
//
//	BenchmarkApplyParallel  43.9 us/op  22.8k applies/s  761 fsyncs/s  29.9 applies/fsync
//	BenchmarkApplySerial     1.7 ms/op   602  applies/s  602 fsyncs/s   1.0 applies/fsync
//
// Pebble merges the WAL syncs of concurrent committers by itself, about 30
// commits per fsync here; its fsyncs (WAL appends) are cheaper than bbolt's
// commits (pages plus meta page, two fdatasyncs), which is why it reaches
// bbolt's throughput with half the grouping.

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/fmnode/fmnode/caspaxos"
)

const benchParallelism = 32

func benchRecord(i uint64, data []byte) caspaxos.Record {
	b := caspaxos.Ballot{Counter: i, Proposer: 1}
	return caspaxos.Record{Key: fmt.Sprintf("partition/%d", i%4096), Promised: b, Accepted: b, Value: caspaxos.Value{Version: i, Data: data}}
}

func reportRates(b *testing.B, fsyncs uint64) {
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/secs, "applies/sec")
	b.ReportMetric(float64(fsyncs)/secs, "fsyncs/sec")
	if fsyncs > 0 {
		b.ReportMetric(float64(b.N)/float64(fsyncs), "applies/fsync")
	}
}

// BenchmarkApplyParallel: 32 x GOMAXPROCS writers, 1-record batches;
// pebble merges their WAL syncs.
func BenchmarkApplyParallel(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var n atomic.Uint64
	data := make([]byte, 64)
	base := s.Fsyncs()
	b.SetParallelism(benchParallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.Apply(caspaxos.Batch{Put: []caspaxos.Record{benchRecord(n.Add(1), data)}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	reportRates(b, s.Fsyncs()-base)
}

// BenchmarkApplySerial: one writer, one WAL sync per Apply.
func BenchmarkApplySerial(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	data := make([]byte, 64)
	base := s.Fsyncs()
	b.ResetTimer()
	for i := range b.N {
		if err := s.Apply(caspaxos.Batch{Put: []caspaxos.Record{benchRecord(uint64(i+1), data)}}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportRates(b, s.Fsyncs()-base)
}
