package boltstore

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/storetest"
)

func TestShardedConformance(t *testing.T) {
	for _, n := range []int{1, 3, 8} {
		t.Run(fmt.Sprintf("shards=%d", n), func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T, dir string) caspaxos.Store {
				t.Helper()
				s, err := OpenSharded(filepath.Join(dir, "sharded"), n, Options{})
				require.NoError(t, err)
				return s
			})
		})
	}
}

// TestShardOf pins the placement: it is part of the on-disk format, so a
// changed hash would make every existing store fail to open.
func TestShardOf(t *testing.T) {
	tests := []struct {
		key  string
		n    int
		want int
	}{
		{key: "", n: 8, want: 0}, // the erase floor is pinned to shard 0
		{key: "anything", n: 1, want: 0},
		{key: "k000000", n: 8, want: 2},
		{key: "k000001", n: 8, want: 5},
		{key: "partition/eu", n: 4, want: 0},
		{key: "\x00\xff", n: 3, want: 2},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q/%d", tt.key, tt.n), func(t *testing.T) {
			assert.Equal(t, tt.want, shardOf(tt.key, tt.n))
			if tt.key != "" {
				h := fnv.New64a()
				_, _ = h.Write([]byte(tt.key))
				assert.Equal(t, int(h.Sum64()%uint64(tt.n)), shardOf(tt.key, tt.n), "must equal hash/fnv FNV-1a 64")
			}
		})
	}
}

// keysInShards returns one key per shard of n (key i lives in shard i).
func keysInShards(t *testing.T, n int) []string {
	t.Helper()
	keys := make([]string, n)
	found := 0
	for i := 0; found < n && i < 100000; i++ {
		k := fmt.Sprintf("key/%d", i)
		if s := shardOf(k, n); keys[s] == "" {
			keys[s] = k
			found++
		}
	}
	require.Equal(t, n, found)
	return keys
}

func TestShardedSpreadsAndReopens(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenSharded(dir, 4, Options{})
	require.NoError(t, err)
	keys := keysInShards(t, 4)
	var b caspaxos.Batch
	for i, k := range keys {
		b.Put = append(b.Put, caspaxos.Record{Key: k, Value: caspaxos.Value{Version: uint64(i + 1), Data: []byte(k)}})
	}
	require.NoError(t, s.Apply(b))
	assert.Equal(t, uint64(4), s.Fsyncs(), "one commit per shard touched")
	assert.Equal(t, 4, s.Shards())
	assert.Equal(t, dir, s.Dir())
	require.NoError(t, s.Close())
	n, err := ReadManifest(dir)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	for i := range 4 {
		one, err := Open(ShardPath(dir, i), Options{})
		require.NoError(t, err)
		st, err := one.Load()
		require.NoError(t, err)
		require.NoError(t, one.Close())
		require.Len(t, st.Records, 1, "shard %d", i)
		assert.Equal(t, keys[i], st.Records[0].Key)
	}
}

func TestOpenShardedRefuses(t *testing.T) {
	// seed makes a 4-shard store holding one record per shard and an age
	// floor; damage then breaks it.
	seed := func(t *testing.T, dir string) {
		t.Helper()
		s, err := OpenSharded(dir, 4, Options{})
		require.NoError(t, err)
		var b caspaxos.Batch
		for i, k := range keysInShards(t, 4) {
			b.Put = append(b.Put, caspaxos.Record{Key: k, Value: caspaxos.Value{Version: uint64(i + 1)}})
		}
		b.AgeFloor = 5
		require.NoError(t, s.Apply(b))
		require.NoError(t, s.Close())
	}
	tests := []struct {
		name    string
		shards  int
		damage  func(t *testing.T, dir string)
		want    error
		mention func(dir string) string
	}{
		{
			name: "other shard count", shards: 8, want: caspaxos.ErrInvalidConfig,
			mention: ManifestPath,
		},
		{
			name: "one shard asked of four", shards: 1, want: caspaxos.ErrInvalidConfig,
			mention: ManifestPath,
		},
		{
			name: "missing shard", shards: 4, want: caspaxos.ErrCorrupt,
			damage:  func(t *testing.T, dir string) { require.NoError(t, os.Remove(ShardPath(dir, 2))) },
			mention: func(dir string) string { return ShardPath(dir, 2) },
		},
		{
			name: "missing manifest with records", shards: 4, want: caspaxos.ErrCorrupt,
			damage:  func(t *testing.T, dir string) { require.NoError(t, os.Remove(ManifestPath(dir))) },
			mention: ManifestPath,
		},
		{
			name: "damaged manifest", shards: 4, want: caspaxos.ErrCorrupt,
			damage: func(t *testing.T, dir string) {
				require.NoError(t, os.WriteFile(ManifestPath(dir), []byte("shards 4\n"), fileMode))
			},
			mention: ManifestPath,
		},
		{
			name: "stray shard", shards: 4, want: caspaxos.ErrCorrupt,
			damage:  func(t *testing.T, dir string) { copyFile(t, ShardPath(dir, 1), ShardPath(dir, 4)) },
			mention: func(dir string) string { return ShardPath(dir, 4) },
		},
		{
			name: "garbage shard", shards: 4, want: caspaxos.ErrCorrupt,
			damage: func(t *testing.T, dir string) {
				require.NoError(t, os.WriteFile(ShardPath(dir, 3), make([]byte, 8192), fileMode))
			},
			mention: func(dir string) string { return ShardPath(dir, 3) },
		},
		{
			name: "swapped shards", shards: 4, want: caspaxos.ErrCorrupt,
			damage: func(t *testing.T, dir string) {
				tmp := filepath.Join(dir, "swap")
				require.NoError(t, os.Rename(ShardPath(dir, 1), tmp))
				require.NoError(t, os.Rename(ShardPath(dir, 2), ShardPath(dir, 1)))
				require.NoError(t, os.Rename(tmp, ShardPath(dir, 2)))
			},
			mention: func(dir string) string { return ShardPath(dir, 1) },
		},
		{
			name: "age floor outside shard 0", shards: 4, want: caspaxos.ErrCorrupt,
			damage: func(t *testing.T, dir string) {
				require.NoError(t, os.Rename(ShardPath(dir, 0), filepath.Join(dir, "zero")))
				require.NoError(t, os.Rename(ShardPath(dir, 3), ShardPath(dir, 0)))
				require.NoError(t, os.Rename(filepath.Join(dir, "zero"), ShardPath(dir, 3)))
			},
			mention: func(dir string) string { return dir },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			seed(t, dir)
			if tt.damage != nil {
				tt.damage(t, dir)
			}
			_, err := OpenSharded(dir, tt.shards, Options{})
			require.ErrorIs(t, err, tt.want)
			assert.Contains(t, err.Error(), tt.mention(dir))
			n, rerr := ReadManifest(dir)
			if rerr == nil {
				assert.Equal(t, 4, n, "a refused open leaves the manifest alone")
			}
		})
	}
}

func TestOpenShardedRejectsConfig(t *testing.T) {
	tests := []struct {
		name   string
		dir    string
		shards int
		opts   Options
	}{
		{name: "empty dir", dir: "", shards: 4},
		{name: "zero shards", dir: t.TempDir(), shards: 0},
		{name: "too many shards", dir: t.TempDir(), shards: MaxShards + 1},
		{name: "bad options", dir: t.TempDir(), shards: 2, opts: Options{QueueLen: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := OpenSharded(tt.dir, tt.shards, tt.opts)
			require.ErrorIs(t, err, caspaxos.ErrInvalidConfig)
		})
	}
}

// TestOpenShardedFinishesCreation: a creation that crashed after making
// (empty) shard files but before its manifest is finished on the next
// open, since empty shards hold nothing to lose.
func TestOpenShardedFinishesCreation(t *testing.T) {
	dir := t.TempDir()
	for i := range 2 {
		s, err := Open(ShardPath(dir, i), Options{})
		require.NoError(t, err)
		require.NoError(t, s.Close())
	}
	s, err := OpenSharded(dir, 4, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	n, err := ReadManifest(dir)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
}

// eraseFixture is an acceptor state with tombstoned registers in every
// shard, and the batch the real acceptor makes when GC raises the age
// floor and erases them all in one Ready: erase-floor put, deletes in
// several shards, AgeFloor.
type eraseFixture struct {
	keys    []string
	ballots map[string]caspaxos.Ballot
	setup   caspaxos.Batch
	erase   caspaxos.Batch
}

func newEraseFixture(t *testing.T, shards int) eraseFixture {
	t.Helper()
	f := eraseFixture{keys: keysInShards(t, shards), ballots: make(map[string]caspaxos.Ballot)}
	for i, k := range f.keys {
		b := caspaxos.Ballot{Counter: uint64(10 + i), Proposer: 1}
		f.ballots[k] = b
		f.setup.Put = append(f.setup.Put, caspaxos.Record{Key: k, Promised: b, Accepted: b, Value: caspaxos.Value{Version: 3, Tombstone: true}})
	}
	a, err := caspaxos.NewAcceptor(1, caspaxos.State{Records: f.setup.Put})
	require.NoError(t, err)
	require.NoError(t, a.Step(caspaxos.Message{Type: caspaxos.MsgRaiseAge, From: 9, To: 1, Age: 7}))
	m := caspaxos.Message{Type: caspaxos.MsgErase, From: 9, To: 1, Age: 7}
	for _, k := range f.keys {
		m.Items = append(m.Items, caspaxos.Item{Key: k, Ballot: f.ballots[k]})
	}
	require.NoError(t, a.Step(m))
	f.erase, _ = a.Ready()
	require.NotZero(t, f.erase.AgeFloor)
	require.Len(t, f.erase.Delete, shards)
	require.Len(t, f.erase.Put, 1)
	require.Equal(t, "", f.erase.Put[0].Key)
	return f
}

// checkEraseInvariant asserts what makes a partial erase safe: every
// erased (absent) key has the erase floor at or above its last promise,
// and the age floor raised with it. It returns how many keys were erased.
func (f eraseFixture) checkEraseInvariant(t *testing.T, st caspaxos.State) int {
	t.Helper()
	present := make(map[string]bool)
	var floor caspaxos.Ballot
	for _, r := range st.Records {
		if r.Key == "" {
			floor = r.Promised
		}
		present[r.Key] = true
	}
	erased := 0
	for _, k := range f.keys {
		if present[k] {
			continue
		}
		erased++
		assert.False(t, floor.Less(f.ballots[k]), "key %q erased with erase floor %v below its promise %v", k, floor, f.ballots[k])
		assert.Equal(t, f.erase.AgeFloor, st.AgeFloor, "key %q erased without the age floor", k)
	}
	// The acceptor recovers from whatever survived.
	_, err := caspaxos.NewAcceptor(1, st)
	assert.NoError(t, err)
	return erased
}

// TestShardedCrashMidApply fails shard commits through the injected hook,
// which is what a crash at that point leaves on disk (the failed commits
// never happened, the others are durable), then reopens and checks that
// no delete persisted without the global records it depends on.
func TestShardedCrashMidApply(t *testing.T) {
	const shards = 4
	errCrash := errors.New("simulated crash")
	tests := []struct {
		name string
		// fail reports whether the commit of this part is lost.
		fail       func(shard int, global bool) bool
		wantErased int
		wantFloor  bool
	}{
		{name: "crash before the global step", fail: func(int, bool) bool { return true }, wantErased: 0},
		{name: "crash between the steps", fail: func(_ int, global bool) bool { return !global }, wantErased: 0, wantFloor: true},
		{name: "crash mid parallel step", fail: func(shard int, global bool) bool { return !global && shard%2 == 1 }, wantErased: shards / 2, wantFloor: true},
		{name: "crash after all", fail: func(int, bool) bool { return false }, wantErased: shards, wantFloor: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			f := newEraseFixture(t, shards)
			s, err := OpenSharded(dir, shards, Options{})
			require.NoError(t, err)
			require.NoError(t, s.Apply(f.setup))

			var mu sync.Mutex
			var globalDone, parallelBeforeGlobal bool
			inner := s.applyShard
			s.applyShard = func(i int, global bool, b caspaxos.Batch) error {
				mu.Lock()
				if global {
					globalDone = !tt.fail(i, global)
				} else if !globalDone {
					parallelBeforeGlobal = true
				}
				mu.Unlock()
				if tt.fail(i, global) {
					return errCrash
				}
				return inner(i, global, b)
			}
			err = s.Apply(f.erase)
			if tt.wantErased == shards {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, errCrash)
				// A store that lost part of a batch takes no more writes.
				assert.ErrorIs(t, s.Apply(caspaxos.Batch{AgeFloor: 99}), errCrash)
			}
			assert.False(t, parallelBeforeGlobal, "no shard part may commit before the global records are durable")
			require.NoError(t, s.Close())

			s, err = OpenSharded(dir, shards, Options{})
			require.NoError(t, err)
			defer s.Close()
			st, err := s.Load()
			require.NoError(t, err)
			assert.Equal(t, tt.wantErased, f.checkEraseInvariant(t, st))
			if tt.wantFloor {
				assert.Equal(t, f.erase.AgeFloor, st.AgeFloor)
			} else {
				assert.Zero(t, st.AgeFloor)
			}
		})
	}
}

// TestShardedInvalidBatchWritesNothing: validation precedes every shard
// write, including the global step.
func TestShardedInvalidBatchWritesNothing(t *testing.T) {
	s, err := OpenSharded(t.TempDir(), 4, Options{})
	require.NoError(t, err)
	defer s.Close()
	big := caspaxos.Record{Key: "big", Value: caspaxos.Value{Version: 1, Data: make([]byte, caspaxos.MaxValueBytes+1)}}
	err = s.Apply(caspaxos.Batch{Put: []caspaxos.Record{{Key: "", Promised: caspaxos.Ballot{Counter: 1, Proposer: 1}}, big}, AgeFloor: 3})
	require.ErrorIs(t, err, caspaxos.ErrValueTooLarge)
	assert.Zero(t, s.Fsyncs())
	require.NoError(t, s.Apply(caspaxos.Batch{AgeFloor: 4}), "a refused batch does not fail the store")
}
