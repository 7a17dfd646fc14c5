package agentcfg

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Check checks what needs the filesystem: the TLS files and the admin
// token file are readable, non-empty regular files, and data_dir is a writable directory or can be created
// (its nearest existing ancestor is a writable directory). It writes and
// removes a probe file to tell. Errors name the field and wrap the
// filesystem's error; Check assumes Validate passed.
func (c Config) Check() error {
	var errs []error
	for _, f := range []struct{ field, path string }{
		{"tls.cert_file", c.TLS.CertFile},
		{"tls.key_file", c.TLS.KeyFile},
		{"tls.ca_file", c.TLS.CAFile},
		{"admin.token_file", c.Admin.TokenFile},
	} {
		if f.path == "" {
			continue
		}
		if err := checkReadable(f.path); err != nil {
			errs = append(errs, fmt.Errorf("agentcfg: %s: %w", f.field, err))
		}
	}
	if c.DataDir != "" {
		if err := checkCreatable(c.DataDir); err != nil {
			errs = append(errs, fmt.Errorf("agentcfg: data_dir: %w", err))
		}
	}
	return errors.Join(errs...)
}

func checkReadable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", path)
	}
	var b [1]byte
	if _, err := f.Read(b[:]); err != nil {
		return fmt.Errorf("%s: unreadable or empty: %w", path, err)
	}
	return nil
}

func checkCreatable(dir string) error {
	d := filepath.Clean(dir)
	for {
		st, err := os.Stat(d)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("%s: not a directory", d)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		parent := filepath.Dir(d)
		if parent == d {
			return err
		}
		d = parent
	}
	probe, err := os.CreateTemp(d, ".fmnode-check-*")
	if err != nil {
		return fmt.Errorf("%s: not writable: %w", d, err)
	}
	name := probe.Name()
	probe.Close()
	return os.Remove(name)
}
