package certs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/fmnode/fmnode/internal/durable"
)

const (
	keyMode  os.FileMode = 0o600
	certMode os.FileMode = 0o644
	dirMode  os.FileMode = 0o700
)

// file is one file to write.
type file struct {
	path string
	data []byte
	mode os.FileMode
}

func existsErr(path string) error {
	return fmt.Errorf("certs: %s already exists (set Overwrite to replace it): %w", path, fs.ErrExist)
}

// writeFiles writes files, each into its directory (created if missing),
// all or none as far as refusals go: every existing file is refused before
// any is written. Each goes to a temporary name in its directory first and
// is synced, then linked into place (which fails if the name appeared
// meanwhile) or, with overwrite, renamed over the old one; a reader sees
// the old file or the new one, never a part.
func writeFiles(files []file, overwrite bool) (err error) {
	var dirs []string
	for _, f := range files {
		if d := filepath.Dir(f.path); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		if err := durable.MkdirAll(d, dirMode); err != nil {
			return fmt.Errorf("certs: %w", err)
		}
	}
	if !overwrite {
		for _, f := range files {
			if _, err := os.Lstat(f.path); err == nil {
				return existsErr(f.path)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("certs: %w", err)
			}
		}
	}
	var temps []string
	defer func() {
		for _, t := range temps {
			os.Remove(t) // linked ones are still in place under their name
		}
	}()
	for _, f := range files {
		tmp, err := writeTemp(filepath.Dir(f.path), f)
		if err != nil {
			return err
		}
		temps = append(temps, tmp)
	}
	for i, f := range files {
		if overwrite {
			err = os.Rename(temps[i], f.path)
		} else {
			err = os.Link(temps[i], f.path)
		}
		if errors.Is(err, fs.ErrExist) {
			return existsErr(f.path)
		}
		if err != nil {
			return fmt.Errorf("certs: %w", err)
		}
	}
	for _, d := range dirs {
		if err := durable.SyncDir(d); err != nil {
			return fmt.Errorf("certs: %w", err)
		}
	}
	return nil
}

// writeTemp writes f under a temporary name in dir with f's mode, synced.
func writeTemp(dir string, f file) (string, error) {
	t, err := os.CreateTemp(dir, "."+filepath.Base(f.path)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("certs: %w", err)
	}
	name := t.Name()
	// CreateTemp makes 0600; a chmod (not umask) sets the certificates'
	// 0644, and keeps keys at 0600 whatever the umask.
	err = t.Chmod(f.mode)
	if err == nil {
		_, err = t.Write(f.data)
	}
	if err == nil {
		err = t.Sync()
	}
	if cerr := t.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", fmt.Errorf("certs: write %s: %w", f.path, err)
	}
	return name, nil
}

// sameCert reports whether path exists and whether its first certificate
// is the one certPEM holds (compared as DER: another tool's copy may
// differ in PEM headers or line breaks).
func sameCert(path string, certPEM []byte) (exists, same bool, err error) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return false, false, nil
	} else if err != nil {
		return false, false, fmt.Errorf("certs: %w", err)
	}
	_, have, err := readCert(path)
	if err != nil {
		return true, false, nil // unreadable as a certificate: not the same one
	}
	return true, bytes.Equal(have, certPEM), nil
}
