package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
)

// TestApplyNeverPromote: only the write region's node proposes the new
// never-promote regions; every node learns them; a second pass proposes
// nothing.
func TestApplyNeverPromote(t *testing.T) {
	c := newTCluster(t, 4)
	c.run(c.now + 3*time.Second)
	want := []partition.Region{"west"}
	for i := range c.nodes {
		proposed, pending, err := c.nodes[i].ApplyNeverPromote(c.now, want, "test")
		require.NoError(t, err)
		if c.nodes[i].Region() == "east" {
			require.Equal(t, 4, proposed+pending, "the write region's node proposes for each partition")
		} else {
			require.Zero(t, proposed+pending, "node %d is not the write region", i+1)
		}
	}
	c.run(c.now + 2*time.Second)
	for i := range c.nodes {
		for p := partition.ID(1); p <= 4; p++ {
			s, ok := c.known(i, p)
			require.True(t, ok)
			require.Equal(t, want, s.NeverPromote, "node %d partition %d", i+1, p)
		}
		proposed, pending, err := c.nodes[i].ApplyNeverPromote(c.now, want, "test")
		require.NoError(t, err)
		require.Zero(t, proposed+pending, "already applied")
	}
}
