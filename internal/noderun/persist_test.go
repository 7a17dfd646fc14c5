package noderun

import (
	"errors"
	"testing"

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

func TestPersistAcceptor(t *testing.T) {
	batch := func(k string) caspaxos.Batch {
		return caspaxos.Batch{Put: []caspaxos.Record{{Key: k, Value: caspaxos.Value{Version: 1}}}}
	}
	three := []caspaxos.Batch{batch("a"), batch("b"), batch("c")}
	tests := map[string]struct {
		plain   bool
		batches []caspaxos.Batch
		failKey string
		calls   []string
		wantErr bool
	}{
		"pipelined: all submitted, then waited in order": {batches: three,
			calls: []string{"submit a", "submit b", "submit c", "wait a", "wait b", "wait c"}},
		"one batch: applied":         {batches: three[:1], calls: []string{"apply a"}},
		"plain store: one at a time": {plain: true, batches: three, calls: []string{"apply a", "apply b", "apply c"}},
		"failed submit: earlier waited": {batches: three, failKey: "b", wantErr: true,
			calls: []string{"submit a", "wait a"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rs := &recStore{MemoryStore: caspaxos.NewMemoryStore(), failKey: tc.failKey}
			var st caspaxos.Store = rs
			if tc.plain {
				st = plainStore{rs}
			}
			err := persistAcceptor(st, tc.batches)
			if tc.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.calls, rs.calls)
		})
	}
}
