package partition_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/partitiontest"
)

// TestBackedOffFollowerCatchesUpAfterRestart: a replica down long enough
// for the write region to back off to the cap catches up well within the
// cap after it restarts (its announcement ends the backoff).
func TestBackedOffFollowerCatchesUpAfterRestart(t *testing.T) {
	c := newTestCluster(t, 7, func(cc *partitiontest.ClusterConfig) {
		cc.Host.MaxContactBackoff = 10 * time.Second
	})
	// b is a replica outside the write quorum: commits go on without it.
	require.NoError(t, c.Create(1, partition.Spec{Level: partition.LevelOf(partition.Strong), Quorum: partition.SampleQuorum("a", "a", "c"), Epoch: 1}))
	c.RunFor(time.Second)
	c.Crash("b")
	hb0 := c.Host("a").Stats().Heartbeats
	for i := 1; i <= 5; i++ {
		mustWrite(t, c, "a", 1, 1, partition.ClientRef(i), "k", "v")
	}
	c.RunFor(60 * time.Second)
	hbs := c.Host("a").Stats().Heartbeats - hb0
	require.Less(t, hbs, uint64(40), "heartbeats to a dead follower over a minute")
	require.NoError(t, c.Restart("b"))
	want := progressOf(t, c, "a", 1).LastLSN
	start := c.Now()
	for progressOf(t, c, "b", 1).LastLSN < want {
		require.Less(t, c.Now()-start, time.Second, "b not caught up a second after its restart")
		c.RunFor(10 * time.Millisecond)
	}
}
