package caspaxos

import (
	"fmt"
	"sort"
	"sync"
)

// MemoryStore is the in-memory twin of the disk stores: same contract, no
// disk. The deterministic simulator and unit tests use it so that acceptor
// logic runs at memory speed, and the conformance suite (caspaxos/storetest)
// holds it to the same behaviour as the bbolt and pebble stores.
//
// Durability model: an Apply that returned is durable, exactly as on disk.
// A simulated crash is Reopen: the new store holds everything applied and
// nothing else. There is deliberately no "unsynced" state to lose, because
// the real stores fsync before Apply returns and never expose unsynced data.
//
// It is safe for concurrent use. Data is deep-copied on the way in and on
// the way out, so callers can neither corrupt the store through a slice
// they keep nor see a later Apply through a slice they loaded.
type MemoryStore struct {
	mu       sync.Mutex
	records  map[string]Record
	ageFloor uint64
	closed   bool
	applies  uint64
}

var _ PipelineStore = (*MemoryStore)(nil)

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{records: make(map[string]Record)}
}

// Load returns every record sorted by key, and the age floor.
func (s *MemoryStore) Load() (State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return State{}, fmt.Errorf("memory store: load: %w", ErrStoreClosed)
	}
	return s.snapshotLocked(), nil
}

// Apply validates the whole batch first and then applies it under one lock,
// so a batch that fails validation changes nothing (atomicity), and
// concurrent readers never see half of a batch. Puts are applied in order
// (a key put twice keeps the later record), then deletes. An empty batch
// is a no-op and is not counted as an apply.
func (s *MemoryStore) Apply(b Batch) error {
	if err := CheckBatch(b); err != nil {
		return fmt.Errorf("memory store: apply: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("memory store: apply: %w", ErrStoreClosed)
	}
	if b.Empty() {
		return nil
	}
	for _, r := range b.Put {
		s.records[r.Key] = cloneRecord(r)
	}
	for _, k := range b.Delete {
		delete(s.records, k)
	}
	if b.AgeFloor != 0 {
		s.ageFloor = b.AgeFloor
	}
	s.applies++
	return nil
}

// Submit is Apply for PipelineStore: the memory store is durable when the
// call returns, so the wait it hands back returns nil at once. Order and
// atomicity follow from Apply's lock.
func (s *MemoryStore) Submit(b Batch) (func() error, error) {
	if err := s.Apply(b); err != nil {
		return nil, err
	}
	return durableNow, nil
}

// Close marks the store closed; later Load and Apply calls fail with
// ErrStoreClosed. Closing twice is harmless.
func (s *MemoryStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// Reopen models a restart (clean or a crash: Apply is durable on return, so
// the two are the same here). It closes s and returns a new store holding
// exactly what s held. The applies counter carries over, like a disk's
// write count would.
func (s *MemoryStore) Reopen() *MemoryStore {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	next := &MemoryStore{records: make(map[string]Record, len(s.records)), ageFloor: s.ageFloor, applies: s.applies}
	for k, r := range s.records {
		next.records[k] = cloneRecord(r)
	}
	return next
}

// Snapshot returns the stored state even after Close, so tests can inspect
// what a crashed acceptor left behind.
func (s *MemoryStore) Snapshot() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked()
}

// Applies returns the number of non-empty batches applied: the number of
// fsyncs a disk store without group commit would have made, which is what
// the simulator reports as fsync cost.
func (s *MemoryStore) Applies() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applies
}

func (s *MemoryStore) snapshotLocked() State {
	st := State{AgeFloor: s.ageFloor, Records: make([]Record, 0, len(s.records))}
	for _, r := range s.records {
		st.Records = append(st.Records, cloneRecord(r))
	}
	sort.Slice(st.Records, func(i, j int) bool { return st.Records[i].Key < st.Records[j].Key })
	return st
}

// cloneRecord deep-copies r. Empty data becomes nil, matching what the disk
// stores' decoder returns, so the twins compare equal.
func cloneRecord(r Record) Record {
	if len(r.Value.Data) == 0 {
		r.Value.Data = nil
	} else {
		r.Value.Data = append([]byte(nil), r.Value.Data...)
	}
	return r
}
