package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/failover"

	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
)

// pauseOutcomes records the RequestDone calls of one request.
type pauseOutcomes []RequestOutcome

func (o *pauseOutcomes) done(r RequestOutcome) { *o = append(*o, r) }

// cutCAS drops node from's register messages while cut says so.
func cutCAS(from NodeID, cut *bool) func(b *nodewire.Batch) bool {
	return func(b *nodewire.Batch) bool { return *cut && b.From == from && len(b.CAS) > 0 }
}

// TestPauseWriteLostIsRetriedNotDropped: swarm seeds 122, 154, 159, 187,
// 223 and 49 of the cluster scenario. An operator's pause (or resume)
// was proposed once; when that register write failed (the proposer gave
// up) or conflicted, the request was gone, while the admin API had
// already answered that it was accepted. The node now writes it again
// against the register's newer value and tells the caller how it ended.
func TestPauseWriteLostIsRetriedNotDropped(t *testing.T) {
	c := newTCluster(t, 1)
	c.run(c.now + 3*time.Second)
	cut := true
	c.drop = cutCAS(1, &cut)
	var got pauseOutcomes
	require.NoError(t, c.nodes[0].SetPaused(c.now, 1, true, "maintenance", got.done))
	// The first write gives up while node 1 cannot reach the acceptors;
	// meanwhile node 2 commits a value of its own (the retry then
	// conflicts with it and is written again on top of it).
	require.NoError(t, c.nodes[1].SetNeverPromote(c.now, 1, []partition.Region{"north"}, "policy"))
	for end := c.now + 30*time.Second; c.now < end && c.nodes[0].Stats().ActionErrors == 0; {
		c.run(c.now + 100*time.Millisecond)
		if c.obs[0].cas[pauseKind()][CASFailed] > 0 {
			break
		}
	}
	require.Positive(t, c.obs[0].cas[pauseKind()][CASFailed], "the first pause write failed")
	require.Empty(t, got, "not ended while it is being retried")
	cut = false
	c.run(c.now + 10*time.Second)
	require.Len(t, got, 1, "the request ended once")
	require.NoError(t, got[0].Err)
	require.False(t, got[0].Already)
	require.GreaterOrEqual(t, got[0].Tries, 2)
	for i := range c.nodes {
		s, ok := c.known(i, 1)
		require.True(t, ok)
		require.True(t, s.Paused, "node %d's register value is paused", i+1)
		require.Equal(t, []partition.Region{"north"}, s.NeverPromote, "node 2's write is kept")
	}
	s, ver, _ := c.nodes[0].Manager().State(partition.RegisterKey(1))
	require.True(t, s.Paused)
	require.Equal(t, ver, got[0].Version)
}

// TestPauseWriteNeverLandingIsReportedNotApplied: a request whose writes
// all fail ends with ErrNotApplied and its reason, never silently.
func TestPauseWriteNeverLandingIsReportedNotApplied(t *testing.T) {
	c := newTCluster(t, 1)
	c.run(c.now + 3*time.Second)
	cut := true
	c.drop = cutCAS(1, &cut)
	var got pauseOutcomes
	require.NoError(t, c.nodes[0].SetPaused(c.now, 1, true, "maintenance", got.done))
	require.ErrorIs(t, c.nodes[0].SetPaused(c.now, 1, false, "again", nil), failover.ErrRefused, "one request at a time")
	for end := c.now + 2*time.Minute; c.now < end && len(got) == 0; {
		c.run(c.now + time.Second)
	}
	require.Len(t, got, 1, "the request ended")
	require.ErrorIs(t, got[0].Err, ErrNotApplied)
	require.Contains(t, got[0].Err.Error(), "lost 3 times")
	require.Equal(t, maxRequestTries, got[0].Tries)
	s, _ := c.known(1, 1)
	require.False(t, s.Paused)
}

// TestPauseAlreadySoEndsAtOnce: pausing a paused partition writes
// nothing and says so, with the version that holds the pause.
func TestPauseAlreadySoEndsAtOnce(t *testing.T) {
	c := newTCluster(t, 1)
	c.run(c.now + 3*time.Second)
	var first, second pauseOutcomes
	require.NoError(t, c.nodes[0].SetPaused(c.now, 1, true, "maintenance", first.done))
	c.run(c.now + 2*time.Second)
	require.Len(t, first, 1)
	require.NoError(t, first[0].Err)
	require.NoError(t, c.nodes[0].SetPaused(c.now, 1, true, "maintenance", second.done))
	require.Equal(t, pauseOutcomes{{Version: first[0].Version, Already: true}}, second)
}

func pauseKind() failover.DecisionKind { return failover.DecidePause }
