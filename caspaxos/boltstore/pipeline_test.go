package boltstore

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/storetest"
)

// TestCrashSubmitCopyWhileOpen: batches submitted back to back, the file
// copied while open (what a process kill leaves) right after some wait
// returned: the copy holds a prefix of the Submit sequence that reaches at
// least that batch.
func TestCrashSubmitCopyWhileOpen(t *testing.T) {
	for _, l := range testLayouts() {
		t.Run(l.name, func(t *testing.T) { testCrashSubmitCopyWhileOpen(t, l.opts) })
	}
}

func testCrashSubmitCopyWhileOpen(t *testing.T, opts Options) {
	dir := t.TempDir()
	path := filepath.Join(dir, "acceptor.db")
	s, err := Open(path, opts)
	require.NoError(t, err)
	defer s.Close()
	rng := rand.New(rand.NewPCG(13, 17))
	h := storetest.NewHistory()
	const total = 150
	waits := make([]func() error, 0, total)
	for i := range total {
		b := randomBatch(rng, uint64(i+1))
		wait, err := s.Submit(b)
		require.NoError(t, err)
		waits = append(waits, wait)
		h.Apply(b)
	}
	for i, wait := range waits {
		require.NoError(t, wait())
		if i%15 != 3 {
			continue
		}
		crashed := filepath.Join(dir, fmt.Sprintf("crash-%d.db", i))
		copyFile(t, path, crashed)
		c, err := Open(crashed, opts)
		require.NoError(t, err)
		st, err := c.Load()
		require.NoError(t, err)
		require.NoError(t, c.Close())
		got := h.Index(st)
		require.GreaterOrEqual(t, got, i+1, "copy after wait %d: state %d of the history (-1: none of them)", i, got)
	}
	st, err := s.Load()
	require.NoError(t, err)
	storetest.AssertState(t, h.Latest(), st)
}

// TestSubmitGroups: batches submitted back to back share commits (the
// committer takes everything queued), and every wait returns.
func TestSubmitGroups(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "acceptor.db"), Options{})
	require.NoError(t, err)
	defer s.Close()
	var waits []func() error
	for i := range 64 {
		wait, err := s.Submit(caspaxos.Batch{Put: []caspaxos.Record{{Key: fmt.Sprintf("k%02d", i), Value: caspaxos.Value{Version: 1}}}})
		require.NoError(t, err)
		waits = append(waits, wait)
	}
	for _, wait := range waits {
		require.NoError(t, wait())
	}
	assert.Less(t, s.Fsyncs(), uint64(64), "queued submits share commits")
	st, err := s.Load()
	require.NoError(t, err)
	assert.Len(t, st.Records, 64)
}
