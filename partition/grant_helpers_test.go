package partition_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/partitiontest"
)

// grantTestLevel is the grant tests' bounded-staleness level (K = 20 ops,
// T = 2 s, writes held 300 ms before ErrStalenessBound) and the window
// after which any grant has surely ended (T plus the drift margin).
func grantTestLevel() (partition.Level, time.Duration) {
	lvl := partition.Level{Consistency: partition.BoundedStaleness, StalenessOps: 20, StalenessTime: 2 * time.Second, StalenessHold: 300 * time.Millisecond}
	return lvl, time.Duration(float64(lvl.StalenessTime) * (1 + partition.DefaultDriftMargin))
}

// grantedCluster is the grant tests' start: a 3-region cluster with
// partition 7 at lvl, written once at a (epoch 1), whose follower holder
// has then served a bounded-staleness read, so it holds a grant of a.
func grantedCluster(t *testing.T, lvl partition.Level, holder partition.Region) *partitiontest.Cluster {
	t.Helper()
	c := newTestCluster(t, 5, nil)
	require.NoError(t, c.Create(7, partition.Spec{Level: lvl, Quorum: partition.SampleQuorum("a"), Epoch: 1}))
	c.RunFor(10 * time.Millisecond)
	mustWrite(t, c, "a", 7, 1, 1, "k", "v1")
	served := false
	for i := 0; i < 5 && !served; i++ {
		rep := mustRead(t, c, holder, partition.ReadRequest{Partition: 7, Ref: partition.ClientRef(10 + i), Key: []byte("k"), Consistency: partition.BoundedStaleness})
		served = rep.Err == nil
		c.RunFor(100 * time.Millisecond)
	}
	require.True(t, served, "%s never got a grant from a", holder)
	return c
}

// writeReadBounded is the grant tests' client: until until, it writes at
// writer (epoch) and reads at reader with bounded staleness, in turn. A
// write may be held and rejected (ErrStalenessBound) and a read refused
// (ErrNotFresh); a read served must miss at most k acknowledged ops. It
// returns the highest acknowledged LSN, the writes held and the reads
// served. since (the change under test) is only for the failure message.
func writeReadBounded(t *testing.T, c *partitiontest.Cluster, writer, reader partition.Region, epoch partition.Epoch, since, until time.Duration, k uint64) (acked partition.LSN, held, served int) {
	t.Helper()
	ref := partition.ClientRef(100)
	for c.Now() < until {
		ref++
		c.Write(writer, partition.WriteRequest{Partition: 7, Epoch: epoch, Ref: ref, Key: []byte("k"), Value: []byte(fmt.Sprint(ref))})
		if r, ok := waitReply(t, c, ref, time.Second); ok {
			if r.Reply.Err == nil {
				acked = max(acked, r.Reply.Token.LSN)
			} else {
				require.ErrorIs(t, r.Reply.Err, partition.ErrStalenessBound)
				held++
			}
		}
		ref++
		rep := mustRead(t, c, reader, partition.ReadRequest{Partition: 7, Ref: ref, Key: []byte("k"), Consistency: partition.BoundedStaleness})
		if rep.Err != nil {
			require.ErrorIs(t, rep.Err, partition.ErrNotFresh)
			continue
		}
		served++
		missing := acked - min(acked, rep.Token.LSN)
		require.LessOrEqual(t, uint64(missing), k,
			"at %v %s served a read at %v missing %d acknowledged ops (%s at %d, changed at %v)",
			c.Now(), reader, rep.Token, missing, writer, acked, since)
	}
	return acked, held, served
}
