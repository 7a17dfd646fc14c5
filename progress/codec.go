package progress

import (
	"encoding/binary"
	"fmt"
)

// Encoding, format version 1. The table is part of a CASPaxos register value
// that is rewritten on every failover, so it is delta-coded with uvarints
// and region names are stored once in a dictionary (failovers bounce
// between a handful of regions). A closed epoch costs 3 bytes when its
// epoch step, region index and length each fit in 7 bits, and at most 30;
// a new region name costs its length plus one byte once.
//
//	format        byte 0x01
//	partition     uvarint length, bytes
//	first epoch   uvarint Epochs[0].Epoch
//	base delta    uvarint Epochs[0].Epoch - BaseEpoch
//	base LSN      uvarint Epochs[0].StartLSN
//	regions       uvarint count, then per region: uvarint length, bytes
//	              (distinct, in order of first use by the epochs below)
//	epochs        uvarint count, then per epoch i:
//	                i > 0:       uvarint Epoch_i - Epoch_{i-1} - 1
//	                             uvarint region index
//	                i < count-1: uvarint EndLSN - StartLSN
//
// Starts are implied (each epoch starts where the previous ended) and the
// last epoch is the open one, so every structural invariant holds by
// construction. There is no checksum: the register record has its own.
// The encoding is canonical: Decode accepts only minimal uvarints, a
// dictionary in first-use order and no trailing bytes, so decoding and
// re-encoding gives back the same bytes (the fuzz target checks it).
const formatV1 byte = 0x01

// MaxEncodedLen bounds Encode's output for any valid table; Decode refuses
// longer input before reading it.
const MaxEncodedLen = 1 + // format
	binary.MaxVarintLen64 + MaxPartitionBytes + // partition
	3*binary.MaxVarintLen64 + // first epoch, base delta, base LSN
	binary.MaxVarintLen64 + MaxEpochs*(binary.MaxVarintLen64+MaxRegionBytes) + // regions
	binary.MaxVarintLen64 + MaxEpochs*3*binary.MaxVarintLen64 // epochs

// Encode appends t's encoding to dst. It refuses an invalid table: the
// register must never hold a table that Decode would reject.
func Encode(dst []byte, t Table) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return dst, err
	}
	first := t.Epochs[0]
	dst = append(dst, formatV1)
	dst = binary.AppendUvarint(dst, uint64(len(t.Partition)))
	dst = append(dst, t.Partition...)
	dst = binary.AppendUvarint(dst, uint64(first.Epoch))
	dst = binary.AppendUvarint(dst, uint64(first.Epoch-t.BaseEpoch))
	dst = binary.AppendUvarint(dst, uint64(first.StartLSN))

	var idx [MaxEpochs]int
	regions := make([]string, 0, len(t.Epochs))
	for i, e := range t.Epochs {
		j := 0
		for j < len(regions) && regions[j] != e.WriteRegion {
			j++
		}
		if j == len(regions) {
			regions = append(regions, e.WriteRegion)
		}
		idx[i] = j
	}
	dst = binary.AppendUvarint(dst, uint64(len(regions)))
	for _, r := range regions {
		dst = binary.AppendUvarint(dst, uint64(len(r)))
		dst = append(dst, r...)
	}

	dst = binary.AppendUvarint(dst, uint64(len(t.Epochs)))
	for i, e := range t.Epochs {
		if i > 0 {
			dst = binary.AppendUvarint(dst, uint64(e.Epoch-t.Epochs[i-1].Epoch-1))
		}
		dst = binary.AppendUvarint(dst, uint64(idx[i]))
		if !e.Open {
			dst = binary.AppendUvarint(dst, uint64(e.EndLSN-e.StartLSN))
		}
	}
	return dst, nil
}

// Decode parses an encoding produced by Encode. Every error wraps
// ErrCorrupt. The result does not alias b.
func Decode(b []byte) (Table, error) {
	if len(b) > MaxEncodedLen {
		return Table{}, fmt.Errorf("progress: %w: %d bytes exceed %d", ErrCorrupt, len(b), MaxEncodedLen)
	}
	if len(b) == 0 {
		return Table{}, fmt.Errorf("progress: %w: empty", ErrCorrupt)
	}
	if b[0] != formatV1 {
		return Table{}, fmt.Errorf("progress: %w: %w: format byte %#x", ErrCorrupt, ErrUnknownVersion, b[0])
	}
	d := decoder{b: b, off: 1}
	var t Table
	t.Partition = d.str("partition", MaxPartitionBytes)
	firstEpoch := d.uvarint("first epoch")
	baseDelta := d.uvarint("base epoch delta")
	baseLSN := d.uvarint("base LSN")
	if d.err == nil && baseDelta >= firstEpoch {
		d.fail("base epoch delta %d leaves no base epoch below first epoch %d", baseDelta, firstEpoch)
	}
	t.BaseEpoch = Epoch(firstEpoch - baseDelta)

	nRegions := d.count("regions")
	regions := make([]string, 0, nRegions)
	for range nRegions {
		r := d.str("region", MaxRegionBytes)
		for _, prev := range regions {
			if d.err == nil && prev == r {
				d.fail("region %q listed twice", r)
			}
		}
		regions = append(regions, r)
	}

	nEpochs := d.count("epochs")
	if d.err == nil && nRegions > nEpochs {
		d.fail("%d regions for %d epochs", nRegions, nEpochs)
	}
	t.Epochs = make([]EpochRange, 0, nEpochs)
	epoch, start, used := firstEpoch, baseLSN, 0
	for i := range nEpochs {
		if i > 0 {
			step := d.uvarint("epoch step")
			if d.err == nil && (step == ^uint64(0) || epoch > ^uint64(0)-step-1) {
				d.fail("epoch overflows after %d", epoch)
			}
			epoch += step + 1
		}
		ri := d.uvarint("region index")
		if d.err == nil {
			switch {
			case ri > uint64(used) || ri >= uint64(nRegions):
				d.fail("epoch %d: region index %d out of order (%d used of %d)", epoch, ri, used, nRegions)
			case ri == uint64(used):
				used++
			}
		}
		if d.err != nil {
			break
		}
		r := EpochRange{Epoch: Epoch(epoch), StartLSN: LSN(start), WriteRegion: regions[ri], Open: i == nEpochs-1}
		if !r.Open {
			n := d.uvarint("epoch length")
			if d.err == nil && start > ^uint64(0)-n {
				d.fail("epoch %d: LSN overflows", epoch)
			}
			start += n
			r.EndLSN = LSN(start)
		}
		t.Epochs = append(t.Epochs, r)
	}
	if d.err == nil && used != nRegions {
		d.fail("%d of %d regions unused", nRegions-used, nRegions)
	}
	if d.err == nil && d.off != len(b) {
		d.fail("%d trailing bytes", len(b)-d.off)
	}
	if d.err != nil {
		return Table{}, d.err
	}
	if err := t.Validate(); err != nil {
		return Table{}, fmt.Errorf("progress: %w: %w", ErrCorrupt, err)
	}
	return t, nil
}

// decoder reads a byte slice and keeps the first error, so the decoding
// code above reads as a straight list of fields.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("progress: %w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
}

// uvarint reads a minimal uvarint: a redundant 0x80 continuation would let
// two byte strings decode to the same table, which breaks canonicality.
func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	switch {
	case n == 0:
		d.fail("%s: truncated", what)
		return 0
	case n < 0:
		d.fail("%s: uvarint overflows 64 bits", what)
		return 0
	case n > 1 && d.b[d.off+n-1] == 0:
		d.fail("%s: non-minimal uvarint", what)
		return 0
	}
	d.off += n
	return v
}

// count reads a count of regions or epochs: 1..MaxEpochs.
func (d *decoder) count(what string) int {
	n := d.uvarint(what)
	if d.err == nil && (n == 0 || n > MaxEpochs) {
		d.fail("%d %s, want 1..%d", n, what, MaxEpochs)
		return 0
	}
	return int(n)
}

// str reads a length-prefixed non-empty string of at most maxBytes.
func (d *decoder) str(what string, maxBytes int) string {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return ""
	}
	if n == 0 || n > uint64(maxBytes) {
		d.fail("%s of %d bytes, want 1..%d", what, n, maxBytes)
		return ""
	}
	if uint64(len(d.b)-d.off) < n {
		d.fail("%s: truncated", what)
		return ""
	}
	s := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return s
}
