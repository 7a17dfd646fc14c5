package durable

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMkdirAllCreatesWithMode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b", "c")
	require.NoError(t, MkdirAll(dir, 0o700))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.True(t, fi.IsDir())
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	require.NoError(t, MkdirAll(dir, 0o700), "an existing directory is fine")
}

func TestMkdirAllRefusesAFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(f, []byte("x"), 0o600))
	require.Error(t, MkdirAll(filepath.Join(f, "sub"), 0o700))
}

func TestSyncDirMissing(t *testing.T) {
	require.Error(t, SyncDir(filepath.Join(t.TempDir(), "missing")))
	require.NoError(t, SyncDir(t.TempDir()))
}

func TestWriteFileReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, WriteFile(dir, "f", []byte("one"), 0o600))
	require.NoError(t, WriteFile(dir, "f", []byte("two"), 0o600))
	b, err := os.ReadFile(filepath.Join(dir, "f"))
	require.NoError(t, err)
	require.Equal(t, "two", string(b))
	_, err = os.Stat(filepath.Join(dir, "f.tmp"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Error(t, WriteFile(filepath.Join(dir, "missing"), "f", nil, 0o600))
}
