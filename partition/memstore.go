package partition

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"sync"
)

// MemStore is the in-memory twin of the pebble store: the same Store
// contract and the same write logic (ApplyWrites), no disk. The
// deterministic harness (partitiontest.Cluster) and unit tests use it.
//
// Durability model: a Commit that returned is durable; a crash is modelled
// by the driver dropping the writes it had not committed yet and reloading
// from the store. It is safe for concurrent use; data is copied in and out.
type MemStore struct {
	mu      sync.Mutex
	kv      memKV
	closed  bool
	commits uint64
	undo    []memUndo // scratch undo log of Commit
	// failNext, if set, makes the next Commit fail (fault injection).
	failNext error
}

var _ AsyncStore = (*MemStore)(nil)

// NewMemStore returns an empty store.
func NewMemStore() *MemStore { return &MemStore{kv: memKV{buckets: map[uint64]*memBucket{}}} }

func (s *MemStore) check(op string) error {
	if s.closed {
		return fmt.Errorf("memstore: %s: %w", op, ErrStoreClosed)
	}
	return nil
}

// Partitions implements Store.
func (s *MemStore) Partitions() ([]ID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("partitions"); err != nil {
		return nil, err
	}
	return ListPartitions(&s.kv)
}

// Load implements Store.
func (s *MemStore) Load(p ID) (Recovered, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("load"); err != nil {
		return Recovered{}, err
	}
	return LoadPartition(&s.kv, p)
}

// Commit implements Store: all of ws or nothing.
func (s *MemStore) Commit(ws []Write) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("commit"); err != nil {
		return err
	}
	if len(ws) == 0 {
		return nil
	}
	if err := s.failNext; err != nil {
		s.failNext = nil
		return fmt.Errorf("memstore: commit: %w", err)
	}
	// The undo log's array is reused from commit to commit.
	b := &memBatch{kv: &s.kv, undo: s.undo[:0]}
	err := ApplyWrites(b, ws)
	if err != nil {
		b.rollback()
	}
	clear(b.undo)
	s.undo = b.undo[:0]
	if cap(s.undo) > maxMemUndo {
		s.undo = nil
	}
	if err != nil {
		return fmt.Errorf("memstore: commit: %w", err)
	}
	s.commits++
	return nil
}

// CommitAsync implements AsyncStore (a MemStore commit is durable at once).
func (s *MemStore) CommitAsync(ws []Write) (func() error, error) {
	if err := s.Commit(ws); err != nil {
		return nil, err
	}
	return func() error { return nil }, nil
}

// FailNextCommit makes the next Commit fail with err (fault injection).
func (s *MemStore) FailNextCommit(err error) {
	s.mu.Lock()
	s.failNext = err
	s.mu.Unlock()
}

// Commits returns the number of successful commits (the fsyncs a disk store would do).
func (s *MemStore) Commits() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits
}

// ReadLog implements Store.
func (s *MemStore) ReadLog(p ID, from LSN, maxOps, maxBytes int) ([]Op, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("read log"); err != nil {
		return nil, err
	}
	return ReadLogOps(&s.kv, p, from, maxOps, maxBytes)
}

// Get implements Store.
func (s *MemStore) Get(p ID, key []byte) (KV, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("get"); err != nil {
		return KV{}, false, err
	}
	return GetKV(&s.kv, p, key)
}

// ReadKV implements Store.
func (s *MemStore) ReadKV(p ID, after []byte, maxBytes int) ([]KV, bool, LSN, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("read state"); err != nil {
		return nil, false, 0, err
	}
	return ReadKVChunk(&s.kv, p, after, maxBytes)
}

// Conflicts implements Store.
func (s *MemStore) Conflicts(p ID, after Token, limit int) ([]ConflictRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("conflicts"); err != nil {
		return nil, err
	}
	return ListConflicts(&s.kv, p, after, limit)
}

// Close implements Store.
func (s *MemStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// Reopen returns a store holding exactly what was committed (a restart).
func (s *MemStore) Reopen() *MemStore {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := NewMemStore()
	for id, b := range s.kv.buckets {
		// Values are never mutated in place: the copy may share them.
		n.kv.buckets[id] = &memBucket{ents: slices.Clone(b.ents)}
	}
	n.kv.prefixes = s.kv.prefixes.clone()
	return n
}

// RawGet and RawSet expose the raw key space for corruption tests.
func (s *MemStore) RawGet(k []byte) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok, _ := s.kv.Get(k)
	return bytes.Clone(v), ok
}

// RawSet overwrites one raw key (for corruption tests).
func (s *MemStore) RawSet(k, v []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.kv.Set(k, v)
}

// RawKeys returns every raw key with the given prefix, ascending.
func (s *MemStore) RawKeys(prefix []byte) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]byte
	hi := append(bytes.Clone(prefix), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	_ = s.kv.Scan(prefix, hi, func(k, _ []byte) (bool, error) {
		out = append(out, bytes.Clone(k))
		return true, nil
	})
	return out
}

// memKV is an ordered map bucketed by the 6-byte partition-section prefix:
// each bucket is one slice of entries sorted by key, so log appends (at a
// bucket's end) are cheap, ranges never cross many buckets, and an idle
// partition's few records cost a few words each (a map per bucket cost
// several hundred bytes even for one record).
type memKV struct {
	buckets  map[uint64]*memBucket // by bucketID of the prefix
	prefixes prefixList            // sorted bucket prefixes
	// recent are the buckets used last, with their ids: a commit writes a
	// partition's log, apply-state, meta and data records in a row, and
	// the map lookup (tens of thousands of buckets) missed the CPU cache
	// each time.
	recent   [memRecent]*memBucket
	recentID [memRecent]uint64
	nextSlot int
	// dense indexes the buckets of partition section prefixes by partition
	// ID and section (denseSlot), filled from buckets as they are looked
	// up: with thousands of partitions a map lookup per commit record was
	// a cache miss in the map's groups, an index into this slice is one
	// load. Buckets are never removed, so an entry never goes stale.
	dense []*memBucket
}

// memDenseIDs bounds the partition IDs dense indexes (IDs above it, and
// keys outside the partition layout, use the map alone).
const memDenseIDs = 1 << 20

// memDenseSecs is the number of section slots per partition in dense.
const memDenseSecs = 8

// denseSlot returns p's index in dense, if p is a partition section prefix
// with a dense slot.
func denseSlot(p string) (int, bool) {
	if len(p) != prefixLen || p[0] != keyPrefix {
		return 0, false
	}
	id := uint32(p[1])<<24 | uint32(p[2])<<16 | uint32(p[3])<<8 | uint32(p[4])
	if id >= memDenseIDs {
		return 0, false
	}
	var sec int
	switch p[5] {
	case secApply:
		sec = 0
	case secConflict:
		sec = 1
	case secKV:
		sec = 2
	case secLog:
		sec = 3
	case secMeta:
		sec = 4
	case secUndo:
		sec = 5
	default:
		return 0, false
	}
	return int(id)*memDenseSecs + sec, true
}

// memRecent is how many recently used buckets a memKV remembers.
const memRecent = 4

// bucketID packs a bucket prefix (at most prefixLen bytes) and its length
// into a map key: hashing and comparing a word instead of a string.
func bucketID(p string) uint64 {
	var id uint64
	for i := 0; i < len(p); i++ {
		id |= uint64(p[i]) << (56 - 8*i)
	}
	return id | uint64(len(p))
}

// bucket returns the bucket of prefix p (nil if none).
func (m *memKV) bucket(p string) *memBucket {
	ds, dense := denseSlot(p)
	if dense && ds < len(m.dense) && m.dense[ds] != nil {
		return m.dense[ds]
	}
	id := bucketID(p)
	for i := range m.recent {
		if m.recentID[i] == id && m.recent[i] != nil {
			return m.recent[i]
		}
	}
	b := m.buckets[id]
	if b != nil {
		if dense {
			m.setDense(ds, b)
			return b
		}
		m.recent[m.nextSlot], m.recentID[m.nextSlot] = b, id
		m.nextSlot = (m.nextSlot + 1) % memRecent
	}
	return b
}

// setDense records bucket b at dense slot ds.
func (m *memKV) setDense(ds int, b *memBucket) {
	if ds >= len(m.dense) {
		m.dense = slices.Grow(m.dense, ds+1-len(m.dense))[:ds+1]
	}
	m.dense[ds] = b
}

type memBucket struct {
	ents []memEnt // sorted by key
}

type memEnt struct {
	k string
	v []byte // never mutated in place: Set stores a copy
	// w is keyWord(k): comparing it decides most comparisons between the
	// keys of one bucket without reading the key's bytes, a cache miss per
	// entry probed once a store holds thousands of partitions.
	w uint64
}

// keyWord packs the 8 key bytes after the bucket prefix (zero-padded)
// into a word, big-endian. All the keys of one bucket share its prefix,
// so between two of them a smaller word means a smaller key; equal words
// decide by length when neither key is longer than prefixLen+8 (the
// shorter is a prefix of the other), else by the whole keys.
func keyWord(k string) uint64 {
	var w uint64
	for i := prefixLen; i < prefixLen+8; i++ {
		w <<= 8
		if i < len(k) {
			w |= uint64(k[i])
		}
	}
	return w
}

// keyWordSpan is the key length keyWord covers entirely.
const keyWordSpan = prefixLen + 8

// less reports whether e's key sorts before k (w = keyWord(k)), both keys
// of e's bucket.
func (e *memEnt) less(k string, w uint64) bool {
	if e.w != w {
		return e.w < w
	}
	if len(e.k) <= keyWordSpan && len(k) <= keyWordSpan {
		return len(e.k) < len(k)
	}
	return e.k < k
}

// is reports whether e's key is k (w = keyWord(k)).
func (e *memEnt) is(k string, w uint64) bool {
	return e.w == w && len(e.k) == len(k) && (len(k) <= keyWordSpan || e.k == k)
}

func bucketOf(k []byte) string {
	if len(k) > prefixLen {
		return string(k[:prefixLen])
	}
	return string(k)
}

// search returns the index of the first entry with key >= k, for any key
// k (range bounds need not share the bucket's prefix).
func (b *memBucket) search(k string) int {
	n := len(b.ents)
	if n > 0 && b.ents[n-1].k < k {
		return n // appends land here without a search
	}
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if b.ents[m].k < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// bound is search(k) for the bucket of prefix p: by words when k has the
// bucket's prefix (a partition's log or state range), else by strings.
func (b *memBucket) bound(p string, k []byte) int {
	if len(p) == prefixLen && len(k) >= prefixLen && string(k[:prefixLen]) == p {
		ks := string(k)
		return b.find(ks, keyWord(ks))
	}
	return b.search(string(k))
}

// find is search for a key k of this bucket, with w = keyWord(k): it
// compares words, reading key bytes only on a tie.
func (b *memBucket) find(k string, w uint64) int {
	n := len(b.ents)
	if n > 0 && b.ents[n-1].less(k, w) {
		return n // appends land here without a search
	}
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if b.ents[m].less(k, w) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func (m *memKV) Get(k []byte) ([]byte, bool, error) {
	v, ok := m.get(string(k))
	return v, ok, nil
}

func (m *memKV) get(k string) ([]byte, bool) {
	b := m.bucket(bucketOfStr(k))
	if b == nil {
		return nil, false
	}
	w := keyWord(k)
	i := b.find(k, w)
	if i < len(b.ents) && b.ents[i].is(k, w) {
		return b.ents[i].v, true
	}
	return nil, false
}

func bucketOfStr(k string) string {
	if len(k) > prefixLen {
		return k[:prefixLen]
	}
	return k
}

func (m *memKV) Set(k, v []byte) error {
	m.set(string(k), bytes.Clone(v))
	return nil
}

// set stores v (owned by the store from now on) under k.
func (m *memKV) set(k string, v []byte) { m.swap(k, v) }

// swap stores v (owned by the store from now on) under k and returns what
// k held before, with one lookup for both (a batch saves the old value).
func (m *memKV) swap(k string, v []byte) (old []byte, existed bool) {
	bp := bucketOfStr(k)
	b := m.bucket(bp)
	if b == nil {
		b = &memBucket{}
		m.buckets[bucketID(bp)] = b
		m.prefixes.insert(bp)
	}
	w := keyWord(k)
	i := b.find(k, w)
	if i < len(b.ents) && b.ents[i].is(k, w) {
		old = b.ents[i].v
		b.ents[i].v = v
		return old, true
	}
	b.ents = slices.Insert(b.ents, i, memEnt{k: k, v: v, w: w})
	return nil, false
}

func (m *memKV) Delete(k []byte) error {
	m.del(string(k))
	return nil
}

func (m *memKV) del(k string) {
	b := m.bucket(bucketOfStr(k))
	if b == nil {
		return
	}
	w := keyWord(k)
	i := b.find(k, w)
	if i < len(b.ents) && b.ents[i].is(k, w) {
		b.ents = slices.Delete(b.ents, i, i+1)
	}
}

// span returns the prefixes of the buckets that may hold keys in [lo, hi).
func (m *memKV) span(lo, hi []byte) []string {
	return m.prefixes.between(bucketOf(lo), string(hi), nil)
}

// each calls fn for keys in [lo, hi), ascending (reverse if rev).
func (m *memKV) each(lo, hi []byte, rev bool, fn func(k string, v []byte) bool) {
	ps := m.span(lo, hi)
	start, end := 0, len(ps)
	visit := func(bi int) bool {
		b := m.bucket(ps[bi])
		i, j := b.bound(ps[bi], lo), b.bound(ps[bi], hi)
		if rev {
			for x := j - 1; x >= i; x-- {
				if !fn(b.ents[x].k, b.ents[x].v) {
					return false
				}
			}
			return true
		}
		for x := i; x < j; x++ {
			if !fn(b.ents[x].k, b.ents[x].v) {
				return false
			}
		}
		return true
	}
	if rev {
		for bi := end - 1; bi >= start; bi-- {
			if !visit(bi) {
				return
			}
		}
		return
	}
	for bi := start; bi < end; bi++ {
		if !visit(bi) {
			return
		}
	}
}

func (m *memKV) First(lo, hi []byte) ([]byte, []byte, bool, error) {
	var rk, rv []byte
	m.each(lo, hi, false, func(k string, v []byte) bool { rk, rv = []byte(k), v; return false })
	return rk, rv, rk != nil, nil
}

func (m *memKV) Last(lo, hi []byte) ([]byte, []byte, bool, error) {
	var rk, rv []byte
	m.each(lo, hi, true, func(k string, v []byte) bool { rk, rv = []byte(k), v; return false })
	return rk, rv, rk != nil, nil
}

func (m *memKV) Scan(lo, hi []byte, fn func(k, v []byte) (bool, error)) error {
	// Collect first so fn may write to m.
	type kv struct {
		k string
		v []byte
	}
	var all []kv
	m.each(lo, hi, false, func(k string, v []byte) bool { all = append(all, kv{k, v}); return true })
	for _, e := range all {
		ok, err := fn([]byte(e.k), e.v)
		if err != nil || !ok {
			return err
		}
	}
	return nil
}

// DeleteRange removes [lo, hi) with one splice per bucket (log
// compaction drops hundreds of keys at a bucket's front at once).
func (m *memKV) DeleteRange(lo, hi []byte) error {
	for _, p := range m.span(lo, hi) {
		b := m.bucket(p)
		i, j := b.bound(p, lo), b.bound(p, hi)
		if i < j {
			b.ents = slices.Delete(b.ents, i, j)
		}
	}
	return nil
}

// prefixList is a sorted set of strings (the bucket prefixes) kept in
// chunks of up to 2*prefixChunk: a bucket created in the middle of
// hundreds of thousands (a partition's first data write, in random
// partition order) costs a chunk's copy instead of the whole set's, which
// made a 100k-partition run quadratic.
type prefixList struct {
	chunks [][]string // each sorted and non-empty; chunk i ends below chunk i+1
}

const prefixChunk = 256

// seek returns the position of the first string >= s.
func (l *prefixList) seek(s string) (ci, i int) {
	ci = sort.Search(len(l.chunks), func(c int) bool {
		ch := l.chunks[c]
		return ch[len(ch)-1] >= s
	})
	if ci == len(l.chunks) {
		return ci, 0
	}
	return ci, sort.SearchStrings(l.chunks[ci], s)
}

// insert adds s, which must not be present.
func (l *prefixList) insert(s string) {
	ci, i := l.seek(s)
	if ci == len(l.chunks) {
		if ci == 0 {
			l.chunks = append(l.chunks, []string{s})
			return
		}
		ci--
		i = len(l.chunks[ci])
	}
	ch := slices.Insert(l.chunks[ci], i, s)
	if len(ch) > 2*prefixChunk {
		right := slices.Clone(ch[prefixChunk:])
		clear(ch[prefixChunk:])
		ch = ch[:prefixChunk]
		l.chunks = slices.Insert(l.chunks, ci+1, right)
	}
	l.chunks[ci] = ch
}

// between appends to buf the strings in [lo, hi), ascending.
func (l *prefixList) between(lo, hi string, buf []string) []string {
	ci, i := l.seek(lo)
	for ; ci < len(l.chunks); ci, i = ci+1, 0 {
		ch := l.chunks[ci]
		for ; i < len(ch); i++ {
			if ch[i] >= hi {
				return buf
			}
			buf = append(buf, ch[i])
		}
	}
	return buf
}

func (l *prefixList) clone() prefixList {
	c := prefixList{chunks: make([][]string, len(l.chunks))}
	for i, ch := range l.chunks {
		c.chunks[i] = slices.Clone(ch)
	}
	return c
}

// memBatch writes straight into a memKV, keeping what it overwrote so that
// a failed commit can be rolled back: atomicity without copying the store.
type memBatch struct {
	kv   *memKV
	undo []memUndo
}

type memUndo struct {
	k       string
	v       []byte
	existed bool
}

// maxMemUndo bounds the undo log array a MemStore keeps between commits.
const maxMemUndo = 4096

func (b *memBatch) save(k string) {
	v, ok := b.kv.get(k)
	b.undo = append(b.undo, memUndo{k: k, v: v, existed: ok})
}

func (b *memBatch) Get(k []byte) ([]byte, bool, error) { return b.kv.Get(k) }
func (b *memBatch) First(lo, hi []byte) ([]byte, []byte, bool, error) {
	return b.kv.First(lo, hi)
}
func (b *memBatch) Last(lo, hi []byte) ([]byte, []byte, bool, error) { return b.kv.Last(lo, hi) }
func (b *memBatch) Scan(lo, hi []byte, fn func(k, v []byte) (bool, error)) error {
	return b.kv.Scan(lo, hi, fn)
}

// Set and Delete convert the key to a string once, for both the undo log
// and the store.
func (b *memBatch) Set(k, v []byte) error {
	ks := string(k)
	old, ok := b.kv.swap(ks, bytes.Clone(v))
	b.undo = append(b.undo, memUndo{k: ks, v: old, existed: ok})
	return nil
}

func (b *memBatch) Delete(k []byte) error {
	ks := string(k)
	b.save(ks)
	b.kv.del(ks)
	return nil
}

func (b *memBatch) DeleteRange(lo, hi []byte) error {
	b.kv.each(lo, hi, false, func(k string, v []byte) bool {
		b.undo = append(b.undo, memUndo{k: k, v: v, existed: true})
		return true
	})
	return b.kv.DeleteRange(lo, hi)
}

func (b *memBatch) rollback() {
	for i := len(b.undo) - 1; i >= 0; i-- {
		u := b.undo[i]
		if u.existed {
			b.kv.set(u.k, u.v) // the value saved is never mutated: no copy
		} else {
			b.kv.del(u.k)
		}
	}
	b.undo = nil
}
