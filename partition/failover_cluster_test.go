package partition_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/partitiontest"
)

// failover does what the failover issue's manager will: fence every
// reachable replica at the new epoch and promote target after its last LSN.
func failover(t *testing.T, c *partitiontest.Cluster, p partition.ID, e partition.Epoch, target partition.Region, members ...partition.Region) partition.LSN {
	t.Helper()
	for _, reg := range c.Regions() {
		if reg == target || !c.Up(reg) {
			continue
		}
		require.NoError(t, c.Control(reg, func(now time.Duration, h *partition.Host) error { return h.Fence(now, p, e, target, 0) }))
	}
	after := progressOf(t, c, target, p).LastLSN
	require.NoError(t, c.Control(target, func(now time.Duration, h *partition.Host) error {
		if err := h.Promote(now, p, e, after, partition.SampleQuorum(target, members...), 0); err != nil {
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
	for _, lvl := range []partition.Consistency{partition.Strong, partition.Session, partition.Eventual, partition.BoundedStaleness} {
		t.Run(lvl.String(), func(t *testing.T) {
			c := newTestCluster(t, 3, nil)
			level := partition.LevelOf(lvl)
			if lvl == partition.BoundedStaleness {
				level.StalenessOps = 1000
				level.StalenessTime = time.Hour
			}
			require.NoError(t, c.Create(1, partition.Spec{Level: level, Quorum: partition.SampleQuorum("a"), Epoch: 1}))
			c.RunFor(10 * time.Millisecond)
			for i := 1; i <= 20; i++ {
				mustWrite(t, c, "a", 1, 1, partition.ClientRef(i), fmt.Sprintf("k%d", i%5), fmt.Sprintf("v%d", i))
			}
			c.RunFor(300 * time.Millisecond)
			// Cut a off and let it take writes the others never see.
			c.Isolate("a")
			for i := 21; i <= 30; i++ {
				c.Write("a", partition.WriteRequest{Partition: 1, Epoch: 1, Ref: partition.ClientRef(i), Key: []byte(fmt.Sprintf("k%d", i%5)), Value: []byte(fmt.Sprintf("lost%d", i))})
			}
			c.RunFor(100 * time.Millisecond)
			pa := progressOf(t, c, "a", 1)
			require.Equal(t, partition.LSN(30), pa.LastLSN)
			if lvl == partition.Strong {
				require.Equal(t, partition.LSN(20), pa.CommitLSN, "strong committed without its members")
			} else {
				require.Equal(t, partition.LSN(30), pa.AppliedLSN, "weak level did not apply locally")
			}
			after := failover(t, c, 1, 2, "b", "b", "c")
			require.Equal(t, partition.LSN(20), after)
			for i := 31; i <= 40; i++ {
				tok := mustWrite(t, c, "b", 1, 2, partition.ClientRef(i), fmt.Sprintf("k%d", i%5), fmt.Sprintf("new%d", i))
				require.Equal(t, partition.Epoch(2), tok.Epoch)
			}
			c.Heal()
			c.RunFor(time.Second)
			require.NoError(t, c.Violation())
			pb := progressOf(t, c, "b", 1)
			pa = progressOf(t, c, "a", 1)
			require.Equal(t, partition.Epoch(2), pa.Epoch)
			require.Equal(t, partition.RoleFollower, pa.Role)
			require.Equal(t, pb.LastLSN, pa.LastLSN, fmtProgress(pa))
			require.Equal(t, pb.AppliedLSN, pa.AppliedLSN, fmtProgress(pa))
			sa, _, err := c.StateOf("a", 1)
			require.NoError(t, err)
			sb, _, err := c.StateOf("b", 1)
			require.NoError(t, err)
			require.Equal(t, sb, sa, "old write region's state did not converge")
			conf, err := c.Store("a").Conflicts(1, partition.Token{}, 100)
			require.NoError(t, err)
			require.Len(t, conf, 10, "false progress not recorded")
			for i, cr := range conf {
				require.Equal(t, partition.Epoch(1), cr.Op.Epoch)
				require.Equal(t, partition.LSN(21+i), cr.Op.LSN)
				require.Equal(t, fmt.Sprintf("lost%d", 21+i), string(cr.Op.Value))
				require.Equal(t, partition.ConflictOverwrite, cr.Reason)
				require.Equal(t, partition.Epoch(2), cr.RemovedAt)
			}
			// Stale clients of epoch 1 are redirected by everyone but the
			// write region of epoch 2, which serves them in epoch 2.
			for i, reg := range partition.SampleRegions {
				ref := partition.ClientRef(900 + i)
				c.Write(reg, partition.WriteRequest{Partition: 1, Epoch: 1, Ref: ref, Key: []byte("k"), Value: []byte("x")})
				r, ok := waitReply(t, c, ref, time.Second)
				require.True(t, ok)
				if reg == "b" {
					require.NoError(t, r.Reply.Err)
					require.Equal(t, partition.Epoch(2), r.Reply.Token.Epoch)
					continue
				}
				require.ErrorIs(t, r.Reply.Err, partition.ErrStaleEpoch)
			}
		})
	}
}

// TestQuietFailoverMovesFalseProgressToConflicts: as above, but the new
// write region takes no writes. The returning old write region must still
// set its false progress aside at the new epoch's first heartbeat: before
// the fix it kept it in the log as progress until an op of the new epoch
// overwrote it, which in a quiet partition is never.
func TestQuietFailoverMovesFalseProgressToConflicts(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	require.NoError(t, c.Create(1, partition.Spec{Level: partition.LevelOf(partition.Strong), Quorum: partition.SampleQuorum("a"), Epoch: 1}))
	c.RunFor(10 * time.Millisecond)
	for i := 1; i <= 5; i++ {
		mustWrite(t, c, "a", 1, 1, partition.ClientRef(i), fmt.Sprintf("k%d", i), "v")
	}
	c.RunFor(300 * time.Millisecond)
	c.Isolate("a")
	for i := 6; i <= 8; i++ {
		c.Write("a", partition.WriteRequest{Partition: 1, Epoch: 1, Ref: partition.ClientRef(i), Key: []byte("k"), Value: []byte(fmt.Sprintf("lost%d", i))})
	}
	c.RunFor(100 * time.Millisecond)
	require.Equal(t, partition.LSN(8), progressOf(t, c, "a", 1).LastLSN)
	require.Equal(t, partition.LSN(5), failover(t, c, 1, 2, "b", "b", "c"))
	c.Heal()
	c.RunFor(time.Second)
	require.NoError(t, c.Violation())
	pa := progressOf(t, c, "a", 1)
	require.Equal(t, partition.Epoch(2), pa.Epoch)
	require.Equal(t, partition.LSN(5), pa.LastLSN, "false progress still in the log: %s", fmtProgress(pa))
	conf, err := c.Store("a").Conflicts(1, partition.Token{}, 100)
	require.NoError(t, err)
	require.Len(t, conf, 3, "false progress not recorded")
	for i, cr := range conf {
		require.Equal(t, partition.LSN(6+i), cr.Op.LSN)
		require.Equal(t, partition.Epoch(2), cr.RemovedAt)
	}
}

// TestSnapshotCatchUp: a replica down while the log is compacted past
// what it has catches up by snapshot, then by log.
func TestSnapshotCatchUp(t *testing.T) {
	c := newTestCluster(t, 5, func(cfg *partitiontest.ClusterConfig) {
		cfg.Host.MaxLogOps = 200
		cfg.Host.SnapshotChunkBytes = partition.DefaultMaxOpBytes + 64
	})
	wq := partition.SampleQuorum("a", "a", "b")
	require.NoError(t, c.Create(1, partition.Spec{Level: partition.LevelOf(partition.Strong), Quorum: wq, Epoch: 1}))
	c.RunFor(10 * time.Millisecond)
	c.Crash("c")
	for i := 1; i <= 600; i++ {
		mustWrite(t, c, "a", 1, 1, partition.ClientRef(i), fmt.Sprintf("key%03d", i%150), fmt.Sprintf("v%d", i))
	}
	pa := progressOf(t, c, "a", 1)
	require.Greater(t, pa.LogBase, partition.LSN(300), "log not compacted: %s", fmtProgress(pa))
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
	rep := mustRead(t, c, "c", partition.ReadRequest{Partition: 1, Ref: 10001, Key: []byte("key000"), Consistency: partition.Eventual})
	require.NoError(t, rep.Err)
	require.Equal(t, "after", string(rep.Value))
}

// TestRestartRecoversSyncedState: a crash loses exactly the writes whose
// commit had not completed; acknowledged writes survive.
func TestRestartRecoversSyncedState(t *testing.T) {
	c := newTestCluster(t, 9, func(cfg *partitiontest.ClusterConfig) {
		cfg.MinDisk, cfg.MaxDisk = 5*time.Millisecond, 5*time.Millisecond
	})
	require.NoError(t, c.Create(1, partition.Spec{Level: partition.LevelOf(partition.Session), Quorum: partition.SampleQuorum("a"), Epoch: 1}))
	c.RunFor(20 * time.Millisecond)
	tok := mustWrite(t, c, "a", 1, 1, 1, "k", "acked")
	c.Write("a", partition.WriteRequest{Partition: 1, Epoch: 1, Ref: 2, Key: []byte("k"), Value: []byte("in-flight")})
	c.RunFor(time.Millisecond) // the Ready is taken, its commit not done
	c.Crash("a")
	require.NoError(t, c.Restart("a"))
	c.RunFor(100 * time.Millisecond)
	p := progressOf(t, c, "a", 1)
	require.Equal(t, tok.LSN, p.LastLSN)
	rec, err := c.Store("a").Load(1)
	require.NoError(t, err)
	require.Equal(t, tok.LSN, rec.Last)
	rep := mustRead(t, c, "a", partition.ReadRequest{Partition: 1, Ref: 3, Key: []byte("k"), Consistency: partition.Eventual})
	require.Equal(t, "acked", string(rep.Value))
	require.NoError(t, c.Violation())
}

// TestCorruptStoreReported: a damaged record fails the load with an error
// naming the partition and what is damaged; nothing is reset.
func TestCorruptStoreReported(t *testing.T) {
	c := newTestCluster(t, 11, nil)
	require.NoError(t, c.Create(4, partition.Spec{Level: partition.LevelOf(partition.Strong), Quorum: partition.SampleQuorum("a"), Epoch: 1}))
	c.RunFor(10 * time.Millisecond)
	for i := 1; i <= 3; i++ {
		mustWrite(t, c, "a", 4, 1, partition.ClientRef(i), "k", "v")
	}
	st := c.Store("a")
	tests := []struct {
		name string
		key  []byte
		want string
	}{
		{"log", partition.AppendLogKey(nil, 4, 3), "log LSN 3"},
		{"meta", partition.MetaKey(4), "meta"},
		{"apply", partition.ApplyKey(4), "apply state"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig, ok := st.RawGet(tc.key)
			require.True(t, ok)
			bad := append([]byte(nil), orig...)
			bad[len(bad)/2] ^= 0x40
			st.RawSet(tc.key, bad)
			_, err := st.Load(4)
			require.ErrorIs(t, err, partition.ErrCorrupt)
			require.Contains(t, err.Error(), "partition 4")
			require.Contains(t, err.Error(), tc.want)
			got, _ := st.RawGet(tc.key)
			require.Equal(t, bad, got, "store changed by a failed load")
			st.RawSet(tc.key, orig)
			_, err = st.Load(4)
			require.NoError(t, err)
		})
	}
	kv := partition.AppendKVKey(nil, 4, []byte("k"))
	orig, _ := st.RawGet(kv)
	st.RawSet(kv, append(append([]byte(nil), orig[:len(orig)-1]...), orig[len(orig)-1]^1))
	_, _, err := st.Get(4, []byte("k"))
	require.ErrorIs(t, err, partition.ErrCorrupt)
	require.Contains(t, err.Error(), `"k"`)
}

// TestUndoRecordsBounded: under a weak level with a replica down (stable
// stuck), undo records are pruned with forced compaction.
func TestUndoRecordsBounded(t *testing.T) {
	c := newTestCluster(t, 21, func(cfg *partitiontest.ClusterConfig) { cfg.Host.MaxLogOps = 200 })
	require.NoError(t, c.Create(1, partition.Spec{Level: partition.LevelOf(partition.Eventual), Quorum: partition.SampleQuorum("a"), Epoch: 1}))
	c.RunFor(10 * time.Millisecond)
	c.Crash("c")
	for i := 1; i <= 1000; i++ {
		mustWrite(t, c, "a", 1, 1, partition.ClientRef(i), fmt.Sprint("k", i%7), "v")
	}
	c.RunFor(100 * time.Millisecond)
	for _, reg := range []partition.Region{"a", "b"} {
		undo := c.Store(reg).RawKeys(partition.AppendPrefix(nil, 1, partition.SecUndo))
		logKeys := c.Store(reg).RawKeys(partition.AppendPrefix(nil, 1, partition.SecLog))
		require.LessOrEqual(t, len(undo), 200+int(c.Config().Host.CompactStepOps)+8, "region %s keeps %d undo records", reg, len(undo))
		require.LessOrEqual(t, len(logKeys), 200+int(c.Config().Host.CompactStepOps)+8, "region %s keeps %d log ops", reg, len(logKeys))
	}
}
