package transport

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
)

// groupWaitRig is an acceptor on a gated store with a group wait, and a
// proposer transport talking to it.
type groupWaitRig struct {
	st *gatedStore
	a  *MemAcceptor
	tr Transport
}

func newGroupWaitRig(t *testing.T, cfg AcceptorConfig) *groupWaitRig {
	t.Helper()
	st := newGatedStore()
	net := NewMemNetwork()
	cfg.ID, cfg.Store = 1, st
	a, err := net.StartAcceptor(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	return &groupWaitRig{st: st, a: a, tr: net.Dial(0)}
}

// send sends prepares for keys and waits until the loop stepped them.
func (r *groupWaitRig) send(t *testing.T, keys ...string) {
	t.Helper()
	want := r.a.Stats().Messages + uint64(len(keys))
	for _, k := range keys {
		require.NoError(t, r.tr.Send(prepare(k, 1)))
	}
	waitFor(t, "requests stepped", func() bool { return r.a.Stats().Messages == want })
}

// persistFirst makes "first" durable after holding its Apply for hold,
// with the keys of pending stepped meanwhile, and returns when its reply
// arrived.
func (r *groupWaitRig) persistFirst(t *testing.T, hold time.Duration, pending ...string) {
	t.Helper()
	require.NoError(t, r.tr.Send(prepare("first", 1)))
	recvWithin(t, r.st.entered, "the gated store's next Apply")
	r.send(t, pending...)
	time.Sleep(hold) // the last Apply's duration bounds the next wait
	sendWithin(t, r.st.gate, struct{}{}, "release the gated store")
	assert.Equal(t, "first", recvReply(t, r.tr).Items[0].Key)
}

func (r *groupWaitRig) appliedKeys() [][]string {
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	out := make([][]string, 0, len(r.st.applied))
	for _, b := range r.st.applied {
		keys := make([]string, 0, len(b.Put))
		for _, rec := range b.Put {
			keys = append(keys, rec.Key)
		}
		out = append(out, keys)
	}
	return out
}

// The wait after a batch became durable: bounded by GroupWait, ended
// early when the group reaches what was in flight, skipped when the group
// is at MaxStepMessages; replies leave in order either way.
func TestAcceptorGroupWait(t *testing.T) {
	const bound = 60 * time.Millisecond
	tests := map[string]struct {
		maxSteps int
		pending  []string // stepped while "first" persists
		join     []string // sent once "first" is durable
		// minHeld and maxHeld bound the time from first's reply to the
		// next Apply; waits is the group waits counted.
		minHeld, maxHeld time.Duration
		waits            uint64
		early            bool       // the wait ended before the bound
		groups           [][]string // Applies after first's
	}{
		"times out at the bound": {
			pending: []string{"a"},
			minHeld: bound * 3 / 4, maxHeld: 5 * time.Second, waits: 1,
			groups: [][]string{{"a"}},
		},
		"ends when the group reaches what was in flight": {
			pending: []string{"a"}, join: []string{"b"},
			maxHeld: 5 * time.Second, waits: 1, early: true,
			groups: [][]string{{"a", "b"}},
		},
		"never holds a full group": {
			maxSteps: 2, pending: []string{"a", "b"},
			maxHeld: 5 * time.Second, waits: 0,
			groups: [][]string{{"a", "b"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newGroupWaitRig(t, AcceptorConfig{GroupWait: bound, GroupWaitFraction: 1, MaxStepMessages: tc.maxSteps})
			r.persistFirst(t, 2*bound, tc.pending...)
			start := time.Now()
			if len(tc.join) > 0 {
				// Let the loop take in first's durability (and start the
				// wait) before the joiners arrive; a joiner stepped before
				// it would count as in flight and raise the target.
				time.Sleep(bound / 6)
			}
			for _, k := range tc.join {
				require.NoError(t, r.tr.Send(prepare(k, 1)))
			}
			recvWithin(t, r.st.entered, "the gated store's next Apply")
			held := time.Since(start)
			assert.GreaterOrEqual(t, held, tc.minHeld)
			assert.Less(t, held, tc.maxHeld)
			sendWithin(t, r.st.gate, struct{}{}, "release the gated store")
			var got []string
			for _, g := range tc.groups {
				for range g {
					got = append(got, recvReply(t, r.tr).Items[0].Key)
				}
			}
			var want []string
			for _, g := range tc.groups {
				want = append(want, g...)
			}
			assert.Equal(t, want, got, "replies in Ready order")
			assert.Equal(t, append([][]string{{"first"}}, tc.groups...), r.appliedKeys())
			stats := r.a.Stats()
			assert.Equal(t, tc.waits, stats.GroupWaits)
			if tc.early {
				assert.Less(t, stats.GroupWaitTime, bound)
				assert.Equal(t, uint64(1), stats.GroupWaitsPaid, "one joined, one waited briefly")
			}
		})
	}
}

// With GroupWait zero (the default) no group is held.
func TestAcceptorGroupWaitOff(t *testing.T) {
	r := newGroupWaitRig(t, AcceptorConfig{})
	r.persistFirst(t, 50*time.Millisecond, "a")
	recvWithin(t, r.st.entered, "the gated store's next Apply")
	sendWithin(t, r.st.gate, struct{}{}, "release the gated store")
	assert.Equal(t, "a", recvReply(t, r.tr).Items[0].Key)
	assert.Zero(t, r.a.Stats().GroupWaits)
}

// A wait that does not pay (nothing joined) makes the next group go at
// once; one that pays lets the following group wait again.
func TestAcceptorGroupWaitBacksOff(t *testing.T) {
	const bound = 40 * time.Millisecond
	r := newGroupWaitRig(t, AcceptorConfig{GroupWait: bound, GroupWaitFraction: 1})
	r.persistFirst(t, 2*bound, "a")
	recvWithin(t, r.st.entered, "the gated store's next Apply") // "a", after a wait nothing joined
	r.send(t, "b")
	time.Sleep(2 * bound)
	sendWithin(t, r.st.gate, struct{}{}, "release the gated store")
	assert.Equal(t, "a", recvReply(t, r.tr).Items[0].Key)
	recvWithin(t, r.st.entered, "the gated store's next Apply") // "b": skipped the wait
	stats := r.a.Stats()
	assert.Equal(t, uint64(1), stats.GroupWaits)
	assert.Zero(t, stats.GroupWaitsPaid)
	sendWithin(t, r.st.gate, struct{}{}, "release the gated store")
	assert.Equal(t, "b", recvReply(t, r.tr).Items[0].Key)
}

// Close during a wait returns promptly; the held group is neither
// persisted nor answered.
func TestAcceptorCloseDuringGroupWait(t *testing.T) {
	r := newGroupWaitRig(t, AcceptorConfig{GroupWait: MaxGroupWait, GroupWaitFraction: 1})
	r.persistFirst(t, 2*MaxGroupWait, "a")
	start := time.Now()
	require.NoError(t, r.a.Close())
	assert.Less(t, time.Since(start), MaxGroupWait, "close must not sit out the wait")
	select {
	case <-r.st.entered:
		t.Fatal("the held group reached the store after close")
	default:
	}
	expectNoReply(t, r.tr, 20*time.Millisecond)
	assert.Equal(t, [][]string{{"first"}}, r.appliedKeys())
}

// Many requests arriving during waits: every reply arrives once, after
// its batch is durable, in the order the batches were persisted, and no two
// Applies overlap.
func TestAcceptorGroupWaitOrder(t *testing.T) {
	st := &orderStore{MemoryStore: caspaxos.NewMemoryStore(), batchOf: make(map[string]int)}
	net := NewMemNetwork()
	a, err := net.StartAcceptor(AcceptorConfig{ID: 1, Store: st, GroupWait: 5 * time.Millisecond, GroupWaitFraction: 1})
	require.NoError(t, err)
	defer a.Close()
	tr := net.Dial(0)
	const n = 300
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := range n {
			if err := tr.Send(prepare(fmt.Sprintf("k%03d", i), 1)); err != nil {
				return
			}
			if i%7 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	last := -1
	seen := make(map[string]bool, n)
	for range n {
		k := recvReply(t, tr).Items[0].Key
		require.False(t, seen[k], "reply %s twice", k)
		seen[k] = true
		st.mu.Lock()
		b, ok := st.batchOf[k]
		st.mu.Unlock()
		require.True(t, ok, "reply %s before its batch was durable", k)
		require.GreaterOrEqual(t, b, last, "reply %s from batch %d after one from batch %d", k, b, last)
		last = b
	}
	recvWithin(t, sent, "the sender goroutine to finish")
	st.mu.Lock()
	defer st.mu.Unlock()
	assert.False(t, st.overlap, "two Applies ran at once")
	assert.Positive(t, a.Stats().GroupWaits, "the test should exercise waits")
}

// orderStore records which Apply made each key durable and whether two
// Applies overlapped; each Apply takes a little time, like an fsync.
type orderStore struct {
	*caspaxos.MemoryStore
	mu      sync.Mutex
	batches int
	batchOf map[string]int
	overlap bool
	active  atomic.Int32
}

func (s *orderStore) Apply(b caspaxos.Batch) error {
	if s.active.Add(1) > 1 {
		s.mu.Lock()
		s.overlap = true
		s.mu.Unlock()
	}
	defer s.active.Add(-1)
	time.Sleep(2 * time.Millisecond)
	if err := s.MemoryStore.Apply(b); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range b.Put {
		s.batchOf[r.Key] = s.batches
	}
	s.batches++
	return nil
}
