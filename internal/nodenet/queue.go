package nodenet

import (
	"sync"

	"github.com/fmnode/fmnode/internal/nodewire"
)

// entry is one queued batch: its encoded frame (TCP) or the batch itself
// (MemNetwork), with what it costs against the bounds.
type entry struct {
	frame []byte
	batch nodewire.Batch
	msgs  int
	bytes int
}

// sendQueue is a peer's bounded send queue. Entries taken by the writer
// still count against the bounds until it releases them, so the memory
// held per peer is the bound plus one batch, whatever the writer does.
// Full means: drop the new batch (push returns false).
type sendQueue struct {
	maxMsgs, maxBytes int
	wake              chan struct{} // capacity 1: entries were pushed

	mu          sync.Mutex
	items       []entry
	msgs, bytes int // queued and being written
}

func newSendQueue(maxMsgs, maxBytes int) *sendQueue {
	return &sendQueue{maxMsgs: maxMsgs, maxBytes: maxBytes, wake: make(chan struct{}, 1)}
}

// push appends e unless that would exceed a bound; a batch larger than a
// bound on its own enters an empty queue.
func (q *sendQueue) push(e entry) bool {
	q.mu.Lock()
	if q.msgs > 0 && (q.msgs+e.msgs > q.maxMsgs || q.bytes+e.bytes > q.maxBytes) {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, e)
	q.msgs += e.msgs
	q.bytes += e.bytes
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// take moves every queued entry to the caller (appending to dst); they
// still count until release.
func (q *sendQueue) take(dst []entry) []entry {
	q.mu.Lock()
	dst = append(dst, q.items...)
	clear(q.items)
	q.items = q.items[:0]
	q.mu.Unlock()
	return dst
}

// release returns the cost of entries taken.
func (q *sendQueue) release(es []entry) {
	m, b := 0, 0
	for i := range es {
		m += es[i].msgs
		b += es[i].bytes
	}
	q.mu.Lock()
	q.msgs -= m
	q.bytes -= b
	q.mu.Unlock()
}

// discard drops everything queued and returns how many batches it held.
func (q *sendQueue) discard() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := len(q.items)
	for _, e := range q.items {
		q.msgs -= e.msgs
		q.bytes -= e.bytes
	}
	clear(q.items)
	q.items = q.items[:0]
	return n
}

func (q *sendQueue) usage() (msgs, bytes int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.msgs, q.bytes
}
