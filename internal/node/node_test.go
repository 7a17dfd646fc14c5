package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
)

func TestNodeRegistersReachEveryNode(t *testing.T) {
	c := newTCluster(t, 4)
	c.run(c.now + 3*time.Second)
	for i := range c.nodes {
		for p := partition.ID(1); p <= 4; p++ {
			s, ok := c.known(i, p)
			require.True(t, ok, "node %d partition %d", i+1, p)
			require.Equal(t, "east", string(s.WriteRegion))
		}
		require.NoError(t, c.nodes[i].Violation())
	}
	// Nodes 2 and 3 learned the values node 1 committed from its Learns,
	// without a register operation of their own.
	require.Positive(t, c.nodes[1].Stats().Learns)
	require.Zero(t, c.nodes[1].Proposer().Stats().Proposals)
}

func TestNodeStrongWriteAndFailover(t *testing.T) {
	c := newTCluster(t, 2)
	c.run(c.now + 3*time.Second)
	r, ok := c.write(0, 1, 1, 1, "k", "v1", 2*time.Second)
	require.True(t, ok)
	require.NoError(t, r.Err)
	// The write region's node dies; the others fail the partitions over
	// within lease + drift + a margin.
	c.crash(0)
	cfg := fastProfile(t)
	c.run(c.now + cfg.LeaseDuration + cfg.MaxClockDrift + 2*time.Second)
	s, ok := c.known(1, 1)
	require.True(t, ok)
	require.NotEqual(t, "east", string(s.WriteRegion))
	require.Greater(t, uint64(s.Epoch), uint64(1))
	wr := int(1)
	if s.WriteRegion == "north" {
		wr = 2
	}
	r, ok = c.write(wr, 1, 2, partition.Epoch(s.Epoch), "k", "v2", 2*time.Second)
	require.True(t, ok)
	require.NoError(t, r.Err)
	// The acknowledged write before the failover is still there.
	kv, found, err := c.stores[wr].Get(1, []byte("k"))
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "v2", string(kv.Value))
	require.Len(t, c.obs[wr].promoted[1], 1)
	// Every partition failed over, and the surviving nodes reported each
	// committed failover proposal to their observers (the agent's
	// metrics count them from there).
	committed := 0
	for i := 1; i < 3; i++ {
		committed += c.obs[i].cas[failover.DecideFailover][CASCommitted]
	}
	require.Equal(t, 2, committed, "one committed failover per partition")
	for i := 1; i < 3; i++ {
		require.NoError(t, c.nodes[i].Violation())
	}
}

func TestParseRegisterKey(t *testing.T) {
	for _, tc := range []struct {
		key string
		id  partition.ID
		ok  bool
	}{
		{"p/1", 1, true}, {"p/4194304", 4194304, true}, {"p/4194305", 0, false},
		{"p/0", 0, false}, {"p/01", 0, false}, {"p/", 0, false}, {"q/1", 0, false}, {"p/1x", 0, false},
	} {
		id, ok := parseRegisterKey(tc.key)
		require.Equal(t, tc.ok, ok, tc.key)
		require.Equal(t, tc.id, id, tc.key)
		if ok {
			require.Equal(t, tc.key, partition.RegisterKey(id))
		}
	}
}
