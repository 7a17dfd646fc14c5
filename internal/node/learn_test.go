package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
)

// TestLostLearnIsSentAgain: a committed value whose learn to a node was
// lost reaches that node once the link is back, though nothing else would
// make it read the register (a policy change moves no replica's epoch).
// Learns used to be sent once: cluster swarm seed 281 left a node on a
// write quorum the register had shrunk, and its stale gray verdict kept a
// live write region's lease withheld for good.
func TestLostLearnIsSentAgain(t *testing.T) {
	c := newTCluster(t, 2)
	c.run(c.now + 3*time.Second)
	lost := true
	c.drop = func(b *nodewire.Batch) bool {
		if lost && b.To == 3 && len(b.Learns) > 0 {
			b.Learns = nil
		}
		return false
	}
	want := []partition.Region{"west"}
	proposed, _, err := c.nodes[0].ApplyNeverPromote(c.now, want, "test")
	require.NoError(t, err)
	require.Equal(t, 2, proposed)
	c.run(c.now + 2*time.Second)
	for p := partition.ID(1); p <= 2; p++ {
		s, ok := c.known(1, p)
		require.True(t, ok)
		require.Equal(t, want, s.NeverPromote, "node 2 learned partition %d's change", p)
		s, ok = c.known(2, p)
		require.True(t, ok)
		require.Empty(t, s.NeverPromote, "node 3 lost the learn of partition %d", p)
	}
	lost = false
	c.run(c.now + 2*DefaultLearnRetry)
	for p := partition.ID(1); p <= 2; p++ {
		s, ok := c.known(2, p)
		require.True(t, ok)
		require.Equal(t, want, s.NeverPromote, "node 3 learned partition %d's change once the link was back", p)
	}
	require.Positive(t, c.nodes[0].Stats().LearnsResent)
	// Every peer acknowledged: nothing more is sent.
	resent := c.nodes[0].Stats().LearnsResent
	c.run(c.now + 20*DefaultLearnRetry)
	require.Equal(t, resent, c.nodes[0].Stats().LearnsResent, "acknowledged values are not sent again")
	require.Empty(t, c.nodes[0].learnOut)
}
