package datadir

import (
	"errors"
	"fmt"
	"github.com/fmnode/fmnode/internal/durable"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Names inside a data directory (see the package doc).
const (
	LockName       = "LOCK"
	IdentityName   = "IDENTITY"
	AcceptorName   = "acceptor.db"
	PartitionsName = "partitions"
	dirMode        = 0o700
	fileMode       = 0o600
	maxPIDBytes    = 32
	// identityTemp is durable.WriteFile's temporary name for IDENTITY.
	identityTemp = IdentityName + ".tmp"
)

// Options tunes Open. The zero value fails at once on a busy lock.
type Options struct {
	// LockTimeout bounds the wait for another agent to release the
	// directory's lock; 0 tries once.
	LockTimeout time.Duration
}

// Dir is an open, locked data directory. Its methods are safe for
// concurrent use.
type Dir struct {
	path string
	id   Identity
	boot uint64

	mu     sync.Mutex
	lock   *os.File // nil once closed
	closed bool
}

// Open locks the data directory dir (creating it, mode 0700, if missing),
// checks that it belongs to the node want names (or, on first use, writes
// want as its identity), and increments the boot counter, durably, before
// it returns.
//
// Errors an operator acts on: *LockedError (ErrLocked) when another agent
// has the directory; *IdentityMismatchError (ErrIdentity) when it belongs
// to another node; *CorruptError (ErrCorrupt) when the identity file is
// damaged, which is never repaired here; ErrInvalid for a bad want or
// opts; ErrBootExhausted. On any error nothing in dir was changed except
// that it may have been created and its lock file written.
func Open(dir string, want Identity, opts Options) (*Dir, error) {
	switch {
	case dir == "":
		return nil, fmt.Errorf("%w: data directory path is empty", ErrInvalid)
	case opts.LockTimeout < 0:
		return nil, fmt.Errorf("%w: Options.LockTimeout %v is negative", ErrInvalid, opts.LockTimeout)
	}
	if err := want.validate(); err != nil {
		return nil, err
	}
	dir = filepath.Clean(dir)
	if err := mkdirDurable(dir); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir, opts.LockTimeout)
	if err != nil {
		return nil, err
	}
	d := &Dir{path: dir, id: want, lock: lock}
	if d.boot, err = d.advanceBoot(want); err != nil {
		_ = lock.Close()
		return nil, err
	}
	return d, nil
}

// lockDir takes the directory's lock and records this process's pid in it.
func lockDir(dir string, timeout time.Duration) (*os.File, error) {
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return nil, fmt.Errorf("datadir: open lock file %s: %w", path, err)
	}
	busy, err := tryLock(f, timeout)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if busy {
		pid := readPID(f)
		_ = f.Close()
		return nil, &LockedError{Path: dir, HolderPID: pid}
	}
	// The pid is for the message a second agent prints; it is synced so
	// that it names this process and not one from before a crash.
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("datadir: write pid to lock file %s: %w", path, err)
	}
	return f, nil
}

// readPID reads the holder's pid from the lock file, 0 when it holds none
// (the holder may not have written it yet).
func readPID(f *os.File) int {
	buf := make([]byte, maxPIDBytes)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// advanceBoot checks (or, in a new directory, writes) the identity file
// and stores the next boot counter durably, returning it.
func (d *Dir) advanceBoot(want Identity) (uint64, error) {
	// A temp file is a replacement that never got renamed in: the crash
	// came before the rename, so IDENTITY is still the current file.
	tmp := filepath.Join(d.path, identityTemp)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("datadir: remove stale %s: %w", tmp, err)
	}
	path := d.IdentityPath()
	raw, err := readBounded(path)
	var boot uint64
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := d.checkNoStores(); err != nil {
			return 0, err
		}
	case err != nil:
		return 0, err
	default:
		stored, b, derr := decodeIdentity(raw)
		if derr != nil {
			return 0, &CorruptError{Path: path, Reason: derr.Error()}
		}
		if field, s, w, ok := mismatch(stored, want); ok {
			return 0, &IdentityMismatchError{Path: path, Field: field, Stored: s, Want: w}
		}
		if b >= MaxBoot {
			return 0, fmt.Errorf("%w: %s: boot counter is at its limit %d; give the node a new node id and a fresh directory", ErrBootExhausted, path, b)
		}
		boot = b
	}
	boot++
	enc, err := encodeIdentity(want, boot)
	if err != nil {
		return 0, err
	}
	if err := durable.WriteFile(d.path, IdentityName, enc, fileMode); err != nil {
		return 0, fmt.Errorf("datadir: %w", err)
	}
	return boot, nil
}

// checkNoStores refuses a directory that has stores but no identity file:
// the identity is written before any store is created, so such a directory
// lost its identity, and adopting it could make this agent another node's
// acceptor.
func (d *Dir) checkNoStores() error {
	for _, p := range []string{d.AcceptorPath(), d.PartitionsPath()} {
		if _, err := os.Lstat(p); err == nil {
			return &CorruptError{Path: d.IdentityPath(), Reason: fmt.Sprintf("missing, but %s exists: the directory lost its identity or belongs to another node", p)}
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("datadir: stat %s: %w", p, err)
		}
	}
	return nil
}

// readBounded reads path, at most MaxIdentityBytes+1 bytes so that an
// oversized file is reported as such without reading it all.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("datadir: open %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(MaxIdentityBytes)+1))
	if err != nil {
		return nil, fmt.Errorf("datadir: read %s: %w", path, err)
	}
	return b, nil
}

// mkdirDurable creates dir and its missing ancestors (mode 0700),
// durably, and checks that dir is a directory.
func mkdirDurable(dir string) error {
	if err := durable.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("datadir: data directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("datadir: stat data directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: data directory %s is not a directory", ErrInvalid, dir)
	}
	return nil
}

// Path is the data directory.
func (d *Dir) Path() string { return d.path }

// LockPath is the lock file.
func (d *Dir) LockPath() string { return filepath.Join(d.path, LockName) }

// IdentityPath is the identity file.
func (d *Dir) IdentityPath() string { return filepath.Join(d.path, IdentityName) }

// AcceptorPath is the acceptor's bbolt file.
func (d *Dir) AcceptorPath() string { return filepath.Join(d.path, AcceptorName) }

// PartitionsPath is the partition store's pebble directory.
func (d *Dir) PartitionsPath() string { return filepath.Join(d.path, PartitionsName) }

// Identity is the node the directory belongs to.
func (d *Dir) Identity() Identity { return d.id }

// Boot is this incarnation's boot counter, already durable: strictly
// greater than that of every earlier Open of the directory. It is the
// node's node.Config.Boot.
func (d *Dir) Boot() uint64 { return d.boot }

// Close releases the lock. Close the stores first: the lock is what keeps
// a second agent from opening them. Calling Close again returns nil.
func (d *Dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	err := d.lock.Close()
	d.lock = nil
	if err != nil {
		return fmt.Errorf("datadir: close lock file %s: %w", d.LockPath(), err)
	}
	return nil
}
