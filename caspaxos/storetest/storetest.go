// Package storetest is the conformance suite for caspaxos.Store
// implementations. Every store (the in-memory twin, bbolt, pebble) runs the
// same cases, so the acceptor can rely on one contract whichever store an
// operator picks, and the simulator's memory store cannot drift from the
// disk stores it stands in for.
package storetest

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
)

// Opener opens the store kept under dir, creating it when dir holds none.
// The suite calls it again with the same dir after Close to check what a
// restart recovers, so it must not wipe existing state. dir is a fresh
// t.TempDir per case; a store that needs a file path picks one inside it.
type Opener func(t *testing.T, dir string) caspaxos.Store

// Run runs every conformance case against the stores open returns.
func Run(t *testing.T, open Opener) {
	cases := []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"EmptyLoad", testEmptyLoad},
		{"PutRoundTrip", testPutRoundTrip},
		{"OverwriteAndDelete", testOverwriteAndDelete},
		{"BatchOrder", testBatchOrder},
		{"EmptyBatch", testEmptyBatch},
		{"AgeFloor", testAgeFloor},
		{"BatchSemantics", testBatchSemantics},
		{"BatchAtomicOnInvalid", testBatchAtomicOnInvalid},
		{"Bounds", testBounds},
		{"SortedByKey", testSortedByKey},
		{"NoAliasing", testNoAliasing},
		{"ConcurrentApply", testConcurrentApply},
		{"ClosedStore", testClosedStore},
		{"ReopenRecoversExactly", testReopenRecoversExactly},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := &harness{t: t, open: open, dir: t.TempDir(), model: NewHistory()}
			h.s = open(t, h.dir)
			t.Cleanup(func() { _ = h.s.Close() })
			c.fn(t, h)
		})
	}
	// The PipelineStore cases, for stores that implement it (checked on
	// a store of their own, so a store that does not is simply skipped).
	probe := open(t, t.TempDir())
	_, pipelines := probe.(caspaxos.PipelineStore)
	require.NoError(t, probe.Close())
	if !pipelines {
		return
	}
	for _, c := range pipelineCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := &harness{t: t, open: open, dir: t.TempDir(), model: NewHistory()}
			h.s = open(t, h.dir)
			t.Cleanup(func() { _ = h.s.Close() })
			c.fn(t, h, h.s.(caspaxos.PipelineStore))
		})
	}
}

// harness keeps a store and the history of what it must hold.
type harness struct {
	t     *testing.T
	open  Opener
	dir   string
	s     caspaxos.Store
	model *History // the obviously-correct reference
}

// apply applies b to the store and, on success, to the model.
func (h *harness) apply(b caspaxos.Batch) {
	h.t.Helper()
	require.NoError(h.t, h.s.Apply(b))
	h.model.Apply(b)
}

// reopen closes the store cleanly and opens it again from the same dir.
func (h *harness) reopen() {
	h.t.Helper()
	require.NoError(h.t, h.s.Close())
	h.s = h.open(h.t, h.dir)
}

// check asserts the store's Load equals the model.
func (h *harness) check() {
	h.t.Helper()
	st, err := h.s.Load()
	require.NoError(h.t, err)
	AssertState(h.t, h.model.Latest(), st)
}

// checkBoth checks before and after a reopen: what a live store shows and
// what a restart recovers must be the same thing.
func (h *harness) checkBoth() {
	h.t.Helper()
	h.check()
	h.reopen()
	h.check()
}

// AssertState asserts got equals want, treating nil and empty data (and
// nil and empty record lists) as equal, since stores may return either.
// It is exported for the stores' own crash tests.
func AssertState(t testing.TB, want, got caspaxos.State) bool {
	t.Helper()
	return assert.Equal(t, Normalize(want), Normalize(got))
}

// Normalize returns st with empty data and record lists as nil, so that
// states compare with == semantics in assertions and map keys.
func Normalize(st caspaxos.State) caspaxos.State {
	out := caspaxos.State{AgeFloor: st.AgeFloor}
	for _, r := range st.Records {
		if len(r.Value.Data) == 0 {
			r.Value.Data = nil
		}
		out.Records = append(out.Records, r)
	}
	return out
}

// rec builds a record whose ballots and version derive from n.
func rec(key string, n uint64, data string) caspaxos.Record {
	b := caspaxos.Ballot{Counter: n, Proposer: caspaxos.NodeID(n%7 + 1)}
	return caspaxos.Record{Key: key, Promised: b, Accepted: b, Value: caspaxos.Value{Version: n, Data: []byte(data)}}
}

func testEmptyLoad(t *testing.T, h *harness) {
	st, err := h.s.Load()
	require.NoError(t, err)
	assert.Empty(t, st.Records)
	assert.Zero(t, st.AgeFloor)
	h.reopen()
	h.check()
}

func testPutRoundTrip(t *testing.T, h *harness) {
	h.apply(caspaxos.Batch{Put: []caspaxos.Record{
		rec("partition/1", 1, `{"write":"eu"}`),
		{Key: "promise-only", Promised: caspaxos.Ballot{Counter: 9, Proposer: 4}},
		{Key: "", Promised: caspaxos.Ballot{Counter: 1, Proposer: 1}}, // the empty key is a key too
		{Key: "\x00bin\xff", Value: caspaxos.Value{Version: 2, Data: []byte{0, 1, 2}}},
		{
			Key:      "tomb",
			Promised: caspaxos.Ballot{Counter: 5, Proposer: 2},
			Accepted: caspaxos.Ballot{Counter: 4, Proposer: 2},
			Value:    caspaxos.Value{Version: 7, Tombstone: true},
		},
		{
			Key:      "max",
			Promised: caspaxos.Ballot{Counter: math.MaxUint64, Proposer: math.MaxUint64},
			Accepted: caspaxos.Ballot{Counter: math.MaxUint64, Proposer: math.MaxUint64},
			Value:    caspaxos.Value{Version: math.MaxUint64, Data: []byte("m")},
		},
	}})
	h.checkBoth()
}

func testOverwriteAndDelete(t *testing.T, h *harness) {
	h.apply(caspaxos.Batch{Put: []caspaxos.Record{rec("a", 1, "a1"), rec("b", 1, "b1"), rec("c", 1, "c1")}})
	h.apply(caspaxos.Batch{Put: []caspaxos.Record{rec("a", 2, "a2")}, Delete: []string{"b", "never-written"}})
	h.check()
	h.apply(caspaxos.Batch{Delete: []string{"c"}})
	h.apply(caspaxos.Batch{Put: []caspaxos.Record{rec("b", 3, "b3")}})
	h.checkBoth()
}

// testBatchOrder pins the order within a batch: puts in order (the later
// put of a key wins), then deletes.
func testBatchOrder(t *testing.T, h *harness) {
	h.apply(caspaxos.Batch{Put: []caspaxos.Record{rec("k", 1, "first"), rec("k", 2, "second"), rec("gone", 1, "x")}, Delete: []string{"gone"}})
	h.checkBoth()
	st, err := h.s.Load()
	require.NoError(t, err)
	require.Len(t, st.Records, 1)
	assert.Equal(t, "second", string(st.Records[0].Value.Data))
}

func testEmptyBatch(t *testing.T, h *harness) {
	require.NoError(t, h.s.Apply(caspaxos.Batch{}))
	h.apply(caspaxos.Batch{Put: []caspaxos.Record{rec("a", 1, "a")}, AgeFloor: 3})
	require.NoError(t, h.s.Apply(caspaxos.Batch{Put: []caspaxos.Record{}, Delete: []string{}}))
	h.checkBoth()
}

// testAgeFloor: a zero AgeFloor leaves the floor alone; otherwise the store
// persists what it is given and Load returns the latest. Keeping the floor
// monotonic is the acceptor's job, not the store's.
func testAgeFloor(t *testing.T, h *harness) {
	h.apply(caspaxos.Batch{AgeFloor: 3})
	h.check()
	h.apply(caspaxos.Batch{Put: []caspaxos.Record{rec("a", 1, "a")}})
	h.apply(caspaxos.Batch{AgeFloor: 10, Delete: []string{"a"}})
	h.checkBoth()
	h.apply(caspaxos.Batch{AgeFloor: math.MaxUint64})
	h.checkBoth()
}

// testBatchSemantics pins, against literal states rather than the model,
// the two rules every store (and every in-memory twin) must agree on:
// within a batch the puts apply first and the deletes after them, so a key
// both put and deleted in one batch is gone; and a non-zero AgeFloor
// replaces the stored floor, even with a lower value (the store does not
// take a max: monotonicity is the acceptor's job). A store that applied
// deletes before puts, or kept max(old, new), fails here.
func testBatchSemantics(t *testing.T, h *harness) {
	load := func() caspaxos.State {
		t.Helper()
		st, err := h.s.Load()
		require.NoError(t, err)
		return st
	}
	want := func(floor uint64, recs ...caspaxos.Record) {
		t.Helper()
		AssertState(t, caspaxos.State{AgeFloor: floor, Records: recs}, load())
		h.reopen()
		AssertState(t, caspaxos.State{AgeFloor: floor, Records: recs}, load())
	}
	keep := rec("keep", 1, "k")
	require.NoError(t, h.s.Apply(caspaxos.Batch{
		Put:      []caspaxos.Record{rec("both", 1, "put"), keep},
		Delete:   []string{"both"},
		AgeFloor: 10,
	}))
	want(10, keep)

	// The key exists before the batch: the batch's put does not resurrect it.
	require.NoError(t, h.s.Apply(caspaxos.Batch{Put: []caspaxos.Record{rec("both", 2, "old")}}))
	require.NoError(t, h.s.Apply(caspaxos.Batch{Put: []caspaxos.Record{rec("both", 3, "new")}, Delete: []string{"both"}}))
	want(10, keep)

	require.NoError(t, h.s.Apply(caspaxos.Batch{AgeFloor: 4}))
	want(4, keep)
	require.NoError(t, h.s.Apply(caspaxos.Batch{Put: []caspaxos.Record{rec("z", 5, "z")}}))
	want(4, keep, rec("z", 5, "z"))
}

// testBatchAtomicOnInvalid: a batch with one out-of-bounds record fails as a
// whole. Crash atomicity is each store's own crash test.
func testBatchAtomicOnInvalid(t *testing.T, h *harness) {
	h.apply(caspaxos.Batch{Put: []caspaxos.Record{rec("keep", 1, "keep")}, AgeFloor: 2})
	var puts []caspaxos.Record
	for i := range 100 {
		puts = append(puts, rec(fmt.Sprintf("k%03d", i), uint64(i+1), "v"))
	}
	bad := rec("too-big", 1, "")
	bad.Value.Data = make([]byte, caspaxos.MaxValueBytes+1)
	puts = append(puts, bad)
	err := h.s.Apply(caspaxos.Batch{Put: puts, Delete: []string{"keep"}, AgeFloor: 9})
	require.ErrorIs(t, err, caspaxos.ErrValueTooLarge)
	h.checkBoth()
}

func testBounds(t *testing.T, h *harness) {
	big := rec(strings.Repeat("k", caspaxos.MaxKeyBytes), 1, "")
	big.Value.Data = bytes.Repeat([]byte{0x5a}, caspaxos.MaxValueBytes)
	h.apply(caspaxos.Batch{Put: []caspaxos.Record{big}})
	h.apply(caspaxos.Batch{Put: []caspaxos.Record{rec("small", 1, "s")}})
	h.checkBoth()

	tests := []struct {
		name string
		b    caspaxos.Batch
		want error
	}{
		{
			name: "key",
			b:    caspaxos.Batch{Put: []caspaxos.Record{rec(strings.Repeat("k", caspaxos.MaxKeyBytes+1), 1, "")}},
			want: caspaxos.ErrKeyTooLarge,
		},
		{
			name: "value",
			b: caspaxos.Batch{Put: []caspaxos.Record{{
				Key: "v", Value: caspaxos.Value{Version: 1, Data: make([]byte, caspaxos.MaxValueBytes+1)},
			}}},
			want: caspaxos.ErrValueTooLarge,
		},
		{
			name: "delete key",
			b:    caspaxos.Batch{Delete: []string{strings.Repeat("d", caspaxos.MaxKeyBytes+1)}},
			want: caspaxos.ErrKeyTooLarge,
		},
	}
	for _, tt := range tests {
		assert.ErrorIs(t, h.s.Apply(tt.b), tt.want, tt.name)
	}
	h.checkBoth()
}

func testSortedByKey(t *testing.T, h *harness) {
	keys := []string{"b", "a\x00", "a", "B", "\xff", "", "aa", "a/1", "a/10", "a/2", "\x00", "zz\xff\x00"}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for i, k := range keys {
		h.apply(caspaxos.Batch{Put: []caspaxos.Record{rec(k, uint64(i+1), k)}})
	}
	h.checkBoth()
	st, err := h.s.Load()
	require.NoError(t, err)
	assert.True(t, sort.SliceIsSorted(st.Records, func(i, j int) bool { return st.Records[i].Key < st.Records[j].Key }))
}

// testNoAliasing: the store must copy data in and out. A disk store that
// leaked its mmap or batch buffers would fail (or fault) here.
func testNoAliasing(t *testing.T, h *harness) {
	data := []byte("original")
	r := rec("k", 1, "")
	r.Value.Data = data
	h.apply(caspaxos.Batch{Put: []caspaxos.Record{r}})
	copy(data, "CHANGED!")
	h.check()

	st, err := h.s.Load()
	require.NoError(t, err)
	copy(st.Records[0].Value.Data, "mutated!")
	h.apply(caspaxos.Batch{Put: []caspaxos.Record{rec("other", 2, "x")}})
	h.checkBoth()
}

// testConcurrentApply: 64 goroutines apply at once (the group-commit path);
// every acknowledged batch must be visible, live and after a restart.
func testConcurrentApply(t *testing.T, h *harness) {
	const writers, perWriter = 64, 8
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				n := uint64(w*perWriter + i + 1)
				b := caspaxos.Batch{Put: []caspaxos.Record{
					rec(fmt.Sprintf("w%02d/%d", w, i), n, fmt.Sprintf("data-%d", n)),
					rec(fmt.Sprintf("w%02d/last", w), n, fmt.Sprintf("last-%d", i)),
				}}
				if err := h.s.Apply(b); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for w := range writers {
		for i := range perWriter {
			n := uint64(w*perWriter + i + 1)
			h.model.Apply(caspaxos.Batch{Put: []caspaxos.Record{
				rec(fmt.Sprintf("w%02d/%d", w, i), n, fmt.Sprintf("data-%d", n)),
				rec(fmt.Sprintf("w%02d/last", w), n, fmt.Sprintf("last-%d", i)),
			}})
		}
	}
	h.checkBoth()
}

func testClosedStore(t *testing.T, h *harness) {
	h.apply(caspaxos.Batch{Put: []caspaxos.Record{rec("a", 1, "a")}})
	require.NoError(t, h.s.Close())
	assert.ErrorIs(t, h.s.Apply(caspaxos.Batch{Put: []caspaxos.Record{rec("b", 1, "b")}}), caspaxos.ErrStoreClosed)
	assert.ErrorIs(t, h.s.Apply(caspaxos.Batch{}), caspaxos.ErrStoreClosed)
	_, err := h.s.Load()
	assert.ErrorIs(t, err, caspaxos.ErrStoreClosed)
	assert.NoError(t, h.s.Close(), "closing twice is harmless")
	h.s = h.open(t, h.dir)
	h.check()
}

// testReopenRecoversExactly drives a random workload with several restarts
// and compares with the model after each.
func testReopenRecoversExactly(t *testing.T, h *harness) {
	rng := rand.New(rand.NewPCG(7, 11))
	var floor uint64
	for range 4 {
		for range 25 {
			var b caspaxos.Batch
			for range rng.IntN(4) {
				k := fmt.Sprintf("key/%d", rng.IntN(40))
				r := rec(k, rng.Uint64N(1000)+1, "")
				r.Value.Data = make([]byte, rng.IntN(300))
				for i := range r.Value.Data {
					r.Value.Data[i] = byte(rng.Uint32())
				}
				r.Value.Tombstone = rng.IntN(10) == 0
				b.Put = append(b.Put, r)
			}
			for range rng.IntN(2) {
				b.Delete = append(b.Delete, fmt.Sprintf("key/%d", rng.IntN(40)))
			}
			if rng.IntN(8) == 0 {
				floor++
				b.AgeFloor = floor
			}
			h.apply(b)
		}
		h.checkBoth()
	}
}
