package dataapi

import (
	"context"
	"fmt"
	"sync"

	"github.com/fmnode/fmnode/partition"
)

// DefaultMemMaxKeys bounds the keys a MemBackend holds (all partitions).
const DefaultMemMaxKeys = 1 << 16

// MemConfig configures a MemBackend.
type MemConfig struct {
	// Region is the region this backend plays (required).
	Region partition.Region
	// WriteRegion is the write region of Epoch; empty means Region.
	WriteRegion partition.Region
	// Epoch is the current epoch of every partition (0 means 1).
	Epoch partition.Epoch
	// Level serves reads that ask for no consistency (0 means Session).
	Level partition.Consistency
	// MaxKeyBytes and MaxOpBytes bound a key and key plus value (0 means
	// the partition defaults) and give ErrTooLarge as the core would.
	MaxKeyBytes int
	MaxOpBytes  int
	// MaxKeys bounds the keys held (0 means DefaultMemMaxKeys); a write of
	// a new key beyond it gets partition.ErrBackpressure.
	MaxKeys int
}

// MemBackend is an in-memory Backend: one map per partition, one epoch and
// write region for all of them, answering as a partition replica in
// Region would. Writes and strong reads carrying another epoch than the
// current one, or reaching a Region that is not the write region, get a
// *partition.RedirectError; the other reads are served from the map (it is
// always fresh), a session read whose token is ahead of the partition gets
// partition.ErrSessionUnavailable; a compare-and-set (WriteRequest.If) is
// decided on the map. For tests (of this package and of the
// clients); safe for concurrent use.
type MemBackend struct {
	cfg MemConfig

	mu          sync.Mutex
	epoch       partition.Epoch
	writeRegion partition.Region
	keys        int
	parts       map[partition.ID]*memPartition
}

type memPartition struct {
	last partition.Token // position of the last op
	kv   map[string]partition.KV
}

// NewMemBackend validates cfg and returns an empty backend.
func NewMemBackend(cfg MemConfig) (*MemBackend, error) {
	if cfg.Region == "" {
		return nil, configErr("MemConfig.Region", "must be set")
	}
	if cfg.WriteRegion == "" {
		cfg.WriteRegion = cfg.Region
	}
	if cfg.Epoch == 0 {
		cfg.Epoch = 1
	}
	if cfg.Level == 0 {
		cfg.Level = partition.Session
	}
	if !cfg.Level.Valid() {
		return nil, configErr("MemConfig.Level", "%v is not a level", cfg.Level)
	}
	var err error
	if cfg.MaxKeyBytes, err = bound("MemConfig.MaxKeyBytes", cfg.MaxKeyBytes, partition.DefaultMaxKeyBytes, partition.HardMaxKeyBytes); err != nil {
		return nil, err
	}
	if cfg.MaxOpBytes, err = bound("MemConfig.MaxOpBytes", cfg.MaxOpBytes, partition.DefaultMaxOpBytes, partition.HardMaxOpBytes); err != nil {
		return nil, err
	}
	if cfg.MaxKeys, err = bound("MemConfig.MaxKeys", cfg.MaxKeys, DefaultMemMaxKeys, 1<<24); err != nil {
		return nil, err
	}
	return &MemBackend{cfg: cfg, epoch: cfg.Epoch, writeRegion: cfg.WriteRegion,
		parts: make(map[partition.ID]*memPartition)}, nil
}

// SetWriteRegion moves every partition to epoch with its write region (a
// failover). The epoch must not go back.
func (m *MemBackend) SetWriteRegion(epoch partition.Epoch, region partition.Region) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if epoch < m.epoch {
		return fmt.Errorf("dataapi: epoch %d is below the current %d: %w", epoch, m.epoch, partition.ErrBadRequest)
	}
	m.epoch, m.writeRegion = epoch, region
	return nil
}

// Epoch returns the current epoch and write region.
func (m *MemBackend) Epoch() (partition.Epoch, partition.Region) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch, m.writeRegion
}

// fence is the write region check of a write or strong read (m.mu held),
// the partition package's rule: the write region serves a request of its
// epoch or of an older known one (in its own epoch), and redirects the rest.
func (m *MemBackend) fence(p partition.ID, reqEpoch partition.Epoch) error {
	rd := &partition.RedirectError{Partition: p, Epoch: m.epoch, WriteRegion: m.writeRegion, RequestEpoch: reqEpoch}
	switch {
	case reqEpoch < m.epoch && reqEpoch != 0 && m.writeRegion == m.cfg.Region:
		return nil
	case reqEpoch < m.epoch:
		rd.Reason = partition.ReasonStaleEpoch
	case reqEpoch > m.epoch:
		rd.Reason = partition.ReasonReplicaBehind
	case m.writeRegion != m.cfg.Region:
		rd.Reason = partition.ReasonNotWriteRegion
	default:
		return nil
	}
	return rd
}

// Write implements Backend.
func (m *MemBackend) Write(ctx context.Context, req partition.WriteRequest) (partition.Reply, error) {
	if err := ctx.Err(); err != nil {
		return partition.Reply{}, err
	}
	r := partition.Reply{Kind: partition.ReplyWrite, Partition: req.Partition, Ref: req.Ref}
	switch {
	case len(req.Key) > m.cfg.MaxKeyBytes:
		r.Err = fmt.Errorf("partition %d: key of %d bytes exceeds MaxKeyBytes %d: %w", req.Partition, len(req.Key), m.cfg.MaxKeyBytes, partition.ErrTooLarge)
		return r, nil
	case len(req.Key)+len(req.Value) > m.cfg.MaxOpBytes:
		r.Err = fmt.Errorf("partition %d: op of %d bytes exceeds MaxOpBytes %d: %w", req.Partition, len(req.Key)+len(req.Value), m.cfg.MaxOpBytes, partition.ErrTooLarge)
		return r, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.Err = m.fence(req.Partition, req.Epoch); r.Err != nil {
		return r, nil
	}
	mp := m.parts[req.Partition]
	if mp == nil {
		mp = &memPartition{kv: make(map[string]partition.KV)}
		m.parts[req.Partition] = mp
	}
	cur, had := mp.kv[string(req.Key)]
	if c := req.If; c != nil {
		if !c.Valid() {
			r.Err = fmt.Errorf("partition %d: a condition sets exactly one of Version and Absent: %w", req.Partition, partition.ErrBadRequest)
			return r, nil
		}
		ver := partition.Token{Epoch: cur.Epoch, LSN: cur.LSN}
		if (c.Absent && had) || (!c.Absent && (!had || ver != c.Version)) {
			cf := &partition.ConditionFailedError{Partition: req.Partition, Cond: *c, Found: had}
			if had {
				cf.Version = ver
			}
			r.Err, r.Epoch = cf, m.epoch
			return r, nil
		}
	}
	if !had && !req.Delete && m.keys >= m.cfg.MaxKeys {
		r.Err = fmt.Errorf("partition %d: memory backend holds %d keys: %w", req.Partition, m.keys, partition.ErrBackpressure)
		return r, nil
	}
	mp.last = partition.Token{Epoch: m.epoch, LSN: mp.last.LSN + 1}
	switch {
	case req.Delete && had:
		delete(mp.kv, string(req.Key))
		m.keys--
	case !req.Delete:
		mp.kv[string(req.Key)] = partition.KV{Key: clone(req.Key), Value: clone(req.Value), LSN: mp.last.LSN, Epoch: mp.last.Epoch}
		if !had {
			m.keys++
		}
	}
	r.Token, r.Epoch = mp.last, m.epoch
	return r, nil
}

// Read implements Backend.
func (m *MemBackend) Read(ctx context.Context, req partition.ReadRequest) (partition.Reply, error) {
	if err := ctx.Err(); err != nil {
		return partition.Reply{}, err
	}
	r := partition.Reply{Kind: partition.ReplyRead, Partition: req.Partition, Ref: req.Ref}
	if len(req.Key) > m.cfg.MaxKeyBytes {
		r.Err = fmt.Errorf("partition %d: read key of %d bytes (bound %d): %w", req.Partition, len(req.Key), m.cfg.MaxKeyBytes, partition.ErrTooLarge)
		return r, nil
	}
	level := req.Consistency
	if level == 0 {
		level = m.cfg.Level
	}
	if !level.Valid() {
		r.Err = fmt.Errorf("partition %d: read consistency %v: %w", req.Partition, level, partition.ErrBadRequest)
		return r, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r.Epoch = m.epoch
	if level == partition.Strong {
		if r.Err = m.fence(req.Partition, req.Epoch); r.Err != nil {
			return r, nil
		}
	}
	var last partition.Token
	mp := m.parts[req.Partition]
	if mp != nil {
		last = mp.last
	}
	if level == partition.Session && last.Less(req.Token) {
		r.Err = fmt.Errorf("partition %d: token %v ahead of %v: %w", req.Partition, req.Token, last, partition.ErrSessionUnavailable)
		return r, nil
	}
	r.Token = last
	if mp != nil {
		if kv, ok := mp.kv[string(req.Key)]; ok {
			r.Found, r.Value, r.Version = true, clone(kv.Value), partition.Token{Epoch: kv.Epoch, LSN: kv.LSN}
		}
	}
	return r, nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}
