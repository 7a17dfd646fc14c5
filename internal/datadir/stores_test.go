package datadir

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/boltstore"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/pebblestore"
)

func testMeta() partition.Meta {
	return partition.Meta{Epoch: 3, Role: partition.RoleFollower, Level: partition.Level{Consistency: partition.Eventual}}
}

// writeStores opens the stores of a fresh directory and writes a record
// to each; it leaves everything closed.
func writeStores(t *testing.T, dir string) {
	t.Helper()
	d, err := Open(dir, testIdentity(), Options{})
	require.NoError(t, err)
	as, ps, err := d.OpenStores(boltstore.Options{}, pebblestore.Options{})
	require.NoError(t, err)
	rec := caspaxos.Record{Key: "register/1", Promised: caspaxos.Ballot{Counter: 5, Proposer: 7}}
	require.NoError(t, as.Apply(caspaxos.Batch{Put: []caspaxos.Record{rec}}))
	meta := testMeta()
	require.NoError(t, ps.Commit([]partition.Write{{Partition: 1, Meta: &meta, ApplyState: &partition.ApplyState{}}}))
	require.NoError(t, as.Close())
	require.NoError(t, ps.Close())
	require.NoError(t, d.Close())
}

func TestOpenStoresPersist(t *testing.T) {
	dir := t.TempDir()
	writeStores(t, dir)

	d := openT(t, dir, testIdentity())
	assert.Equal(t, uint64(2), d.Boot())
	as, ps, err := d.OpenStores(boltstore.Options{}, pebblestore.Options{Dir: d.PartitionsPath()})
	require.NoError(t, err)
	defer as.Close()
	defer ps.Close()
	st, err := as.Load()
	require.NoError(t, err)
	require.Len(t, st.Records, 1)
	assert.Equal(t, "register/1", st.Records[0].Key)
	assert.Equal(t, caspaxos.Ballot{Counter: 5, Proposer: 7}, st.Records[0].Promised)
	ids, err := ps.Partitions()
	require.NoError(t, err)
	assert.Equal(t, []partition.ID{1}, ids)
	rec, err := ps.Load(1)
	require.NoError(t, err)
	assert.Equal(t, testMeta(), rec.Meta)
	for _, p := range []string{d.AcceptorPath(), d.PartitionsPath()} {
		_, err := os.Stat(p)
		require.NoError(t, err)
	}
}

func TestOpenStoresInvalid(t *testing.T) {
	d := openT(t, t.TempDir(), testIdentity())
	_, _, err := d.OpenStores(boltstore.Options{}, pebblestore.Options{Dir: t.TempDir()})
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), d.PartitionsPath())

	require.NoError(t, d.Close())
	_, _, err = d.OpenStores(boltstore.Options{}, pebblestore.Options{})
	require.ErrorIs(t, err, ErrClosed)
}

func TestOpenStoresRefusesCorruptAcceptor(t *testing.T) {
	tests := []struct {
		name   string
		damage func(good []byte) []byte
	}{
		{name: "garbage", damage: func(good []byte) []byte {
			b := make([]byte, len(good))
			for i := range b {
				b[i] = byte(i*131 + 7)
			}
			return b
		}},
		{name: "truncated", damage: func(good []byte) []byte { return good[:len(good)/3] }},
		{name: "truncated to a page", damage: func(good []byte) []byte { return good[:1024] }},
		{name: "both meta pages smashed", damage: func(good []byte) []byte {
			// With one meta page intact bbolt rightly falls back to it.
			b := append([]byte(nil), good...)
			for _, page := range []int{0, os.Getpagesize()} {
				for i := page + 16; i < page+80; i++ {
					b[i] ^= 0xff
				}
			}
			return b
		}},
		{name: "empty", damage: func([]byte) []byte { return []byte{} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeStores(t, dir)
			path := filepath.Join(dir, AcceptorName)
			good, err := os.ReadFile(path)
			require.NoError(t, err)
			bad := tc.damage(good)
			require.NoError(t, os.WriteFile(path, bad, fileMode))

			d := openT(t, dir, testIdentity())
			as, ps, err := d.OpenStores(boltstore.Options{}, pebblestore.Options{})
			require.Error(t, err)
			assert.Nil(t, as)
			assert.Nil(t, ps)
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorIs(t, err, caspaxos.ErrCorrupt)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), "refuses to start")
			assert.Contains(t, err.Error(), "did not modify the file")
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, bad, after, "a damaged acceptor store is never reset")
		})
	}
}

func TestOpenStoresRefusesForeignPartitions(t *testing.T) {
	dir := t.TempDir()
	d := openT(t, dir, testIdentity())
	// A pebble database that is not a partition store (someone else's).
	db, err := pebble.Open(d.PartitionsPath(), &pebble.Options{})
	require.NoError(t, err)
	require.NoError(t, db.Set([]byte("other"), []byte("data"), pebble.Sync))
	require.NoError(t, db.Close())

	_, _, err = d.OpenStores(boltstore.Options{}, pebblestore.Options{})
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorIs(t, err, pebblestore.ErrNotStore)
	assert.Contains(t, err.Error(), d.PartitionsPath())
	assert.Contains(t, err.Error(), "refuses to start")

	// The acceptor store was closed again: a retry can open it.
	require.NoError(t, os.RemoveAll(d.PartitionsPath()))
	as, ps, err := d.OpenStores(boltstore.Options{}, pebblestore.Options{})
	require.NoError(t, err)
	require.NoError(t, as.Close())
	require.NoError(t, ps.Close())
}

func TestOpenStoresRefusesCorruptPartitionManifest(t *testing.T) {
	dir := t.TempDir()
	writeStores(t, dir)
	parts := filepath.Join(dir, PartitionsName)
	manifests, err := filepath.Glob(filepath.Join(parts, "MANIFEST-*"))
	require.NoError(t, err)
	require.NotEmpty(t, manifests)
	for _, m := range manifests {
		b, err := os.ReadFile(m)
		require.NoError(t, err)
		for i := range b {
			b[i] ^= 0x5a
		}
		require.NoError(t, os.WriteFile(m, b, fileMode))
	}
	before := readTree(t, parts)
	d := openT(t, dir, testIdentity())
	_, _, err = d.OpenStores(boltstore.Options{}, pebblestore.Options{})
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), parts)
	assert.Contains(t, err.Error(), "refuses to start")
	assert.Equal(t, before, readTree(t, parts), "the damaged partition store is left as it was")
}

// readTree maps every file under dir to its bytes.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = b
		return err
	}))
	return out
}
