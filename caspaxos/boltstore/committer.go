package boltstore

import (
	"fmt"
	"runtime"
	"time"

	"go.etcd.io/bbolt"

	"github.com/fmnode/fmnode/caspaxos"
)

// request is one Apply call waiting for its group's commit.
type request struct {
	batch caspaxos.Batch
	done  chan error // buffered (1): the committer never blocks on a waiter
	// pipelined: from Submit; a group holding one is not lingered on.
	pipelined bool
}

// requestOverheadBytes approximates the encoding overhead of a record
// (ballots, version, lengths, checksum) for the group byte bound.
const requestOverheadBytes = 48

// maxLinger caps how long the committer waits for writers it just woke.
const maxLinger = time.Millisecond

func (r *request) sizeBytes() int {
	n := 0
	for _, rec := range r.batch.Put {
		n += len(rec.Key) + len(rec.Value.Data) + requestOverheadBytes
	}
	for _, k := range r.batch.Delete {
		n += len(k)
	}
	return n
}

// commitLoop is the group committer: the only goroutine that writes. It
// blocks for one request, takes every request already queued (up to the
// group bounds) and commits them all in one transaction, so one fsync
// serves the whole group. While a commit's fsync runs, new requests pile up
// and form the next group, so group size follows the load and a lone
// writer pays no added delay.
//
// Starting the next commit the instant the last one ends has a flaw: the
// writers just woken have not yet come back, so the next group holds only
// those that queued during the fsync, and the writers settle into two
// alternating half-size cohorts (measured: 33 applies per fsync with 64
// writers, against 58-64 for bbolt's DB.Batch). So the committer lingers
// briefly for the writers it just woke: until the group is as large as the
// number in flight at the end of the last commit (that group plus what had
// queued meanwhile), and never longer than half the last commit's duration
// (capped at maxLinger). A lone writer is never made to wait, and neither
// is a group holding a Submit batch (see Submit).
//
// It exits when Close closes the queue, after committing what was queued.
func (s *Store) commitLoop() {
	defer close(s.done)
	defer faultsPanic()()
	group := make([]*request, 0, s.opts.MaxGroupBatches)
	var (
		arena    []byte
		failed   error
		inflight int
		linger   time.Duration
	)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		first, ok := <-s.queue
		if !ok {
			return
		}
		group = append(group[:0], first)
		size := first.sizeBytes()
		pipelined := first.pipelined
		full := func() bool { return len(group) >= s.opts.MaxGroupBatches || size >= s.opts.MaxGroupBytes }
	drain:
		for !full() {
			select {
			case r, ok := <-s.queue:
				if !ok {
					break drain
				}
				group = append(group, r)
				size += r.sizeBytes()
				pipelined = pipelined || r.pipelined
			default:
				break drain
			}
		}
		if len(group) < inflight && linger > 0 && !full() && !pipelined {
			timer.Reset(linger)
		wait:
			for len(group) < inflight && !full() {
				select {
				case r, ok := <-s.queue:
					if !ok {
						break wait
					}
					group = append(group, r)
					size += r.sizeBytes()
				case <-timer.C:
					break wait
				}
			}
			timer.Stop()
		}
		err := failed
		if err == nil {
			start := time.Now()
			arena, err = s.commit(group, arena[:0])
			linger = min(time.Since(start)/2, maxLinger)
			if cap(arena) > arenaKeepBytes {
				arena = nil
			}
			if err != nil {
				failed = fmt.Errorf("boltstore: %s: store failed by an earlier commit: %w", s.path, err)
				s.log.Error("commit failed; store refuses further writes until reopened", "err", err, "batches", len(group))
			} else {
				s.fsyncs.Add(1)
			}
		}
		inflight = len(group) + len(s.queue)
		for _, r := range group {
			r.done <- err
		}
		clear(group) // drop references to delivered batches
		if len(s.queue) > 0 {
			// Let the callers just woken run before the next commit's
			// work takes the P: with few Ps (an acceptor process runs on
			// one) a pipelining acceptor's replies would otherwise wait
			// for that commit's tree updates and page writes, and for
			// the scheduler to take the P back from its fdatasync.
			runtime.Gosched()
		}
	}
}

// commit writes a group in one bbolt transaction (which fsyncs on commit),
// keeping the records digest current (see digest).
// Batches apply in queue order, each as puts then deletes, so the result
// equals applying them one by one. Record encodings go to one arena: bbolt
// requires values to stay valid until the commit, and slices of an arena
// that later grows still point at the old, unchanged array.
func (s *Store) commit(group []*request, arena []byte) (_ []byte, err error) {
	defer guard(&err, s.path, "commit")
	if s.layout == LayoutLog {
		err = s.db.Update(func(tx *bbolt.Tx) error {
			var err error
			arena, err = s.commitLog(tx, group, arena)
			return err
		})
		if err != nil {
			return arena, fmt.Errorf("boltstore: %s: commit: %w", s.path, err)
		}
		return arena, nil
	}
	err = s.db.Update(func(tx *bbolt.Tx) error {
		recs := tx.Bucket([]byte(bucketRecords))
		meta := tx.Bucket([]byte(bucketMeta))
		if recs == nil || meta == nil {
			return fmt.Errorf("%w: boltstore: %s: buckets missing", caspaxos.ErrCorrupt, s.path)
		}
		sum, err := decodeDigest(meta.Get([]byte(metaDigest)))
		if err != nil {
			return err
		}
		var floor uint64
		for _, req := range group {
			for _, r := range req.batch.Put {
				start := len(arena)
				arena = append(arena, keyPrefix)
				arena = append(arena, r.Key...)
				mid := len(arena)
				arena = caspaxos.EncodeRecord(arena, r)
				end := len(arena)
				key, val := arena[start:mid:mid], arena[mid:end:end]
				if old := recs.Get(key); old != nil {
					sum.remove(old)
				}
				if err := recs.Put(key, val); err != nil {
					return fmt.Errorf("put %q: %w", r.Key, err)
				}
				sum.add(val)
			}
			for _, k := range req.batch.Delete {
				start := len(arena)
				arena = append(arena, keyPrefix)
				arena = append(arena, k...)
				key := arena[start:]
				old := recs.Get(key)
				if old == nil {
					continue
				}
				sum.remove(old)
				if err := recs.Delete(key); err != nil {
					return fmt.Errorf("delete %q: %w", k, err)
				}
			}
			if req.batch.AgeFloor != 0 {
				floor = req.batch.AgeFloor
			}
		}
		if err := meta.Put([]byte(metaDigest), sum.encode()); err != nil {
			return fmt.Errorf("put digest: %w", err)
		}
		if floor != 0 {
			if err := meta.Put([]byte(metaAgeFloor), caspaxos.EncodeAgeFloor(nil, floor)); err != nil {
				return fmt.Errorf("put age floor: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return arena, fmt.Errorf("boltstore: %s: commit: %w", s.path, err)
	}
	return arena, nil
}
