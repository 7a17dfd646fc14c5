// Package durable holds the filesystem steps that make a directory entry
// survive a crash: a new file or directory, or a rename, is durable only
// once its parent directory is synced. The stores and the data directory
// share them.
package durable

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// SyncDir makes the entries of dir (a rename, a new file) durable.
func SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// MkdirAll creates dir and its missing ancestors with mode perm, syncing
// the parent of each directory it creates: a new directory's entry is only
// durable once its parent is synced, and losing it loses what is inside.
func MkdirAll(dir string, perm os.FileMode) error {
	var created []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	for _, d := range created {
		if err := SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile replaces dir/name with data (mode perm): written to
// dir/name.tmp, synced, renamed over name, and the directory synced, so
// that after a crash dir/name is either the old file or the new one,
// whole.
func WriteFile(dir, name string, data []byte, perm os.FileMode) error {
	path := filepath.Join(dir, name)
	tmpPath := path + ".tmp"
	f, err := os.OpenFile(tmpPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmpPath, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmpPath)
		return fmt.Errorf("write %s: %w", tmpPath, err)
	}
	if err := os.Rename(tmpPath, path); err != nil {
		_ = os.Remove(tmpPath)
		return fmt.Errorf("rename %s to %s: %w", tmpPath, path, err)
	}
	return SyncDir(dir)
}
