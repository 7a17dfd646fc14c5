package boltstore

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
)

// bbolt's on-disk meta page (format version 2), read here without bbolt.
// bbolt maps the file and trusts the meta page's high-water mark: a file
// cut short leaves that mark pointing past the end, and bbolt then touches
// unmapped pages (SIGBUS) instead of returning an error. checkFile reads
// the meta pages first so that a truncated file is reported cleanly.
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	pageHeaderBytes  = 16
	metaBytes        = 64 // up to and including the checksum
	metaSummedBytes  = 56 // the checksum covers the fields before it
	minPageSizeBytes = 1024
	maxPageSizeBytes = 1024 << 14
)

// boltMeta holds the meta-page fields checkFile needs.
type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64 // high-water mark: pages [0, pgid) are in use
	txid     uint64
}

// parseMeta decodes a meta page body; ok is false when the magic, version
// or checksum is wrong (a torn meta write looks like that, and bbolt then
// falls back to the other meta page).
func parseMeta(b []byte) (boltMeta, bool) {
	if len(b) < metaBytes {
		return boltMeta{}, false
	}
	e := binary.NativeEndian // bbolt writes its structs in memory order
	if e.Uint32(b[0:]) != boltMagic || e.Uint32(b[4:]) != boltVersion {
		return boltMeta{}, false
	}
	h := fnv.New64a()
	_, _ = h.Write(b[:metaSummedBytes])
	if h.Sum64() != e.Uint64(b[metaSummedBytes:]) {
		return boltMeta{}, false
	}
	return boltMeta{
		pageSize: e.Uint32(b[8:]),
		root:     e.Uint64(b[16:]),
		freelist: e.Uint64(b[32:]),
		pgid:     e.Uint64(b[40:]),
		txid:     e.Uint64(b[48:]),
	}, true
}

// checkFile rejects, with ErrCorrupt naming path, a file that is not a
// bbolt file or whose current meta page points beyond the file's end. It
// holds the file's lock while reading, and fails with ErrLocked when
// another process keeps the store open past lockTimeout.
func checkFile(path string, lockTimeout time.Duration) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	defer f.Close()
	if err := lockFile(f, lockTimeout); err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("boltstore: stat %s: %w", path, err)
	}
	size := fi.Size()
	if size == 0 {
		return fmt.Errorf("%w: boltstore: %s: empty file (stores are created whole, so this is damage, not a new store)", caspaxos.ErrCorrupt, path)
	}
	readMeta := func(off int64) (boltMeta, bool) {
		buf := make([]byte, metaBytes)
		if _, err := f.ReadAt(buf, off+pageHeaderBytes); err != nil && err != io.EOF {
			return boltMeta{}, false
		}
		return parseMeta(buf)
	}
	var metas []boltMeta
	m0, ok0 := readMeta(0)
	if ok0 {
		metas = append(metas, m0)
	}
	// Meta page 1 sits one page in; without meta 0 the page size is
	// unknown, so try each size bbolt can use (as bbolt itself does).
	for ps := int64(minPageSizeBytes); ps <= maxPageSizeBytes && ps < size; ps <<= 1 {
		if ok0 && ps != int64(m0.pageSize) {
			continue
		}
		if m1, ok := readMeta(ps); ok && int64(m1.pageSize) == ps {
			metas = append(metas, m1)
			break
		}
	}
	if len(metas) == 0 {
		return fmt.Errorf("%w: boltstore: %s: not a bbolt file, or both meta pages are damaged", caspaxos.ErrCorrupt, path)
	}
	cur := metas[0]
	for _, m := range metas[1:] {
		if m.txid > cur.txid {
			cur = m
		}
	}
	ps := uint64(cur.pageSize)
	if ps < minPageSizeBytes || ps > maxPageSizeBytes || ps&(ps-1) != 0 {
		return fmt.Errorf("%w: boltstore: %s: page size %d", caspaxos.ErrCorrupt, path, ps)
	}
	if cur.pgid < 2 || cur.pgid > uint64(size)/ps {
		return fmt.Errorf("%w: boltstore: %s: truncated: meta (txid %d) needs %d pages of %d bytes, file has %d bytes",
			caspaxos.ErrCorrupt, path, cur.txid, cur.pgid, ps, size)
	}
	if err := checkPages(f, cur); err != nil {
		return fmt.Errorf("%w: boltstore: %s: meta txid %d: %v", caspaxos.ErrCorrupt, path, cur.txid, err)
	}
	return nil
}
