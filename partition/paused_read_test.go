package partition_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
)

// A write region paused for a graceful switchover cannot know when the
// switchover completes: the register commits the successor's epoch, the
// successor's node promotes it and acknowledges writes, and the paused
// region hears of it only when a message of the new epoch reaches it (here
// it is cut off right after the target caught up). Its lease may still
// hold for up to a lease duration (a switchover, unlike a takeover, does
// not wait for it), so a strong read it served at its old epoch would miss
// the successor's acknowledged write (a stale read), and a bounded-
// staleness read would, T later, miss a write older than T.
func TestPausedWriteRegionServesNoStrongOrBoundedRead(t *testing.T) {
	bounded := partition.LevelOf(partition.BoundedStaleness)
	tests := []struct {
		name  string
		level partition.Level
		// wait after the successor's write, before the read.
		wait time.Duration
		want error
	}{
		{"strong", partition.LevelOf(partition.Strong), 0, partition.ErrNotWriteRegion},
		{"bounded staleness", bounded, 2 * bounded.StalenessTime, partition.ErrNotFresh},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCluster(t, 9, nil)
			require.NoError(t, c.Create(7, partition.Spec{Level: tt.level, Quorum: partition.SampleQuorum("a"), Epoch: 1}))
			c.RunFor(10 * time.Millisecond)
			mustWrite(t, c, "a", 7, 1, 1, "k", "v1")
			// The switchover: fence a at its epoch (paused); b holds
			// every LSN.
			require.NoError(t, c.Control("a", func(now time.Duration, h *partition.Host) error { return h.Fence(now, 7, 1, "a", 0) }))
			c.RunFor(100 * time.Millisecond)
			require.Equal(t, partition.RolePaused, progressOf(t, c, "a", 7).Role)
			after := progressOf(t, c, "b", 7).LastLSN
			require.Equal(t, partition.LSN(1), after)
			// The switchover completes before the paused region hears.
			c.Isolate("a")
			require.NoError(t, c.Control("c", func(now time.Duration, h *partition.Host) error { return h.Fence(now, 7, 2, "b", 0) }))
			require.NoError(t, c.Control("b", func(now time.Duration, h *partition.Host) error {
				return h.Promote(now, 7, 2, after, partition.SampleQuorum("b", "b", "c"), 0)
			}))
			tok := mustWrite(t, c, "b", 7, 2, 2, "k", "v2")
			require.Equal(t, partition.Epoch(2), tok.Epoch)
			c.RunFor(tt.wait)

			// A client still routed to epoch 1 reads at a.
			rep := mustRead(t, c, "a", partition.ReadRequest{Partition: 7, Ref: 3, Key: []byte("k"), Epoch: 1, Consistency: tt.level.Consistency})
			require.Error(t, rep.Err, "the paused write region served a %v read of %q at %v; epoch 2 acknowledged %v %v earlier",
				tt.level.Consistency, rep.Value, rep.Token, tok, tt.wait)
			require.ErrorIs(t, rep.Err, tt.want)
			var re *partition.RedirectError
			if errors.As(rep.Err, &re) {
				require.Equal(t, partition.ReasonPaused, re.Reason)
			}
			require.Equal(t, partition.RolePaused, progressOf(t, c, "a", 7).Role, "a heard of epoch 2 after all: the case proves nothing")
			require.NoError(t, c.Violation())
		})
	}
}
