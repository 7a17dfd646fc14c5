package pebblestore

import (
	"sync/atomic"

	"github.com/cockroachdb/pebble/vfs"
)

// syncCountingFS wraps a vfs.FS and counts durable syncs of the files it
// opens. Pebble merges the WAL syncs of concurrent committers, so the
// number of synced commits says nothing about how many fsyncs the disk
// actually served; this count does, and is what Fsyncs reports.
type syncCountingFS struct {
	vfs.FS
	n *atomic.Uint64
}

func (fs syncCountingFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return syncCountingFile{File: f, n: fs.n}, nil
}

func (fs syncCountingFS) Create(name string) (vfs.File, error) { return fs.wrap(fs.FS.Create(name)) }

func (fs syncCountingFS) OpenReadWrite(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name, opts...))
}

func (fs syncCountingFS) OpenDir(name string) (vfs.File, error) { return fs.wrap(fs.FS.OpenDir(name)) }

func (fs syncCountingFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname))
}

// syncCountingFile counts Sync, SyncData and full SyncTo calls that succeed.
type syncCountingFile struct {
	vfs.File
	n *atomic.Uint64
}

func (f syncCountingFile) Sync() error {
	err := f.File.Sync()
	if err == nil {
		f.n.Add(1)
	}
	return err
}

func (f syncCountingFile) SyncData() error {
	err := f.File.SyncData()
	if err == nil {
		f.n.Add(1)
	}
	return err
}

func (f syncCountingFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	if err == nil && full {
		f.n.Add(1)
	}
	return full, err
}
