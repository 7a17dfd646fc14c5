package transport

import (
	"context"
	"sync"
)

// budget is a counting semaphore over bytes that waiters can abandon
// through a context. Acquiring more than the whole budget is allowed when
// nothing else holds any (so one oversized request cannot deadlock), which
// keeps the bound at max plus one request.
type budget struct {
	mu    sync.Mutex
	max   int
	used  int
	freed chan struct{} // closed and replaced on every release
}

func newBudget(max int) *budget {
	return &budget{max: max, freed: make(chan struct{})}
}

func (b *budget) fits(n int) bool { return b.used+n <= b.max || b.used == 0 }

// acquire takes n, waiting while the budget is exhausted.
func (b *budget) acquire(ctx context.Context, n int) error {
	for {
		b.mu.Lock()
		if b.fits(n) {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// tryAcquire takes n if it is available now.
func (b *budget) tryAcquire(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.fits(n) {
		return false
	}
	b.used += n
	return true
}

// release returns n and wakes the waiters.
func (b *budget) release(n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.used < 0 {
		b.used = 0
	}
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// inUse reports the bytes held (for tests and metrics).
func (b *budget) inUse() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
