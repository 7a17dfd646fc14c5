// Package pebblestore keeps the partitions of one host in one pebble
// database: every partition's log, applied state, undo and conflict
// records under its key prefix (see partition's key layout), so hosting a
// partition costs no per-partition pebble resources. A Commit is one pebble
// batch committed with Sync: the group commit of every partition's writes
// of a Ready. Records carry checksums; a damaged record is reported as
// partition.ErrCorrupt naming the partition and record, and the store is
// never reset.
package pebblestore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/fmnode/fmnode/partition"
)

// markerKey identifies a directory as a partition store; it sorts before
// every partition key.
// ErrNotStore: the directory holds a pebble database that is not a partition store.
var ErrNotStore = errors.New("pebblestore: directory holds a pebble database that is not a partition store")

const markerKey = "\x00fmnode-partition-store"

const markerValue = "v1"

// Options configures Open.
type Options struct {
	// Dir is the database directory (created if missing).
	Dir string
	// NoSync turns off fsync on commit (benchmarks of the CPU path only;
	// a crash may then lose acknowledged writes).
	NoSync bool
	// CacheBytes is pebble's block cache (default 64 MiB).
	CacheBytes int64
	// MemTableBytes is pebble's memtable size (default 32 MiB).
	MemTableBytes uint64
	// FS overrides the filesystem (tests use vfs.NewStrictMem to simulate
	// losing unsynced data).
	FS vfs.FS
	// Logger receives pebble's messages at debug level. Nil discards them.
	Logger *slog.Logger
}

// Store is a partition.Store on pebble. It is safe for concurrent use;
// commits are serialised.
type Store struct {
	db     *pebble.DB
	wo     *pebble.WriteOptions
	dir    string
	mu     sync.Mutex // serialises Commit (batch reads must see a stable DB)
	failed error
	closed bool
}

var _ partition.AsyncStore = (*Store)(nil)

// quietLogger routes pebble's log lines to slog at debug level.
type quietLogger struct{ log *slog.Logger }

func (l quietLogger) Infof(format string, args ...any) {
	if l.log != nil {
		l.log.Debug(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (l quietLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if l.log != nil {
		l.log.Error(msg, "component", "pebble")
	}
	panic("pebble: " + msg)
}

// Open opens (or creates) the store in opts.Dir.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("pebblestore: Options.Dir is empty: %w", partition.ErrInvalidConfig)
	}
	if opts.CacheBytes == 0 {
		opts.CacheBytes = 64 << 20
	}
	if opts.MemTableBytes == 0 {
		opts.MemTableBytes = 32 << 20
	}
	cache := pebble.NewCache(opts.CacheBytes)
	po := &pebble.Options{
		Cache:                       cache,
		MemTableSize:                opts.MemTableBytes,
		Logger:                      quietLogger{opts.Logger},
		FS:                          opts.FS,
		MaxConcurrentCompactions:    func() int { return 1 },
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       32,
		LBaseMaxBytes:               64 << 20,
		MemTableStopWritesThreshold: 4,
	}
	db, err := pebble.Open(opts.Dir, po)
	cache.Unref()
	if err != nil {
		return nil, fmt.Errorf("pebblestore: open %s: %w", opts.Dir, err)
	}
	s := &Store{db: db, dir: opts.Dir, wo: pebble.Sync}
	if opts.NoSync {
		s.wo = pebble.NoSync
	}
	if err := s.checkMarker(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) checkMarker() error {
	v, closer, err := s.db.Get([]byte(markerKey))
	if err == nil {
		ok := string(v) == markerValue
		_ = closer.Close()
		if !ok {
			return fmt.Errorf("pebblestore: %s: store marker %q, want %q: %w", s.dir, v, markerValue, partition.ErrCorrupt)
		}
		return nil
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("pebblestore: %s: read marker: %w", s.dir, err)
	}
	it, err := s.db.NewIter(nil)
	if err != nil {
		return err
	}
	nonEmpty := it.First()
	if err := it.Close(); err != nil {
		return err
	}
	if nonEmpty {
		return fmt.Errorf("pebblestore: %s: %w", s.dir, ErrNotStore)
	}
	return s.db.Set([]byte(markerKey), []byte(markerValue), pebble.Sync)
}

// DB exposes the pebble database (metrics).
func (s *Store) DB() *pebble.DB { return s.db }

// Partitions implements partition.Store.
func (s *Store) Partitions() ([]partition.ID, error) {
	if err := s.check("partitions"); err != nil {
		return nil, err
	}
	return partition.ListPartitions(reader{s.db})
}

// Load implements partition.Store.
func (s *Store) Load(p partition.ID) (partition.Recovered, error) {
	if err := s.check("load"); err != nil {
		return partition.Recovered{}, err
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	rec, err := partition.LoadPartition(reader{snap}, p)
	if err != nil {
		return rec, fmt.Errorf("pebblestore: %s: %w", s.dir, err)
	}
	return rec, nil
}

// Commit implements partition.Store: one pebble batch, synced.
func (s *Store) Commit(ws []partition.Write) error {
	wait, err := s.CommitAsync(ws)
	if err != nil {
		return err
	}
	return wait()
}

func noWait() error { return nil }

// CommitAsync implements partition.AsyncStore: the batch is applied to
// the memtable and queued on the write-ahead log at once; wait returns
// when its fsync (shared with every batch queued meanwhile) is done.
func (s *Store) CommitAsync(ws []partition.Write) (func() error, error) {
	if len(ws) == 0 {
		return noWait, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("pebblestore: commit: %w", partition.ErrStoreClosed)
	}
	if s.failed != nil {
		return nil, fmt.Errorf("pebblestore: %s: store failed by an earlier commit, reopen it: %w", s.dir, s.failed)
	}
	// Scans (rare: truncation, snapshot reset) need an indexed batch;
	// point reads (undo records) only need the batch's own writes, kept in
	// an overlay, over the database; most commits read nothing.
	indexed := partition.NeedsScan(ws)
	var b *pebble.Batch
	if indexed {
		b = s.db.NewIndexedBatch()
	} else {
		b = s.db.NewBatch()
	}
	ba := &batch{b: b, indexed: indexed}
	if !indexed && partition.NeedsReads(ws) {
		ba.db, ba.overlay = s.db, map[string][]byte{}
	}
	if err := partition.ApplyWrites(ba, ws); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("pebblestore: %s: commit: %w", s.dir, err)
	}
	if !s.wo.Sync {
		err := b.Commit(s.wo)
		_ = b.Close()
		if err != nil {
			s.failed = err
			return nil, fmt.Errorf("pebblestore: %s: commit: %w", s.dir, err)
		}
		return noWait, nil
	}
	if err := s.db.ApplyNoSyncWait(b, s.wo); err != nil {
		_ = b.Close()
		s.failed = err
		return nil, fmt.Errorf("pebblestore: %s: commit: %w", s.dir, err)
	}
	return func() error {
		err := b.SyncWait()
		_ = b.Close()
		if err != nil {
			s.mu.Lock()
			s.failed = err
			s.mu.Unlock()
			return fmt.Errorf("pebblestore: %s: sync: %w", s.dir, err)
		}
		return nil
	}, nil
}

// ReadLog implements partition.Store.
func (s *Store) ReadLog(p partition.ID, from partition.LSN, maxOps, maxBytes int) ([]partition.Op, error) {
	if err := s.check("read log"); err != nil {
		return nil, err
	}
	return partition.ReadLogOps(reader{s.db}, p, from, maxOps, maxBytes)
}

// Get implements partition.Store.
func (s *Store) Get(p partition.ID, key []byte) (partition.KV, bool, error) {
	if err := s.check("get"); err != nil {
		return partition.KV{}, false, err
	}
	return partition.GetKV(reader{s.db}, p, key)
}

// ReadKV implements partition.Store from one consistent snapshot.
func (s *Store) ReadKV(p partition.ID, after []byte, maxBytes int) ([]partition.KV, bool, partition.LSN, error) {
	if err := s.check("read state"); err != nil {
		return nil, false, 0, err
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	return partition.ReadKVChunk(reader{snap}, p, after, maxBytes)
}

// Conflicts implements partition.Store.
func (s *Store) Conflicts(p partition.ID, after partition.Token, limit int) ([]partition.ConflictRecord, error) {
	if err := s.check("conflicts"); err != nil {
		return nil, err
	}
	return partition.ListConflicts(reader{s.db}, p, after, limit)
}

// WALBytes returns the bytes written to pebble's write-ahead log.
func (s *Store) WALBytes() uint64 { return s.db.Metrics().WAL.BytesWritten }

// Flush flushes the memtable (tests and measurements).
func (s *Store) Flush() error { return s.db.Flush() }

// Close implements partition.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.db.Close()
}

func (s *Store) check(op string) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("pebblestore: %s: %w", op, partition.ErrStoreClosed)
	}
	return nil
}

// reader adapts a pebble reader (DB or snapshot) to partition.KVReader.
type reader struct{ r pebble.Reader }

func (r reader) Get(k []byte) ([]byte, bool, error) {
	v, closer, err := r.r.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := bytes.Clone(v)
	return out, true, closer.Close()
}

func (r reader) First(lo, hi []byte) ([]byte, []byte, bool, error) {
	return edge(r.r, lo, hi, false)
}

func (r reader) Last(lo, hi []byte) ([]byte, []byte, bool, error) {
	return edge(r.r, lo, hi, true)
}

func (r reader) Scan(lo, hi []byte, fn func(k, v []byte) (bool, error)) error {
	return scan(r.r, lo, hi, fn)
}

type iterSource interface {
	NewIter(*pebble.IterOptions) (*pebble.Iterator, error)
}

func edge(src iterSource, lo, hi []byte, last bool) ([]byte, []byte, bool, error) {
	it, err := src.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, nil, false, err
	}
	var ok bool
	if last {
		ok = it.Last()
	} else {
		ok = it.First()
	}
	var k, v []byte
	if ok {
		k, v = bytes.Clone(it.Key()), bytes.Clone(it.Value())
	}
	err = errors.Join(it.Error(), it.Close())
	return k, v, ok && err == nil, err
}

func scan(src iterSource, lo, hi []byte, fn func(k, v []byte) (bool, error)) error {
	it, err := src.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		cont, err := fn(it.Key(), it.Value())
		if err != nil {
			_ = it.Close()
			return err
		}
		if !cont {
			break
		}
	}
	return errors.Join(it.Error(), it.Close())
}

// batch adapts a pebble batch to partition.KVBatch. An indexed batch
// reads through itself; a plain one with an overlay answers point reads
// from the keys it wrote, then from the database.
type batch struct {
	b       *pebble.Batch
	indexed bool
	db      *pebble.DB
	overlay map[string][]byte // nil value: deleted in this batch
}

var errNotIndexed = errors.New("pebblestore: read from a non-indexed batch")

func (b *batch) Get(k []byte) ([]byte, bool, error) {
	if b.indexed {
		return reader{b.b}.Get(k)
	}
	if b.overlay == nil {
		return nil, false, errNotIndexed
	}
	if v, ok := b.overlay[string(k)]; ok {
		return v, v != nil, nil
	}
	return reader{b.db}.Get(k)
}

func (b *batch) First(lo, hi []byte) ([]byte, []byte, bool, error) {
	if !b.indexed {
		return nil, nil, false, errNotIndexed
	}
	return edge(b.b, lo, hi, false)
}

func (b *batch) Last(lo, hi []byte) ([]byte, []byte, bool, error) {
	if !b.indexed {
		return nil, nil, false, errNotIndexed
	}
	return edge(b.b, lo, hi, true)
}

func (b *batch) Scan(lo, hi []byte, fn func(k, v []byte) (bool, error)) error {
	if !b.indexed {
		return errNotIndexed
	}
	// Collect first: the caller may write to the batch from fn.
	type kv struct{ k, v []byte }
	var all []kv
	err := scan(b.b, lo, hi, func(k, v []byte) (bool, error) {
		all = append(all, kv{bytes.Clone(k), bytes.Clone(v)})
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, e := range all {
		cont, err := fn(e.k, e.v)
		if err != nil || !cont {
			return err
		}
	}
	return nil
}

func (b *batch) Set(k, v []byte) error {
	if b.overlay != nil {
		b.overlay[string(k)] = bytes.Clone(v)
	}
	return b.b.Set(k, v, nil)
}

func (b *batch) Delete(k []byte) error {
	if b.overlay != nil {
		b.overlay[string(k)] = nil
	}
	return b.b.Delete(k, nil)
}

func (b *batch) DeleteRange(lo, hi []byte) error {
	if b.overlay != nil {
		// Without scans (they use indexed batches) range deletes cover
		// only log, undo and conflict keys, never the state keys that
		// point reads ask for; keep the overlay exact anyway.
		for k := range b.overlay {
			if k >= string(lo) && k < string(hi) {
				b.overlay[k] = nil
			}
		}
	}
	return b.b.DeleteRange(lo, hi, nil)
}
