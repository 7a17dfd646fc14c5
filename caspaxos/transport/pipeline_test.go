package transport

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
)

// pipeStore is a caspaxos.PipelineStore twin that makes submitted batches
// durable only when the test says so (release), oldest first, and records
// the order of everything: "submit N", "durable N". A batch's records
// reach the memory store only when it becomes durable, so Snapshot is what
// a crash would keep.
type pipeStore struct {
	mem *caspaxos.MemoryStore

	mu        sync.Mutex
	events    []string
	pending   []*pipeEntry
	submitted int
	durable   int
	// batchOf is the batch that made each key durable.
	batchOf map[string]int
	changed chan struct{} // signalled (non-blocking) on every submit
}

type pipeEntry struct {
	n     int
	batch caspaxos.Batch
	done  chan struct{}
}

func newPipeStore() *pipeStore {
	return &pipeStore{mem: caspaxos.NewMemoryStore(), batchOf: make(map[string]int), changed: make(chan struct{}, 1)}
}

func (s *pipeStore) Load() (caspaxos.State, error) { return s.mem.Load() }
func (s *pipeStore) Close() error                  { return s.mem.Close() }

// Apply is not used by a pipelining acceptor; it fails the test loudly if
// it were, by never being durable in order with the submitted batches.
func (s *pipeStore) Apply(caspaxos.Batch) error {
	return fmt.Errorf("pipeStore: Apply called on a pipelining acceptor")
}

func (s *pipeStore) Submit(b caspaxos.Batch) (func() error, error) {
	if err := caspaxos.CheckBatch(b); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.submitted++
	e := &pipeEntry{n: s.submitted, batch: b, done: make(chan struct{})}
	s.pending = append(s.pending, e)
	s.events = append(s.events, fmt.Sprintf("submit %d", e.n))
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return func() error { <-e.done; return nil }, nil
}

// release makes the n oldest pending batches durable, in order.
func (s *pipeStore) release(t *testing.T, n int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.LessOrEqual(t, n, len(s.pending), "release more than pending")
	for _, e := range s.pending[:n] {
		require.NoError(t, s.mem.Apply(e.batch))
		for _, r := range e.batch.Put {
			s.batchOf[r.Key] = e.n
		}
		s.durable = e.n
		s.events = append(s.events, fmt.Sprintf("durable %d", e.n))
		close(e.done)
	}
	s.pending = s.pending[n:]
}

func (s *pipeStore) submittedKeys() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make(map[string]bool)
	for _, e := range s.pending {
		for _, r := range e.batch.Put {
			keys[r.Key] = true
		}
	}
	for k := range s.batchOf {
		keys[k] = true
	}
	return keys
}

func (s *pipeStore) pendingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

func startPipeAcceptor(t *testing.T, depth int) (*pipeStore, *MemAcceptor, *MemTransport) {
	t.Helper()
	st := newPipeStore()
	net := NewMemNetwork()
	a, err := net.StartAcceptor(AcceptorConfig{ID: 1, Store: st, PipelineDepth: depth})
	require.NoError(t, err)
	t.Cleanup(func() {
		st.mu.Lock()
		n := len(st.pending)
		st.mu.Unlock()
		st.release(t, n) // let persistence finish every wait
		_ = a.Close()
	})
	return st, a, net.Dial(0)
}

// sendSubmitted sends prepares and waits until the acceptor submitted each
// key's write.
func sendSubmitted(t *testing.T, st *pipeStore, tr Transport, counter uint64, keys ...string) {
	t.Helper()
	for _, k := range keys {
		require.NoError(t, tr.Send(prepare(k, counter)))
	}
	waitFor(t, "keys submitted", func() bool {
		got := st.submittedKeys()
		for _, k := range keys {
			if !got[k] {
				return false
			}
		}
		return true
	})
}

// With a PipelineStore the acceptor submits the next group before the last
// is durable, and still sends no reply before its batch and every earlier
// one is durable.
func TestAcceptorPipelineRepliesAfterDurable(t *testing.T) {
	st, a, tr := startPipeAcceptor(t, DefaultPipelineDepth)
	sendSubmitted(t, st, tr, 1, "a")
	sendSubmitted(t, st, tr, 1, "b", "c")
	assert.GreaterOrEqual(t, st.pendingCount(), 2, "the second group is submitted while the first is pending")
	expectNoReply(t, tr, 30*time.Millisecond)

	st.release(t, 1)
	assert.Equal(t, "a", recvReply(t, tr).Items[0].Key)
	expectNoReply(t, tr, 30*time.Millisecond)

	st.release(t, st.pendingCount())
	got := map[string]bool{}
	for range 2 {
		got[recvReply(t, tr).Items[0].Key] = true
	}
	assert.Equal(t, map[string]bool{"b": true, "c": true}, got)
	assert.Equal(t, uint64(3), a.Stats().Replies)
}

// A request that writes nothing (a prepare refused by a promise still
// being persisted) yields a group with an empty batch; its reply reveals
// that promise, so it too waits until the earlier batch is durable.
func TestAcceptorPipelineEmptyBatchWaitsBehind(t *testing.T) {
	st, a, tr := startPipeAcceptor(t, DefaultPipelineDepth)
	sendSubmitted(t, st, tr, 5, "x")
	require.NoError(t, tr.Send(prepare("x", 3))) // refused: promised 5
	waitFor(t, "refusal stepped", func() bool { return a.Stats().Messages == 2 })
	expectNoReply(t, tr, 50*time.Millisecond)
	st.release(t, 1)
	first, second := recvReply(t, tr), recvReply(t, tr)
	assert.Equal(t, caspaxos.Ballot{Counter: 5, Proposer: 7}, first.Items[0].Ballot, "the promise's reply first")
	assert.Equal(t, caspaxos.Ballot{Counter: 3, Proposer: 7}, second.Items[0].Ballot)
	assert.Equal(t, caspaxos.Ballot{Counter: 5, Proposer: 7}, second.Items[0].Conflict, "refused by the promise")
	assert.Equal(t, 1, st.submitted, "the refusal wrote nothing")
}

// Depth bounds the groups in flight: with depth 2 a third group is not
// submitted until one of the first two is durable.
func TestAcceptorPipelineDepthBound(t *testing.T) {
	st, _, tr := startPipeAcceptor(t, 2)
	sendSubmitted(t, st, tr, 1, "a")
	sendSubmitted(t, st, tr, 1, "b")
	require.NoError(t, tr.Send(prepare("c", 1)))
	time.Sleep(30 * time.Millisecond)
	assert.False(t, st.submittedKeys()["c"], "a third group went out with two in flight")
	st.release(t, 1)
	waitFor(t, "c submitted", func() bool { return st.submittedKeys()["c"] })
	st.release(t, 2)
	for range 3 {
		recvReply(t, tr)
	}
}

// Many requests while batches become durable at random moments: every
// reply arrives once, after its batch is durable, in batch order, and the
// submit order is the order batches become durable.
func TestAcceptorPipelineOrder(t *testing.T) {
	st, a, tr := startPipeAcceptor(t, DefaultPipelineDepth)
	const n = 300
	stop := make(chan struct{})
	releaser := make(chan struct{})
	go func() {
		defer close(releaser)
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Microsecond):
			}
			st.mu.Lock()
			k := len(st.pending)
			st.mu.Unlock()
			if k > 0 {
				st.release(t, 1+k/2)
			}
		}
	}()
	go func() {
		for i := range n {
			if err := tr.Send(prepare(fmt.Sprintf("k%03d", i), 1)); err != nil {
				return
			}
			if i%5 == 0 {
				time.Sleep(200 * time.Microsecond)
			}
		}
	}()
	last := 0
	seen := make(map[string]bool, n)
	for range n {
		k := recvReply(t, tr).Items[0].Key
		require.False(t, seen[k], "reply %s twice", k)
		seen[k] = true
		st.mu.Lock()
		b, ok := st.batchOf[k]
		durable := st.durable
		st.mu.Unlock()
		require.True(t, ok, "reply %s before its batch was durable", k)
		require.LessOrEqual(t, b, durable)
		require.GreaterOrEqual(t, b, last, "reply %s from batch %d after one from batch %d", k, b, last)
		last = b
	}
	close(stop)
	recvWithin(t, releaser, "the releaser goroutine to finish")
	st.mu.Lock()
	defer st.mu.Unlock()
	next := 1
	for _, e := range st.events {
		var what string
		var m int
		_, err := fmt.Sscanf(e, "%s %d", &what, &m)
		require.NoError(t, err)
		if what == "durable" {
			require.Equal(t, next, m, "batches became durable out of submit order: %v", st.events)
			next++
		}
	}
	assert.Greater(t, st.submitted, 1, "the test should pipeline")
	assert.Less(t, a.Stats().Batches, uint64(n), "requests should share groups")
}

// A store that cannot pipeline, or a group wait, keeps one group at a
// time; asking for more is a configuration error naming the field.
func TestAcceptorPipelineConfig(t *testing.T) {
	tests := map[string]struct {
		cfg     AcceptorConfig
		depth   int
		wantErr string
	}{
		"pipeline store: one at a time unless asked": {cfg: AcceptorConfig{Store: caspaxos.NewMemoryStore()}, depth: 1},
		"pipeline store, depth asked":                {cfg: AcceptorConfig{Store: caspaxos.NewMemoryStore(), PipelineDepth: 8}, depth: 8},
		"group wait: one at a time":                  {cfg: AcceptorConfig{Store: caspaxos.NewMemoryStore(), GroupWait: time.Millisecond}, depth: 1},
		"plain store: one at a time":                 {cfg: AcceptorConfig{Store: newGatedStore()}, depth: 1},
		"plain store, depth asked":                   {cfg: AcceptorConfig{Store: newGatedStore(), PipelineDepth: 4}, wantErr: "PipelineDepth"},
		"group wait and depth":                       {cfg: AcceptorConfig{Store: caspaxos.NewMemoryStore(), GroupWait: time.Millisecond, PipelineDepth: 4}, wantErr: "PipelineDepth"},
		"depth too large":                            {cfg: AcceptorConfig{Store: caspaxos.NewMemoryStore(), PipelineDepth: MaxPipelineDepth + 1}, wantErr: "PipelineDepth"},
		"negative depth":                             {cfg: AcceptorConfig{Store: caspaxos.NewMemoryStore(), PipelineDepth: -1}, wantErr: "PipelineDepth"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.cfg.ID = 1
			got, err := tc.cfg.withDefaults()
			if tc.wantErr != "" {
				require.ErrorIs(t, err, caspaxos.ErrInvalidConfig)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.depth, got.PipelineDepth)
		})
	}
}
