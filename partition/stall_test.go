package partition_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/partitiontest"
)

// TestNoProtocolStalls: with instant network and disk, every strong write
// commits without waiting for a timer, however many partitions interleave.
func TestNoProtocolStalls(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *partitiontest.ClusterConfig) {
		cfg.MinDelay, cfg.MaxDelay, cfg.MinDisk, cfg.MaxDisk = 0, 0, 0, 0
		cfg.Host = partition.DefaultConfig("x", 1)
	})
	const parts = 50
	for p := partition.ID(0); p < parts; p++ {
		require.NoError(t, c.Create(p, partition.Spec{Level: partition.LevelOf(partition.Strong), Quorum: partition.SampleQuorum(partition.SampleRegions[p%3]), Epoch: 1}))
	}
	c.RunFor(time.Millisecond)
	rng := rand.New(rand.NewPCG(1, 1))
	start := map[partition.ClientRef]time.Duration{}
	var worst time.Duration
	ref := partition.ClientRef(0)
	for round := 0; round < 200; round++ {
		for i := 0; i < 20; i++ {
			ref++
			p := partition.ID(rng.IntN(parts))
			c.Write(partition.SampleRegions[p%3], partition.WriteRequest{Partition: p, Epoch: 1, Ref: ref, Key: []byte("k"), Value: []byte("v")})
			start[ref] = c.Now()
		}
		c.RunFor(time.Millisecond)
		for _, r := range c.Replies() {
			require.NoError(t, r.Reply.Err)
			worst = max(worst, r.At-start[r.Reply.Ref])
			delete(start, r.Reply.Ref)
		}
	}
	c.RunFor(time.Second)
	for _, r := range c.Replies() {
		worst = max(worst, r.At-start[r.Reply.Ref])
		delete(start, r.Reply.Ref)
	}
	require.Empty(t, start)
	require.Less(t, worst, time.Millisecond, "a write waited for a timer")
}
