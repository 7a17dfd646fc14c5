package boltstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fmnode/fmnode/caspaxos"
)

// Sharded is a caspaxos.Store over several bbolt files in one directory,
// each a complete Store with its own group committer. One bbolt file
// serialises every commit behind two fdatasyncs; the disk completes far
// more fdatasyncs per second spread over several files than on one (the
// brief measured ~4.8k/s on one file, ~16k/s over 8), so splitting each
// batch over N files was meant to cut the acceptor's commit latency, which
// throughput with 64 closed-loop clients follows. Measured, it did not on
// the 2-core build machine (docs/BENCHMARKS.md, CAS section): each shard
// commit pays its own two fdatasyncs, which overlap only when the
// goroutines blocked in them hold Ps of their own, and three acceptors
// already keep the shared disk busy. So `fmnode acceptor` keeps the single
// file by default and offers this store behind --shards.
//
// Layout: dir/shards.manifest names the format, the shard count and the
// hash; dir/shard-000.db ... are Stores (see Open). A key lives in shard
// fnv1a64(key) mod N, except the reserved empty key (the acceptor's erase
// floor), which lives in shard 0; the age floor is kept in shard 0 only
// and must be zero in every other shard. Load checks that every record
// sits in the shard its key maps to, so swapped or renamed files fail as
// corruption instead of loading a wrong state.
//
// Atomicity, and why the acceptor is still safe. Apply splits a batch by
// shard and commits the parts in parallel, so a crash during Apply may keep
// some shards' parts and lose others: the batch is not atomic as the Store
// interface asks. For the acceptor that is harmless for ordinary records:
// records of different keys are independent (no acceptor decision reads
// one key's record to answer for another), and the acceptor driver sends a
// batch's replies only after Apply returns. A partly persisted batch is
// therefore indistinguishable from one in which only some of the requests
// were ever processed, and the requests whose writes were lost got no
// reply; their proposers retry or time out, as after any lost message.
// Within one key there is no tearing: all of a key's puts and deletes in a
// batch go to one shard and commit in one bbolt transaction.
//
// The exception is the global state that guards other keys: the erase
// floor (key "") and the age floor (Batch.AgeFloor). An erased key whose
// erase floor was lost would be absent with no floor under it, and a
// proposer still holding a promise from before the erase could then write
// a stale value back into it. So a batch carrying global records is
// applied in two steps: first the global records alone, to shard 0, then,
// once they are durable, everything else in parallel. Every crash point
// then leaves the floors at least as high as any persisted delete needs.
// Such batches are rare (GC erases and age raises); ordinary batches take
// one parallel step.
//
// Invalid batches (CheckBatch) fail before any shard writes anything. After
// a failed Apply the store refuses every later Apply until reopened: which
// shards kept their part is unknowable without reading the files again.
type Sharded struct {
	dir    string
	shards []*Store

	// applyShard applies one part of a batch to shard i; global marks the
	// first step of a batch with global records. Tests replace it to inject
	// failures (a simulated crash) between and within the steps.
	applyShard func(i int, global bool, b caspaxos.Batch) error

	// mu guards closed: Apply holds it shared for its whole run, so Close,
	// taking it exclusively, closes the shards only once no Apply is using
	// them.
	mu     sync.RWMutex
	closed bool
	failed atomic.Pointer[error]
}

var _ caspaxos.Store = (*Sharded)(nil)

// Sharded on-disk names and bounds.
const (
	manifestName = "shards.manifest"
	// manifestFormat is the whole manifest; %d is the shard count. The
	// hash line pins the key placement: changing the hash or the count
	// would misplace every key, so either refuses to open.
	manifestFormat = "fmnode/caspaxos/boltstore sharded v1\nshards %d\nhash fnv1a64\n"
	shardPattern   = "shard-%03d.db"
	// MaxShards bounds the shard count (file names have three digits, and
	// far fewer files already saturate the disk).
	MaxShards = 256
)

// ShardPath returns the file of shard i in dir.
func ShardPath(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf(shardPattern, i))
}

// ManifestPath returns the manifest file of the sharded store in dir.
func ManifestPath(dir string) string { return filepath.Join(dir, manifestName) }

// shardOf maps key to its shard. The empty key, the acceptor's erase floor,
// is pinned to shard 0 with the age floor, so both globals are written by
// one transaction in Apply's first step.
func shardOf(key string, n int) int {
	if key == "" || n == 1 {
		return 0
	}
	// FNV-1a 64, inlined: hash/fnv behind its interface allocates on
	// every call, and this runs once per record. TestShardOf pins it to
	// hash/fnv and to fixed placements, since changing it would misplace
	// every stored key.
	const offset64, prime64 = 14695981039346656037, 1099511628211
	h := uint64(offset64)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime64
	}
	return int(h % uint64(n))
}

// ReadManifest returns the shard count recorded in dir's manifest. A
// missing manifest fails with an error wrapping os.ErrNotExist; a damaged
// one with caspaxos.ErrCorrupt.
func ReadManifest(dir string) (int, error) {
	path := ManifestPath(dir)
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("boltstore: read manifest %s: %w", path, err)
	}
	var n int
	if _, err := fmt.Sscanf(string(data), manifestFormat, &n); err != nil || string(data) != fmt.Sprintf(manifestFormat, n) || n < 1 || n > MaxShards {
		return 0, fmt.Errorf("%w: boltstore: manifest %s is damaged or not a sharded store manifest: %q", caspaxos.ErrCorrupt, path, data)
	}
	return n, nil
}

// OpenSharded opens the sharded store in dir, creating it (and dir) when
// dir holds none. An existing store must have been created with the same
// shard count: keys are placed by hash mod count, so opening with another
// count would misplace them; the error names the manifest and wraps
// caspaxos.ErrInvalidConfig. A missing or damaged shard file, or shard
// files without a manifest that hold any record, fail with
// caspaxos.ErrCorrupt: OpenSharded never resets what it cannot read.
func OpenSharded(dir string, shards int, opts Options) (*Sharded, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: boltstore: empty directory", caspaxos.ErrInvalidConfig)
	}
	if shards < 1 || shards > MaxShards {
		return nil, fmt.Errorf("%w: boltstore: %d shards, want 1 to %d", caspaxos.ErrInvalidConfig, shards, MaxShards)
	}
	if _, err := opts.withDefaults(); err != nil {
		return nil, err
	}
	if err := mkdirDurable(dir); err != nil {
		return nil, err
	}
	existing, err := shardFiles(dir)
	if err != nil {
		return nil, err
	}
	have, err := ReadManifest(dir)
	fresh := errors.Is(err, os.ErrNotExist)
	switch {
	case err != nil && !fresh:
		return nil, err
	case !fresh && have != shards:
		return nil, fmt.Errorf("%w: boltstore: %s records %d shards, asked for %d: re-sharding would misplace keys; open with %d shards",
			caspaxos.ErrInvalidConfig, ManifestPath(dir), have, shards, have)
	}
	for _, i := range existing {
		if i >= shards {
			return nil, fmt.Errorf("%w: boltstore: %s is outside the %d shards of this store", caspaxos.ErrCorrupt, ShardPath(dir, i), shards)
		}
	}
	if !fresh {
		// Open would create a missing file: check first, so that a lost
		// shard is an error and not a silently empty shard.
		for i := range shards {
			if !slices.Contains(existing, i) {
				return nil, fmt.Errorf("%w: boltstore: shard file %s is missing (manifest %s records %d shards)",
					caspaxos.ErrCorrupt, ShardPath(dir, i), ManifestPath(dir), shards)
			}
		}
	}
	s := &Sharded{dir: dir, shards: make([]*Store, 0, shards)}
	s.applyShard = func(i int, _ bool, b caspaxos.Batch) error { return s.shards[i].Apply(b) }
	for i := range shards {
		st, err := Open(ShardPath(dir, i), opts)
		if err != nil {
			_ = s.closeShards()
			return nil, fmt.Errorf("boltstore: open shard %d of %s: %w", i, dir, err)
		}
		s.shards = append(s.shards, st)
	}
	st, err := s.load()
	if err != nil {
		_ = s.closeShards()
		return nil, err
	}
	if fresh {
		// Shard files but no manifest: a creation that crashed before its
		// last step (the manifest is written last, as the commit point).
		// Empty shards hold nothing to lose, so finishing the creation is
		// safe; a shard with records is a store that lost its manifest,
		// and guessing its count could misplace keys.
		if len(st.Records) > 0 || st.AgeFloor != 0 {
			_ = s.closeShards()
			return nil, fmt.Errorf("%w: boltstore: %s is missing but the shard files in %s hold %d records: refusing to guess the shard count",
				caspaxos.ErrCorrupt, ManifestPath(dir), dir, len(st.Records))
		}
		if err := writeManifest(dir, shards); err != nil {
			_ = s.closeShards()
			return nil, err
		}
	}
	return s, nil
}

// shardFiles lists the shard indexes whose files exist in dir.
func shardFiles(dir string) ([]int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("boltstore: list %s: %w", dir, err)
	}
	var out []int
	for _, e := range entries {
		var i int
		name := e.Name()
		if !strings.HasPrefix(name, "shard-") || !strings.HasSuffix(name, ".db") {
			continue
		}
		if _, err := fmt.Sscanf(name, shardPattern, &i); err != nil || fmt.Sprintf(shardPattern, i) != name {
			return nil, fmt.Errorf("%w: boltstore: unexpected file %s in a sharded store", caspaxos.ErrCorrupt, filepath.Join(dir, name))
		}
		out = append(out, i)
	}
	return out, nil
}

// writeManifest writes the manifest under a temporary name, syncs it and
// renames it into place, so a manifest that exists is always complete.
func writeManifest(dir string, shards int) error {
	path := ManifestPath(dir)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fileMode)
	if err != nil {
		return fmt.Errorf("boltstore: create %s: %w", tmp, err)
	}
	_, err = fmt.Fprintf(f, manifestFormat, shards)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("boltstore: write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("boltstore: rename %s into place: %w", tmp, err)
	}
	return syncDir(dir)
}

// Load returns every record of every shard sorted by key, and the age
// floor (kept in shard 0).
func (s *Sharded) Load() (caspaxos.State, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return caspaxos.State{}, fmt.Errorf("boltstore: %s: load: %w", s.dir, caspaxos.ErrStoreClosed)
	}
	return s.load()
}

func (s *Sharded) load() (caspaxos.State, error) {
	var out caspaxos.State
	for i, sh := range s.shards {
		st, err := sh.load()
		if err != nil {
			return caspaxos.State{}, err
		}
		if i == 0 {
			out.AgeFloor = st.AgeFloor
		} else if st.AgeFloor != 0 {
			return caspaxos.State{}, fmt.Errorf("%w: boltstore: %s holds age floor %d; only shard 0 keeps it (files swapped?)",
				caspaxos.ErrCorrupt, sh.path, st.AgeFloor)
		}
		for _, r := range st.Records {
			if want := shardOf(r.Key, len(s.shards)); want != i {
				return caspaxos.State{}, fmt.Errorf("%w: boltstore: %s holds key %q, which belongs in shard %d (files swapped or shard count changed?)",
					caspaxos.ErrCorrupt, sh.path, r.Key, want)
			}
		}
		out.Records = append(out.Records, st.Records...)
	}
	// Each shard is sorted and keys are disjoint; one sort merges them.
	slices.SortFunc(out.Records, func(a, b caspaxos.Record) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// split divides b into the global part (erase floor and age floor, bound
// for shard 0 and applied first) and one part per shard. Puts keep their
// order and deletes follow puts within each part, so each shard applies
// its keys exactly as the whole batch would.
func (s *Sharded) split(b caspaxos.Batch) (global caspaxos.Batch, parts []caspaxos.Batch) {
	parts = make([]caspaxos.Batch, len(s.shards))
	global.AgeFloor = b.AgeFloor
	for _, r := range b.Put {
		if r.Key == "" {
			global.Put = append(global.Put, r)
			continue
		}
		i := shardOf(r.Key, len(s.shards))
		parts[i].Put = append(parts[i].Put, r)
	}
	for _, k := range b.Delete {
		if k == "" {
			global.Delete = append(global.Delete, k)
			continue
		}
		i := shardOf(k, len(s.shards))
		parts[i].Delete = append(parts[i].Delete, k)
	}
	return global, parts
}

// Apply persists b durably: the global records first (see Sharded), then
// every shard's part in parallel, returning once all are durable. It is
// not atomic across shards; the type's comment argues why the acceptor is
// safe regardless.
func (s *Sharded) Apply(b caspaxos.Batch) error {
	// Validate the whole batch before any shard writes, so an invalid
	// batch fails whole (the shards would each check only their part).
	if err := caspaxos.CheckBatch(b); err != nil {
		return fmt.Errorf("boltstore: %s: apply: %w", s.dir, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return fmt.Errorf("boltstore: %s: apply: %w", s.dir, caspaxos.ErrStoreClosed)
	}
	if b.Empty() {
		return nil
	}
	if p := s.failed.Load(); p != nil {
		return *p
	}
	global, parts := s.split(b)
	if !global.Empty() {
		if err := s.applyShard(0, true, global); err != nil {
			return s.fail(err)
		}
	}
	var (
		wg   sync.WaitGroup
		errs = make([]error, len(parts))
		last = -1
	)
	for i := range parts {
		if parts[i].Empty() {
			continue
		}
		if last >= 0 {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				errs[i] = s.applyShard(i, false, parts[i])
			}(last)
		}
		last = i
	}
	if last >= 0 {
		// The last part runs on this goroutine: a batch touching one shard
		// (the common case for small batches) starts no goroutine.
		errs[last] = s.applyShard(last, false, parts[last])
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return s.fail(err)
	}
	return nil
}

// fail records the first failed Apply; later ones return it.
func (s *Sharded) fail(err error) error {
	err = fmt.Errorf("boltstore: %s: apply failed; store refuses writes until reopened: %w", s.dir, err)
	s.failed.CompareAndSwap(nil, &err)
	return err
}

// Close waits for Apply calls in progress, then closes every shard.
// Closing twice is harmless.
func (s *Sharded) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.closeShards()
}

func (s *Sharded) closeShards() error {
	errs := make([]error, 0, len(s.shards))
	for _, sh := range s.shards {
		errs = append(errs, sh.Close())
	}
	return errors.Join(errs...)
}

// Fsyncs returns the commits made over all shards. A batch spread over k
// shards costs k commits (in parallel), so against a single file this
// counts more fsyncs for the same work.
func (s *Sharded) Fsyncs() uint64 {
	var n uint64
	for _, sh := range s.shards {
		n += sh.Fsyncs()
	}
	return n
}

// Dir returns the directory the store lives in.
func (s *Sharded) Dir() string { return s.dir }

// Shards returns the number of shard files.
func (s *Sharded) Shards() int { return len(s.shards) }
