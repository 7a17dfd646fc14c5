package boltstore

import (
	"fmt"

	"github.com/fmnode/fmnode/caspaxos"
)

var _ caspaxos.PipelineStore = (*Store)(nil)

// Submit queues b for the committer and returns at once with the wait for
// its commit (caspaxos.PipelineStore). The queue is FIFO and has one
// consumer, the committer, which commits groups one transaction at a time
// in queue order and applies the batches of a group in queue order; a
// request's done is sent only after its group's transaction (and so its
// fdatasyncs) completed, and every earlier group's before it. So batches
// land in Submit order, a crash keeps a prefix of them (bbolt's commit is
// atomic: the meta page written after the synced data pages either names
// the whole transaction or none of it), and wait returns only once b and
// every earlier batch are durable.
//
// Groups that hold a submitted batch are committed without the linger that
// Apply callers get (see commitLoop): submitters do not come back when
// woken, they keep submitting, so waiting for them would only add latency.
func (s *Store) Submit(b caspaxos.Batch) (func() error, error) {
	if err := caspaxos.CheckBatch(b); err != nil {
		return nil, fmt.Errorf("boltstore: %s: submit: %w", s.path, err)
	}
	req := &request{batch: b, done: make(chan error, 1), pipelined: true}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, fmt.Errorf("boltstore: %s: submit: %w", s.path, caspaxos.ErrStoreClosed)
	}
	if b.Empty() {
		s.mu.RUnlock()
		return func() error { return nil }, nil
	}
	s.queue <- req
	s.mu.RUnlock()
	return req.wait, nil
}

// wait returns the commit's result; a second call would block forever, so
// the PipelineStore contract allows one.
func (r *request) wait() error { return <-r.done }
