package partition

import (
	"encoding/binary"
	"hash/crc32"
	"time"

	"github.com/fmnode/fmnode/quorum"
)

// Key layout. Every key of partition p starts with 'p' and p as 4 bytes
// big-endian, then a section byte, so one partition's keys are contiguous
// and each section is a contiguous range:
//
//	p|id|'a'                      ApplyState
//	p|id|'c'|epoch(8)|lsn(8)      conflict record of the op (epoch, lsn)
//	p|id|'k'|key                  applied value of key
//	p|id|'l'|lsn(8)               log op
//	p|id|'m'                      Meta
//	p|id|'u'|lsn(8)               undo record of the applied op lsn
//
// Integers in keys are big-endian so that byte order is numeric order.
const (
	keyPrefix   byte = 'p'
	secApply    byte = 'a'
	secConflict byte = 'c'
	secKV       byte = 'k'
	secLog      byte = 'l'
	secMeta     byte = 'm'
	secUndo     byte = 'u'
	prefixLen        = 6
)

// Record formats: the first byte of every stored value names its kind and
// version, so a value can never be mistaken for another kind.
const (
	fmtLog      byte = 0x4c // 'L'
	fmtKV       byte = 0x4b // 'K'
	fmtUndo     byte = 0x55 // 'U'
	fmtConflict byte = 0x43 // 'C'
	fmtMeta     byte = 0x4d // 'M'
	fmtApply    byte = 0x41 // 'A'
	checksumLen      = 4
)

func castagnoli() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// AppendPrefix appends p's section prefix to dst.
func appendPrefix(dst []byte, p ID, sec byte) []byte {
	dst = append(dst, keyPrefix)
	dst = binary.BigEndian.AppendUint32(dst, uint32(p))
	return append(dst, sec)
}

// MetaKey and the other key functions return p's keys (see the layout).
func MetaKey(p ID) []byte  { return appendPrefix(make([]byte, 0, prefixLen), p, secMeta) }
func ApplyKey(p ID) []byte { return appendPrefix(make([]byte, 0, prefixLen), p, secApply) }

// AppendLogKey appends the log key of (p, lsn) to dst.
func AppendLogKey(dst []byte, p ID, lsn LSN) []byte {
	return binary.BigEndian.AppendUint64(appendPrefix(dst, p, secLog), uint64(lsn))
}

// AppendKVKey appends the state key of (p, key) to dst.
func AppendKVKey(dst []byte, p ID, key []byte) []byte {
	return append(appendPrefix(dst, p, secKV), key...)
}

// AppendUndoKey appends the undo key of (p, lsn) to dst.
func AppendUndoKey(dst []byte, p ID, lsn LSN) []byte {
	return binary.BigEndian.AppendUint64(appendPrefix(dst, p, secUndo), uint64(lsn))
}

// AppendConflictKey appends the conflict key of (p, epoch, lsn) to dst.
func AppendConflictKey(dst []byte, p ID, e Epoch, lsn LSN) []byte {
	dst = binary.BigEndian.AppendUint64(appendPrefix(dst, p, secConflict), uint64(e))
	return binary.BigEndian.AppendUint64(dst, uint64(lsn))
}

// SectionBounds returns [lo, hi) covering section sec of partition p.
func SectionBounds(p ID, sec byte) (lo, hi []byte) {
	return appendPrefix(nil, p, sec), appendPrefix(nil, p, sec+1)
}

// PartitionBounds returns [lo, hi) covering every key of partition p.
func PartitionBounds(p ID) (lo, hi []byte) {
	lo = binary.BigEndian.AppendUint32([]byte{keyPrefix}, uint32(p))
	if p == ^ID(0) {
		return lo, []byte{keyPrefix + 1}
	}
	return lo, binary.BigEndian.AppendUint32([]byte{keyPrefix}, uint32(p)+1)
}

// parseKey splits a store key into partition, section and the rest.
func parseKey(k []byte) (p ID, sec byte, rest []byte, ok bool) {
	if len(k) < prefixLen || k[0] != keyPrefix {
		return 0, 0, nil, false
	}
	return ID(binary.BigEndian.Uint32(k[1:5])), k[5], k[prefixLen:], true
}

// lsnFromKey decodes the 8-byte LSN suffix of a log or undo key.
func lsnFromKey(rest []byte) (LSN, bool) {
	if len(rest) != 8 {
		return 0, false
	}
	return LSN(binary.BigEndian.Uint64(rest)), true
}

// ----- writer and reader helpers -----

func seal(dst []byte, start int, salt []byte) []byte {
	c := crc32.Update(0, castagnoli(), salt)
	c = crc32.Update(c, castagnoli(), dst[start:])
	return binary.LittleEndian.AppendUint32(dst, c)
}

// open verifies the format byte and checksum and returns the payload
// between them.
func open(kind string, format byte, b, salt []byte) ([]byte, error) {
	if len(b) < 1+checksumLen {
		return nil, corruptf("%s record of %d bytes is too short", kind, len(b))
	}
	body := b[:len(b)-checksumLen]
	c := crc32.Update(0, castagnoli(), salt)
	c = crc32.Update(c, castagnoli(), body)
	if got := binary.LittleEndian.Uint32(b[len(b)-checksumLen:]); got != c {
		return nil, corruptf("%s record checksum %08x, computed %08x", kind, got, c)
	}
	if body[0] != format {
		return nil, corruptf("%s record has format byte %#x, want %#x", kind, body[0], format)
	}
	return body[1:], nil
}

type reader struct {
	kind string
	b    []byte
	err  error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = corruptf("%s record: bad %s", r.kind, what)
	}
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte1(what string) byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 1 {
		r.fail(what)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// bytes reads a length-prefixed byte string of at most max bytes, copied.
func (r *reader) bytes(what string, max int) []byte {
	n := r.uvarint(what + " length")
	if r.err != nil {
		return nil
	}
	if n > uint64(max) || n > uint64(len(r.b)) {
		r.fail(what + " length")
		return nil
	}
	if n == 0 {
		return nil
	}
	v := append([]byte(nil), r.b[:n]...)
	r.b = r.b[n:]
	return v
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = corruptf("%s record: %d trailing bytes", r.kind, len(r.b))
	}
	return r.err
}

func appendBytes(dst, v []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

func lsnSalt(lsn LSN) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(lsn)) }

// ----- log records -----

const flagDelete byte = 1

// EncodeLogRecord appends the stored form of op (without its LSN, which is
// in the key but covered by the checksum) to dst:
//
//	'L' | epoch uvarint | flags | key (uvarint length, bytes) | value (same) | crc32c(lsn, ...)
func EncodeLogRecord(dst []byte, op *Op) []byte {
	start := len(dst)
	dst = append(dst, fmtLog)
	dst = binary.AppendUvarint(dst, uint64(op.Epoch))
	var flags byte
	if op.Delete {
		flags = flagDelete
	}
	dst = append(dst, flags)
	dst = appendBytes(dst, op.Key)
	dst = appendBytes(dst, op.Value)
	return seal(dst, start, lsnSalt(op.LSN))
}

// DecodeLogRecord decodes the log record of lsn. The op shares no memory with b.
func DecodeLogRecord(lsn LSN, b []byte) (Op, error) {
	payload, err := open("log", fmtLog, b, lsnSalt(lsn))
	if err != nil {
		return Op{}, err
	}
	r := reader{kind: "log", b: payload}
	op := decodeOpBody(&r, lsn)
	if err := r.done(); err != nil {
		return Op{}, err
	}
	return op, nil
}

func decodeOpBody(r *reader, lsn LSN) Op {
	op := Op{LSN: lsn}
	op.Epoch = Epoch(r.uvarint("epoch"))
	flags := r.byte1("flags")
	if flags&^flagDelete != 0 {
		r.fail("flags")
	}
	op.Delete = flags&flagDelete != 0
	op.Key = r.bytes("key", HardMaxKeyBytes)
	op.Value = r.bytes("value", HardMaxOpBytes)
	if r.err == nil && op.Delete && op.Value != nil {
		r.fail("delete with a value")
	}
	if r.err == nil && op.Epoch == 0 {
		r.fail("epoch 0")
	}
	return op
}

// ----- state values -----

// EncodeKVValue appends the stored form of a state value:
//
//	'K' | lsn uvarint | epoch uvarint | value bytes... | crc32c(key, ...)
func EncodeKVValue(dst []byte, kv *KV) []byte {
	start := len(dst)
	dst = append(dst, fmtKV)
	dst = binary.AppendUvarint(dst, uint64(kv.LSN))
	dst = binary.AppendUvarint(dst, uint64(kv.Epoch))
	dst = append(dst, kv.Value...)
	return seal(dst, start, kv.Key)
}

// DecodeKVValue decodes the stored value of key. The result shares no memory with b.
func DecodeKVValue(key, b []byte) (KV, error) {
	payload, err := open("state", fmtKV, b, key)
	if err != nil {
		return KV{}, err
	}
	r := reader{kind: "state", b: payload}
	kv := KV{Key: append([]byte(nil), key...)}
	kv.LSN = LSN(r.uvarint("lsn"))
	kv.Epoch = Epoch(r.uvarint("epoch"))
	if r.err != nil {
		return KV{}, r.err
	}
	if len(r.b) > HardMaxOpBytes {
		return KV{}, corruptf("state value of %d bytes exceeds %d", len(r.b), HardMaxOpBytes)
	}
	if len(r.b) > 0 {
		kv.Value = append([]byte(nil), r.b...)
	}
	return kv, nil
}

// ----- undo records -----

// undoRecord is what applying op LSN replaced: the previous value of Key
// (Existed=false if the key was absent).
type undoRecord struct {
	Key     []byte
	Existed bool
	Prev    KV // Value, LSN, Epoch of the previous value
}

// encodeUndo: 'U' | flags(1=existed) | key | prev lsn | prev epoch | prev value | crc32c(lsn, ...)
func encodeUndo(dst []byte, lsn LSN, u *undoRecord) []byte {
	start := len(dst)
	dst = append(dst, fmtUndo)
	var flags byte
	if u.Existed {
		flags = 1
	}
	dst = append(dst, flags)
	dst = appendBytes(dst, u.Key)
	dst = binary.AppendUvarint(dst, uint64(u.Prev.LSN))
	dst = binary.AppendUvarint(dst, uint64(u.Prev.Epoch))
	dst = appendBytes(dst, u.Prev.Value)
	return seal(dst, start, lsnSalt(lsn))
}

func decodeUndo(lsn LSN, b []byte) (undoRecord, error) {
	payload, err := open("undo", fmtUndo, b, lsnSalt(lsn))
	if err != nil {
		return undoRecord{}, err
	}
	r := reader{kind: "undo", b: payload}
	var u undoRecord
	flags := r.byte1("flags")
	if flags > 1 {
		r.fail("flags")
	}
	u.Existed = flags == 1
	u.Key = r.bytes("key", HardMaxKeyBytes)
	u.Prev.LSN = LSN(r.uvarint("lsn"))
	u.Prev.Epoch = Epoch(r.uvarint("epoch"))
	u.Prev.Value = r.bytes("value", HardMaxOpBytes)
	if err := r.done(); err != nil {
		return undoRecord{}, err
	}
	u.Prev.Key = u.Key
	if !u.Existed && (u.Prev.LSN != 0 || u.Prev.Epoch != 0 || u.Prev.Value != nil) {
		return undoRecord{}, corruptf("undo record of LSN %d: absent key with a previous value", lsn)
	}
	return u, nil
}

// ----- conflict records -----

// EncodeConflict appends the stored form of a conflict record (its
// partition, epoch and LSN are in the key and covered by the checksum):
//
//	'C' | removedAt uvarint | reason | op body (as in a log record) | crc32c(epoch, lsn, ...)
func EncodeConflict(dst []byte, c *ConflictRecord) []byte {
	start := len(dst)
	dst = append(dst, fmtConflict)
	dst = binary.AppendUvarint(dst, uint64(c.RemovedAt))
	dst = append(dst, byte(c.Reason))
	dst = binary.AppendUvarint(dst, uint64(c.Op.Epoch))
	var flags byte
	if c.Op.Delete {
		flags = flagDelete
	}
	dst = append(dst, flags)
	dst = appendBytes(dst, c.Op.Key)
	dst = appendBytes(dst, c.Op.Value)
	return seal(dst, start, conflictSalt(c.Op.Epoch, c.Op.LSN))
}

func conflictSalt(e Epoch, lsn LSN) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(e))
	return binary.BigEndian.AppendUint64(b, uint64(lsn))
}

// DecodeConflict decodes the conflict record stored under (p, epoch, lsn).
func DecodeConflict(p ID, e Epoch, lsn LSN, b []byte) (ConflictRecord, error) {
	payload, err := open("conflict", fmtConflict, b, conflictSalt(e, lsn))
	if err != nil {
		return ConflictRecord{}, err
	}
	r := reader{kind: "conflict", b: payload}
	c := ConflictRecord{Partition: p}
	c.RemovedAt = Epoch(r.uvarint("removed-at epoch"))
	c.Reason = ConflictReason(r.byte1("reason"))
	c.Op = decodeOpBody(&r, lsn)
	if err := r.done(); err != nil {
		return ConflictRecord{}, err
	}
	if c.Reason < ConflictTruncate || c.Reason > ConflictSnapshot {
		return ConflictRecord{}, corruptf("conflict record: unknown reason %d", c.Reason)
	}
	if c.Op.Epoch != e {
		return ConflictRecord{}, corruptf("conflict record: op epoch %d under key epoch %d", c.Op.Epoch, e)
	}
	return c, nil
}

// ----- apply state -----

// EncodeApplyState: 'A' | applied | applied epoch | undo floor | crc32c
func EncodeApplyState(dst []byte, a *ApplyState) []byte {
	start := len(dst)
	dst = append(dst, fmtApply)
	dst = binary.AppendUvarint(dst, uint64(a.Applied))
	dst = binary.AppendUvarint(dst, uint64(a.AppliedEpoch))
	dst = binary.AppendUvarint(dst, uint64(a.UndoFloor))
	return seal(dst, start, nil)
}

// DecodeApplyState decodes an ApplyState record.
func DecodeApplyState(b []byte) (ApplyState, error) {
	payload, err := open("apply-state", fmtApply, b, nil)
	if err != nil {
		return ApplyState{}, err
	}
	r := reader{kind: "apply-state", b: payload}
	a := ApplyState{
		Applied:      LSN(r.uvarint("applied")),
		AppliedEpoch: Epoch(r.uvarint("applied epoch")),
		UndoFloor:    LSN(r.uvarint("undo floor")),
	}
	return a, r.done()
}

// ----- meta -----

const metaFlagNeedSnapshot byte = 1

// EncodeMeta appends the stored form of m:
//
//	'M' | epoch | role | write region | level (consistency, K, T ns, hold ns)
//	| quorum (replicas, write region, members, min durability)
//	| history (count, (epoch, after)...) | log base | log base epoch | flags
//	| readable-from | crc32c
func EncodeMeta(dst []byte, m *Meta) []byte {
	start := len(dst)
	dst = append(dst, fmtMeta)
	dst = binary.AppendUvarint(dst, uint64(m.Epoch))
	dst = append(dst, byte(m.Role))
	dst = appendBytes(dst, []byte(m.WriteRegion))
	dst = append(dst, byte(m.Level.Consistency))
	dst = binary.AppendUvarint(dst, m.Level.StalenessOps)
	dst = binary.AppendUvarint(dst, uint64(m.Level.StalenessTime))
	dst = binary.AppendUvarint(dst, uint64(m.Level.StalenessHold))
	dst = appendRegions(dst, m.Quorum.Replicas)
	dst = appendBytes(dst, []byte(m.Quorum.WriteRegion))
	dst = appendRegions(dst, m.Quorum.Members)
	dst = binary.AppendUvarint(dst, uint64(m.Quorum.MinDurability))
	dst = binary.AppendUvarint(dst, uint64(len(m.History)))
	for _, h := range m.History {
		dst = binary.AppendUvarint(dst, uint64(h.Epoch))
		dst = binary.AppendUvarint(dst, uint64(h.After))
	}
	dst = binary.AppendUvarint(dst, uint64(m.LogBase))
	dst = binary.AppendUvarint(dst, uint64(m.LogBaseEpoch))
	var flags byte
	if m.NeedSnapshot {
		flags |= metaFlagNeedSnapshot
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(m.ReadableFrom))
	return seal(dst, start, nil)
}

func appendRegions(dst []byte, rs []quorum.Region) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(rs)))
	for _, r := range rs {
		dst = appendBytes(dst, []byte(r))
	}
	return dst
}

func (r *reader) regions(what string) []quorum.Region {
	n := r.uvarint(what + " count")
	if r.err != nil {
		return nil
	}
	if n > maxReplicas {
		r.fail(what + " count")
		return nil
	}
	if n == 0 {
		return nil
	}
	out := make([]quorum.Region, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		out = append(out, quorum.Region(r.bytes(what, maxRegionBytes)))
	}
	return out
}

// DecodeMeta decodes a Meta record. The quorum, if set, must validate.
func DecodeMeta(b []byte) (Meta, error) {
	payload, err := open("meta", fmtMeta, b, nil)
	if err != nil {
		return Meta{}, err
	}
	r := reader{kind: "meta", b: payload}
	var m Meta
	m.Epoch = Epoch(r.uvarint("epoch"))
	m.Role = Role(r.byte1("role"))
	m.WriteRegion = quorum.Region(r.bytes("write region", maxRegionBytes))
	m.Level.Consistency = Consistency(r.byte1("consistency"))
	m.Level.StalenessOps = r.uvarint("staleness ops")
	m.Level.StalenessTime = time.Duration(r.uvarint("staleness time"))
	m.Level.StalenessHold = time.Duration(r.uvarint("staleness hold"))
	m.Quorum.Replicas = r.regions("replicas")
	m.Quorum.WriteRegion = quorum.Region(r.bytes("quorum write region", maxRegionBytes))
	m.Quorum.Members = r.regions("members")
	md := r.uvarint("min durability")
	if md > maxReplicas {
		r.fail("min durability")
	}
	m.Quorum.MinDurability = int(md)
	n := r.uvarint("history count")
	if r.err == nil && n > HardMaxEpochHistory {
		r.fail("history count")
	}
	if r.err == nil && n > 0 {
		m.History = make([]EpochRange, 0, n)
		for i := uint64(0); i < n && r.err == nil; i++ {
			m.History = append(m.History, EpochRange{Epoch: Epoch(r.uvarint("history epoch")), After: LSN(r.uvarint("history after"))})
		}
	}
	m.LogBase = LSN(r.uvarint("log base"))
	m.LogBaseEpoch = Epoch(r.uvarint("log base epoch"))
	flags := r.byte1("flags")
	if flags&^metaFlagNeedSnapshot != 0 {
		r.fail("flags")
	}
	m.NeedSnapshot = flags&metaFlagNeedSnapshot != 0
	m.ReadableFrom = LSN(r.uvarint("readable-from"))
	if err := r.done(); err != nil {
		return Meta{}, err
	}
	if err := m.check(); err != nil {
		return Meta{}, err
	}
	return m, nil
}

// check reports a Meta that contradicts itself.
func (m *Meta) check() error {
	if !m.Role.valid() {
		return corruptf("meta: unknown role %d", m.Role)
	}
	if err := m.Level.Validate(); err != nil {
		return corruptf("meta: level: %v", err)
	}
	if !history(m.History).valid() {
		return corruptf("meta: epoch history not ascending")
	}
	if n := len(m.History); n > 0 && m.History[n-1].Epoch > m.Epoch {
		return corruptf("meta: history epoch %d above replica epoch %d", m.History[n-1].Epoch, m.Epoch)
	}
	if m.Role.writeRegion() {
		if err := m.Quorum.Validate(); err != nil {
			return corruptf("meta: write region with invalid quorum: %v", err)
		}
	}
	return nil
}
