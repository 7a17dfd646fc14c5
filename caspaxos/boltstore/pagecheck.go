package boltstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// bbolt page format (version 2), as far as walking the page graph needs.
// bbolt reads pages through its mapping and trusts every offset, count and
// page id in them: a damaged page can make it read outside the mapping,
// allocate without bound, or loop forever (a branch page that points at
// itself). checkPages walks the whole graph with reads that are bounds-
// checked, a visited set and a depth bound, so that by the time bbolt sees
// the file every page it can reach is known to be well formed.
const (
	pageBranch   = 0x01
	pageLeaf     = 0x02
	pageFreelist = 0x10
	leafBucket   = 0x01 // leaf element flag: the value is a nested bucket
	elementBytes = 16   // branch and leaf elements are both 16 bytes
	inBucketSize = 16   // nested bucket header: root page id, sequence
	noFreelist   = ^uint64(0)
	freelistMany = 0xFFFF // count overflow marker: the real count is the first id slot
	maxWalkDepth = 64     // far beyond any real tree; bounds a damaged one
)

// pageWalker walks a bbolt file's page graph from one meta page.
type pageWalker struct {
	f    *os.File
	ps   uint64 // page size
	hwm  uint64 // high-water mark: valid ids are [2, hwm)
	used []uint64
	free []uint64
}

func bitSet(bits []uint64, i uint64) bool { return bits[i/64]&(1<<(i%64)) != 0 }
func bitPut(bits []uint64, i uint64)      { bits[i/64] |= 1 << (i % 64) }

// checkPages verifies the freelist and the bucket tree of meta m.
func checkPages(f *os.File, m boltMeta) error {
	w := &pageWalker{
		f:    f,
		ps:   uint64(m.pageSize),
		hwm:  m.pgid,
		used: make([]uint64, m.pgid/64+1),
		free: make([]uint64, m.pgid/64+1),
	}
	if m.freelist != noFreelist {
		if err := w.freelist(m.freelist); err != nil {
			return err
		}
	}
	return w.node(m.root, nil, 0)
}

// readPage reads page id with its overflow pages and marks them used.
func (w *pageWalker) readPage(id uint64) ([]byte, error) {
	if id < 2 || id >= w.hwm {
		return nil, fmt.Errorf("page id %d outside [2, %d)", id, w.hwm)
	}
	first := make([]byte, w.ps)
	if _, err := w.f.ReadAt(first, int64(id*w.ps)); err != nil && err != io.EOF {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	e := binary.NativeEndian
	if got := e.Uint64(first[0:]); got != id {
		return nil, fmt.Errorf("page %d: header says page %d", id, got)
	}
	overflow := uint64(e.Uint32(first[12:]))
	if overflow >= w.hwm-id {
		return nil, fmt.Errorf("page %d: %d overflow pages run past the high-water mark %d", id, overflow, w.hwm)
	}
	for p := id; p <= id+overflow; p++ {
		if bitSet(w.used, p) {
			return nil, fmt.Errorf("page %d: reached twice (cycle or shared page)", p)
		}
		if bitSet(w.free, p) {
			return nil, fmt.Errorf("page %d: in use and on the freelist", p)
		}
		bitPut(w.used, p)
	}
	if overflow == 0 {
		return first, nil
	}
	page := make([]byte, (overflow+1)*w.ps)
	if _, err := w.f.ReadAt(page, int64(id*w.ps)); err != nil && err != io.EOF {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	return page, nil
}

func (w *pageWalker) freelist(id uint64) error {
	page, err := w.readPage(id)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	e := binary.NativeEndian
	if flags := e.Uint16(page[8:]); flags != pageFreelist {
		return fmt.Errorf("freelist page %d: flags %#x", id, flags)
	}
	start, count := uint64(pageHeaderBytes), uint64(e.Uint16(page[10:]))
	if count == freelistMany {
		count = e.Uint64(page[start:])
		start += 8
	}
	if count > (uint64(len(page))-start)/8 {
		return fmt.Errorf("freelist page %d: %d ids do not fit", id, count)
	}
	for i := range count {
		free := e.Uint64(page[start+i*8:])
		if free < 2 || free >= w.hwm {
			return fmt.Errorf("freelist page %d: free id %d outside [2, %d)", id, free, w.hwm)
		}
		if bitSet(w.free, free) || bitSet(w.used, free) {
			return fmt.Errorf("freelist page %d: page %d freed twice or is the freelist", id, free)
		}
		bitPut(w.free, free)
	}
	return nil
}

// node checks a tree node: page id, or (id 0) the inline page of a small
// bucket held in its parent's value.
func (w *pageWalker) node(id uint64, inline []byte, depth int) error {
	if depth > maxWalkDepth {
		return fmt.Errorf("page %d: tree deeper than %d", id, maxWalkDepth)
	}
	page := inline
	if inline == nil {
		var err error
		if page, err = w.readPage(id); err != nil {
			return err
		}
	}
	if len(page) < pageHeaderBytes {
		return fmt.Errorf("inline page of %d bytes", len(page))
	}
	e := binary.NativeEndian
	flags, count := e.Uint16(page[8:]), uint64(e.Uint16(page[10:]))
	if uint64(pageHeaderBytes)+count*elementBytes > uint64(len(page)) {
		return fmt.Errorf("page %d: %d elements do not fit in %d bytes", id, count, len(page))
	}
	switch {
	case flags == pageBranch && inline == nil:
		if count == 0 {
			return fmt.Errorf("page %d: empty branch page", id)
		}
	case flags == pageLeaf:
	default:
		return fmt.Errorf("page %d: flags %#x where a branch or leaf page belongs", id, flags)
	}
	var prev []byte
	for i := range count {
		el := uint64(pageHeaderBytes) + i*elementBytes
		var pos, ksize, vsize uint64
		if flags == pageBranch {
			pos, ksize = uint64(e.Uint32(page[el:])), uint64(e.Uint32(page[el+4:]))
		} else {
			pos, ksize, vsize = uint64(e.Uint32(page[el+4:])), uint64(e.Uint32(page[el+8:])), uint64(e.Uint32(page[el+12:]))
		}
		kstart := el + pos
		vend := kstart + ksize + vsize
		if vend > uint64(len(page)) {
			return fmt.Errorf("page %d element %d: key/value past the page end", id, i)
		}
		key := page[kstart : kstart+ksize]
		if i > 0 && bytes.Compare(prev, key) >= 0 {
			return fmt.Errorf("page %d element %d: keys out of order", id, i)
		}
		prev = key
		if flags == pageBranch {
			if err := w.node(e.Uint64(page[el+8:]), nil, depth+1); err != nil {
				return err
			}
			continue
		}
		if e.Uint32(page[el:])&leafBucket == 0 {
			continue
		}
		value := page[kstart+ksize : vend]
		if len(value) < inBucketSize {
			return fmt.Errorf("page %d element %d: bucket header of %d bytes", id, i, len(value))
		}
		root := e.Uint64(value)
		var err error
		if root == 0 {
			err = w.node(0, value[inBucketSize:], depth+1)
		} else {
			err = w.node(root, nil, depth+1)
		}
		if err != nil {
			return fmt.Errorf("bucket %q: %w", key, err)
		}
	}
	return nil
}
