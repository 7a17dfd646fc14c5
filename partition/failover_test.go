package partition

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPromoteTruncatesOwnTail: a promotion after an LSN below the
// replica's end moves its tail to the conflict records.
func TestPromoteTruncatesOwnTail(t *testing.T) {
	s := newSolo(t, "b", nil)
	require.NoError(t, s.h.Create(0, 1, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 1}, 0))
	s.flush()
	var ops []Op
	for i := 1; i <= 5; i++ {
		ops = append(ops, Op{LSN: LSN(i), Epoch: 1, Key: []byte("k"), Value: []byte(fmt.Sprint(i))})
	}
	s.step(Message{Type: MsgAppend, Partition: 1, Epoch: 1, From: "a", Entries: ops, Commit: 3})
	s.flush()
	p, _ := s.h.Progress(1)
	require.Equal(t, LSN(3), p.AppliedLSN)
	// Below the commit point is refused for strong (it would lose
	// committed writes) -- the core flags it as an invariant violation;
	// here promote after 4 (> commit).
	require.ErrorIs(t, s.h.Promote(s.now, 1, 2, 6, testQuorum("b"), 0), ErrBehind)
	require.NoError(t, s.h.Promote(s.now, 1, 2, 4, testQuorum("b"), 0))
	s.flush()
	conf, err := s.st.Conflicts(1, Token{}, 10)
	require.NoError(t, err)
	require.Len(t, conf, 1)
	require.Equal(t, LSN(5), conf[0].Op.LSN)
	require.Equal(t, ConflictTruncate, conf[0].Reason)
	p, _ = s.h.Progress(1)
	require.Equal(t, LSN(4), p.LastLSN)
	require.Equal(t, RoleLeader, p.Role)
	require.Equal(t, []EpochRange{{1, 0}, {2, 4}}, p.History)
	// Promote at an epoch that already had another write region is refused.
	s2 := newSolo(t, "c", nil)
	require.NoError(t, s2.h.Create(0, 1, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 1}, 0))
	require.ErrorIs(t, s2.h.Promote(0, 1, 1, 0, testQuorum("c"), 0), ErrBadRequest)
}

// TestTruncateUndoesAppliedOps: explicit truncation of applied ops under a
// weak level restores the previous values from the undo records; below
// the undo floor the replica records everything as conflicts and waits for
// a snapshot.
func TestTruncateUndoesAppliedOps(t *testing.T) {
	s := newSolo(t, "b", nil)
	require.NoError(t, s.h.Create(0, 1, Spec{Level: levelOf(Eventual), Quorum: testQuorum("a"), Epoch: 1}, 0))
	s.flush()
	var ops []Op
	for i := 1; i <= 6; i++ {
		ops = append(ops, Op{LSN: LSN(i), Epoch: 1, Key: []byte(fmt.Sprintf("k%d", i%2)), Value: []byte(fmt.Sprint(i))})
	}
	ops = append(ops, Op{LSN: 7, Epoch: 1, Key: []byte("k1"), Delete: true})
	s.step(Message{Type: MsgAppend, Partition: 1, Epoch: 1, From: "a", Entries: ops, Commit: 7, Stable: 2})
	s.flush()
	get := func(k string) string {
		kv, ok, err := s.st.Get(1, []byte(k))
		require.NoError(t, err)
		if !ok {
			return "<none>"
		}
		return string(kv.Value)
	}
	require.Equal(t, "6", get("k0"))
	require.Equal(t, "<none>", get("k1"))
	require.NoError(t, s.h.Fence(s.now, 1, 2, "c", 0))
	require.NoError(t, s.h.Truncate(s.now, 1, 3, 0))
	s.flush()
	require.Equal(t, "2", get("k0"))
	require.Equal(t, "3", get("k1"))
	p, _ := s.h.Progress(1)
	require.Equal(t, LSN(3), p.LastLSN)
	require.Equal(t, LSN(3), p.AppliedLSN)
	conf, err := s.st.Conflicts(1, Token{}, 10)
	require.NoError(t, err)
	require.Len(t, conf, 4)
	// Below the undo floor (stable 2): everything goes to conflicts and
	// the replica needs a snapshot.
	require.NoError(t, s.h.Truncate(s.now, 1, 1, 0))
	s.flush()
	p, _ = s.h.Progress(1)
	require.True(t, p.NeedSnapshot)
	conf, err = s.st.Conflicts(1, Token{}, 10)
	require.NoError(t, err)
	require.Len(t, conf, 7, "ops 1-3 not recorded before the reset")
	require.Equal(t, "<none>", get("k0"))
	// A snapshot from the write region brings it back.
	s.step(Message{Type: MsgAppend, Partition: 1, Epoch: 2, From: "c", Prev: 3, PrevEpoch: 1})
	s.flush()
	sent := s.drainSent()
	require.True(t, sent[len(sent)-1].NeedSnapshot)
	s.step(Message{Type: MsgSnapshot, Partition: 1, Epoch: 2, From: "c", Seq: 0, Base: 9, BaseEpoch: 2,
		History: []EpochRange{{1, 0}, {2, 5}}, LeaderLast: 9, KVs: []KV{{Key: []byte("k0"), Value: []byte("s0"), LSN: 8, Epoch: 2}}})
	s.step(Message{Type: MsgSnapshot, Partition: 1, Epoch: 2, From: "c", Seq: 1, Last: true, Base: 9, BaseEpoch: 2, ConsistentAt: 9,
		History: []EpochRange{{1, 0}, {2, 5}}, LeaderLast: 9, KVs: []KV{{Key: []byte("k1"), Value: []byte("s1"), LSN: 9, Epoch: 2}}})
	s.flush()
	p, _ = s.h.Progress(1)
	require.False(t, p.NeedSnapshot)
	require.Equal(t, LSN(9), p.AppliedLSN)
	require.Equal(t, "s0", get("k0"))
	require.Equal(t, "s1", get("k1"))
	rec, err := s.st.Load(1)
	require.NoError(t, err)
	require.Equal(t, LSN(9), rec.Last)
	require.Equal(t, LSN(9), rec.Meta.LogBase)
}

// TestCatchUpResendsFromLSN: the recovery code can make the write region
// stream its log from a given LSN (a delta), or a snapshot when the log no
// longer reaches back.
func TestCatchUpResendsFromLSN(t *testing.T) {
	s := newSolo(t, "a", nil)
	require.NoError(t, s.h.Create(0, 1, Spec{Level: levelOf(Session), Quorum: testQuorum("a"), Epoch: 1}, 0))
	s.flush()
	for i := 1; i <= 6; i++ {
		s.write(1, 1, ClientRef(i), "k", fmt.Sprint(i))
	}
	s.flush()
	s.ackAll(s.drainSent())
	s.flush()
	s.drainSent()
	require.NoError(t, s.h.CatchUp(s.now, 1, "b", 3))
	s.flush()
	var got []LSN
	for _, m := range s.drainSent() {
		if m.To == "b" {
			for _, e := range m.Entries {
				got = append(got, e.LSN)
			}
		}
	}
	require.Equal(t, []LSN{3, 4, 5, 6}, got)
	require.ErrorIs(t, s.h.CatchUp(s.now, 1, "zz", 1), ErrBadRequest)
}
