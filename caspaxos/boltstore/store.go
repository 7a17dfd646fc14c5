package boltstore

import (
	"errors"
	"fmt"
	"github.com/fmnode/fmnode/internal/durable"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"

	"github.com/fmnode/fmnode/caspaxos"
)

// ErrLocked: another process has the store file open. It is not
// corruption; the caller may retry or report a second instance.
var ErrLocked = errors.New("boltstore: store file locked by another process")

// ErrWrongLayout: Options.Layout names one layout and the file holds the
// other. Nothing is migrated silently: a migration that failed halfway
// could lose promises.
var ErrWrongLayout = errors.New("boltstore: store file holds another layout")

// Layout selects how records are laid out in the file.
type Layout int

const (
	// LayoutAuto opens a file in the layout it holds and creates new
	// files in LayoutLog.
	LayoutAuto Layout = iota
	// LayoutLog appends records to a log (format v2); see logstore.go.
	LayoutLog
	// LayoutInPlace keeps one bbolt key per record (format v1).
	LayoutInPlace
)

func (l Layout) String() string {
	switch l {
	case LayoutAuto:
		return "auto"
	case LayoutLog:
		return "log"
	case LayoutInPlace:
		return "in-place"
	}
	return fmt.Sprintf("Layout(%d)", int(l))
}

// ParseLayout parses a Layout's String form.
func ParseLayout(s string) (Layout, error) {
	for _, l := range []Layout{LayoutAuto, LayoutLog, LayoutInPlace} {
		if s == l.String() {
			return l, nil
		}
	}
	return 0, fmt.Errorf("%w: boltstore: unknown layout %q (auto, log, in-place)", caspaxos.ErrInvalidConfig, s)
}

// Defaults for Options fields left zero.
const (
	DefaultMaxGroupBatches = 256
	DefaultMaxGroupBytes   = 16 << 20
	DefaultQueueLen        = 1024
	DefaultLockTimeout     = time.Second
)

// On-disk names. The magic names the format and its version; Open refuses
// anything else rather than guessing.
const (
	bucketRecords = "records"
	bucketMeta    = "meta"
	metaFormat    = "format"
	metaAgeFloor  = "agefloor"
	metaDigest    = "digest"
	keyPrefix     = 'r'
	formatMagic   = "fmnode/caspaxos/boltstore v1"
	fileMode      = 0o600
	dirMode       = 0o750
	// arenaKeepBytes: the committer keeps its encoding buffer between
	// commits unless a huge commit grew it beyond this.
	arenaKeepBytes = 4 << 20
)

// Options tunes a Store. The zero value is the recommended setting.
type Options struct {
	// MaxGroupBatches bounds how many Apply calls one commit (one fsync)
	// carries, so a burst cannot build an unbounded transaction.
	MaxGroupBatches int
	// MaxGroupBytes bounds the approximate payload of one commit; a single
	// batch larger than this still commits, alone.
	MaxGroupBytes int
	// QueueLen bounds Apply calls waiting for the committer. When the queue
	// is full Apply blocks: backpressure instead of unbounded memory.
	QueueLen int
	// LockTimeout bounds the wait for another process's lock on the file.
	LockTimeout time.Duration
	// Logger receives open/close and error events; nil discards them.
	Logger *slog.Logger
	// Layout is the file layout; LayoutAuto (zero) opens a file in the
	// layout it holds and creates LayoutLog files. An explicit layout that
	// contradicts the file fails Open with ErrWrongLayout.
	Layout Layout
	// CompactSlack (LayoutLog): log entries allowed beyond twice the live
	// keys before commits start compacting; 0 means DefaultCompactSlack.
	CompactSlack int
	// CompactChunk (LayoutLog): the most log entries one commit compacts,
	// which bounds the work compaction adds to a commit (with
	// MaxGroupBytes); 0 means DefaultCompactChunk, else it must lie in
	// [64, 65536].
	CompactChunk int
}

func (o Options) withDefaults() (Options, error) {
	switch {
	case o.MaxGroupBatches < 0:
		return o, fmt.Errorf("%w: boltstore: MaxGroupBatches %d is negative", caspaxos.ErrInvalidConfig, o.MaxGroupBatches)
	case o.MaxGroupBytes < 0:
		return o, fmt.Errorf("%w: boltstore: MaxGroupBytes %d is negative", caspaxos.ErrInvalidConfig, o.MaxGroupBytes)
	case o.QueueLen < 0:
		return o, fmt.Errorf("%w: boltstore: QueueLen %d is negative", caspaxos.ErrInvalidConfig, o.QueueLen)
	case o.LockTimeout < 0:
		return o, fmt.Errorf("%w: boltstore: LockTimeout %v is negative", caspaxos.ErrInvalidConfig, o.LockTimeout)
	case o.Layout < LayoutAuto || o.Layout > LayoutInPlace:
		return o, fmt.Errorf("%w: boltstore: Layout %d unknown", caspaxos.ErrInvalidConfig, int(o.Layout))
	case o.CompactSlack < 0:
		return o, fmt.Errorf("%w: boltstore: CompactSlack %d is negative", caspaxos.ErrInvalidConfig, o.CompactSlack)
	case o.CompactChunk != 0 && (o.CompactChunk < minCompactChunk || o.CompactChunk > maxCompactChunk):
		return o, fmt.Errorf("%w: boltstore: CompactChunk %d outside [%d, %d]", caspaxos.ErrInvalidConfig, o.CompactChunk, minCompactChunk, maxCompactChunk)
	}
	if o.MaxGroupBatches == 0 {
		o.MaxGroupBatches = DefaultMaxGroupBatches
	}
	if o.MaxGroupBytes == 0 {
		o.MaxGroupBytes = DefaultMaxGroupBytes
	}
	if o.QueueLen == 0 {
		o.QueueLen = DefaultQueueLen
	}
	if o.LockTimeout == 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CompactSlack == 0 {
		o.CompactSlack = DefaultCompactSlack
	}
	if o.CompactChunk == 0 {
		o.CompactChunk = DefaultCompactChunk
	}
	return o, nil
}

// Store is a bbolt-backed caspaxos.Store. It is safe for concurrent use.
type Store struct {
	path string
	db   *bbolt.DB
	opts Options
	log  *slog.Logger

	// mu guards closed and the send side of queue: Close takes it
	// exclusively to close the queue only once no Apply is sending.
	mu     sync.RWMutex
	closed bool
	queue  chan *request
	done   chan struct{} // closed when the committer has exited

	fsyncs atomic.Uint64

	// layout is the file's layout (never LayoutAuto once open); lg is the
	// log layout's committer state (nil for LayoutInPlace).
	layout Layout
	lg     *logState
}

var _ caspaxos.Store = (*Store)(nil)

// Open opens the store at path, creating it (and its parent directories)
// when the file does not exist. An existing file must be a complete store:
// a foreign, truncated or corrupt file fails with an error that names path
// and wraps caspaxos.ErrCorrupt. Open never resets a file it cannot read.
func Open(path string, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if path == "" {
		return nil, fmt.Errorf("%w: boltstore: empty path", caspaxos.ErrInvalidConfig)
	}
	start := time.Now()
	if err := ensureFile(path, opts); err != nil {
		return nil, err
	}
	if err := checkFile(path, opts.LockTimeout); err != nil {
		return nil, err
	}
	db, err := openDB(path, opts)
	if err != nil {
		return nil, err
	}
	s := &Store{
		path:  path,
		db:    db,
		opts:  opts,
		log:   opts.Logger.With("store", "bolt", "path", path),
		queue: make(chan *request, opts.QueueLen),
		done:  make(chan struct{}),
	}
	n, err := s.verify()
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	go s.commitLoop()
	s.log.Info("store opened", "layout", s.layout, "records", n, "took", time.Since(start))
	return s, nil
}

// ensureFile creates a new store file when none exists. The file is built
// under a temporary name and renamed into place, so a file at path is
// always a complete store: an empty or half-written file at path is then
// corruption, never a store to silently re-initialise.
func ensureFile(path string, opts Options) error {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Errorf("%w: boltstore: %s is a directory, want a file path", caspaxos.ErrInvalidConfig, path)
	case err == nil:
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("boltstore: stat %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if err := mkdirDurable(dir); err != nil {
		return err
	}
	tmp := path + ".init"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("boltstore: remove stale %s: %w", tmp, err)
	}
	db, err := bbolt.Open(tmp, fileMode, &bbolt.Options{Timeout: opts.LockTimeout})
	if err != nil {
		return fmt.Errorf("boltstore: create %s: %w", tmp, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		meta, err := tx.CreateBucket([]byte(bucketMeta))
		if err != nil {
			return err
		}
		if err := meta.Put([]byte(metaAgeFloor), caspaxos.EncodeAgeFloor(nil, 0)); err != nil {
			return err
		}
		if opts.Layout == LayoutInPlace {
			if _, err := tx.CreateBucket([]byte(bucketRecords)); err != nil {
				return err
			}
			if err := meta.Put([]byte(metaFormat), []byte(formatMagic)); err != nil {
				return err
			}
			return meta.Put([]byte(metaDigest), digest{}.encode())
		}
		if _, err := tx.CreateBucket([]byte(bucketLog)); err != nil {
			return err
		}
		if err := meta.Put([]byte(metaFormat), []byte(formatMagicV2)); err != nil {
			return err
		}
		return meta.Put([]byte(metaLogRange), encodeLogRange(0, 0))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("boltstore: initialise %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("boltstore: rename %s into place: %w", tmp, err)
	}
	return syncDir(dir)
}

// mkdirDurable creates dir and its missing ancestors, durably (a new
// directory's entry is lost with the store inside if its parent is not
// synced).
func mkdirDurable(dir string) error {
	if err := durable.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("boltstore: %w", err)
	}
	return nil
}

// syncDir makes the entries of dir (a rename, a new file) durable.
func syncDir(dir string) error {
	if err := durable.SyncDir(dir); err != nil {
		return fmt.Errorf("boltstore: %w", err)
	}
	return nil
}

// openDB opens the bbolt file, turning bbolt's corruption errors and
// panics (and memory faults on a damaged mapping) into ErrCorrupt.
func openDB(path string, opts Options) (db *bbolt.DB, err error) {
	defer faultsPanic()()
	defer guard(&err, path, "open")
	// The freelist stays synced: with NoFreelistSync bbolt rebuilds it at
	// open by walking every page in a background goroutine that panics on
	// a damaged page, which the crash tests showed, and a panic there
	// cannot be turned into an error naming the file.
	db, err = bbolt.Open(path, fileMode, &bbolt.Options{Timeout: opts.LockTimeout})
	if err == nil {
		return db, nil
	}
	if errors.Is(err, bbolt.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s: %v", ErrLocked, path, err)
	}
	if errors.Is(err, bbolt.ErrInvalid) || errors.Is(err, bbolt.ErrVersionMismatch) || errors.Is(err, bbolt.ErrChecksum) {
		return nil, fmt.Errorf("%w: boltstore: %s: %v", caspaxos.ErrCorrupt, path, err)
	}
	return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
}

// guard converts a panic or memory fault during a read of the file into
// ErrCorrupt. bbolt trusts its pages: a damaged page can make it panic or
// read outside the mapping, and an acceptor must fail cleanly instead.
func guard(err *error, path, op string) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("%w: boltstore: %s: %s failed on damaged data: %v", caspaxos.ErrCorrupt, path, op, p)
	}
}

// faultsPanic makes memory faults in the calling goroutine recoverable
// panics and returns the function that restores the previous setting.
func faultsPanic() func() {
	old := debug.SetPanicOnFault(true)
	return func() { debug.SetPanicOnFault(old) }
}

// verify decodes every record and the age floor (checkFile has already
// vetted the page structure), settles the layout, builds the log layout's
// index and returns the number of records.
func (s *Store) verify() (int, error) {
	st, ls, err := s.loadAll(true)
	if err != nil {
		return 0, err
	}
	s.lg = ls
	if ls != nil {
		return len(ls.index), nil
	}
	return len(st.Records), nil
}

// Load returns every record sorted by key, and the age floor.
func (s *Store) Load() (caspaxos.State, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return caspaxos.State{}, fmt.Errorf("boltstore: %s: load: %w", s.path, caspaxos.ErrStoreClosed)
	}
	return s.load()
}

func (s *Store) load() (caspaxos.State, error) {
	st, _, err := s.loadAll(false)
	return st, err
}

// loadAll reads the whole file. At open (first) it also settles s.layout
// from the file and the requested layout.
func (s *Store) loadAll(first bool) (st caspaxos.State, ls *logState, err error) {
	defer faultsPanic()()
	defer guard(&err, s.path, "load")
	err = s.db.View(func(tx *bbolt.Tx) error {
		meta, err := s.readMeta(tx)
		if err != nil {
			return err
		}
		if first {
			if want := s.opts.Layout; want != LayoutAuto && want != meta.layout {
				return fmt.Errorf("%w: %s holds the %s layout (%q), %s was asked for; open it with its own layout",
					ErrWrongLayout, s.path, meta.layout, meta.format, want)
			}
			s.layout = meta.layout
		}
		if meta.layout == LayoutLog {
			st, ls, err = s.loadLog(tx, meta, !first)
			return err
		}
		st.AgeFloor = meta.ageFloor
		var sum digest
		c := tx.Bucket([]byte(bucketRecords)).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			r, err := decodeEntry(k, v)
			if err != nil {
				return fmt.Errorf("boltstore: %s: %w", s.path, err)
			}
			if n := len(st.Records); n > 0 && st.Records[n-1].Key >= r.Key {
				return fmt.Errorf("%w: boltstore: %s: key %q after %q: out of order", caspaxos.ErrCorrupt, s.path, r.Key, st.Records[n-1].Key)
			}
			sum.add(v)
			st.Records = append(st.Records, r)
		}
		if sum != meta.digest {
			return fmt.Errorf("%w: boltstore: %s: records do not match the digest: %d records (hash %016x), digest says %d (hash %016x)",
				caspaxos.ErrCorrupt, s.path, sum.count, sum.xor, meta.digest.count, meta.digest.xor)
		}
		return nil
	})
	return st, ls, err
}

// storedMeta is the decoded meta bucket.
type storedMeta struct {
	format   string
	layout   Layout
	ageFloor uint64
	digest   digest // LayoutInPlace
	lo, hi   uint64 // LayoutLog: the log range
}

// readMeta checks the file's top-level layout strictly: exactly the two
// buckets, exactly the known meta keys. A damaged key name must not read
// as "absent" (an absent age floor would read as zero and readmit fenced
// proposers).
func (s *Store) readMeta(tx *bbolt.Tx) (storedMeta, error) {
	var m storedMeta
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: boltstore: %s: %s", caspaxos.ErrCorrupt, s.path, fmt.Sprintf(format, args...))
	}
	err := tx.ForEach(func(name []byte, _ *bbolt.Bucket) error {
		if n := string(name); n != bucketMeta && n != bucketRecords && n != bucketLog {
			return corrupt("unexpected bucket %q: not a caspaxos store", name)
		}
		return nil
	})
	if err != nil {
		return m, err
	}
	meta := tx.Bucket([]byte(bucketMeta))
	if meta == nil {
		return m, corrupt("no %q bucket: not a caspaxos store", bucketMeta)
	}
	// The format decides which buckets and meta keys must exist.
	data, other, extra := bucketRecords, bucketLog, metaDigest
	switch f := string(meta.Get([]byte(metaFormat))); f {
	case formatMagic:
		m.layout = LayoutInPlace
	case formatMagicV2:
		m.layout = LayoutLog
		data, other, extra = bucketLog, bucketRecords, metaLogRange
	default:
		return m, corrupt("format %q, want %q or %q", f, formatMagicV2, formatMagic)
	}
	m.format = string(meta.Get([]byte(metaFormat)))
	if tx.Bucket([]byte(data)) == nil {
		return m, corrupt("no %q bucket", data)
	}
	if tx.Bucket([]byte(other)) != nil {
		return m, corrupt("a %q bucket in a %s-layout file", other, m.layout)
	}
	seen := 0
	err = meta.ForEach(func(k, v []byte) error {
		seen++
		switch string(k) {
		case metaFormat:
		case metaAgeFloor:
			floor, err := caspaxos.DecodeAgeFloor(v)
			if err != nil {
				return fmt.Errorf("boltstore: %s: age floor: %w", s.path, err)
			}
			m.ageFloor = floor
		case extra:
			if m.layout == LayoutLog {
				lo, hi, err := decodeLogRange(v)
				if err != nil {
					return fmt.Errorf("boltstore: %s: %w", s.path, err)
				}
				m.lo, m.hi = lo, hi
				return nil
			}
			d, err := decodeDigest(v)
			if err != nil {
				return fmt.Errorf("boltstore: %s: %w", s.path, err)
			}
			m.digest = d
		default:
			return corrupt("unexpected meta key %q", k)
		}
		return nil
	})
	if err != nil {
		return m, err
	}
	if seen != 3 {
		return m, corrupt("meta bucket holds %d of its 3 keys (%s, %s, %s)", seen, metaFormat, metaAgeFloor, extra)
	}
	return m, nil
}

// decodeEntry decodes one records-bucket entry and checks that the record
// sits under its own key (a misplaced record is corruption too).
func decodeEntry(k, v []byte) (caspaxos.Record, error) {
	if len(k) == 0 || k[0] != keyPrefix {
		return caspaxos.Record{}, fmt.Errorf("%w: bucket key %q lacks the record prefix", caspaxos.ErrCorrupt, k)
	}
	if v == nil {
		return caspaxos.Record{}, fmt.Errorf("%w: key %q: nested bucket where a record belongs", caspaxos.ErrCorrupt, k[1:])
	}
	r, err := caspaxos.DecodeRecord(v)
	if err != nil {
		return caspaxos.Record{}, fmt.Errorf("key %q: %w", k[1:], err)
	}
	if r.Key != string(k[1:]) {
		return caspaxos.Record{}, fmt.Errorf("%w: key %q holds the record of key %q", caspaxos.ErrCorrupt, k[1:], r.Key)
	}
	return r, nil
}

// Apply persists b atomically and durably. Concurrent calls are grouped
// into one bbolt transaction and one fsync by the committer. An empty batch
// returns at once. After a failed commit the store refuses every later
// Apply: whether the failed fsync left data on disk is unknowable, so the
// only safe continuation is a restart that reads what is really there.
func (s *Store) Apply(b caspaxos.Batch) error {
	if err := caspaxos.CheckBatch(b); err != nil {
		return fmt.Errorf("boltstore: %s: apply: %w", s.path, err)
	}
	req := &request{batch: b, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return fmt.Errorf("boltstore: %s: apply: %w", s.path, caspaxos.ErrStoreClosed)
	}
	if b.Empty() {
		s.mu.RUnlock()
		return nil
	}
	s.queue <- req
	s.mu.RUnlock()
	return <-req.done
}

// Close waits for queued Apply calls to commit, then closes the file.
// Closing twice is harmless.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.queue)
	s.mu.Unlock()
	<-s.done
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("boltstore: close %s: %w", s.path, err)
	}
	s.log.Info("store closed", "fsyncs", s.fsyncs.Load())
	return nil
}

// Fsyncs returns the number of commits made, each ending in an fsync. With
// concurrent Apply calls it is smaller than the number of calls: the ratio
// is the group-commit factor.
func (s *Store) Fsyncs() uint64 { return s.fsyncs.Load() }

// Path returns the file the store lives in.
func (s *Store) Path() string { return s.path }
