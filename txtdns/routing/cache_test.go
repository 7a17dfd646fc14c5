package routing

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/txtdns"
)

var t0 = time.Unix(1_000_000, 0)

func rt(p uint32, epoch, cv uint64, write string) txtdns.Route {
	return txtdns.Route{Partition: p, Epoch: epoch, WriteRegion: write, Priority: []string{"eastus", "westus"}, ConfigVersion: cv}
}

func TestCacheOffer(t *testing.T) {
	tests := []struct {
		name      string
		start     *txtdns.Route
		offer     txtdns.Route
		want      Outcome
		wantEpoch uint64
		wantWrite string
	}{
		{"insert", nil, rt(1, 5, 1, "eastus"), Inserted, 5, "eastus"},
		{"same route refreshes", new(rt(1, 5, 1, "eastus")), rt(1, 5, 1, "eastus"), Refreshed, 5, "eastus"},
		{"newer epoch", new(rt(1, 5, 1, "eastus")), rt(1, 6, 1, "westus"), Updated, 6, "westus"},
		{"newer config", new(rt(1, 5, 1, "eastus")), rt(1, 5, 2, "eastus"), Updated, 5, "eastus"},
		{"older epoch rejected", new(rt(1, 5, 1, "eastus")), rt(1, 4, 9, "westus"), RejectedOlder, 5, "eastus"},
		{"older config rejected", new(rt(1, 5, 2, "eastus")), rt(1, 5, 1, "westus"), RejectedOlder, 5, "eastus"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewCache(100)
			require.NoError(t, err)
			if tc.start != nil {
				c.Offer(*tc.start, t0.Add(time.Second), t0)
			}
			now := t0.Add(2 * time.Second)
			out := c.Offer(tc.offer, now.Add(5*time.Second), now)
			assert.Equal(t, tc.want, out)
			e, ok := c.Get(1)
			require.True(t, ok)
			assert.Equal(t, tc.wantEpoch, e.Epoch)
			assert.Equal(t, tc.wantWrite, e.WriteRegion)
			assert.True(t, e.Fresh(now), "any processed answer extends the expiry")
			assert.Equal(t, now, e.Checked)
		})
	}
}

func TestCacheRedirect(t *testing.T) {
	tests := []struct {
		name      string
		epoch     uint64
		region    string
		want      Outcome
		wantEpoch uint64
		wantWrite string
	}{
		{"newer epoch moves", 6, "westus", Updated, 6, "westus"},
		{"same epoch same region", 5, "eastus", Refreshed, 5, "eastus"},
		{"same epoch other region", 5, "westus", RejectedOlder, 5, "eastus"},
		{"older epoch", 4, "westus", RejectedOlder, 5, "eastus"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewCache(100)
			require.NoError(t, err)
			c.Offer(rt(1, 5, 3, "eastus"), t0.Add(time.Second), t0)
			out := c.Redirect(1, tc.epoch, tc.region, t0.Add(time.Second), t0)
			assert.Equal(t, tc.want, out)
			e, _ := c.Get(1)
			assert.Equal(t, tc.wantEpoch, e.Epoch)
			assert.Equal(t, tc.wantWrite, e.WriteRegion)
			assert.Equal(t, uint64(3), e.ConfigVersion, "a redirect keeps the config version")
			assert.Equal(t, []string{"eastus", "westus"}, e.Priority, "a redirect keeps the priority list")
		})
	}
	// A DNS answer at the redirect's epoch fills in what the redirect lacked.
	c, _ := NewCache(100)
	assert.Equal(t, Inserted, c.Redirect(9, 7, "westus", t0.Add(time.Second), t0))
	e, _ := c.Get(9)
	assert.True(t, e.FromRedirect)
	assert.Nil(t, e.Priority)
	assert.Equal(t, Updated, c.Offer(rt(9, 7, 1, "westus"), t0.Add(time.Second), t0))
	e, _ = c.Get(9)
	assert.False(t, e.FromRedirect)
	assert.NotNil(t, e.Priority)
}

func TestCacheBound(t *testing.T) {
	c, err := NewCache(10)
	require.NoError(t, err)
	assert.Equal(t, Inserted, c.Offer(rt(9, 1, 1, "eastus"), t0.Add(time.Second), t0))
	assert.Equal(t, RejectedFull, c.Offer(rt(10, 1, 1, "eastus"), t0.Add(time.Second), t0), "beyond the partition count")
	assert.Equal(t, RejectedFull, c.Redirect(10, 1, "eastus", t0.Add(time.Second), t0))
	_, ok := c.Get(10)
	assert.False(t, ok)
	assert.Equal(t, 1, c.Len())
	_, err = NewCache(0)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewCache(MaxPartitions + 1)
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

// TestCacheNeverMovesBackwards drives random answers and redirects, many
// of them stale, and checks that a partition's (epoch, config version)
// never decreases.
func TestCacheNeverMovesBackwards(t *testing.T) {
	for seed := range uint64(10) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 2))
			c, err := NewCache(1000)
			require.NoError(t, err)
			type ver struct{ e, cv uint64 }
			seen := map[uint32]ver{}
			now := t0
			for range 5000 {
				now = now.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
				p := uint32(rng.IntN(8))
				epoch := uint64(1 + rng.IntN(10))
				region := []string{"eastus", "westus"}[rng.IntN(2)]
				if rng.IntN(3) == 0 {
					c.Redirect(p, epoch, region, now.Add(5*time.Second), now)
				} else {
					c.Offer(rt(p, epoch, uint64(rng.IntN(3)), region), now.Add(5*time.Second), now)
				}
				e, ok := c.Get(p)
				require.True(t, ok)
				prev := seen[p]
				require.False(t, e.Epoch < prev.e || e.Epoch == prev.e && e.ConfigVersion < prev.cv,
					"partition %d moved from %+v to (%d, %d)", p, prev, e.Epoch, e.ConfigVersion)
				seen[p] = ver{e.Epoch, e.ConfigVersion}
			}
		})
	}
}
