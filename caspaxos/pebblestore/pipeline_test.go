package pebblestore

import (
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/storetest"
)

// TestCrashSubmitKeepsAPrefix: batches submitted back to back, a power
// loss while the later ones are still in the pipeline (their syncs are
// dropped): recovery holds every batch whose wait returned before the
// loss, and exactly a prefix of the Submit sequence (never a later batch
// without an earlier one).
func TestCrashSubmitKeepsAPrefix(t *testing.T) {
	fs := vfs.NewStrictMem()
	const dir = "/acceptor"
	rng := rand.New(rand.NewPCG(47, 53))
	h := storetest.NewHistory()
	var n uint64
	acked := 0 // history index every recovery must reach
	lost := 0  // cycles whose loss took submitted batches with it
	for cycle := range 8 {
		s, err := Open(dir, Options{FS: fs})
		require.NoError(t, err, "cycle %d", cycle)
		st, err := s.Load()
		require.NoError(t, err)
		got := h.Index(st)
		require.GreaterOrEqual(t, got, acked, "cycle %d: recovered state %d of the history, acknowledged up to %d", cycle, got, acked)
		if got < h.Len()-1 {
			lost++
		}
		// Carry on from what survived: the lost suffix never happened.
		h = truncated(h, got)
		const total = 40
		durable := 1 + rng.IntN(total-1) // waits returned before the loss
		waits := make([]func() error, 0, total)
		for range total {
			n++
			b := randomBatch(rng, n)
			wait, err := s.Submit(b)
			require.NoError(t, err)
			waits = append(waits, wait)
			h.Apply(b)
		}
		for _, wait := range waits[:durable] {
			require.NoError(t, wait())
		}
		acked = got + durable
		fs.SetIgnoreSyncs(true) // the loss: no later sync reaches the disk
		for _, wait := range waits[durable:] {
			require.NoError(t, wait())
		}
		require.NoError(t, s.Close())
		fs.ResetToSyncedState()
		fs.SetIgnoreSyncs(false)
	}
	assert.Positive(t, lost, "no loss cut into the submitted batches: the test proves nothing")
}

// truncated returns the history of h's first upto batches.
func truncated(h *storetest.History, upto int) *storetest.History {
	return h.Prefix(upto)
}

// TestCrashSubmitHarnessLoses is the canary for the test above: with syncs
// dropped before any wait, a power loss does lose submitted batches, so
// the test's "kept" is the store's doing, not the harness's.
func TestCrashSubmitHarnessLoses(t *testing.T) {
	fs := vfs.NewStrictMem()
	const dir = "/acceptor"
	s, err := Open(dir, Options{FS: fs})
	require.NoError(t, err)
	fs.SetIgnoreSyncs(true)
	var waits []func() error
	for i := range 20 {
		wait, err := s.Submit(caspaxos.Batch{Put: []caspaxos.Record{{Key: "k", Value: caspaxos.Value{Version: uint64(i + 1)}}}})
		require.NoError(t, err)
		waits = append(waits, wait)
	}
	for _, wait := range waits {
		require.NoError(t, wait())
	}
	require.NoError(t, s.Close())
	fs.ResetToSyncedState()
	fs.SetIgnoreSyncs(false)
	s, err = Open(dir, Options{FS: fs})
	require.NoError(t, err)
	defer s.Close()
	st, err := s.Load()
	require.NoError(t, err)
	assert.Empty(t, st.Records)
}
