package nodewire

import (
	"encoding/binary"
	"fmt"
)

// reader reads fields from a payload. The first failure sticks, so callers
// read straight through and check once; a failure names the field and the
// offset (Decode wraps it in ErrCorrupt once, after the section's context,
// so messages read "corrupt batch: data message 3: ...").
type reader struct {
	b   []byte
	off int
	err error
	// regions holds the region names decoded last: a batch names the same
	// two or three regions in every partition message, so reusing their
	// strings saves two allocations per message.
	regions [4]string
	next    int
}

// region returns b as a string, reusing a recent equal one.
func (r *reader) region(b []byte) string {
	for _, s := range r.regions {
		if s == string(b) {
			return s
		}
	}
	s := string(b)
	r.regions[r.next%len(r.regions)] = s
	r.next++
	return s
}

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%s at offset %d", fmt.Sprintf(format, args...), r.off)
	}
}

func (r *reader) byte1(field string) byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail("%s truncated", field)
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

// uvarint reads a uvarint in its shortest form (a longer encoding is
// refused so that every batch has exactly one encoding).
func (r *reader) uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	b := r.b[r.off:]
	if len(b) > 0 && b[0] < 0x80 {
		r.off++
		return uint64(b[0])
	}
	v, n := binary.Uvarint(b)
	switch {
	case n == 0:
		r.fail("%s truncated", field)
		return 0
	case n < 0:
		r.fail("%s overflows 64 bits", field)
		return 0
	case b[n-1] == 0:
		r.fail("%s not in shortest form", field)
		return 0
	}
	r.off += n
	return v
}

// varint reads a zigzag varint (binary.AppendVarint) in its shortest form.
func (r *reader) varint(field string) int64 {
	u := r.uvarint(field)
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

// count reads a count of items, refusing one above limit or one whose
// items (at least minBytes each) cannot fit in the bytes left, so that the
// caller may allocate count items.
func (r *reader) count(field string, limit, minBytes int) int {
	n := r.uvarint(field)
	if r.err != nil {
		return 0
	}
	if n > uint64(limit) {
		r.fail("%s %d exceeds %d", field, n, limit)
		return 0
	}
	if n > uint64(r.left()/minBytes) {
		r.fail("%s %d cannot fit in %d bytes", field, n, r.left())
		return 0
	}
	return int(n)
}

// bytes reads a length-prefixed field, refusing lengths beyond limit
// before slicing. The result aliases the input (callers copy it out);
// empty is nil.
func (r *reader) bytes(field string, limit int) []byte {
	n := r.uvarint(field)
	if r.err != nil {
		return nil
	}
	if n > uint64(limit) {
		r.fail("%s length %d exceeds %d", field, n, limit)
		return nil
	}
	if n > uint64(r.left()) {
		r.fail("%s length %d but %d bytes left", field, n, r.left())
		return nil
	}
	if n == 0 {
		return nil
	}
	v := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return v
}

func appendBytes(dst, v []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}
