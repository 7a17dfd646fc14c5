package partition_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/partitiontest"
)

// With LeaseGatesWrites a write region stops acknowledging once its lease
// lapses: new writes are refused and writes that commit after the lease get
// an unknown outcome, because a takeover may already start the lineage
// before them (found by the flapping scenario: an ack after the lease named
// a write the new write region truncated).
func TestLeaseGatesWrites(t *testing.T) {
	c := lapsedLeaseCluster(t)
	rep, ok := waitReply(t, c, 2, 5*time.Second)
	require.True(t, ok, "the write gets an answer")
	require.ErrorIs(t, rep.Reply.Err, partition.ErrLeaseExpired)
	var unk *partition.UnknownOutcomeError
	assert.True(t, errors.As(rep.Reply.Err, &unk), "a durable write without a lease is an unknown outcome, not a success: %v", rep.Reply.Err)
	assert.Positive(t, c.Host("a").Stats().AcksWithheld)

	// New writes are refused outright.
	c.Write("a", partition.WriteRequest{Partition: 7, Epoch: 1, Ref: 3, Key: []byte("k"), Value: []byte("v3")})
	rep, ok = waitReply(t, c, 3, time.Second)
	require.True(t, ok)
	require.ErrorIs(t, rep.Reply.Err, partition.ErrLeaseExpired)

	// A renewed lease restores writes.
	require.NoError(t, c.Host("a").SetLease(7, c.Now()+time.Hour))
	mustWrite(t, c, "a", 7, 1, 4, "k", "v4")
	require.NoError(t, c.Violation())
}

// lapsedLeaseCluster is three regions with leases on, write region a: LSN 1
// acknowledged, then LSN 2 assigned under a's lease, its write region cut
// off so the commit waits, the lease lapsed and the cut healed (ref 2 is
// the client of LSN 2).
func lapsedLeaseCluster(t *testing.T) *partitiontest.Cluster {
	t.Helper()
	c := newTestCluster(t, 3, func(cfg *partitiontest.ClusterConfig) { cfg.Host.LeaseGatesWrites = true })
	require.NoError(t, c.Create(7, partition.Spec{Level: partition.LevelOf(partition.Strong), Quorum: partition.SampleQuorum("a"), Epoch: 1}))
	c.RunFor(10 * time.Millisecond)
	mustWrite(t, c, "a", 7, 1, 1, "k", "v1")
	c.Cut("a", "b")
	c.Cut("a", "c")
	c.Write("a", partition.WriteRequest{Partition: 7, Epoch: 1, Ref: 2, Key: []byte("k"), Value: []byte("v2")})
	c.RunFor(20 * time.Millisecond)
	require.NoError(t, c.Host("a").SetLease(7, c.Now()))
	c.Heal()
	return c
}

// With the lease gated on validation (SetLeaseGen), a lease regained after
// a lapse serves no write and no strong or bounded read until the
// failover manager validated it for the new run and the replica's epoch
// (ValidateLease): a takeover decided during the lapse may commit after
// the regain, and a write region cut from the new one must not serve its
// old epoch on the new lease.
func TestLeaseGatedOnValidation(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *partitiontest.ClusterConfig) { cfg.Host.LeaseGatesWrites = true })
	require.NoError(t, c.Create(7, partition.Spec{Level: partition.LevelOf(partition.Strong), Quorum: partition.SampleQuorum("a"), Epoch: 1}))
	c.RunFor(10 * time.Millisecond)
	h := c.Host("a")
	require.NoError(t, h.SetLease(7, c.Now()+time.Hour))
	h.SetLeaseGen(1)
	require.NoError(t, h.ValidateLease(7, 1, 1))
	mustWrite(t, c, "a", 7, 1, 1, "k", "v1")
	mustRead(t, c, "a", partition.ReadRequest{Partition: 7, Epoch: 1, Ref: 2, Key: []byte("k"), Consistency: partition.Strong})

	tests := []struct {
		name     string
		gen      uint64 // the host's lease run
		validGen uint64 // the run and epoch validated (0: none since)
		validE   partition.Epoch
		serves   bool
	}{
		{"validated run and epoch", 1, 1, 1, true},
		{"a new run, not validated", 2, 0, 0, false},
		{"a new run validated at another epoch", 2, 2, 2, false},
		{"an old run validated", 3, 2, 1, false},
		{"the new run validated", 3, 3, 1, true},
	}
	ref := partition.ClientRef(10)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.SetLeaseGen(tt.gen)
			if tt.validGen != 0 {
				require.NoError(t, h.ValidateLease(7, tt.validGen, tt.validE))
			}
			ref++
			c.Write("a", partition.WriteRequest{Partition: 7, Epoch: 1, Ref: ref, Key: []byte("k"), Value: []byte(tt.name)})
			rep, ok := waitReply(t, c, ref, 5*time.Second)
			require.True(t, ok)
			for _, lvl := range []partition.Consistency{partition.Strong, partition.BoundedStaleness} {
				ref++
				c.Read("a", partition.ReadRequest{Partition: 7, Epoch: 1, Ref: ref, Key: []byte("k"), Consistency: lvl})
				rd, ok := waitReply(t, c, ref, 5*time.Second)
				require.True(t, ok)
				if tt.serves {
					require.NoError(t, rd.Reply.Err, "%v read", lvl)
				} else {
					require.ErrorIs(t, rd.Reply.Err, partition.ErrLeaseExpired, "%v read", lvl)
				}
			}
			if tt.serves {
				require.NoError(t, rep.Reply.Err)
				return
			}
			require.ErrorIs(t, rep.Reply.Err, partition.ErrLeaseExpired)
		})
	}
	require.NoError(t, c.Violation())
}

// A write region advances its commit only while its lease holds: a
// committed op can never be set aside (under strong consistency it is
// applied without undo on every replica), and a takeover of a write region
// whose lease lapsed may start its epoch before ops it replicated
// afterwards. Before, such an op committed on every replica and the new
// write region could not promote; the background-fault sweep of
// node-failure wedged partitions that way.
func TestCommitWaitsForTheLease(t *testing.T) {
	c := lapsedLeaseCluster(t)
	wq := partition.SampleQuorum("a")
	rep, ok := waitReply(t, c, 2, 5*time.Second)
	require.True(t, ok)
	var unk *partition.UnknownOutcomeError
	require.True(t, errors.As(rep.Reply.Err, &unk), "no ack without a lease: %v", rep.Reply.Err)
	c.RunFor(time.Second)
	pr, err := c.Host("b").Progress(7)
	require.NoError(t, err)
	require.Equal(t, partition.LSN(2), pr.LastLSN, "b holds LSN 2")
	require.Equal(t, partition.LSN(1), pr.CommitLSN, "but it did not commit")

	// A takeover decided from b's position before LSN 2 arrived: b
	// promotes after LSN 1 and sets LSN 2 aside (it was never
	// acknowledged).
	wq.WriteRegion = "b"
	err = c.Control("b", func(now time.Duration, h *partition.Host) error {
		return h.Promote(now, 7, 2, 1, wq, 0)
	})
	require.NoError(t, err, "LSN 2 committed without a lease")
	require.NoError(t, c.Violation())
}

// The commit held while the lease lapsed resumes when the lease returns,
// though every acknowledgement came in meanwhile (nothing else would
// commit it: the background-fault sweep left such a partition a commit
// behind on every replica).
func TestCommitResumesWithTheLease(t *testing.T) {
	c := lapsedLeaseCluster(t)
	c.RunFor(time.Second)
	pr, err := c.Host("a").Progress(7)
	require.NoError(t, err)
	require.Equal(t, partition.LSN(1), pr.CommitLSN, "held without the lease")

	// Through the driver (Control), as a node hands its host the lease.
	require.NoError(t, c.Control("a", func(now time.Duration, h *partition.Host) error { return h.SetLease(7, now+time.Hour) }))
	c.RunFor(time.Second)
	for _, reg := range []partition.Region{"a", "b", "c"} {
		pr, err := c.Host(reg).Progress(7)
		require.NoError(t, err)
		require.Equal(t, partition.LSN(2), pr.CommitLSN, "region %s: the commit did not resume", reg)
	}
	require.NoError(t, c.Violation())
}
