package pebblestore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/fmnode/fmnode/caspaxos"
)

// Key layout. Records sit under a one-byte prefix and the meta keys under
// "m/", so a scan can tell them apart and refuse anything else.
const (
	recordPrefix = 'r'
	metaFormat   = "m/format"
	metaAgeFloor = "m/agefloor"
	formatMagic  = "fmnode/caspaxos/pebblestore v1"
	// initFile marks a store whose initialisation completed. A store dir
	// with this file but without a single key has lost its data (a WAL
	// truncated to nothing, say) and must not be re-initialised.
	initFile = "CASPAXOS-STORE"
	dirMode  = 0o750
)

// Options tunes a Store. The zero value is the production setting.
type Options struct {
	// FS is the file system pebble uses; nil means the OS. Tests pass
	// vfs.NewStrictMem() to simulate crashes that lose unsynced writes.
	FS vfs.FS
	// Logger receives open/close and error events, and pebble's own log
	// at Debug; nil discards them.
	Logger *slog.Logger
}

// Store is a pebble-backed caspaxos.Store. It is safe for concurrent use.
type Store struct {
	dir string
	db  *pebble.DB
	log *slog.Logger

	// mu guards closed and db against Close: Apply and Load hold it shared
	// for their whole call, because pebble panics on use after Close.
	mu     sync.RWMutex
	closed bool
	// failed is set by the first failed commit; see Apply.
	failed atomic.Pointer[error]

	commits atomic.Uint64
	fsyncs  atomic.Uint64
}

var _ caspaxos.Store = (*Store)(nil)

// Open opens the store in dir, creating it when dir is missing or empty.
// A non-empty dir must hold a pebble database with this store's format
// marker; otherwise (foreign files, another program's database, damage
// pebble detects, an undecodable record) Open fails with an error naming
// dir that wraps caspaxos.ErrCorrupt. Open never resets what it cannot read.
func Open(dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: pebblestore: empty dir", caspaxos.ErrInvalidConfig)
	}
	start := time.Now()
	fs := opts.FS
	if fs == nil {
		fs = vfs.Default
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("store", "pebble", "dir", dir)
	s := &Store{dir: dir, log: log}

	fresh, err := isFresh(fs, dir)
	if err != nil {
		return nil, err
	}
	if fresh {
		if err := mkdirDurable(fs, dir); err != nil {
			return nil, err
		}
	}
	popts := &pebble.Options{
		FS:               syncCountingFS{FS: fs, n: &s.fsyncs},
		Logger:           slogLogger{log: log},
		ErrorIfNotExists: !fresh,
	}
	db, err := openDB(dir, popts)
	switch {
	case err == nil:
	case errors.Is(err, pebble.ErrDBDoesNotExist):
		return nil, fmt.Errorf("%w: pebblestore: %s holds files but no pebble database", caspaxos.ErrCorrupt, dir)
	case pebble.IsCorruptionError(err):
		return nil, fmt.Errorf("%w: pebblestore: %s: %v", caspaxos.ErrCorrupt, dir, err)
	default:
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	s.db = db
	n, err := s.initOrVerify(fs)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	log.Info("store opened", "records", n, "took", time.Since(start))
	return s, nil
}

// openDB is pebble.Open with a panic on damaged files (pebble asserts
// rather than checks in places) turned into ErrCorrupt.
func openDB(dir string, popts *pebble.Options) (db *pebble.DB, err error) {
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, fmt.Errorf("%w: pebblestore: %s: open panicked: %v", caspaxos.ErrCorrupt, dir, p)
		}
	}()
	return pebble.Open(dir, popts)
}

// isFresh reports whether dir is missing or empty, the only cases in which
// Open creates a store.
func isFresh(fs vfs.FS, dir string) (bool, error) {
	fi, err := fs.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("pebblestore: stat %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("%w: pebblestore: %s is not a directory", caspaxos.ErrInvalidConfig, dir)
	}
	names, err := fs.List(dir)
	if err != nil {
		return false, fmt.Errorf("pebblestore: list %s: %w", dir, err)
	}
	return len(names) == 0, nil
}

// mkdirDurable creates dir and its missing ancestors and syncs the parent
// of each directory it created. Pebble syncs its own directory, not the
// entry that names it: without this a power loss soon after creating a
// store can lose the whole directory, every synced write with it (the
// strict in-memory FS in the crash tests shows exactly that).
func mkdirDurable(fs vfs.FS, dir string) error {
	var created []string
	for d := dir; ; {
		if _, err := fs.Stat(d); err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
		created = append(created, d)
		parent := fs.PathDir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if err := fs.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("pebblestore: create %s: %w", dir, err)
	}
	for _, d := range created {
		if err := syncDir(fs, fs.PathDir(d)); err != nil {
			return err
		}
	}
	return nil
}

// scanned is what one pass over the whole keyspace found.
type scanned struct {
	state    caspaxos.State
	format   []byte // nil when the marker is missing
	hasFloor bool
	keys     int
}

// initOrVerify writes the format marker into a database with no keys at
// all, provided initialisation never completed (no initFile): a new store,
// or one whose creation crashed before its marker was durable, from which
// nothing can have been acknowledged. Otherwise it checks the marker and
// decodes everything. It returns the record count.
func (s *Store) initOrVerify(fs vfs.FS) (int, error) {
	sc, err := s.scan()
	if err != nil {
		return 0, err
	}
	marker := fs.PathJoin(s.dir, initFile)
	_, statErr := fs.Stat(marker)
	initialised := statErr == nil
	if statErr != nil && !errors.Is(statErr, os.ErrNotExist) {
		return 0, fmt.Errorf("pebblestore: stat %s: %w", marker, statErr)
	}
	if sc.keys == 0 {
		if initialised {
			return 0, fmt.Errorf("%w: pebblestore: %s: initialised store holds no keys: its data is lost", caspaxos.ErrCorrupt, s.dir)
		}
		b := s.db.NewBatch()
		defer b.Close()
		if err := b.Set([]byte(metaFormat), []byte(formatMagic), nil); err != nil {
			return 0, fmt.Errorf("pebblestore: %s: init: %w", s.dir, err)
		}
		if err := b.Set([]byte(metaAgeFloor), caspaxos.EncodeAgeFloor(nil, 0), nil); err != nil {
			return 0, fmt.Errorf("pebblestore: %s: init: %w", s.dir, err)
		}
		if err := b.Commit(pebble.Sync); err != nil {
			return 0, fmt.Errorf("pebblestore: %s: init: %w", s.dir, err)
		}
		return 0, writeInitFile(fs, s.dir, marker)
	}
	if err := s.checkMeta(sc); err != nil {
		return 0, err
	}
	if !initialised {
		// The marker is durable, so initialisation did complete; only the
		// file recording that was lost to a crash.
		if err := writeInitFile(fs, s.dir, marker); err != nil {
			return 0, err
		}
	}
	return len(sc.state.Records), nil
}

// writeInitFile durably creates the file that records a completed
// initialisation.
func writeInitFile(fs vfs.FS, dir, path string) error {
	f, err := fs.Create(path)
	if err != nil {
		return fmt.Errorf("pebblestore: create %s: %w", path, err)
	}
	_, err = f.Write([]byte(formatMagic + "\n"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pebblestore: write %s: %w", path, err)
	}
	return syncDir(fs, dir)
}

// syncDir makes the entries of dir durable.
func syncDir(fs vfs.FS, dir string) error {
	f, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("pebblestore: open directory %s: %w", dir, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pebblestore: sync directory %s: %w", dir, err)
	}
	return nil
}

func (s *Store) checkMeta(sc scanned) error {
	switch {
	case sc.format == nil:
		return fmt.Errorf("%w: pebblestore: %s: no format marker: not a caspaxos store", caspaxos.ErrCorrupt, s.dir)
	case string(sc.format) != formatMagic:
		return fmt.Errorf("%w: pebblestore: %s: format %q, want %q", caspaxos.ErrCorrupt, s.dir, sc.format, formatMagic)
	case !sc.hasFloor:
		return fmt.Errorf("%w: pebblestore: %s: age floor missing", caspaxos.ErrCorrupt, s.dir)
	}
	return nil
}

// scan reads every key. Anything that is not a known meta key or a
// decodable record under its own key is corruption, named by key.
func (s *Store) scan() (sc scanned, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: pebblestore: %s: read panicked: %v", caspaxos.ErrCorrupt, s.dir, p)
		}
	}()
	it, err := s.db.NewIter(nil)
	if err != nil {
		return sc, s.readErr("iterate", err)
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			err = s.readErr("iterate", cerr)
		}
	}()
	for ok := it.First(); ok; ok = it.Next() {
		sc.keys++
		k := it.Key()
		v, verr := it.ValueAndErr()
		if verr != nil {
			return sc, s.readErr(fmt.Sprintf("read key %q", k), verr)
		}
		switch {
		case len(k) > 0 && k[0] == recordPrefix:
			r, derr := caspaxos.DecodeRecord(v)
			if derr != nil {
				return sc, fmt.Errorf("pebblestore: %s: key %q: %w", s.dir, k[1:], derr)
			}
			if r.Key != string(k[1:]) {
				return sc, fmt.Errorf("%w: pebblestore: %s: key %q holds the record of key %q", caspaxos.ErrCorrupt, s.dir, k[1:], r.Key)
			}
			sc.state.Records = append(sc.state.Records, r)
		case string(k) == metaFormat:
			sc.format = append([]byte{}, v...)
		case string(k) == metaAgeFloor:
			floor, derr := caspaxos.DecodeAgeFloor(v)
			if derr != nil {
				return sc, fmt.Errorf("pebblestore: %s: key %q: %w", s.dir, k, derr)
			}
			sc.state.AgeFloor, sc.hasFloor = floor, true
		default:
			return sc, fmt.Errorf("%w: pebblestore: %s: unexpected key %q", caspaxos.ErrCorrupt, s.dir, k)
		}
	}
	return sc, nil
}

// readErr wraps a pebble read error, marking pebble's corruption errors
// (failed block or WAL checksums) as caspaxos.ErrCorrupt.
func (s *Store) readErr(op string, err error) error {
	if pebble.IsCorruptionError(err) {
		return fmt.Errorf("%w: pebblestore: %s: %s: %v", caspaxos.ErrCorrupt, s.dir, op, err)
	}
	return fmt.Errorf("pebblestore: %s: %s: %w", s.dir, op, err)
}

// Load returns every record sorted by key (pebble's order is bytewise, the
// same as Go's string order), and the age floor.
func (s *Store) Load() (caspaxos.State, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return caspaxos.State{}, fmt.Errorf("pebblestore: %s: load: %w", s.dir, caspaxos.ErrStoreClosed)
	}
	sc, err := s.scan()
	if err != nil {
		return caspaxos.State{}, err
	}
	if err := s.checkMeta(sc); err != nil {
		return caspaxos.State{}, err
	}
	return sc.state, nil
}

// Apply commits b as one pebble batch with pebble.Sync: atomic, and
// durable before it returns. Puts apply in order, then deletes (a pebble
// batch applies its operations in order, so a later operation on a key
// wins). After a failed commit the store refuses every later Apply: a
// failed WAL sync leaves the log in an unknown state, and only a restart
// that reads what is really there is safe.
func (s *Store) Apply(b caspaxos.Batch) error {
	if err := caspaxos.CheckBatch(b); err != nil {
		return fmt.Errorf("pebblestore: %s: apply: %w", s.dir, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return fmt.Errorf("pebblestore: %s: apply: %w", s.dir, caspaxos.ErrStoreClosed)
	}
	if p := s.failed.Load(); p != nil {
		return *p
	}
	if b.Empty() {
		return nil
	}
	if err := s.commit(b); err != nil {
		return s.failCommit(err)
	}
	s.commits.Add(1)
	return nil
}

// failCommit fails the store by err (the first failure is kept and logged)
// and returns the error for the caller.
func (s *Store) failCommit(err error) error {
	failed := fmt.Errorf("pebblestore: %s: store failed by an earlier commit: %w", s.dir, err)
	if s.failed.CompareAndSwap(nil, &failed) {
		s.log.Error("commit failed; store refuses further writes until reopened", "err", err)
	}
	return fmt.Errorf("pebblestore: %s: apply: %w", s.dir, err)
}

func (s *Store) commit(b caspaxos.Batch) error {
	pb, err := s.batch(b)
	defer pb.Close()
	if err != nil {
		return err
	}
	return pb.Commit(pebble.Sync)
}

// batch builds the pebble batch for b; the caller closes it.
func (s *Store) batch(b caspaxos.Batch) (*pebble.Batch, error) {
	pb := s.db.NewBatch()
	// Batch.Set copies key and value, so one scratch buffer serves all.
	var buf []byte
	for _, r := range b.Put {
		buf = append(buf[:0], recordPrefix)
		buf = append(buf, r.Key...)
		klen := len(buf)
		buf = caspaxos.EncodeRecord(buf, r)
		if err := pb.Set(buf[:klen], buf[klen:], nil); err != nil {
			return pb, fmt.Errorf("put %q: %w", r.Key, err)
		}
	}
	for _, k := range b.Delete {
		buf = append(append(buf[:0], recordPrefix), k...)
		if err := pb.Delete(buf, nil); err != nil {
			return pb, fmt.Errorf("delete %q: %w", k, err)
		}
	}
	if b.AgeFloor != 0 {
		if err := pb.Set([]byte(metaAgeFloor), caspaxos.EncodeAgeFloor(nil, b.AgeFloor), nil); err != nil {
			return pb, fmt.Errorf("put age floor: %w", err)
		}
	}
	return pb, nil
}

// Close waits for in-flight Apply and Load calls and closes the database.
// Closing twice is harmless.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("pebblestore: close %s: %w", s.dir, err)
	}
	s.log.Info("store closed", "commits", s.commits.Load(), "fsyncs", s.fsyncs.Load())
	return nil
}

// Fsyncs returns the number of durable file syncs pebble has made (WAL,
// manifest, tables, directories), counted at the file system. Under
// concurrent Apply calls it grows more slowly than Commits: the ratio is
// pebble's group-commit factor.
func (s *Store) Fsyncs() uint64 { return s.fsyncs.Load() }

// Commits returns the number of synced batch commits (non-empty Apply
// calls that succeeded).
func (s *Store) Commits() uint64 { return s.commits.Load() }

// Dir returns the directory the store lives in.
func (s *Store) Dir() string { return s.dir }
