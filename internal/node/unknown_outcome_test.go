package node

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
)

// dropCASRepliesTo loses every register reply to node to while *on holds:
// its proposer's accepts reach the acceptors (and may be chosen) but it
// never hears so.
func dropCASRepliesTo(to NodeID, on *bool) func(b *nodewire.Batch) bool {
	return func(b *nodewire.Batch) bool {
		if *on && b.To == to {
			b.CAS = slices.DeleteFunc(b.CAS, func(m caspaxos.Message) bool { return m.Type.IsReply() })
		}
		return false
	}
}

// startUnheardCAS starts a cluster and has node 1 propose a never-promote
// change while every register reply to it is lost; *cut ends the loss.
func startUnheardCAS(t *testing.T) (c *tcluster, cut *bool, want []partition.Region) {
	t.Helper()
	cut = new(bool)
	c = newTClusterWith(t, 1, nil)
	c.run(c.now + 3*time.Second)
	c.drop = dropCASRepliesTo(1, cut)
	*cut = true
	want = []partition.Region{"north"}
	proposed, _, err := c.nodes[0].ApplyNeverPromote(c.now, want, "test")
	require.NoError(t, err)
	require.Equal(t, 1, proposed)
	return c, cut, want
}

// TestPromotedNodeThatMissedItsLearnIsTold: a CAS whose proposer gave up
// with an unknown outcome, though its accept was chosen, left every node
// on the older value for good: the proposer shares only what it knows it
// committed, the others learn only from a learn or their own register
// operations, and nothing else made anyone read the register. In the
// swarm sweeps (graceful-drain seed 7, flapping seed 10) the CAS was a
// failover to the proposer's own region: the old write region learned the
// new epoch from its own conflicting CAS and became a follower, and the
// promoted node stayed a follower of the old epoch, so the partition had
// no write region. The proposer now reads the register back after an
// unknown outcome (caspaxos.ErrUnknownOutcome: "read to learn") and
// shares what it reads.
func TestPromotedNodeThatMissedItsLearnIsTold(t *testing.T) {
	c, cut, want := startUnheardCAS(t)
	for end := c.now + 30*time.Second; c.nodes[0].Proposer().Stats().Unknown == 0 && c.now < end; {
		c.run(c.now + 100*time.Millisecond)
	}
	require.Positive(t, c.nodes[0].Proposer().Stats().Unknown, "node 1's CAS ended with an unknown outcome")
	for i := range c.nodes {
		s, ok := c.known(i, 1)
		require.True(t, ok)
		require.Empty(t, s.NeverPromote, "node %d does not know the change yet", i+1)
	}
	*cut = false
	c.run(c.now + 5*time.Second)
	for i := range c.nodes {
		s, ok := c.known(i, 1)
		require.True(t, ok)
		require.Equal(t, want, s.NeverPromote, "node %d learned the value its proposer never heard committed", i+1)
	}
	require.Positive(t, c.nodes[0].Stats().ReadsUnknown)
}

// TestValueLearnedFromAConflictIsShared: a node that learns a newer
// register value from its own CAS's conflict shares it like one it
// committed or read. Only the committer shared, so a value whose
// committer never heard its outcome and stopped before reading it back
// (a crash, a region lost) stayed unknown to every node that did not
// write to the register itself, though the conflicting node knew it.
func TestValueLearnedFromAConflictIsShared(t *testing.T) {
	c, cut, want := startUnheardCAS(t)
	c.run(c.now + 200*time.Millisecond) // the accept is chosen, unheard
	c.crash(0)
	*cut = false
	// Node 2 asks for a switchover against the value it knows: its CAS
	// conflicts with node 1's, and the value that won refuses the target.
	require.NoError(t, c.nodes[1].Switchover(c.now, 1, "north", "test"))
	c.run(c.now + 500*time.Millisecond) // well within node 1's lease: no failover yet
	s, ok := c.known(1, 1)
	require.True(t, ok)
	require.Equal(t, want, s.NeverPromote, "node 2 learned node 1's value from its conflict")
	s, ok = c.known(2, 1)
	require.True(t, ok)
	require.Equal(t, want, s.NeverPromote, "node 3 learned it from node 2")
}
