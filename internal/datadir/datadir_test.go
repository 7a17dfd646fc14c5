package datadir

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func openT(t *testing.T, dir string, id Identity) *Dir {
	t.Helper()
	d, err := Open(dir, id, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// storedBoot reads the boot counter from the identity file by its offset,
// without the package's decoder.
func storedBoot(t *testing.T, dir string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, IdentityName))
	require.NoError(t, err)
	require.Greater(t, len(b), 19)
	require.Equal(t, identityMagic, string(b[:8]))
	return binary.BigEndian.Uint64(b[11:19])
}

func TestOpenBootCounter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "data")
	for want := uint64(1); want <= 3; want++ {
		d, err := Open(dir, testIdentity(), Options{})
		require.NoError(t, err)
		assert.Equal(t, want, d.Boot())
		assert.Equal(t, want, storedBoot(t, dir), "the boot counter is durable before Open returns")
		assert.Equal(t, testIdentity(), d.Identity())
		require.NoError(t, d.Close())
	}
	b, err := os.ReadFile(filepath.Join(dir, IdentityName))
	require.NoError(t, err)
	id, boot, err := decodeIdentity(b)
	require.NoError(t, err)
	assert.Equal(t, testIdentity(), id)
	assert.Equal(t, uint64(3), boot)
	_, err = os.Stat(filepath.Join(dir, identityTemp))
	assert.ErrorIs(t, err, os.ErrNotExist, "no temp file is left behind")
}

func TestOpenCreatesPrivateDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	d := openT(t, dir, testIdentity())
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
	assert.Zero(t, fi.Mode().Perm()&0o077, "mode %v", fi.Mode().Perm())
	assert.Equal(t, dir, d.Path())
	assert.Equal(t, filepath.Join(dir, "LOCK"), d.LockPath())
	assert.Equal(t, filepath.Join(dir, "IDENTITY"), d.IdentityPath())
	assert.Equal(t, filepath.Join(dir, "acceptor.db"), d.AcceptorPath())
	assert.Equal(t, filepath.Join(dir, "partitions"), d.PartitionsPath())
}

func TestOpenLocked(t *testing.T) {
	dir := t.TempDir()
	d := openT(t, dir, testIdentity())
	pid, err := os.ReadFile(d.LockPath())
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("%d\n", os.Getpid()), string(pid))

	// flock is per open file description: a second Open in this process
	// opens the lock file again and conflicts like another process would.
	_, err = Open(dir, testIdentity(), Options{})
	var le *LockedError
	require.ErrorAs(t, err, &le)
	require.ErrorIs(t, err, ErrLocked)
	assert.Equal(t, dir, le.Path)
	assert.Equal(t, os.Getpid(), le.HolderPID)
	assert.Equal(t, fmt.Sprintf("data directory %s is in use by another fmnode agent (pid %d)", dir, os.Getpid()), err.Error())
	assert.Equal(t, uint64(1), storedBoot(t, dir), "a refused Open does not touch the boot counter")
	pid2, err := os.ReadFile(d.LockPath())
	require.NoError(t, err)
	assert.Equal(t, pid, pid2, "a refused Open does not overwrite the holder's pid")

	// A bounded wait gives up after the timeout.
	start := time.Now()
	_, err = Open(dir, testIdentity(), Options{LockTimeout: 50 * time.Millisecond})
	require.ErrorIs(t, err, ErrLocked)
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)

	require.NoError(t, d.Close())
	require.NoError(t, d.Close(), "Close is idempotent")
	d2 := openT(t, dir, testIdentity())
	assert.Equal(t, uint64(2), d2.Boot())
}

func TestOpenWaitsForLock(t *testing.T) {
	dir := t.TempDir()
	d, err := Open(dir, testIdentity(), Options{})
	require.NoError(t, err)
	released := make(chan error, 1)
	go func() {
		time.Sleep(30 * time.Millisecond)
		released <- d.Close()
	}()
	d2, err := Open(dir, testIdentity(), Options{LockTimeout: 10 * time.Second})
	require.NoError(t, err)
	require.NoError(t, <-released)
	assert.Equal(t, uint64(2), d2.Boot())
	require.NoError(t, d2.Close())
}

func TestOpenLockedUnknownPID(t *testing.T) {
	dir := t.TempDir()
	// A holder that has locked but not yet written its pid.
	f, err := os.OpenFile(filepath.Join(dir, LockName), os.O_RDWR|os.O_CREATE, fileMode)
	require.NoError(t, err)
	defer f.Close()
	busy, err := tryLock(f, 0)
	require.NoError(t, err)
	require.False(t, busy)
	_, err = Open(dir, testIdentity(), Options{})
	var le *LockedError
	require.ErrorAs(t, err, &le)
	assert.Zero(t, le.HolderPID)
	assert.Contains(t, err.Error(), "(pid unknown)")
	_, err = os.Stat(filepath.Join(dir, IdentityName))
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing is written without the lock")
}

func TestOpenIdentityMismatch(t *testing.T) {
	stored := testIdentity()
	tests := []struct {
		name   string
		mutate func(*Identity)
		field  string
		stored string
		want   string
	}{
		{name: "cluster", mutate: func(i *Identity) { i.Cluster = "prod-us" }, field: "cluster", stored: `"prod-eu"`, want: `"prod-us"`},
		{name: "node id", mutate: func(i *Identity) { i.NodeID = 8 }, field: "node id", stored: "7", want: "8"},
		{name: "name", mutate: func(i *Identity) { i.Name = "node-8" }, field: "name", stored: `"node-7"`, want: `"node-8"`},
		{name: "region", mutate: func(i *Identity) { i.Region = "" }, field: "region", stored: `"eu-west"`, want: `""`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d, err := Open(dir, stored, Options{})
			require.NoError(t, err)
			require.NoError(t, d.Close())
			before, err := os.ReadFile(filepath.Join(dir, IdentityName))
			require.NoError(t, err)

			want := stored
			tc.mutate(&want)
			_, err = Open(dir, want, Options{})
			var me *IdentityMismatchError
			require.ErrorAs(t, err, &me)
			require.ErrorIs(t, err, ErrIdentity)
			assert.Equal(t, filepath.Join(dir, IdentityName), me.Path)
			assert.Equal(t, tc.field, me.Field)
			assert.Equal(t, tc.stored, me.Stored)
			assert.Equal(t, tc.want, me.Want)
			assert.Contains(t, err.Error(), "belongs to another node")

			after, err := os.ReadFile(filepath.Join(dir, IdentityName))
			require.NoError(t, err)
			assert.Equal(t, before, after, "the other node's identity is never adopted")
			d2 := openT(t, dir, stored) // the lock was released
			assert.Equal(t, uint64(2), d2.Boot())
		})
	}
}

// corruptions are damaged identity files Open must refuse.
func corruptions(t *testing.T) map[string][]byte {
	good := mustEncode(t, testIdentity(), 4)
	out := map[string][]byte{
		"unknown version": reseal(append(append(append([]byte(nil), good[:8]...), 9), good[9:]...)),
		"trailing bytes":  append(append([]byte(nil), good...), "junk"...),
		"foreign file":    []byte("cluster: prod-eu\nnode: 7\n"),
		"oversized":       make([]byte, 4096),
	}
	for n := range len(good) {
		out[fmt.Sprintf("truncated to %d", n)] = append([]byte{}, good[:n]...)
	}
	for i := range len(good) {
		b := append([]byte(nil), good...)
		b[i] ^= 0x10
		out[fmt.Sprintf("byte %d flipped", i)] = b
	}
	return out
}

func TestOpenRefusesCorruptIdentity(t *testing.T) {
	for name, raw := range corruptions(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, IdentityName)
			require.NoError(t, os.WriteFile(path, raw, fileMode))
			_, err := Open(dir, testIdentity(), Options{})
			var ce *CorruptError
			require.ErrorAs(t, err, &ce)
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Equal(t, path, ce.Path)
			assert.NotEmpty(t, ce.Reason)
			assert.Contains(t, err.Error(), "refuses to start")
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, raw, after, "a damaged identity file is never rewritten")
			_, err = os.Stat(filepath.Join(dir, identityTemp))
			assert.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}

func TestOpenIgnoresStaleTemp(t *testing.T) {
	other := Identity{Cluster: "other", NodeID: 9, Name: "node-9"}
	tests := []struct {
		name string
		tmp  []byte
	}{
		{name: "another identity", tmp: mustEncode(t, other, 100)},
		{name: "this identity, later boot", tmp: mustEncode(t, testIdentity(), 100)},
		{name: "torn", tmp: mustEncode(t, testIdentity(), 100)[:12]},
		{name: "empty", tmp: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d, err := Open(dir, testIdentity(), Options{})
			require.NoError(t, err)
			require.NoError(t, d.Close())
			// A crash after the temp file was written, before the rename.
			require.NoError(t, os.WriteFile(filepath.Join(dir, identityTemp), tc.tmp, fileMode))
			d = openT(t, dir, testIdentity())
			assert.Equal(t, uint64(2), d.Boot(), "IDENTITY, not the temp file, is the current boot")
			assert.Equal(t, uint64(2), storedBoot(t, dir))
			_, err = os.Stat(filepath.Join(dir, identityTemp))
			assert.ErrorIs(t, err, os.ErrNotExist)
		})
	}
	t.Run("temp only", func(t *testing.T) {
		// A crash during the very first write: the directory is new.
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, identityTemp), mustEncode(t, other, 100), fileMode))
		d := openT(t, dir, testIdentity())
		assert.Equal(t, uint64(1), d.Boot())
	})
}

func TestOpenRefusesStoresWithoutIdentity(t *testing.T) {
	for _, name := range []string{AcceptorName, PartitionsName} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.Mkdir(filepath.Join(dir, name), dirMode))
			_, err := Open(dir, testIdentity(), Options{})
			var ce *CorruptError
			require.ErrorAs(t, err, &ce)
			assert.Contains(t, ce.Reason, name)
			_, err = os.Stat(filepath.Join(dir, IdentityName))
			assert.ErrorIs(t, err, os.ErrNotExist, "no identity is invented for a directory that has stores")
		})
	}
}

func TestOpenInvalid(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, fileMode))
	tests := []struct {
		name string
		dir  string
		id   Identity
		opts Options
		want string
	}{
		{name: "empty path", dir: "", id: testIdentity(), want: "path is empty"},
		{name: "negative timeout", dir: t.TempDir(), id: testIdentity(), opts: Options{LockTimeout: -1}, want: "LockTimeout"},
		{name: "no cluster", dir: t.TempDir(), id: Identity{Name: "n"}, want: "Identity.Cluster"},
		{name: "no name", dir: t.TempDir(), id: Identity{Cluster: "c"}, want: "Identity.Name"},
		{name: "path is a file", dir: file, id: testIdentity(), want: file},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(tc.dir, tc.id, tc.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestOpenBootExhausted(t *testing.T) {
	dir := t.TempDir()
	raw := mustEncode(t, testIdentity(), MaxBoot)
	require.NoError(t, os.WriteFile(filepath.Join(dir, IdentityName), raw, fileMode))
	_, err := Open(dir, testIdentity(), Options{})
	require.ErrorIs(t, err, ErrBootExhausted)
	after, err := os.ReadFile(filepath.Join(dir, IdentityName))
	require.NoError(t, err)
	assert.Equal(t, raw, after)
}
