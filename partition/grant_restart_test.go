package partition_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
)

// A write region counts a follower it granted freshness as bounded for T
// after the grant (its lag holds writes) even once the follower leaves the
// write quorum. That knowledge is volatile: a write region that restarts
// within T of a grant must not forget it. Here c got a grant, was cut off
// from a and shrunk out of the write quorum (so only the grant makes it
// bounded), and a restarted at once: unless a counts every follower as one
// that may hold its grant until it answers or T passes, a writes more than
// K ops while c still serves bounded reads on the grant.
func TestRestartedWriteRegionCountsItsGrants(t *testing.T) {
	lvl, window := grantTestLevel()
	tests := []struct {
		name string
		// cut: c and a stop hearing each other before the restart
		// ("before") or 100ms after it ("after": c answered a, which
		// proves nothing about a grant of the same epoch; a holds writes
		// for T, though c, told it is no member, serves no more reads).
		cut                  string
		wantServed, wantHeld bool
	}{
		{"follower cut off from the restarted write region", "before", true, true},
		{"follower answers the restarted write region, then is cut off", "after", false, true},
		{"follower answers the restarted write region", "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := grantedCluster(t, lvl, "c")
			cut := func() {
				c.Cut("a", "c")
				c.Cut("c", "a")
			}
			if tt.cut == "before" {
				cut()
			}
			require.NoError(t, c.Control("a", func(now time.Duration, h *partition.Host) error {
				return h.SetWriteQuorum(now, 7, partition.SampleQuorum("a", "a", "b"), 0)
			}))
			c.RunFor(10 * time.Millisecond)
			c.Crash("a")
			require.NoError(t, c.Restart("a"))
			restartedAt := c.Now()
			if tt.cut == "after" {
				c.RunFor(100 * time.Millisecond)
				cut()
			}

			acked, held, servedAfter := writeReadBounded(t, c, "a", "c", 1, restartedAt, restartedAt+window+time.Second, lvl.StalenessOps)
			require.Equal(t, tt.wantServed, servedAfter > 0, "reads served at c after the restart: %d", servedAfter)
			require.Equal(t, tt.wantHeld, held > 0, "writes held and rejected: %d", held)
			require.Greater(t, uint64(acked), lvl.StalenessOps+1, "a must write again once c's grant has surely ended")
		})
	}
}
