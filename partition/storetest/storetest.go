// Package storetest is the conformance suite every partition.Store must
// pass: MemStore and the pebble store run the same tests.
package storetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
)

// Harness opens stores for the suite.
type Harness struct {
	// Open returns an empty store.
	Open func(t *testing.T) partition.Store
	// Reopen closes st and opens the same data again (a restart).
	Reopen func(t *testing.T, st partition.Store) partition.Store
	// RawSet overwrites one raw key (to damage records).
	RawSet func(t *testing.T, st partition.Store, k, v []byte)
	// RawGet reads one raw key.
	RawGet func(t *testing.T, st partition.Store, k []byte) []byte
}

func meta(epoch partition.Epoch) *partition.Meta {
	rs := []quorum.Region{"a", "b", "c"}
	return &partition.Meta{
		Epoch: epoch, Role: partition.RoleLeader, WriteRegion: "a",
		Level:   partition.Level{Consistency: partition.Session},
		Quorum:  quorum.WriteQuorum{Replicas: rs, WriteRegion: "a", Members: rs, MinDurability: 2},
		History: []partition.EpochRange{{Epoch: 1, After: 0}},
	}
}

func op(lsn partition.LSN, e partition.Epoch, k, v string) partition.Op {
	return partition.Op{LSN: lsn, Epoch: e, Key: []byte(k), Value: []byte(v)}
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Run("Empty", func(t *testing.T) {
		st := h.Open(t)
		defer st.Close()
		ids, err := st.Partitions()
		require.NoError(t, err)
		require.Empty(t, ids)
		_, err = st.Load(1)
		require.ErrorIs(t, err, partition.ErrUnknownPartition)
	})
	t.Run("CommitLoadRead", func(t *testing.T) { testCommitLoad(t, h) })
	t.Run("TruncateUndo", func(t *testing.T) { testTruncate(t, h) })
	t.Run("ResetLineage", func(t *testing.T) { testReset(t, h) })
	t.Run("CompactPrune", func(t *testing.T) { testCompact(t, h) })
	t.Run("FailedCommitAppliesNothing", func(t *testing.T) { testAtomic(t, h) })
	t.Run("CorruptReported", func(t *testing.T) { testCorrupt(t, h) })
	t.Run("ManyPartitions", func(t *testing.T) { testMany(t, h) })
}

func testCommitLoad(t *testing.T, h Harness) {
	st := h.Open(t)
	ops := []partition.Op{op(1, 1, "x", "1"), op(2, 1, "y", "2"), op(3, 1, "x", "3"), {LSN: 4, Epoch: 1, Key: []byte("y"), Delete: true}, op(5, 1, "z", "5")}
	require.NoError(t, st.Commit([]partition.Write{{Partition: 7, Meta: meta(1), Append: ops,
		Apply: ops[:4], UndoAbove: 2, ApplyState: &partition.ApplyState{Applied: 4, AppliedEpoch: 1, UndoFloor: 2}}}))
	st = h.Reopen(t, st)
	defer st.Close()
	ids, err := st.Partitions()
	require.NoError(t, err)
	require.Equal(t, []partition.ID{7}, ids)
	rec, err := st.Load(7)
	require.NoError(t, err)
	require.Equal(t, *meta(1), rec.Meta)
	require.Equal(t, partition.LSN(5), rec.Last)
	require.Equal(t, partition.Epoch(1), rec.LastEpoch)
	require.Equal(t, partition.LSN(4), rec.Apply.Applied)
	require.Equal(t, []partition.Op{ops[4]}, rec.Tail)
	got, err := st.ReadLog(7, 2, 2, 1<<20)
	require.NoError(t, err)
	require.Equal(t, ops[1:3], got)
	kv, ok, err := st.Get(7, []byte("x"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "3", string(kv.Value))
	require.Equal(t, partition.LSN(3), kv.LSN)
	_, ok, err = st.Get(7, []byte("y"))
	require.NoError(t, err)
	require.False(t, ok, "deleted key found")
	kvs, more, applied, err := st.ReadKV(7, nil, 1)
	require.NoError(t, err)
	require.False(t, more, "only x exists")
	require.Len(t, kvs, 1)
	require.Equal(t, partition.LSN(4), applied)
	// Chunking: with more keys, a small bound pages through them.
	more2 := []partition.Op{op(5, 1, "z", "5"), op(6, 1, "w", "6")}
	require.NoError(t, st.Commit([]partition.Write{{Partition: 7, Apply: []partition.Op{ops[4], more2[1]}, UndoAbove: 10,
		Append: more2[1:], ApplyState: &partition.ApplyState{Applied: 6, AppliedEpoch: 1}}}))
	var keys []string
	var after []byte
	for i := 0; i < 10; i++ {
		kvs, more, _, err = st.ReadKV(7, after, 1)
		require.NoError(t, err)
		for _, kv := range kvs {
			keys = append(keys, string(kv.Key))
			after = kv.Key
		}
		if !more {
			break
		}
	}
	require.Equal(t, []string{"w", "x", "z"}, keys)
	_, err = st.Load(8)
	require.ErrorIs(t, err, partition.ErrUnknownPartition)
}

func testTruncate(t *testing.T, h Harness) {
	st := h.Open(t)
	defer st.Close()
	ops := []partition.Op{op(1, 1, "x", "1"), op(2, 1, "x", "2"), op(3, 1, "y", "3"), {LSN: 4, Epoch: 1, Key: []byte("x"), Delete: true}}
	require.NoError(t, st.Commit([]partition.Write{{Partition: 1, Meta: meta(1), Append: ops, Apply: ops, UndoAbove: 1,
		ApplyState: &partition.ApplyState{Applied: 4, AppliedEpoch: 1, UndoFloor: 1}}}))
	require.NoError(t, st.Commit([]partition.Write{{Partition: 1, Truncate: &partition.Truncation{After: 1, Applied: 4, RemovedAt: 2, Reason: partition.ConflictTruncate},
		ApplyState: &partition.ApplyState{Applied: 1, AppliedEpoch: 1, UndoFloor: 1}}}))
	kv, ok, err := st.Get(1, []byte("x"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "1", string(kv.Value))
	_, ok, _ = st.Get(1, []byte("y"))
	require.False(t, ok)
	rec, err := st.Load(1)
	require.NoError(t, err)
	require.Equal(t, partition.LSN(1), rec.Last)
	conf, err := st.Conflicts(1, partition.Token{}, 10)
	require.NoError(t, err)
	require.Len(t, conf, 3)
	for i, c := range conf {
		require.Equal(t, ops[i+1], c.Op)
		require.Equal(t, partition.Epoch(2), c.RemovedAt)
		require.Equal(t, partition.ConflictTruncate, c.Reason)
	}
	page, err := st.Conflicts(1, partition.Token{Epoch: 1, LSN: 2}, 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, partition.LSN(3), page[0].Op.LSN)
	// Truncating applied ops without undo records fails loudly.
	require.NoError(t, st.Commit([]partition.Write{{Partition: 1, Append: []partition.Op{op(2, 2, "q", "q")}, Apply: []partition.Op{op(2, 2, "q", "q")}, UndoAbove: 2}}))
	err = st.Commit([]partition.Write{{Partition: 1, Truncate: &partition.Truncation{After: 1, Applied: 2, RemovedAt: 3, Reason: partition.ConflictTruncate}}})
	require.ErrorIs(t, err, partition.ErrCorrupt)
}

func testReset(t *testing.T, h Harness) {
	st := h.Open(t)
	defer st.Close()
	ops := []partition.Op{op(1, 1, "x", "1"), op(2, 1, "x", "2"), op(3, 2, "y", "3"), op(4, 3, "z", "4")}
	require.NoError(t, st.Commit([]partition.Write{{Partition: 1, Meta: meta(3), Append: ops, Apply: ops[:2], UndoAbove: 10,
		ApplyState: &partition.ApplyState{Applied: 2, AppliedEpoch: 1}}}))
	// Lineage: epoch 1 up to 2, epoch 4 after; ops 3 and 4 are not in it.
	require.NoError(t, st.Commit([]partition.Write{{Partition: 1,
		Reset:   &partition.Reset{Lineage: []partition.EpochRange{{Epoch: 1, After: 0}, {Epoch: 4, After: 2}}, Last: 9, RemovedAt: 4},
		Install: []partition.KV{{Key: []byte("s"), Value: []byte("snap"), LSN: 9, Epoch: 4}},
		Meta:    meta(4), ApplyState: &partition.ApplyState{}}}))
	conf, err := st.Conflicts(1, partition.Token{}, 10)
	require.NoError(t, err)
	require.Len(t, conf, 2)
	require.Equal(t, partition.LSN(3), conf[0].Op.LSN)
	require.Equal(t, partition.ConflictSnapshot, conf[0].Reason)
	_, ok, _ := st.Get(1, []byte("x"))
	require.False(t, ok, "state not wiped")
	kv, ok, _ := st.Get(1, []byte("s"))
	require.True(t, ok)
	require.Equal(t, "snap", string(kv.Value))
	got, err := st.ReadLog(1, 1, 10, 1<<20)
	require.NoError(t, err)
	require.Empty(t, got)
}

func testCompact(t *testing.T, h Harness) {
	st := h.Open(t)
	defer st.Close()
	var ops []partition.Op
	for i := 1; i <= 10; i++ {
		ops = append(ops, op(partition.LSN(i), 1, fmt.Sprint("k", i%3), fmt.Sprint(i)))
	}
	require.NoError(t, st.Commit([]partition.Write{{Partition: 1, Meta: meta(1), Append: ops, Apply: ops, UndoAbove: 0,
		ApplyState: &partition.ApplyState{Applied: 10, AppliedEpoch: 1}}}))
	m := meta(1)
	m.LogBase, m.LogBaseEpoch = 6, 1
	require.NoError(t, st.Commit([]partition.Write{{Partition: 1, CompactTo: 6, PruneUndoTo: 8, Meta: m}}))
	got, err := st.ReadLog(1, 1, 100, 1<<20)
	require.NoError(t, err)
	require.Empty(t, got, "compacted ops returned")
	got, err = st.ReadLog(1, 7, 100, 1<<20)
	require.NoError(t, err)
	require.Len(t, got, 4)
	rec, err := st.Load(1)
	require.NoError(t, err)
	require.Equal(t, partition.LSN(10), rec.Last)
	// One commit mixing compaction and applies that need undo records
	// (undo reads must see the batch's own earlier writes).
	o11, o12 := op(11, 1, "k1", "11"), op(12, 1, "k1", "12")
	require.NoError(t, st.Commit([]partition.Write{
		{Partition: 1, Append: []partition.Op{o11}, Apply: []partition.Op{o11}, UndoAbove: 8},
		{Partition: 1, CompactTo: 7, Meta: m},
		{Partition: 1, Append: []partition.Op{o12}, Apply: []partition.Op{o12}, UndoAbove: 8,
			ApplyState: &partition.ApplyState{Applied: 12, AppliedEpoch: 1}},
	}))
	require.NoError(t, st.Commit([]partition.Write{{Partition: 1, Truncate: &partition.Truncation{After: 10, Applied: 12, RemovedAt: 2, Reason: partition.ConflictTruncate},
		ApplyState: &partition.ApplyState{Applied: 10, AppliedEpoch: 1}}}))
	kv, _, _ := st.Get(1, []byte("k1"))
	require.Equal(t, "10", string(kv.Value), "undo of 12 then 11 must restore op 10's value")
	// Undo records 9 and 10 remain: truncation after 8 works.
	require.NoError(t, st.Commit([]partition.Write{{Partition: 1, Truncate: &partition.Truncation{After: 8, Applied: 10, RemovedAt: 2, Reason: partition.ConflictTruncate},
		ApplyState: &partition.ApplyState{Applied: 8, AppliedEpoch: 1}}}))
	kv, _, _ = st.Get(1, []byte("k1"))
	require.Equal(t, "7", string(kv.Value))
}

func testAtomic(t *testing.T, h Harness) {
	st := h.Open(t)
	defer st.Close()
	require.NoError(t, st.Commit([]partition.Write{{Partition: 1, Meta: meta(1), ApplyState: &partition.ApplyState{}}}))
	err := st.Commit([]partition.Write{
		{Partition: 1, Append: []partition.Op{op(1, 1, "a", "1")}},
		{Partition: 2, Meta: meta(1)},
		{Partition: 1, Append: []partition.Op{{LSN: 0, Epoch: 1, Key: []byte("bad")}}},
	})
	require.Error(t, err)
	st = h.Reopen(t, st)
	defer st.Close()
	ids, err := st.Partitions()
	require.NoError(t, err)
	require.Equal(t, []partition.ID{1}, ids)
	rec, err := st.Load(1)
	require.NoError(t, err)
	require.Equal(t, partition.LSN(0), rec.Last)
}

func testCorrupt(t *testing.T, h Harness) {
	st := h.Open(t)
	defer st.Close()
	require.NoError(t, st.Commit([]partition.Write{{Partition: 3, Meta: meta(1), Append: []partition.Op{op(1, 1, "a", "1"), op(2, 1, "a", "2")},
		ApplyState: &partition.ApplyState{}}}))
	k := partition.AppendLogKey(nil, 3, 2)
	v := h.RawGet(t, st, k)
	bad := append([]byte(nil), v...)
	bad[2] ^= 0xff
	h.RawSet(t, st, k, bad)
	_, err := st.Load(3)
	require.ErrorIs(t, err, partition.ErrCorrupt)
	require.Contains(t, err.Error(), "partition 3")
	require.Contains(t, err.Error(), "log LSN 2")
	_, err = st.ReadLog(3, 1, 10, 1<<20)
	require.ErrorIs(t, err, partition.ErrCorrupt)
	require.Equal(t, bad, h.RawGet(t, st, k), "damaged record rewritten")
}

func testMany(t *testing.T, h Harness) {
	st := h.Open(t)
	var ws []partition.Write
	for p := partition.ID(0); p < 300; p++ {
		ws = append(ws, partition.Write{Partition: p * 7919, Meta: meta(1), Append: []partition.Op{op(1, 1, "k", fmt.Sprint(p))},
			Apply: []partition.Op{op(1, 1, "k", fmt.Sprint(p))}, UndoAbove: 1, ApplyState: &partition.ApplyState{Applied: 1, AppliedEpoch: 1}})
	}
	ws = append(ws, partition.Write{Partition: ^partition.ID(0), Meta: meta(1)})
	require.NoError(t, st.Commit(ws))
	st = h.Reopen(t, st)
	defer st.Close()
	ids, err := st.Partitions()
	require.NoError(t, err)
	require.Len(t, ids, 301)
	for _, w := range ws[:300] {
		kv, ok, err := st.Get(w.Partition, []byte("k"))
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, string(w.Apply[0].Value), string(kv.Value))
	}
}
