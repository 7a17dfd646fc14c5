package partition_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/partitiontest"
)

// casCluster is a strong partition 7 at epoch 1, write region "a".
func casCluster(t *testing.T) *partitiontest.Cluster {
	t.Helper()
	c := newTestCluster(t, 3, nil)
	require.NoError(t, c.Create(7, partition.Spec{Level: partition.LevelOf(partition.Strong), Quorum: partition.SampleQuorum("a"), Epoch: 1}))
	c.RunFor(10 * time.Millisecond)
	return c
}

func casReply(t *testing.T, c *partitiontest.Cluster, reg partition.Region, ref partition.ClientRef, epoch partition.Epoch, key, value string, cond partition.Condition) partition.Reply {
	t.Helper()
	c.Write(reg, partition.WriteRequest{Partition: 7, Epoch: epoch, Ref: ref, Key: []byte(key), Value: []byte(value), If: &cond})
	r, ok := waitReply(t, c, ref, 5*time.Second)
	require.True(t, ok, "no reply to compare-and-set %d", ref)
	return r.Reply
}

func strongGet(t *testing.T, c *partitiontest.Cluster, ref partition.ClientRef, key string) partition.Reply {
	t.Helper()
	r := mustRead(t, c, "a", partition.ReadRequest{Partition: 7, Ref: ref, Key: []byte(key), Epoch: 1, Consistency: partition.Strong})
	require.NoError(t, r.Err)
	return r
}

// The condition is decided both from the write region's in-memory tail
// (the key was just written) and from the store (the tail was trimmed once
// every follower had the ops: the core fetches the key).
func TestCompareAndSetDecidesOnTheKeysCurrentVersion(t *testing.T) {
	for _, settle := range []time.Duration{0, 500 * time.Millisecond} {
		t.Run(fmt.Sprintf("settle=%v", settle), func(t *testing.T) {
			c := casCluster(t)
			ref := partition.ClientRef(0)
			next := func() partition.ClientRef { ref++; return ref }

			// Create only if absent: the first wins, the second sees it.
			r := casReply(t, c, "a", next(), 1, "k", "v1", partition.Condition{Absent: true})
			require.NoError(t, r.Err)
			v1 := r.Token
			c.RunFor(settle)
			r = casReply(t, c, "a", next(), 1, "k", "other", partition.Condition{Absent: true})
			var cf *partition.ConditionFailedError
			require.ErrorAs(t, r.Err, &cf)
			require.ErrorIs(t, r.Err, partition.ErrConditionFailed)
			require.True(t, cf.Found)
			require.Equal(t, v1, cf.Version)

			// Compare on the version a read returned.
			got := strongGet(t, c, next(), "k")
			require.Equal(t, v1, got.Version)
			r = casReply(t, c, "a", next(), 1, "k", "v2", partition.Condition{Version: got.Version})
			require.NoError(t, r.Err)
			v2 := r.Token
			c.RunFor(settle)
			// The old version no longer matches; the reply names the new one.
			r = casReply(t, c, "a", next(), 1, "k", "v3", partition.Condition{Version: v1})
			require.ErrorAs(t, r.Err, &cf)
			require.Equal(t, v2, cf.Version)
			require.Equal(t, "v2", string(strongGet(t, c, next(), "k").Value))

			// A missing key fails a version condition, reported absent.
			r = casReply(t, c, "a", next(), 1, "missing", "x", partition.Condition{Version: v2})
			require.ErrorAs(t, r.Err, &cf)
			require.False(t, cf.Found)
			require.Zero(t, cf.Version)

			// After a delete the key is absent again.
			c.Write("a", partition.WriteRequest{Partition: 7, Epoch: 1, Ref: next(), Key: []byte("k"), Delete: true})
			_, ok := waitReply(t, c, ref, 5*time.Second)
			require.True(t, ok)
			c.RunFor(settle)
			r = casReply(t, c, "a", next(), 1, "k", "v4", partition.Condition{Version: v2})
			require.ErrorAs(t, r.Err, &cf)
			require.False(t, cf.Found)
			r = casReply(t, c, "a", next(), 1, "k", "v4", partition.Condition{Absent: true})
			require.NoError(t, r.Err)
			require.Equal(t, "v4", string(strongGet(t, c, next(), "k").Value))
			require.NoError(t, c.Violation())
		})
	}
}

// Many compare-and-sets on one version submitted together: exactly one is
// applied, whether the key's state comes from the tail or the store.
func TestCompareAndSetOnOneVersionAppliesOnce(t *testing.T) {
	for _, settle := range []time.Duration{0, 500 * time.Millisecond} {
		t.Run(fmt.Sprintf("settle=%v", settle), func(t *testing.T) {
			c := casCluster(t)
			base := mustWrite(t, c, "a", 7, 1, 1, "k", "v0")
			c.RunFor(settle)
			const n = 20
			for i := range n {
				c.Write("a", partition.WriteRequest{Partition: 7, Epoch: 1, Ref: partition.ClientRef(100 + i), Key: []byte("k"),
					Value: []byte(fmt.Sprint("c", i)), If: &partition.Condition{Version: base}})
			}
			won, lost := -1, 0
			for i := range n {
				r, ok := waitReply(t, c, partition.ClientRef(100+i), 5*time.Second)
				require.True(t, ok, "no reply to %d", i)
				switch {
				case r.Reply.Err == nil:
					require.Equal(t, -1, won, "two compare-and-sets on version %v applied", base)
					won = i
				case errors.Is(r.Reply.Err, partition.ErrConditionFailed):
					lost++
				default:
					t.Fatalf("compare-and-set %d: %v", i, r.Reply.Err)
				}
			}
			require.NotEqual(t, -1, won)
			require.Equal(t, n-1, lost)
			require.Equal(t, fmt.Sprint("c", won), string(strongGet(t, c, 1000, "k").Value))
			require.NoError(t, c.Violation())
		})
	}
}

// A compare-and-set is fenced like a write: at a follower, or with an old
// epoch, it is redirected and not applied; a malformed condition is a bad
// request.
func TestCompareAndSetRedirectsAndRefusesLikeAWrite(t *testing.T) {
	c := casCluster(t)
	mustWrite(t, c, "a", 7, 1, 1, "k", "v0")
	c.RunFor(100 * time.Millisecond)
	tests := []struct {
		name   string
		reg    partition.Region
		epoch  partition.Epoch
		cond   partition.Condition
		reason partition.RedirectReason
		is     error
	}{
		{name: "not the write region", reg: "b", epoch: 1, cond: partition.Condition{Absent: true}, reason: partition.ReasonNotWriteRegion, is: partition.ErrNotWriteRegion},
		{name: "stale epoch", reg: "a", epoch: 0, cond: partition.Condition{Absent: true}, reason: partition.ReasonStaleEpoch, is: partition.ErrStaleEpoch},
		{name: "both fields", reg: "a", epoch: 1, cond: partition.Condition{Absent: true, Version: partition.Token{Epoch: 1, LSN: 1}}, is: partition.ErrBadRequest},
		{name: "no field", reg: "a", epoch: 1, cond: partition.Condition{}, is: partition.ErrBadRequest},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := casReply(t, c, tc.reg, partition.ClientRef(10+i), tc.epoch, "k", "x", tc.cond)
			require.ErrorIs(t, r.Err, tc.is)
			if tc.reason != 0 {
				var rd *partition.RedirectError
				require.ErrorAs(t, r.Err, &rd)
				require.Equal(t, tc.reason, rd.Reason)
			}
		})
	}
	require.Equal(t, "v0", string(strongGet(t, c, 100, "k").Value))
}
