package partition_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/partitiontest"
)

func newTestCluster(t testing.TB, seed uint64, mut func(*partitiontest.ClusterConfig)) *partitiontest.Cluster {
	t.Helper()
	cfg := partitiontest.ClusterConfig{
		Regions:  partition.SampleRegions,
		Host:     partition.SmallHostConfig(),
		MinDelay: time.Millisecond, MaxDelay: 3 * time.Millisecond,
		MinDisk: 500 * time.Microsecond, MaxDisk: 2 * time.Millisecond,
		Lease: time.Hour * 1000,
	}
	if mut != nil {
		mut(&cfg)
	}
	c, err := partitiontest.NewCluster(cfg, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
	require.NoError(t, err)
	return c
}

// waitReply runs the cluster until the reply for ref arrives (or d passes).
func waitReply(t testing.TB, c *partitiontest.Cluster, ref partition.ClientRef, d time.Duration) (partitiontest.ClientReply, bool) {
	t.Helper()
	return c.WaitReply(ref, d)
}

func mustWrite(t testing.TB, c *partitiontest.Cluster, reg partition.Region, p partition.ID, e partition.Epoch, ref partition.ClientRef, key, value string) partition.Token {
	t.Helper()
	c.Write(reg, partition.WriteRequest{Partition: p, Epoch: e, Ref: ref, Key: []byte(key), Value: []byte(value)})
	r, ok := waitReply(t, c, ref, 5*time.Second)
	require.True(t, ok, "no reply to write %d", ref)
	require.NoError(t, r.Reply.Err)
	return r.Reply.Token
}

func mustRead(t testing.TB, c *partitiontest.Cluster, reg partition.Region, req partition.ReadRequest) partition.Reply {
	t.Helper()
	c.Read(reg, req)
	r, ok := waitReply(t, c, req.Ref, 5*time.Second)
	require.True(t, ok, "no reply to read %d", req.Ref)
	return r.Reply
}

func progressOf(t testing.TB, c *partitiontest.Cluster, reg partition.Region, p partition.ID) partition.Progress {
	t.Helper()
	h := c.Host(reg)
	require.NotNil(t, h, "region %s down", reg)
	pr, err := h.Progress(p)
	require.NoError(t, err)
	return pr
}

func fmtProgress(p partition.Progress) string {
	return fmt.Sprintf("%s e%d %s last=%d:%d commit=%d applied=%d stable=%d base=%d snap=%v",
		p.Region, p.Epoch, p.Role, p.LastEpoch, p.LastLSN, p.CommitLSN, p.AppliedLSN, p.StableLSN, p.LogBase, p.NeedSnapshot)
}
