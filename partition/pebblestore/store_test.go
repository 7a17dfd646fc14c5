package pebblestore

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) partition.Store {
			st, err := Open(Options{Dir: t.TempDir()})
			require.NoError(t, err)
			return st
		},
		Reopen: func(t *testing.T, st partition.Store) partition.Store {
			dir := st.(*Store).dir
			require.NoError(t, st.Close())
			st2, err := Open(Options{Dir: dir})
			require.NoError(t, err)
			return st2
		},
		RawSet: func(t *testing.T, st partition.Store, k, v []byte) {
			require.NoError(t, st.(*Store).db.Set(k, v, pebble.Sync))
		},
		RawGet: func(t *testing.T, st partition.Store, k []byte) []byte {
			v, ok, err := reader{st.(*Store).db}.Get(k)
			require.NoError(t, err)
			require.True(t, ok)
			return v
		},
	})
}

// TestCrashKeepsSyncedCommits: with a filesystem that drops unsynced data
// on "crash", every committed batch survives.
func TestCrashKeepsSyncedCommits(t *testing.T) {
	fs := vfs.NewStrictMem()
	require.NoError(t, fs.MkdirAll("/db", 0o755))
	root, err := fs.OpenDir("/")
	require.NoError(t, err)
	require.NoError(t, root.Sync())
	require.NoError(t, root.Close())
	st, err := Open(Options{Dir: "/db", FS: fs})
	require.NoError(t, err)
	meta := &partition.Meta{Epoch: 1, Role: partition.RoleFollower, Level: partition.Level{Consistency: partition.Eventual}}
	require.NoError(t, st.Commit([]partition.Write{{Partition: 1, Meta: meta, ApplyState: &partition.ApplyState{}}}))
	for i := 1; i <= 50; i++ {
		o := partition.Op{LSN: partition.LSN(i), Epoch: 1, Key: []byte("k"), Value: []byte{byte(i)}}
		require.NoError(t, st.Commit([]partition.Write{{Partition: 1, Append: []partition.Op{o}, Apply: []partition.Op{o}, UndoAbove: 100,
			ApplyState: &partition.ApplyState{Applied: o.LSN, AppliedEpoch: 1}}}))
	}
	// Not synced: lost by the crash.
	require.NoError(t, st.db.Set(partition.AppendLogKey(nil, 1, 51), []byte("unsynced"), pebble.NoSync))
	fs.SetIgnoreSyncs(true)
	_ = st.db.Close()
	fs.ResetToSyncedState()
	fs.SetIgnoreSyncs(false)
	st, err = Open(Options{Dir: "/db", FS: fs})
	require.NoError(t, err)
	defer st.Close()
	rec, err := st.Load(1)
	require.NoError(t, err)
	require.Equal(t, partition.LSN(50), rec.Last)
	require.Equal(t, partition.LSN(50), rec.Apply.Applied)
}

func TestOpenRefusesForeignDatabase(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	require.NoError(t, err)
	require.NoError(t, db.Set([]byte("other"), []byte("data"), pebble.Sync))
	require.NoError(t, db.Close())
	_, err = Open(Options{Dir: dir})
	require.True(t, errors.Is(err, ErrNotStore), "%v", err)
}
