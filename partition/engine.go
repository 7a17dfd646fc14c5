package partition

import (
	"bytes"
	"fmt"
)

// KVReader is the read side of an ordered byte-key store, the only thing
// the shared store logic needs from a backend. Returned slices are valid
// only until the next call; the shared logic copies what it keeps.
type KVReader interface {
	Get(k []byte) (v []byte, ok bool, err error)
	// First returns the first pair with lo <= key < hi.
	First(lo, hi []byte) (k, v []byte, ok bool, err error)
	// Last returns the last pair with lo <= key < hi.
	Last(lo, hi []byte) (k, v []byte, ok bool, err error)
	// Scan calls fn for each pair with lo <= key < hi, ascending, until fn
	// returns false or an error.
	Scan(lo, hi []byte, fn func(k, v []byte) (bool, error)) error
}

// KVBatch is an atomic batch of writes over a backend. When ApplyWrites
// needs reads (NeedsReads), the batch's reads must see its own earlier
// writes; otherwise reads are never called.
type KVBatch interface {
	KVReader
	Set(k, v []byte) error
	Delete(k []byte) error
	// DeleteRange deletes keys in [lo, hi).
	DeleteRange(lo, hi []byte) error
}

// ApplyWrites runs the writes on b, in order. It is the single definition
// of what a Write means, shared by MemStore and the pebble store. An error
// leaves b partially written; the caller discards it.
func ApplyWrites(b KVBatch, ws []Write) error {
	var buf, kbuf []byte
	for i := range ws {
		w := &ws[i]
		var err error
		if buf, kbuf, err = applyWrite(b, w, buf, kbuf); err != nil {
			return fmt.Errorf("partition %d: %w", w.Partition, err)
		}
	}
	return nil
}

func applyWrite(b KVBatch, w *Write, buf, kbuf []byte) ([]byte, []byte, error) {
	p := w.Partition
	if w.Reset != nil {
		if err := applyReset(b, p, w.Reset); err != nil {
			return buf, kbuf, err
		}
	}
	if w.Truncate != nil {
		if err := applyTruncate(b, p, w.Truncate); err != nil {
			return buf, kbuf, err
		}
	}
	for i := range w.Install {
		kv := &w.Install[i]
		kbuf = AppendKVKey(kbuf[:0], p, kv.Key)
		buf = EncodeKVValue(buf[:0], kv)
		if err := b.Set(kbuf, buf); err != nil {
			return buf, kbuf, err
		}
	}
	for i := range w.Append {
		op := &w.Append[i]
		if op.LSN == 0 || op.Epoch == 0 {
			return buf, kbuf, fmt.Errorf("%w: append of op with LSN %d epoch %d", ErrInvariant, op.LSN, op.Epoch)
		}
		kbuf = AppendLogKey(kbuf[:0], p, op.LSN)
		buf = EncodeLogRecord(buf[:0], op)
		if err := b.Set(kbuf, buf); err != nil {
			return buf, kbuf, err
		}
	}
	for i := range w.Apply {
		op := &w.Apply[i]
		kbuf = AppendKVKey(kbuf[:0], p, op.Key)
		if op.LSN > w.UndoAbove {
			u := undoRecord{Key: op.Key}
			old, ok, err := b.Get(kbuf)
			if err != nil {
				return buf, kbuf, err
			}
			if ok {
				prev, err := DecodeKVValue(op.Key, old)
				if err != nil {
					return buf, kbuf, fmt.Errorf("state key %q: %w", op.Key, err)
				}
				u.Existed, u.Prev = true, prev
			}
			ukey := AppendUndoKey(nil, p, op.LSN)
			if err := b.Set(ukey, encodeUndo(buf[:0], op.LSN, &u)); err != nil {
				return buf, kbuf, err
			}
		}
		if op.Delete {
			if err := b.Delete(kbuf); err != nil {
				return buf, kbuf, err
			}
			continue
		}
		buf = EncodeKVValue(buf[:0], &KV{Key: op.Key, Value: op.Value, LSN: op.LSN, Epoch: op.Epoch})
		if err := b.Set(kbuf, buf); err != nil {
			return buf, kbuf, err
		}
	}
	if w.CompactTo > 0 {
		if err := b.DeleteRange(AppendLogKey(nil, p, 0), AppendLogKey(nil, p, w.CompactTo+1)); err != nil {
			return buf, kbuf, err
		}
	}
	if w.PruneUndoTo > 0 {
		if err := b.DeleteRange(AppendUndoKey(nil, p, 0), AppendUndoKey(nil, p, w.PruneUndoTo+1)); err != nil {
			return buf, kbuf, err
		}
	}
	if t := w.PurgeConflictsThrough; t != (Token{}) {
		lo, _ := SectionBounds(p, secConflict)
		if err := b.DeleteRange(lo, append(AppendConflictKey(nil, p, t.Epoch, t.LSN), 0)); err != nil {
			return buf, kbuf, err
		}
	}
	if w.Meta != nil {
		if err := b.Set(MetaKey(p), EncodeMeta(buf[:0], w.Meta)); err != nil {
			return buf, kbuf, err
		}
	}
	if w.ApplyState != nil {
		if err := b.Set(ApplyKey(p), EncodeApplyState(buf[:0], w.ApplyState)); err != nil {
			return buf, kbuf, err
		}
	}
	return buf, kbuf, nil
}

// moveToConflicts writes the log ops of p in [lo, hi) that keep(op) rejects
// to the conflict records. Ops keep accepts are simply dropped by the
// caller's range delete (they are in the lineage).
func moveToConflicts(b KVBatch, p ID, lo, hi []byte, removedAt Epoch, reason ConflictReason, keep func(*Op) bool) error {
	type pending struct{ k, v []byte }
	var out []pending
	err := b.Scan(lo, hi, func(k, v []byte) (bool, error) {
		_, _, rest, _ := parseKey(k)
		lsn, ok := lsnFromKey(rest)
		if !ok {
			return false, corruptf("log key %x malformed", k)
		}
		op, err := DecodeLogRecord(lsn, v)
		if err != nil {
			return false, fmt.Errorf("log LSN %d: %w", lsn, err)
		}
		if keep != nil && keep(&op) {
			return true, nil
		}
		c := ConflictRecord{Partition: p, Op: op, RemovedAt: removedAt, Reason: reason}
		out = append(out, pending{AppendConflictKey(nil, p, op.Epoch, op.LSN), EncodeConflict(nil, &c)})
		return true, nil
	})
	if err != nil {
		return err
	}
	// Writing while scanning could disturb a batch iterator; write after.
	for _, pc := range out {
		if err := b.Set(pc.k, pc.v); err != nil {
			return err
		}
	}
	return nil
}

func applyReset(b KVBatch, p ID, r *Reset) error {
	lineage := history(r.Lineage)
	lo, hi := SectionBounds(p, secLog)
	keep := func(op *Op) bool {
		if op.LSN > r.Last {
			return false
		}
		e, ok := lineage.epochAt(op.LSN)
		return ok && e == op.Epoch
	}
	if err := moveToConflicts(b, p, lo, hi, r.RemovedAt, ConflictSnapshot, keep); err != nil {
		return err
	}
	for _, sec := range []byte{secLog, secKV, secUndo} {
		lo, hi := SectionBounds(p, sec)
		if err := b.DeleteRange(lo, hi); err != nil {
			return err
		}
	}
	return nil
}

func applyTruncate(b KVBatch, p ID, t *Truncation) error {
	lo := AppendLogKey(nil, p, t.After+1)
	_, hi := SectionBounds(p, secLog)
	if t.After == ^LSN(0) {
		return nil
	}
	if err := moveToConflicts(b, p, lo, hi, t.RemovedAt, t.Reason, nil); err != nil {
		return err
	}
	if err := b.DeleteRange(lo, hi); err != nil {
		return err
	}
	if t.Applied <= t.After {
		return nil
	}
	// Undo applied ops (After, Applied], newest first.
	var undos []undoRecord
	var lsns []LSN
	ulo, uhi := AppendUndoKey(nil, p, t.After+1), AppendUndoKey(nil, p, t.Applied+1)
	err := b.Scan(ulo, uhi, func(k, v []byte) (bool, error) {
		_, _, rest, _ := parseKey(k)
		lsn, ok := lsnFromKey(rest)
		if !ok {
			return false, corruptf("undo key %x malformed", k)
		}
		u, err := decodeUndo(lsn, v)
		if err != nil {
			return false, fmt.Errorf("undo LSN %d: %w", lsn, err)
		}
		lsns = append(lsns, lsn)
		undos = append(undos, u)
		return true, nil
	})
	if err != nil {
		return err
	}
	if LSN(len(lsns)) != t.Applied-t.After {
		return fmt.Errorf("%w: truncating after %d undoes %d applied ops but %d undo records exist",
			ErrCorrupt, t.After, t.Applied-t.After, len(lsns))
	}
	var kbuf, buf []byte
	for i := len(undos) - 1; i >= 0; i-- {
		u := &undos[i]
		kbuf = AppendKVKey(kbuf[:0], p, u.Key)
		if !u.Existed {
			if err := b.Delete(kbuf); err != nil {
				return err
			}
			continue
		}
		buf = EncodeKVValue(buf[:0], &u.Prev)
		if err := b.Set(kbuf, buf); err != nil {
			return err
		}
	}
	return b.DeleteRange(ulo, uhi)
}

// ListPartitions returns the partitions that have a Meta record.
func ListPartitions(r KVReader) ([]ID, error) {
	var ids []ID
	lo := []byte{keyPrefix}
	hi := []byte{keyPrefix + 1}
	for {
		k, _, ok, err := r.First(lo, hi)
		if err != nil || !ok {
			return ids, err
		}
		p, _, _, ok := parseKey(k)
		if !ok {
			return nil, corruptf("store key %x malformed", k)
		}
		if _, ok, err := r.Get(MetaKey(p)); err != nil {
			return nil, err
		} else if ok {
			ids = append(ids, p)
		}
		_, next := PartitionBounds(p)
		if bytes.Equal(next, hi) {
			return ids, nil
		}
		lo = next
	}
}

// LoadPartition recovers partition p from r (see Store.Load).
func LoadPartition(r KVReader, p ID) (Recovered, error) {
	rec := Recovered{Partition: p}
	v, ok, err := r.Get(MetaKey(p))
	if err != nil {
		return rec, err
	}
	if !ok {
		return rec, fmt.Errorf("load partition %d: %w", p, ErrUnknownPartition)
	}
	if rec.Meta, err = DecodeMeta(v); err != nil {
		return rec, fmt.Errorf("load partition %d: meta: %w", p, err)
	}
	if v, ok, err = r.Get(ApplyKey(p)); err != nil {
		return rec, err
	} else if ok {
		if rec.Apply, err = DecodeApplyState(v); err != nil {
			return rec, fmt.Errorf("load partition %d: apply state: %w", p, err)
		}
	}
	m := &rec.Meta
	rec.Last, rec.LastEpoch = m.LogBase, m.LogBaseEpoch
	lo, hi := SectionBounds(p, secLog)
	k, v, ok, err := r.Last(lo, hi)
	if err != nil {
		return rec, err
	}
	if ok {
		_, _, rest, _ := parseKey(k)
		lsn, okk := lsnFromKey(rest)
		if !okk {
			return rec, fmt.Errorf("load partition %d: %w", p, corruptf("log key %x malformed", k))
		}
		op, err := DecodeLogRecord(lsn, v)
		if err != nil {
			return rec, fmt.Errorf("load partition %d: log LSN %d: %w", p, lsn, err)
		}
		rec.Last, rec.LastEpoch = lsn, op.Epoch
	}
	if !m.NeedSnapshot && rec.Apply.Applied > rec.Last {
		return rec, fmt.Errorf("load partition %d: %w", p, corruptf("applied LSN %d beyond log end %d", rec.Apply.Applied, rec.Last))
	}
	if !m.NeedSnapshot && rec.Apply.Applied < m.LogBase {
		return rec, fmt.Errorf("load partition %d: %w", p, corruptf("applied LSN %d below log base %d", rec.Apply.Applied, m.LogBase))
	}
	if m.NeedSnapshot {
		return rec, nil
	}
	next := rec.Apply.Applied + 1
	err = r.Scan(AppendLogKey(nil, p, next), hi, func(k, v []byte) (bool, error) {
		_, _, rest, _ := parseKey(k)
		lsn, ok := lsnFromKey(rest)
		if !ok {
			return false, corruptf("log key %x malformed", k)
		}
		if lsn != next {
			return false, corruptf("log gap: LSN %d follows %d", lsn, next-1)
		}
		op, err := DecodeLogRecord(lsn, v)
		if err != nil {
			return false, fmt.Errorf("log LSN %d: %w", lsn, err)
		}
		rec.Tail = append(rec.Tail, op)
		next++
		return true, nil
	})
	if err != nil {
		return rec, fmt.Errorf("load partition %d: %w", p, err)
	}
	if next-1 != rec.Last {
		return rec, fmt.Errorf("load partition %d: %w", p, corruptf("log ends at %d, expected %d", next-1, rec.Last))
	}
	return rec, nil
}

// ReadLogOps implements Store.ReadLog over r.
func ReadLogOps(r KVReader, p ID, from LSN, maxOps, maxBytes int) ([]Op, error) {
	var ops []Op
	size := 0
	_, hi := SectionBounds(p, secLog)
	next := from
	err := r.Scan(AppendLogKey(nil, p, from), hi, func(k, v []byte) (bool, error) {
		_, _, rest, _ := parseKey(k)
		lsn, ok := lsnFromKey(rest)
		if !ok {
			return false, corruptf("log key %x malformed", k)
		}
		if lsn != next {
			if len(ops) == 0 {
				return false, nil // from is compacted: nothing
			}
			return false, corruptf("log gap: LSN %d follows %d", lsn, next-1)
		}
		op, err := DecodeLogRecord(lsn, v)
		if err != nil {
			return false, fmt.Errorf("log LSN %d: %w", lsn, err)
		}
		ops = append(ops, op)
		size += op.wireSize()
		next++
		return len(ops) < maxOps && size < maxBytes, nil
	})
	if err != nil {
		return nil, fmt.Errorf("partition %d: read log from %d: %w", p, from, err)
	}
	return ops, nil
}

// GetKV implements Store.Get over r.
func GetKV(r KVReader, p ID, key []byte) (KV, bool, error) {
	v, ok, err := r.Get(AppendKVKey(nil, p, key))
	if err != nil || !ok {
		return KV{}, false, err
	}
	kv, err := DecodeKVValue(key, v)
	if err != nil {
		return KV{}, false, fmt.Errorf("partition %d: state key %q: %w", p, key, err)
	}
	return kv, true, nil
}

// ReadKVChunk implements Store.ReadKV over r, which must be a consistent view.
func ReadKVChunk(r KVReader, p ID, after []byte, maxBytes int) ([]KV, bool, LSN, error) {
	var applied LSN
	if v, ok, err := r.Get(ApplyKey(p)); err != nil {
		return nil, false, 0, err
	} else if ok {
		a, err := DecodeApplyState(v)
		if err != nil {
			return nil, false, 0, fmt.Errorf("partition %d: apply state: %w", p, err)
		}
		applied = a.Applied
	}
	lo, hi := SectionBounds(p, secKV)
	if after != nil {
		lo = append(AppendKVKey(nil, p, after), 0)
	}
	var kvs []KV
	size, more := 0, false
	err := r.Scan(lo, hi, func(k, v []byte) (bool, error) {
		if size >= maxBytes {
			more = true
			return false, nil
		}
		key := k[prefixLen:]
		kv, err := DecodeKVValue(key, v)
		if err != nil {
			return false, fmt.Errorf("state key %q: %w", key, err)
		}
		kvs = append(kvs, kv)
		size += len(kv.Key) + len(kv.Value) + 24
		return true, nil
	})
	if err != nil {
		return nil, false, 0, fmt.Errorf("partition %d: read state: %w", p, err)
	}
	return kvs, more, applied, nil
}

// ListConflicts implements Store.Conflicts over r.
func ListConflicts(r KVReader, p ID, after Token, limit int) ([]ConflictRecord, error) {
	lo, hi := SectionBounds(p, secConflict)
	if after != (Token{}) {
		lo = append(AppendConflictKey(nil, p, after.Epoch, after.LSN), 0)
	}
	var out []ConflictRecord
	err := r.Scan(lo, hi, func(k, v []byte) (bool, error) {
		if len(out) >= limit {
			return false, nil
		}
		rest := k[prefixLen:]
		if len(rest) != 16 {
			return false, corruptf("conflict key %x malformed", k)
		}
		e := Epoch(beUint64(rest[:8]))
		lsn := LSN(beUint64(rest[8:]))
		c, err := DecodeConflict(p, e, lsn, v)
		if err != nil {
			return false, fmt.Errorf("conflict (%d, %d): %w", e, lsn, err)
		}
		out = append(out, c)
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("partition %d: list conflicts: %w", p, err)
	}
	return out, nil
}

func beUint64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}
