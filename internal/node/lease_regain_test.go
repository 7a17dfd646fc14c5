package node

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
)

// TestRegainedLeaseCommitsNothingBeforeItsReassert: a write region whose
// lease lapsed holds the commit of an op every member acknowledged. When
// its lease comes back it is a new lease run, which says nothing about the
// register (a takeover decided during the lapse may still commit), so the
// op commits only once the node's reassert committed and validated the
// run. The node used to hand the host the regained lease before the new
// run number, so the host counted the new lease under the old run's
// validation and committed at once: node-failure seed 10 (swarm) then
// committed an op above the position a takeover in flight had recorded,
// and the new write region, which must not undo a committed op, refused
// to promote for good.
func TestRegainedLeaseCommitsNothingBeforeItsReassert(t *testing.T) {
	c := newTClusterWith(t, 1, func(cfg *Config) { cfg.Host.LeaseGatesWrites = true }) // as the agent and the simulator run
	c.run(c.now + 3*time.Second)
	r, ok := c.write(0, 1, 1, 1, "k", "v1", 2*time.Second)
	require.True(t, ok)
	require.NoError(t, r.Err)
	pr, err := c.nodes[0].Host().Progress(1)
	require.NoError(t, err)
	op := pr.LastLSN + 1

	// East hears no ack, of its heartbeat rounds or of its ops: the op it
	// assigns next replicates, and its lease lapses.
	heartbeats, data := false, false
	c.drop = func(b *nodewire.Batch) bool {
		if b.To != 1 {
			return false
		}
		if !heartbeats {
			b.Heartbeats = slices.DeleteFunc(b.Heartbeats, func(h failover.Heartbeat) bool { return h.Kind == failover.KindHeartbeatAck })
		}
		if !data {
			b.Data = nil
		}
		return false
	}
	c.nodes[0].Write(c.now, &partition.WriteRequest{Partition: 1, Epoch: 1, Ref: 2, Key: []byte("k"), Value: []byte("v2")})
	cfg := fastProfile(t)
	c.run(c.now + cfg.LeaseDuration + cfg.MaxClockDrift)
	require.False(t, c.nodes[0].Manager().Liveness().LeaseValid(c.now), "east's lease lapsed")
	gen := c.nodes[0].Manager().Liveness().LeaseGen()

	// The followers' acks come in while the lease is away: nothing commits.
	data = true
	c.run(c.now + partition.DefaultMaxContactBackoff + time.Second)
	pr, err = c.nodes[0].Host().Progress(1)
	require.NoError(t, err)
	require.Less(t, pr.CommitLSN, op, "no commit without the lease")
	rep, ok := c.replies[2]
	require.True(t, ok, "the write is answered")
	require.ErrorIs(t, rep.Err, partition.ErrLeaseExpired, "its outcome is unknown: the lease lapsed")
	s, ok := c.known(0, 1)
	require.True(t, ok)
	_, before, _ := c.nodes[0].Manager().State(s.Partition)

	// The lease comes back as a new run: the op commits only after the
	// reassert of this run committed.
	heartbeats = true
	regained := false
	for end := c.now + 3*time.Second; c.now < end; {
		c.run(c.now + time.Millisecond)
		if c.nodes[0].Manager().Liveness().LeaseGen() != gen {
			regained = true
		}
		pr, err = c.nodes[0].Host().Progress(1)
		require.NoError(t, err)
		if pr.CommitLSN >= op {
			_, v, _ := c.nodes[0].Manager().State(s.Partition)
			require.Greater(t, v, before, "op %d committed at %v under a lease run no register write validated", op, c.now)
			break
		}
	}
	require.True(t, regained, "the lease came back as a new run")
	require.GreaterOrEqual(t, pr.CommitLSN, op, "the op commits once the run is validated")
	require.NoError(t, c.nodes[0].Violation())
}
