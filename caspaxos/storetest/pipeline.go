package storetest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
)

// pipelineCases are the conformance cases of caspaxos.PipelineStore; Run
// runs them for every store that implements it.
var pipelineCases = []struct {
	name string
	fn   func(t *testing.T, h *harness, p caspaxos.PipelineStore)
}{
	{"SubmitOrder", testSubmitOrder},
	{"SubmitInvalid", testSubmitInvalid},
	{"SubmitClosed", testSubmitClosed},
	{"SubmitMixedWithApply", testSubmitMixedWithApply},
}

// testSubmitOrder: many batches submitted back to back from one goroutine,
// rewriting the same keys, with their waits called in order only after all
// were submitted (so the store has them all in its pipeline at once): the
// store ends in the state of applying them in Submit order, live and after
// a restart.
func testSubmitOrder(t *testing.T, h *harness, p caspaxos.PipelineStore) {
	rng := rand.New(rand.NewPCG(3, 5))
	const batches = 200
	waits := make([]func() error, 0, batches)
	var floor uint64
	for n := range uint64(batches) {
		var b caspaxos.Batch
		for range 1 + rng.IntN(4) {
			b.Put = append(b.Put, rec(fmt.Sprintf("key/%d", rng.IntN(16)), n+1, fmt.Sprintf("v%d", n)))
		}
		if rng.IntN(6) == 0 {
			b.Delete = append(b.Delete, fmt.Sprintf("key/%d", rng.IntN(16)))
		}
		if rng.IntN(10) == 0 {
			floor++
			b.AgeFloor = floor
		}
		wait, err := p.Submit(b)
		require.NoError(t, err)
		waits = append(waits, wait)
		h.model.Apply(b)
	}
	for i, wait := range waits {
		require.NoError(t, wait(), "batch %d", i)
	}
	h.checkBoth()
}

// testSubmitInvalid: an invalid batch is refused by Submit itself and
// changes nothing; the store goes on accepting valid ones.
func testSubmitInvalid(t *testing.T, h *harness, p caspaxos.PipelineStore) {
	h.apply(caspaxos.Batch{Put: []caspaxos.Record{rec("a", 1, "a")}})
	bad := rec("too-big", 2, "")
	bad.Value.Data = make([]byte, caspaxos.MaxValueBytes+1)
	_, err := p.Submit(caspaxos.Batch{Put: []caspaxos.Record{rec("b", 2, "b"), bad}, Delete: []string{"a"}})
	require.ErrorIs(t, err, caspaxos.ErrValueTooLarge)
	wait, err := p.Submit(caspaxos.Batch{})
	require.NoError(t, err, "an empty batch is valid")
	require.NoError(t, wait())
	wait, err = p.Submit(caspaxos.Batch{Put: []caspaxos.Record{rec("c", 3, "c")}})
	require.NoError(t, err)
	require.NoError(t, wait())
	h.model.Apply(caspaxos.Batch{Put: []caspaxos.Record{rec("c", 3, "c")}})
	h.checkBoth()
}

// testSubmitClosed: Submit after Close fails with ErrStoreClosed, and a
// wait obtained before Close still reports its batch durable.
func testSubmitClosed(t *testing.T, h *harness, p caspaxos.PipelineStore) {
	b := caspaxos.Batch{Put: []caspaxos.Record{rec("a", 1, "a")}}
	wait, err := p.Submit(b)
	require.NoError(t, err)
	require.NoError(t, wait())
	h.model.Apply(b)
	require.NoError(t, h.s.Close())
	_, err = p.Submit(caspaxos.Batch{Put: []caspaxos.Record{rec("b", 1, "b")}})
	assert.ErrorIs(t, err, caspaxos.ErrStoreClosed)
	h.s = h.open(t, h.dir)
	h.check()
}

// testSubmitMixedWithApply: Apply calls between submitted batches land
// after them (Apply returns only once durable, and the waits came first).
func testSubmitMixedWithApply(t *testing.T, h *harness, p caspaxos.PipelineStore) {
	for n := range uint64(20) {
		b := caspaxos.Batch{Put: []caspaxos.Record{rec("k", 2*n+1, fmt.Sprintf("submit-%d", n))}}
		wait, err := p.Submit(b)
		require.NoError(t, err)
		require.NoError(t, wait())
		h.model.Apply(b)
		h.apply(caspaxos.Batch{Put: []caspaxos.Record{rec("k", 2*n+2, fmt.Sprintf("apply-%d", n))}})
	}
	h.checkBoth()
}
