package agent

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/wire"
	"github.com/fmnode/fmnode/internal/sysreg"
)

// diskFullStore is a system-register store whose Apply fails as bbolt's
// commit does on a full disk.
type diskFullStore struct{ caspaxos.Store }

var errNoSpace = errors.New("write system.db: no space left on device")

func (diskFullStore) Apply(caspaxos.Batch) error { return errNoSpace }

// TestAgentStopsWhenItsSystemRegisterAcceptorFails: found by the
// jepsen-style disk-full fault. A failed Apply stops the system
// register's acceptor until the process restarts, and the agent ran on
// with it stopped (its /readyz ready, one acceptor short, nothing said).
// The agent's run loop must end with the acceptor's error so that its
// supervisor restarts it and the restart recovers the acceptor.
func TestAgentStopsWhenItsSystemRegisterAcceptorFails(t *testing.T) {
	acc, err := sysreg.NewAcceptor(sysreg.AcceptorConfig{ID: 1, Store: diskFullStore{caspaxos.NewMemoryStore()}})
	require.NoError(t, err)
	a := &Agent{sysacc: acc}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.watchAcceptor(ctx) }()

	select {
	case err := <-done:
		t.Fatalf("the watcher ended before the acceptor failed: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	m := caspaxos.Message{Type: caspaxos.MsgPrepare, From: 7, To: 1,
		Items: []caspaxos.Item{{Key: sysreg.Key, Ballot: caspaxos.Ballot{Counter: 3, Proposer: 7}}}}
	body, err := wire.AppendMessage(nil, m)
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	acc.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, sysreg.Path, bytes.NewReader(body)))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)

	select {
	case err := <-done:
		require.Error(t, err, "the agent must stop when its acceptor has")
		assert.ErrorIs(t, err, sysreg.ErrAcceptorFailed)
		assert.ErrorIs(t, err, errNoSpace, "the operator gets the reason")
	case <-time.After(5 * time.Second):
		t.Fatal("the agent ran on with its system-register acceptor stopped")
	}
}

// A healthy acceptor's watcher ends quietly with the run.
func TestAcceptorWatcherEndsWithTheRun(t *testing.T) {
	acc, err := sysreg.NewAcceptor(sysreg.AcceptorConfig{ID: 1, Store: caspaxos.NewMemoryStore()})
	require.NoError(t, err)
	a := &Agent{sysacc: acc}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.NoError(t, a.watchAcceptor(ctx))
}
