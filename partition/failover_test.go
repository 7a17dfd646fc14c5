package partition

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// failover does what the failover issue's manager will: fence every
// reachable replica at the new epoch and promote target after its last LSN.
func failover(t *testing.T, c *Cluster, p ID, e Epoch, target Region, members ...Region) LSN {
	t.Helper()
	for _, reg := range c.Regions() {
		if reg == target || !c.Up(reg) {
			continue
		}
		require.NoError(t, c.Control(reg, func(now time.Duration, h *Host) error { return h.Fence(now, p, e, target, 0) }))
	}
	after := progressOf(t, c, target, p).LastLSN
	require.NoError(t, c.Control(target, func(now time.Duration, h *Host) error {
		if err := h.Promote(now, p, e, after, testQuorum(target, members...), 0); err != nil {
			return err
		}
		return h.SetLease(p, now+time.Hour)
	}))
	return after
}

// TestFailoverMovesFalseProgressToConflicts: the old write region, cut
// off, takes writes that never reach the new lineage. When it returns they
// are truncated into conflict records (never dropped), applied ones are
// undone, and its state converges to the new write region's.
func TestFailoverMovesFalseProgressToConflicts(t *testing.T) {
	for _, lvl := range []Consistency{Strong, Session, Eventual, BoundedStaleness} {
		t.Run(lvl.String(), func(t *testing.T) {
			c := newTestCluster(t, 3, nil)
			level := levelOf(lvl)
			if lvl == BoundedStaleness {
				level.StalenessOps = 1000
				level.StalenessTime = time.Hour
			}
			require.NoError(t, c.Create(1, Spec{Level: level, Quorum: testQuorum("a"), Epoch: 1}))
			c.RunFor(10 * time.Millisecond)
			for i := 1; i <= 20; i++ {
				mustWrite(t, c, "a", 1, 1, ClientRef(i), fmt.Sprintf("k%d", i%5), fmt.Sprintf("v%d", i))
			}
			c.RunFor(300 * time.Millisecond)
			// Cut a off and let it take writes the others never see.
			c.Isolate("a")
			for i := 21; i <= 30; i++ {
				c.Write("a", WriteRequest{Partition: 1, Epoch: 1, Ref: ClientRef(i), Key: []byte(fmt.Sprintf("k%d", i%5)), Value: []byte(fmt.Sprintf("lost%d", i))})
			}
			c.RunFor(100 * time.Millisecond)
			pa := progressOf(t, c, "a", 1)
			require.Equal(t, LSN(30), pa.LastLSN)
			if lvl == Strong {
				require.Equal(t, LSN(20), pa.CommitLSN, "strong committed without its members")
			} else {
				require.Equal(t, LSN(30), pa.AppliedLSN, "weak level did not apply locally")
			}
			after := failover(t, c, 1, 2, "b", "b", "c")
			require.Equal(t, LSN(20), after)
			for i := 31; i <= 40; i++ {
				tok := mustWrite(t, c, "b", 1, 2, ClientRef(i), fmt.Sprintf("k%d", i%5), fmt.Sprintf("new%d", i))
				require.Equal(t, Epoch(2), tok.Epoch)
			}
			c.Heal()
			c.RunFor(time.Second)
			require.NoError(t, c.Violation())
			pb := progressOf(t, c, "b", 1)
			pa = progressOf(t, c, "a", 1)
			require.Equal(t, Epoch(2), pa.Epoch)
			require.Equal(t, RoleFollower, pa.Role)
			require.Equal(t, pb.LastLSN, pa.LastLSN, fmtProgress(pa))
			require.Equal(t, pb.AppliedLSN, pa.AppliedLSN, fmtProgress(pa))
			sa, _, err := c.StateOf("a", 1)
			require.NoError(t, err)
			sb, _, err := c.StateOf("b", 1)
			require.NoError(t, err)
			require.Equal(t, sb, sa, "old write region's state did not converge")
			conf, err := c.Store("a").Conflicts(1, Token{}, 100)
			require.NoError(t, err)
			require.Len(t, conf, 10, "false progress not recorded")
			for i, cr := range conf {
				require.Equal(t, Epoch(1), cr.Op.Epoch)
				require.Equal(t, LSN(21+i), cr.Op.LSN)
				require.Equal(t, fmt.Sprintf("lost%d", 21+i), string(cr.Op.Value))
				require.Equal(t, ConflictOverwrite, cr.Reason)
				require.Equal(t, Epoch(2), cr.RemovedAt)
			}
			// Stale clients of epoch 1 are redirected by everyone.
			for _, reg := range testRegions {
				c.Write(reg, WriteRequest{Partition: 1, Epoch: 1, Ref: 999, Key: []byte("k"), Value: []byte("x")})
				r, ok := waitReply(t, c, 999, time.Second)
				require.True(t, ok)
				require.ErrorIs(t, r.Reply.Err, ErrStaleEpoch)
			}
		})
	}
}

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

// TestSnapshotCatchUp: a replica down while the log is compacted past
// what it has catches up by snapshot, then by log.
func TestSnapshotCatchUp(t *testing.T) {
	c := newTestCluster(t, 5, func(cfg *ClusterConfig) {
		cfg.Host.MaxLogOps = 200
		cfg.Host.SnapshotChunkBytes = DefaultMaxOpBytes + 64
	})
	wq := testQuorum("a", "a", "b")
	require.NoError(t, c.Create(1, Spec{Level: levelOf(Strong), Quorum: wq, Epoch: 1}))
	c.RunFor(10 * time.Millisecond)
	c.Crash("c")
	for i := 1; i <= 600; i++ {
		mustWrite(t, c, "a", 1, 1, ClientRef(i), fmt.Sprintf("key%03d", i%150), fmt.Sprintf("v%d", i))
	}
	pa := progressOf(t, c, "a", 1)
	require.Greater(t, pa.LogBase, LSN(300), "log not compacted: %s", fmtProgress(pa))
	require.NoError(t, c.Restart("c"))
	c.RunFor(2 * time.Second)
	require.Positive(t, c.Host("a").Stats().SnapshotsDone)
	require.NoError(t, c.Violation())
	pc := progressOf(t, c, "c", 1)
	require.Equal(t, pa.LastLSN, pc.AppliedLSN, fmtProgress(pc))
	sa, _, _ := c.StateOf("a", 1)
	sc, _, _ := c.StateOf("c", 1)
	require.Equal(t, sa, sc)
	// More writes flow by log afterwards.
	mustWrite(t, c, "a", 1, 1, 10000, "key000", "after")
	c.RunFor(200 * time.Millisecond)
	rep := mustRead(t, c, "c", ReadRequest{Partition: 1, Ref: 10001, Key: []byte("key000"), Consistency: Eventual})
	require.NoError(t, rep.Err)
	require.Equal(t, "after", string(rep.Value))
}

// TestRestartRecoversSyncedState: a crash loses exactly the writes whose
// commit had not completed; acknowledged writes survive.
func TestRestartRecoversSyncedState(t *testing.T) {
	c := newTestCluster(t, 9, func(cfg *ClusterConfig) { cfg.MinDisk, cfg.MaxDisk = 5*time.Millisecond, 5*time.Millisecond })
	require.NoError(t, c.Create(1, Spec{Level: levelOf(Session), Quorum: testQuorum("a"), Epoch: 1}))
	c.RunFor(20 * time.Millisecond)
	tok := mustWrite(t, c, "a", 1, 1, 1, "k", "acked")
	c.Write("a", WriteRequest{Partition: 1, Epoch: 1, Ref: 2, Key: []byte("k"), Value: []byte("in-flight")})
	c.RunFor(time.Millisecond) // the Ready is taken, its commit not done
	c.Crash("a")
	require.NoError(t, c.Restart("a"))
	c.RunFor(100 * time.Millisecond)
	p := progressOf(t, c, "a", 1)
	require.Equal(t, tok.LSN, p.LastLSN)
	rec, err := c.Store("a").Load(1)
	require.NoError(t, err)
	require.Equal(t, tok.LSN, rec.Last)
	rep := mustRead(t, c, "a", ReadRequest{Partition: 1, Ref: 3, Key: []byte("k"), Consistency: Eventual})
	require.Equal(t, "acked", string(rep.Value))
	require.NoError(t, c.Violation())
}

// TestCorruptStoreReported: a damaged record fails the load with an error
// naming the partition and what is damaged; nothing is reset.
func TestCorruptStoreReported(t *testing.T) {
	c := newTestCluster(t, 11, nil)
	require.NoError(t, c.Create(4, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 1}))
	c.RunFor(10 * time.Millisecond)
	for i := 1; i <= 3; i++ {
		mustWrite(t, c, "a", 4, 1, ClientRef(i), "k", "v")
	}
	st := c.Store("a")
	tests := []struct {
		name string
		key  []byte
		want string
	}{
		{"log", AppendLogKey(nil, 4, 3), "log LSN 3"},
		{"meta", MetaKey(4), "meta"},
		{"apply", ApplyKey(4), "apply state"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig, ok := st.RawGet(tc.key)
			require.True(t, ok)
			bad := append([]byte(nil), orig...)
			bad[len(bad)/2] ^= 0x40
			st.RawSet(tc.key, bad)
			_, err := st.Load(4)
			require.ErrorIs(t, err, ErrCorrupt)
			require.Contains(t, err.Error(), "partition 4")
			require.Contains(t, err.Error(), tc.want)
			got, _ := st.RawGet(tc.key)
			require.Equal(t, bad, got, "store changed by a failed load")
			st.RawSet(tc.key, orig)
			_, err = st.Load(4)
			require.NoError(t, err)
		})
	}
	kv := AppendKVKey(nil, 4, []byte("k"))
	orig, _ := st.RawGet(kv)
	st.RawSet(kv, append(append([]byte(nil), orig[:len(orig)-1]...), orig[len(orig)-1]^1))
	_, _, err := st.Get(4, []byte("k"))
	require.ErrorIs(t, err, ErrCorrupt)
	require.Contains(t, err.Error(), `"k"`)
}

// TestUndoRecordsBounded: under a weak level with a replica down (stable
// stuck), undo records are pruned with forced compaction.
func TestUndoRecordsBounded(t *testing.T) {
	c := newTestCluster(t, 21, func(cfg *ClusterConfig) { cfg.Host.MaxLogOps = 200 })
	require.NoError(t, c.Create(1, Spec{Level: levelOf(Eventual), Quorum: testQuorum("a"), Epoch: 1}))
	c.RunFor(10 * time.Millisecond)
	c.Crash("c")
	for i := 1; i <= 1000; i++ {
		mustWrite(t, c, "a", 1, 1, ClientRef(i), fmt.Sprint("k", i%7), "v")
	}
	c.RunFor(100 * time.Millisecond)
	for _, reg := range []Region{"a", "b"} {
		undo := c.Store(reg).RawKeys(appendPrefix(nil, 1, secUndo))
		logKeys := c.Store(reg).RawKeys(appendPrefix(nil, 1, secLog))
		require.LessOrEqual(t, len(undo), 200+int(c.cfg.Host.CompactStepOps)+8, "region %s keeps %d undo records", reg, len(undo))
		require.LessOrEqual(t, len(logKeys), 200+int(c.cfg.Host.CompactStepOps)+8, "region %s keeps %d log ops", reg, len(logKeys))
	}
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
