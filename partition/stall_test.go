package partition

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestNoProtocolStalls: with instant network and disk, every strong write
// commits without waiting for a timer, however many partitions interleave.
func TestNoProtocolStalls(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *ClusterConfig) {
		cfg.MinDelay, cfg.MaxDelay, cfg.MinDisk, cfg.MaxDisk = 0, 0, 0, 0
		cfg.Host = DefaultConfig("x", 1)
	})
	const parts = 50
	for p := ID(0); p < parts; p++ {
		require.NoError(t, c.Create(p, Spec{Level: levelOf(Strong), Quorum: testQuorum(testRegions[p%3]), Epoch: 1}))
	}
	c.RunFor(time.Millisecond)
	rng := rand.New(rand.NewPCG(1, 1))
	start := map[ClientRef]time.Duration{}
	var worst time.Duration
	ref := ClientRef(0)
	for round := 0; round < 200; round++ {
		for i := 0; i < 20; i++ {
			ref++
			p := ID(rng.IntN(parts))
			c.Write(testRegions[p%3], WriteRequest{Partition: p, Epoch: 1, Ref: ref, Key: []byte("k"), Value: []byte("v")})
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
