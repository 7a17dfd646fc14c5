package pebblestore

import (
	"fmt"

	"github.com/cockroachdb/pebble"

	"github.com/fmnode/fmnode/caspaxos"
)

var _ caspaxos.PipelineStore = (*Store)(nil)

// Submit hands b to pebble's commit pipeline and returns once it is in the
// WAL's buffer and the memtable, before the WAL fsync
// (caspaxos.PipelineStore); wait is Batch.SyncWait.
//
// Why this keeps the contract: pebble's commit pipeline assigns sequence
// numbers and appends to the WAL under one mutex, so batches reach the WAL
// in Submit order; the WAL is one sequential file whose syncs cover a
// prefix of it (a WAL rotation closes, and so syncs, the old file before
// the new one takes writes), and replay stops at the first torn or
// checksum-failing record. So a crash keeps a prefix of the submitted
// batches, each whole, and SyncWait returns only once the sync covering b
// (and so every earlier batch) completed. Concurrent syncs are merged by
// pebble's WAL syncer: while one fdatasync runs, later batches queue for
// the next.
//
// The store's read lock is held from Submit until wait returns, because
// pebble must not be closed with a batch in its pipeline: Close waits for
// every outstanding wait, so the caller must call each wait it gets.
func (s *Store) Submit(b caspaxos.Batch) (func() error, error) {
	if err := caspaxos.CheckBatch(b); err != nil {
		return nil, fmt.Errorf("pebblestore: %s: submit: %w", s.dir, err)
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, fmt.Errorf("pebblestore: %s: submit: %w", s.dir, caspaxos.ErrStoreClosed)
	}
	if p := s.failed.Load(); p != nil {
		s.mu.RUnlock()
		return nil, *p
	}
	if b.Empty() {
		s.mu.RUnlock()
		return func() error { return nil }, nil
	}
	pb, err := s.batch(b)
	if err == nil {
		err = s.db.ApplyNoSyncWait(pb, pebble.Sync)
	}
	if err != nil {
		_ = pb.Close()
		s.mu.RUnlock()
		return nil, s.failCommit(err)
	}
	return func() error {
		defer s.mu.RUnlock()
		err := pb.SyncWait()
		_ = pb.Close()
		if err != nil {
			return s.failCommit(err)
		}
		s.commits.Add(1)
		return nil
	}, nil
}
