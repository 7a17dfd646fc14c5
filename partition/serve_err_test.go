package partition_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/partitiontest"
)

// Host.ServeErr is what the simulator's lease checks ask ("does this
// replica serve on its lease?") instead of keeping their own copy of the
// rule: it must agree with what the read path does. Through a write
// region's states (leading on a validated lease, a new lease run not yet
// validated, validated again, its lease lapsed, renewed, paused for a
// switchover) and a follower, ServeErr is nil exactly when a strong read
// at the replica's epoch is served, and otherwise names the same cause.
func TestServeErrAgreesWithTheStrongReadPath(t *testing.T) {
	c := newTestCluster(t, 11, func(cfg *partitiontest.ClusterConfig) { cfg.Host.LeaseGatesWrites = true })
	require.NoError(t, c.Create(7, partition.Spec{Level: partition.LevelOf(partition.Strong), Quorum: partition.SampleQuorum("a"), Epoch: 1}))
	c.RunFor(10 * time.Millisecond)
	h := c.Host("a")
	require.NoError(t, h.SetLease(7, c.Now()+time.Hour))
	h.SetLeaseGen(1)
	require.NoError(t, h.ValidateLease(7, 1, 1))
	mustWrite(t, c, "a", 7, 1, 1, "k", "v1")

	ref := partition.ClientRef(100)
	check := func(step string, reg partition.Region, serves bool) {
		t.Helper()
		serveErr := c.Host(reg).ServeErr(7, c.Now())
		ref++
		rep := mustRead(t, c, reg, partition.ReadRequest{Partition: 7, Epoch: 1, Ref: ref, Key: []byte("k"), Consistency: partition.Strong})
		require.Equal(t, serves, serveErr == nil, "%s: %s ServeErr %v", step, reg, serveErr)
		require.Equal(t, serves, rep.Err == nil, "%s: %s strong read %v", step, reg, rep.Err)
		for _, cause := range []error{partition.ErrLeaseExpired, partition.ErrNotWriteRegion} {
			require.Equal(t, errors.Is(rep.Err, cause), errors.Is(serveErr, cause),
				"%s: %s: the read got %v, ServeErr says %v", step, reg, rep.Err, serveErr)
		}
	}
	check("leading on a validated lease", "a", true)
	check("a follower", "b", false)
	h.SetLeaseGen(2)
	check("a new lease run, not validated", "a", false)
	require.NoError(t, h.ValidateLease(7, 2, 1))
	check("the new run validated", "a", true)
	require.NoError(t, h.SetLease(7, c.Now()))
	check("the lease lapsed", "a", false)
	require.NoError(t, h.SetLease(7, c.Now()+time.Hour))
	check("the lease renewed", "a", true)
	require.NoError(t, c.Control("a", func(now time.Duration, h *partition.Host) error { return h.Fence(now, 7, 1, "a", 0) }))
	c.RunFor(100 * time.Millisecond)
	require.Equal(t, partition.RolePaused, progressOf(t, c, "a", 7).Role)
	check("paused for a switchover, its lease still running", "a", false)
	require.NoError(t, c.Violation())
}
