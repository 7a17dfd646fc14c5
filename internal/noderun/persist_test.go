package noderun

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
)

// recStore is a PipelineStore twin that records calls and waits in order
// and fails the Submit of the batch whose key is failKey.
type recStore struct {
	*caspaxos.MemoryStore
	calls   []string
	failKey string
}

func (s *recStore) Apply(b caspaxos.Batch) error {
	s.calls = append(s.calls, "apply "+b.Put[0].Key)
	return s.MemoryStore.Apply(b)
}

func (s *recStore) Submit(b caspaxos.Batch) (func() error, error) {
	k := b.Put[0].Key
	if k == s.failKey {
		return nil, errors.New("submit failed")
	}
	s.calls = append(s.calls, "submit "+k)
	if err := s.MemoryStore.Apply(b); err != nil {
		return nil, err
	}
	return func() error { s.calls = append(s.calls, "wait "+k); return nil }, nil
}

// plainStore hides Submit: a store that cannot pipeline.
type plainStore struct{ s *recStore }

func (p plainStore) Apply(b caspaxos.Batch) error  { return p.s.Apply(b) }
func (p plainStore) Load() (caspaxos.State, error) { return p.s.Load() }
func (p plainStore) Close() error                  { return p.s.Close() }

func TestSubmitAcceptor(t *testing.T) {
	batch := func(k string) caspaxos.Batch {
		return caspaxos.Batch{Put: []caspaxos.Record{{Key: k, Value: caspaxos.Value{Version: 1}}}}
	}
	three := []caspaxos.Batch{batch("a"), batch("b"), batch("c")}
	tests := map[string]struct {
		plain   bool
		batches []caspaxos.Batch
		failKey string
		calls   []string // after every returned wait was called, in order
		wantErr bool
	}{
		"pipelined: all submitted before any wait, waits in order": {batches: three,
			calls: []string{"submit a", "submit b", "submit c", "wait a", "wait b", "wait c"}},
		"one batch: submitted too": {batches: three[:1], calls: []string{"submit a", "wait a"}},
		"plain store: applied one at a time, nothing to wait for": {plain: true, batches: three,
			calls: []string{"apply a", "apply b", "apply c"}},
		"failed submit: the earlier batch's wait is still returned": {batches: three, failKey: "b", wantErr: true,
			calls: []string{"submit a", "wait a"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rs := &recStore{MemoryStore: caspaxos.NewMemoryStore(), failKey: tc.failKey}
			var st caspaxos.Store = rs
			if tc.plain {
				st = plainStore{rs}
			}
			waits, err := submitAcceptor(st, tc.batches)
			if tc.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			for _, w := range waits {
				require.NoError(t, w())
			}
			assert.Equal(t, tc.calls, rs.calls)
		})
	}
}

// gatedWait is a store's wait that returns only when released.
type gatedWait struct {
	release chan error
	called  atomic.Bool
}

func newGatedWait() *gatedWait { return &gatedWait{release: make(chan error, 1)} }

func (g *gatedWait) wait() error { g.called.Store(true); return <-g.release }

// recvWithin takes the next commit from ch, failing the test after d.
func recvWithin(t *testing.T, ch <-chan *commit, d time.Duration) *commit {
	t.Helper()
	select {
	case c, ok := <-ch:
		require.True(t, ok, "durable closed early")
		return c
	case <-time.After(d):
		t.Fatalf("no commit became durable within %v", d)
		return nil
	}
}

// TestPipelineAppliesTheNextReadyDuringAnFsync: Ready 2 is applied while
// Ready 1's fsync is still running (the serial committer applied it only
// after), yet neither is handed back before it is durable, and they come
// back in Ready order even when 2's fsync ends first (rule 3: a reply
// leaves only after the state it depends on, and every earlier Ready's,
// is durable).
func TestPipelineAppliesTheNextReadyDuringAnFsync(t *testing.T) {
	commits := make(chan *commit, 4)
	applied := make(chan int, 4)
	gates := []*gatedWait{newGatedWait(), newGatedWait()}
	var n int
	apply := func(c *commit) {
		c.waits = []func() error{gates[n].wait}
		n++
		applied <- n
	}
	durable, stages := pipeline(commits, 4, apply)
	c1, c2 := &commit{}, &commit{}
	commits <- c1
	commits <- c2
	for want := 1; want <= 2; want++ {
		select {
		case got := <-applied:
			require.Equal(t, want, got)
		case <-time.After(5 * time.Second):
			t.Fatalf("Ready %d was not applied while Ready 1's fsync ran", want)
		}
	}
	gates[1].release <- nil // Ready 2 durable first: it must still wait for 1
	select {
	case c := <-durable:
		t.Fatalf("a commit came back before Ready 1 was durable (c1: %v)", c == c1)
	case <-time.After(50 * time.Millisecond):
	}
	gates[0].release <- nil
	require.Same(t, c1, recvWithin(t, durable, 5*time.Second))
	require.Same(t, c2, recvWithin(t, durable, 5*time.Second))
	close(commits)
	_, open := <-durable
	require.False(t, open)
	stages.Wait()
}

// TestPipelineStopsApplyingAfterAFailure: once a Ready's apply failed, the
// Readys after it are not applied and come back with its error; a failed
// fsync comes back as its commit's error; every wait is called.
func TestPipelineStopsApplyingAfterAFailure(t *testing.T) {
	errDisk := errors.New("disk on fire")
	commits := make(chan *commit, 4)
	var appliedN atomic.Int32
	w1 := newGatedWait()
	w1.release <- errDisk
	apply := func(c *commit) {
		switch appliedN.Add(1) {
		case 1:
			c.waits = []func() error{w1.wait}
		case 2:
			c.err = errDisk
		}
	}
	durable, stages := pipeline(commits, 4, apply)
	for range 3 {
		commits <- &commit{}
	}
	close(commits)
	var errs []error
	for c := range durable {
		errs = append(errs, c.err)
	}
	stages.Wait()
	require.Len(t, errs, 3)
	for i, err := range errs {
		require.ErrorIs(t, err, errDisk, "commit %d", i+1)
	}
	assert.True(t, w1.called.Load(), "the wait of a failed fsync was not called")
	assert.EqualValues(t, 2, appliedN.Load(), "a Ready after a failed apply was applied")
}
