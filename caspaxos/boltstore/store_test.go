package boltstore

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/storetest"
)

// testLayouts are the layouts every layout-independent test runs on. The
// log layout compacts as soon as it can (slack 1, smallest chunk), so the
// conformance cases run through compaction too.
func testLayouts() []struct {
	name string
	opts Options
} {
	return []struct {
		name string
		opts Options
	}{
		{name: "log", opts: Options{Layout: LayoutLog, CompactSlack: 1, CompactChunk: minCompactChunk}},
		{name: "log-defaults", opts: Options{}},
		{name: "in-place", opts: Options{Layout: LayoutInPlace}},
	}
}

func TestConformance(t *testing.T) {
	for _, l := range testLayouts() {
		t.Run(l.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T, dir string) caspaxos.Store {
				t.Helper()
				s, err := Open(filepath.Join(dir, "acceptor.db"), l.opts)
				require.NoError(t, err)
				return s
			})
		})
	}
}

// TestGroupBounds: the committer's bounds cap how many Apply calls share a
// commit, and every call still lands.
func TestGroupBounds(t *testing.T) {
	const writers, perWriter = 16, 4
	tests := []struct {
		name       string
		opts       Options
		minCommits uint64
	}{
		{name: "batches", opts: Options{MaxGroupBatches: 4}, minCommits: writers * perWriter / 4},
		{name: "bytes", opts: Options{MaxGroupBytes: 1}, minCommits: writers * perWriter},
		{name: "queue of one", opts: Options{QueueLen: 1}, minCommits: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(filepath.Join(t.TempDir(), "acceptor.db"), tt.opts)
			require.NoError(t, err)
			defer s.Close()
			var wg sync.WaitGroup
			errs := make(chan error, writers*perWriter)
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range perWriter {
						r := caspaxos.Record{Key: fmt.Sprintf("w%d/%d", w, i), Value: caspaxos.Value{Version: 1, Data: []byte("x")}}
						errs <- s.Apply(caspaxos.Batch{Put: []caspaxos.Record{r}})
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			assert.GreaterOrEqual(t, s.Fsyncs(), tt.minCommits)
			st, err := s.Load()
			require.NoError(t, err)
			assert.Len(t, st.Records, writers*perWriter)
		})
	}
}

func TestOpenCreatesParents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "acceptor.db")
	s, err := Open(path, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Apply(caspaxos.Batch{AgeFloor: 1}))
	require.NoError(t, s.Close())
	_, err = os.Stat(path + ".init")
	assert.ErrorIs(t, err, os.ErrNotExist, "the temporary init file is renamed away")
	assert.Equal(t, path, s.Path())
}

func TestOpenRejectsConfig(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		path string
		opts Options
	}{
		{name: "empty path", path: ""},
		{name: "directory", path: dir},
		{name: "negative group", path: filepath.Join(dir, "x.db"), opts: Options{MaxGroupBatches: -1}},
		{name: "negative bytes", path: filepath.Join(dir, "x.db"), opts: Options{MaxGroupBytes: -1}},
		{name: "negative queue", path: filepath.Join(dir, "x.db"), opts: Options{QueueLen: -1}},
		{name: "negative timeout", path: filepath.Join(dir, "x.db"), opts: Options{LockTimeout: -time.Second}},
		{name: "unknown layout", path: filepath.Join(dir, "x.db"), opts: Options{Layout: LayoutInPlace + 1}},
		{name: "negative slack", path: filepath.Join(dir, "x.db"), opts: Options{CompactSlack: -1}},
		{name: "tiny chunk", path: filepath.Join(dir, "x.db"), opts: Options{CompactChunk: minCompactChunk - 1}},
		{name: "huge chunk", path: filepath.Join(dir, "x.db"), opts: Options{CompactChunk: maxCompactChunk + 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(tt.path, tt.opts)
			require.ErrorIs(t, err, caspaxos.ErrInvalidConfig)
		})
	}
}

// rawBolt writes a bbolt file directly, for files the store must refuse.
func rawBolt(t *testing.T, path string, fn func(tx *bbolt.Tx) error) {
	t.Helper()
	db, err := bbolt.Open(path, fileMode, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(fn))
	require.NoError(t, db.Close())
}

// validStore creates a store file of layout l with one record (for the
// log layout: entries 0 put k, 1 put j, 2 delete j), then lets edit damage it.
func validStore(t *testing.T, path string, l Layout, edit func(tx *bbolt.Tx) error) {
	t.Helper()
	s, err := Open(path, Options{Layout: l})
	require.NoError(t, err)
	require.NoError(t, s.Apply(caspaxos.Batch{Put: []caspaxos.Record{{Key: "k", Value: caspaxos.Value{Version: 1, Data: []byte("v")}}}, AgeFloor: 3}))
	if l == LayoutLog {
		require.NoError(t, s.Apply(caspaxos.Batch{Put: []caspaxos.Record{{Key: "j"}}}))
		require.NoError(t, s.Apply(caspaxos.Batch{Delete: []string{"j"}}))
	}
	require.NoError(t, s.Close())
	rawBolt(t, path, edit)
}

// logPut puts raw bytes under a log sequence number.
func logPut(seq uint64, v []byte) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error { return tx.Bucket([]byte(bucketLog)).Put(seqKey(nil, seq), v) }
}

func TestOpenRejectsDamage(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T, path string)
		want string
	}{
		{
			name: "empty file",
			make: func(t *testing.T, path string) { require.NoError(t, os.WriteFile(path, nil, 0o600)) },
			want: "empty file",
		},
		{
			name: "text file",
			make: func(t *testing.T, path string) {
				require.NoError(t, os.WriteFile(path, []byte("partition,region\n1,eu\n"), 0o600))
			},
			want: "not a bbolt file",
		},
		{
			name: "foreign bbolt file",
			make: func(t *testing.T, path string) {
				rawBolt(t, path, func(tx *bbolt.Tx) error {
					b, err := tx.CreateBucket([]byte("logs"))
					if err != nil {
						return err
					}
					return b.Put([]byte("1"), []byte("entry"))
				})
			},
			want: `unexpected bucket "logs": not a caspaxos store`,
		},
		{
			name: "wrong magic",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutInPlace, func(tx *bbolt.Tx) error {
					return tx.Bucket([]byte(bucketMeta)).Put([]byte(metaFormat), []byte("fmnode/caspaxos/boltstore v9"))
				})
			},
			want: "format",
		},
		{
			name: "records bucket missing",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutInPlace, func(tx *bbolt.Tx) error { return tx.DeleteBucket([]byte(bucketRecords)) })
			},
			want: `no "records" bucket`,
		},
		{
			name: "undecodable record",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutInPlace, func(tx *bbolt.Tx) error {
					return tx.Bucket([]byte(bucketRecords)).Put([]byte("rbad"), []byte("garbage"))
				})
			},
			want: `key "bad"`,
		},
		{
			name: "misplaced record",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutInPlace, func(tx *bbolt.Tx) error {
					enc := caspaxos.EncodeRecord(nil, caspaxos.Record{Key: "other"})
					return tx.Bucket([]byte(bucketRecords)).Put([]byte("rk"), enc)
				})
			},
			want: `key "k" holds the record of key "other"`,
		},
		{
			name: "unprefixed key",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutInPlace, func(tx *bbolt.Tx) error {
					return tx.Bucket([]byte(bucketRecords)).Put([]byte("xk"), caspaxos.EncodeRecord(nil, caspaxos.Record{Key: "k"}))
				})
			},
			want: "lacks the record prefix",
		},
		{
			name: "lost age floor",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutInPlace, func(tx *bbolt.Tx) error { return tx.Bucket([]byte(bucketMeta)).Delete([]byte(metaAgeFloor)) })
			},
			want: "meta bucket holds 2 of its 3 keys",
		},
		{
			name: "unknown meta key",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutInPlace, func(tx *bbolt.Tx) error { return tx.Bucket([]byte(bucketMeta)).Put([]byte("agefloot"), []byte{1}) })
			},
			want: `unexpected meta key "agefloot"`,
		},
		{
			name: "vanished record",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutInPlace, func(tx *bbolt.Tx) error { return tx.Bucket([]byte(bucketRecords)).Delete([]byte("rk")) })
			},
			want: "0 records (hash 0000000000000000), digest says 1",
		},
		{
			name: "rolled-back record",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutInPlace, func(tx *bbolt.Tx) error {
					old := caspaxos.EncodeRecord(nil, caspaxos.Record{Key: "k"})
					return tx.Bucket([]byte(bucketRecords)).Put([]byte("rk"), old)
				})
			},
			want: "do not match the digest",
		},
		{
			name: "log: records bucket in a log file",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutLog, func(tx *bbolt.Tx) error { _, err := tx.CreateBucket([]byte(bucketRecords)); return err })
			},
			want: `a "records" bucket in a log-layout file`,
		},
		{
			name: "log: log bucket missing",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutLog, func(tx *bbolt.Tx) error { return tx.DeleteBucket([]byte(bucketLog)) })
			},
			want: `no "log" bucket`,
		},
		{
			name: "log: lost log range",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutLog, func(tx *bbolt.Tx) error { return tx.Bucket([]byte(bucketMeta)).Delete([]byte(metaLogRange)) })
			},
			want: "meta bucket holds 2 of its 3 keys",
		},
		{
			name: "log: damaged log range",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutLog, func(tx *bbolt.Tx) error {
					r := encodeLogRange(0, 3)
					r[3] ^= 1
					return tx.Bucket([]byte(bucketMeta)).Put([]byte(metaLogRange), r)
				})
			},
			want: "log range: checksum mismatch",
		},
		{
			name: "log: undecodable entry",
			make: func(t *testing.T, path string) { validStore(t, path, LayoutLog, logPut(1, []byte("garbage"))) },
			want: "log entry 1: checksum mismatch",
		},
		{
			name: "log: misplaced entry",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutLog, logPut(1, appendPutEntry(nil, 0, caspaxos.Record{Key: "j"})))
			},
			want: "log entry 1: checksum mismatch (damaged, or an entry of another sequence number)",
		},
		{
			name: "log: vanished entry",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutLog, func(tx *bbolt.Tx) error { return tx.Bucket([]byte(bucketLog)).Delete(seqKey(nil, 1)) })
			},
			want: "log entries [1, 2) missing from the log range [0, 3)",
		},
		{
			name: "log: vanished tail",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutLog, func(tx *bbolt.Tx) error { return tx.Bucket([]byte(bucketLog)).Delete(seqKey(nil, 2)) })
			},
			want: "log entries [2, 3) missing: the log ends early",
		},
		{
			name: "log: stray entry beyond the range",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutLog, logPut(3, appendDeleteEntry(nil, 3, "k")))
			},
			want: "log entry 3 outside the log range [0, 3)",
		},
		{
			name: "log: rolled-back range",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutLog, func(tx *bbolt.Tx) error {
					return tx.Bucket([]byte(bucketMeta)).Put([]byte(metaLogRange), encodeLogRange(0, 2))
				})
			},
			want: "log entry 2 outside the log range [0, 2)",
		},
		{
			name: "log: short key",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutLog, func(tx *bbolt.Tx) error { return tx.Bucket([]byte(bucketLog)).Put([]byte("k"), []byte("v")) })
			},
			want: "log key 6b: 1 bytes, want 8",
		},
		{
			name: "damaged age floor",
			make: func(t *testing.T, path string) {
				validStore(t, path, LayoutInPlace, func(tx *bbolt.Tx) error {
					return tx.Bucket([]byte(bucketMeta)).Put([]byte(metaAgeFloor), []byte{1, 2, 3})
				})
			},
			want: "age floor",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "acceptor.db")
			tt.make(t, path)
			before, err := os.ReadFile(path)
			require.NoError(t, err)
			_, err = Open(path, Options{})
			require.ErrorIs(t, err, caspaxos.ErrCorrupt)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), tt.want)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, before, after, "Open must not modify a file it refuses")
		})
	}
}

func TestOpenLockedFileTimesOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acceptor.db")
	s, err := Open(path, Options{})
	require.NoError(t, err)
	defer s.Close()
	_, err = Open(path, Options{LockTimeout: 50 * time.Millisecond})
	require.ErrorIs(t, err, ErrLocked)
	assert.NotErrorIs(t, err, caspaxos.ErrCorrupt, "a busy file is not a damaged one")
	assert.Contains(t, err.Error(), path)
}

func TestFsyncsCountCommits(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "acceptor.db"), Options{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Apply(caspaxos.Batch{}))
	assert.Zero(t, s.Fsyncs(), "an empty batch costs no fsync")
	for i := range 3 {
		require.NoError(t, s.Apply(caspaxos.Batch{AgeFloor: uint64(i + 1)}))
	}
	assert.Equal(t, uint64(3), s.Fsyncs(), "serial Apply calls commit one by one")
}

func TestFsyncBaseline(t *testing.T) {
	dir := t.TempDir()
	perSec, err := FsyncBaseline(dir, 50*time.Millisecond)
	require.NoError(t, err)
	assert.Positive(t, perSec)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "the scratch file is removed")

	_, err = FsyncBaseline(dir, 0)
	assert.Error(t, err)
}
