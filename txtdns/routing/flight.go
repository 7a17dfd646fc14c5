package routing

import (
	"context"
	"errors"
	"sync"
)

// flight collapses concurrent resolutions of one key into one: the first
// caller runs fn, the others wait for its result (or their own context).
// Entries live only while a call runs, so the map is bounded by the
// callers in flight.
type flight[K comparable, V any] struct {
	mu    sync.Mutex
	calls map[K]*flightCall[V]
}

type flightCall[V any] struct {
	done chan struct{}
	v    V
	err  error
}

func newFlight[K comparable, V any]() *flight[K, V] {
	return &flight[K, V]{calls: make(map[K]*flightCall[V])}
}

func (f *flight[K, V]) do(ctx context.Context, k K, fn func(context.Context, K) (V, error)) (V, error) {
	var zero V
	for range 3 {
		f.mu.Lock()
		if c, ok := f.calls[k]; ok {
			f.mu.Unlock()
			select {
			case <-c.done:
			case <-ctx.Done():
				return zero, ctx.Err()
			}
			// The leader's context ended, not ours: try again, maybe as leader.
			if isContextErr(c.err) && ctx.Err() == nil {
				continue
			}
			return c.v, c.err
		}
		c := &flightCall[V]{done: make(chan struct{})}
		f.calls[k] = c
		f.mu.Unlock()
		c.v, c.err = fn(ctx, k)
		f.mu.Lock()
		delete(f.calls, k)
		f.mu.Unlock()
		close(c.done)
		return c.v, c.err
	}
	return fn(ctx, k)
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
