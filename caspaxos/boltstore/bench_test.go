package boltstore

// Measured 2026-11-29 on the 2-core build machine while other engineers'
// builds and tests kept the load average at 10-12, so the disk's fsync rate
// was ~300/s instead of the ~2.1k/s section 7 of the brief reports on a
// quiet box; read the ratios more than the absolute rates.
//
//	go test -run XXX -bench 'ApplyParallel|ApplySerial|BoltDBBatch' -benchtime 2s -count 3 ./caspaxos/boltstore/
//
// 1-record batches, 64-byte values over 4096 keys; "parallel" is
// b.SetParallelism(32) = 64 writers. These are the in-place layout's
// figures (now the layout=in-place sub-benchmarks); docs/BENCHMARKS.md
// compares it with the log layout. Medians of 3:
//
//	BenchmarkApplyParallel (group committer)  53.6 us/op  18.6k applies/s  294 fsyncs/s  63.0 applies/fsync
//	BenchmarkApplySerial   (1 writer)          3.0 ms/op   335  applies/s  335 fsyncs/s   1.0 applies/fsync
//	BenchmarkBoltDBBatchParallel delay=1ms    53.1 us/op  18.8k applies/s  324 fsyncs/s  58.1 applies/fsync
//	BenchmarkBoltDBBatchParallel delay=10ms   75.9 us/op  13.2k applies/s  206 fsyncs/s  63.8 applies/fsync
//
// Choice: the hand-rolled committer. Under 64 writers it matches DB.Batch
// with MaxBatchSize = writers and a 1 ms delay (both fill a commit with
// ~all 64 writers; both are bound by the fsync rate) and beats the 10 ms
// default delay; unlike DB.Batch it makes a lone writer wait for nothing
// (DB.Batch holds every call for MaxBatchDelay unless MaxBatchSize calls
// arrive) and it needs no guess of the writer count. Without the linger
// described on commitLoop it fell to 33 applies/fsync (two alternating
// cohorts of writers) and 8.4k applies/s against DB.Batch's 17k in the
// same conditions.

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/bbolt"

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

// benchLayouts: every store benchmark runs on both layouts, in-place
// first (the figures above are the in-place layout's).
func benchLayouts() []Layout { return []Layout{LayoutInPlace, LayoutLog} }

func openBench(b *testing.B, l Layout) *Store {
	b.Helper()
	s, err := Open(filepath.Join(b.TempDir(), "acceptor.db"), Options{Layout: l})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// reportPages reports bbolt's page writes per commit.
func reportPages(b *testing.B, s *Store, before int64) {
	if n := s.Fsyncs(); n > 0 {
		b.ReportMetric(float64(pageWrites(s)-before)/float64(n), "pages/commit")
	}
}

// BenchmarkApplyParallel: the store's group committer under 64 writers.
func BenchmarkApplyParallel(b *testing.B) {
	for _, l := range benchLayouts() {
		b.Run("layout="+l.String(), func(b *testing.B) {
			s := openBench(b, l)
			defer s.Close()
			var n atomic.Uint64
			data := make([]byte, 64)
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
			reportRates(b, s.Fsyncs())
			reportPages(b, s, 0)
		})
	}
}

// BenchmarkApplySerial: one writer, so every Apply is its own commit; the
// committer must add no delay over a plain Update.
func BenchmarkApplySerial(b *testing.B) {
	for _, l := range benchLayouts() {
		b.Run("layout="+l.String(), func(b *testing.B) {
			s := openBench(b, l)
			defer s.Close()
			data := make([]byte, 64)
			b.ResetTimer()
			for i := range b.N {
				if err := s.Apply(caspaxos.Batch{Put: []caspaxos.Record{benchRecord(uint64(i+1), data)}}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportRates(b, s.Fsyncs())
			reportPages(b, s, 0)
		})
	}
}

// BenchmarkApplyBatch is the acceptor driver's pattern in `fmnode bench
// cas`: one Apply at a time, each one Ready of 32 or 64 records over 1000
// registers (16-byte values, as the CAS bench writes). The store is filled
// with all 1000 keys first, so the in-place layout has its full tree.
// stores=3 runs three stores side by side on one disk, each with its own
// writer, as the bench's three acceptor processes do; ns/op is then the
// time of one batch in one store, records/sec the sum over the stores.
func BenchmarkApplyBatch(b *testing.B) {
	for _, perBatch := range []int{32, 64} {
		for _, stores := range []int{1, 3} {
			for _, l := range benchLayouts() {
				b.Run(fmt.Sprintf("records=%d/stores=%d/layout=%s", perBatch, stores, l), func(b *testing.B) {
					benchApplyBatch(b, l, perBatch, stores)
				})
			}
		}
	}
}

func benchApplyBatch(b *testing.B, l Layout, perBatch, stores int) {
	const keys = 1000
	data := make([]byte, 16)
	rec := func(seq uint64, key int) caspaxos.Record {
		bal := caspaxos.Ballot{Counter: seq, Proposer: 1}
		return caspaxos.Record{Key: fmt.Sprintf("partition/%d", key), Promised: bal, Accepted: bal, Value: caspaxos.Value{Version: seq, Data: data}}
	}
	ss := make([]*Store, stores)
	var commits0, pages0 uint64
	for i := range ss {
		ss[i] = openBench(b, l)
		defer ss[i].Close()
		var fill caspaxos.Batch
		for k := range keys {
			fill.Put = append(fill.Put, rec(1, k))
		}
		if err := ss[i].Apply(fill); err != nil {
			b.Fatal(err)
		}
		commits0 += ss[i].Fsyncs()
		pages0 += uint64(pageWrites(ss[i]))
	}
	var wg sync.WaitGroup
	took := make([][]time.Duration, stores) // per store, per Apply
	b.ResetTimer()
	for i, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(1, uint64(i)))
			batch := caspaxos.Batch{Put: make([]caspaxos.Record, perBatch)}
			seq := uint64(1)
			took[i] = make([]time.Duration, 0, b.N)
			for range b.N {
				for j := range batch.Put {
					seq++
					batch.Put[j] = rec(seq, rng.IntN(keys))
				}
				start := time.Now()
				if err := s.Apply(batch); err != nil {
					b.Error(err)
					return
				}
				took[i] = append(took[i], time.Since(start))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(took...)
	slices.Sort(all)
	if n := len(all); n > 0 {
		b.ReportMetric(float64(all[n/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(all[n*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(all[n-1].Microseconds())/1000, "max-ms")
	}
	var commits, pages uint64
	for _, s := range ss {
		commits += s.Fsyncs()
		pages += uint64(pageWrites(s))
	}
	b.ReportMetric(float64(b.N*perBatch*stores)/b.Elapsed().Seconds(), "records/sec")
	b.ReportMetric(float64(pages-pages0)/float64(commits-commits0), "pages/commit")
}

// BenchmarkBoltDBBatchParallel is the alternative the committer was chosen
// over: bbolt's own DB.Batch, MaxBatchSize set to the number of writers.
// It encodes the same records but keeps no digest.
func BenchmarkBoltDBBatchParallel(b *testing.B) {
	for _, delay := range []time.Duration{time.Millisecond, 10 * time.Millisecond} {
		b.Run(fmt.Sprintf("delay=%v", delay), func(b *testing.B) {
			db, err := bbolt.Open(filepath.Join(b.TempDir(), "raw.db"), fileMode, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if err := db.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket([]byte(bucketRecords)); return err }); err != nil {
				b.Fatal(err)
			}
			db.MaxBatchSize = benchParallelism * runtime.GOMAXPROCS(0)
			db.MaxBatchDelay = delay
			txid := func() (id int) {
				_ = db.View(func(tx *bbolt.Tx) error { id = tx.ID(); return nil })
				return id
			}
			startTx := txid()
			var n atomic.Uint64
			data := make([]byte, 64)
			b.SetParallelism(benchParallelism)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := benchRecord(n.Add(1), data)
					enc := caspaxos.EncodeRecord(nil, r)
					err := db.Batch(func(tx *bbolt.Tx) error {
						return tx.Bucket([]byte(bucketRecords)).Put(append([]byte{keyPrefix}, r.Key...), enc)
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			reportRates(b, uint64(txid()-startTx))
		})
	}
}

// pageWrites returns bbolt's count of page writes so far.
func pageWrites(s *Store) int64 {
	st := s.db.Stats()
	return st.TxStats.GetWrite()
}

// BenchmarkOpenLarge measures, for stores of 100k and 1M keys
// ("partition/NNNNNNN", 16-byte values, each written once), how long Open
// takes (it decodes and checks every record), how long the acceptor's
// Load then takes, and the heap an open store
// keeps per key: for the log layout that is the index of live keys with
// its key strings; the in-place layout keeps none. b.N repeats the reopen.
func BenchmarkOpenLarge(b *testing.B) {
	for _, keys := range []int{100_000, 1_000_000} {
		for _, l := range benchLayouts() {
			b.Run(fmt.Sprintf("keys=%d/layout=%s", keys, l), func(b *testing.B) { benchOpenLarge(b, l, keys) })
		}
	}
}

func benchOpenLarge(b *testing.B, l Layout, keys int) {
	path := filepath.Join(b.TempDir(), "acceptor.db")
	s, err := Open(path, Options{Layout: l})
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 16)
	var batch caspaxos.Batch
	for k := range keys {
		bal := caspaxos.Ballot{Counter: 1, Proposer: 1}
		batch.Put = append(batch.Put, caspaxos.Record{Key: fmt.Sprintf("partition/%07d", k), Promised: bal, Accepted: bal, Value: caspaxos.Value{Version: 1, Data: data}})
		if len(batch.Put) == 4096 || k == keys-1 {
			if err := s.Apply(batch); err != nil {
				b.Fatal(err)
			}
			batch.Put = batch.Put[:0]
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	batch.Put = nil
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var perKey float64
	b.ResetTimer()
	for range b.N {
		before := heap()
		start := time.Now()
		s, err := Open(path, Options{Layout: l})
		if err != nil {
			b.Fatal(err)
		}
		opened := time.Since(start)
		after := heap()
		if s.lg != nil && len(s.lg.index) != keys {
			b.Fatalf("index holds %d keys, want %d", len(s.lg.index), keys)
		}
		perKey = (float64(after) - float64(before)) / float64(keys)
		b.ReportMetric(opened.Seconds(), "open-s")
		start = time.Now()
		st, err := s.Load()
		if err != nil {
			b.Fatal(err)
		}
		if len(st.Records) != keys {
			b.Fatalf("loaded %d records, want %d", len(st.Records), keys)
		}
		b.ReportMetric(time.Since(start).Seconds(), "load-s")
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(perKey, "heap-bytes/key")
}
