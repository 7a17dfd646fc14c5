package txtdns

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testZone = "fm.example."

func newTestPublisher(t testing.TB, mod func(*PublisherConfig)) *Publisher {
	t.Helper()
	cfg := PublisherConfig{Zone: testZone}
	if mod != nil {
		mod(&cfg)
	}
	p, err := NewPublisher(cfg)
	require.NoError(t, err)
	return p
}

func route(part uint32, epoch uint64, write string) Route {
	prio := []string{"eastus", "westus", "northeu"}
	return Route{Partition: part, Epoch: epoch, WriteRegion: write, Priority: prio, ConfigVersion: 1}
}

func lookupRun(t *testing.T, p *Publisher, part uint32) Run {
	t.Helper()
	ans, err := p.LookupTXT(PartitionName(testZone, part))
	require.NoError(t, err)
	require.Len(t, ans.Records, 1)
	r, err := DecodeRun(ans.Records[0])
	require.NoError(t, err)
	require.True(t, r.Contains(part))
	return r
}

func TestPublisherConfigErrorsNameTheField(t *testing.T) {
	tests := []struct {
		field string
		cfg   PublisherConfig
	}{
		{"Zone", PublisherConfig{Zone: "."}},
		{"TTL", PublisherConfig{Zone: testZone, TTL: 1500 * time.Millisecond}},
		{"TTL", PublisherConfig{Zone: testZone, TTL: 2 * time.Hour}},
		{"BlockSize", PublisherConfig{Zone: testZone, BlockSize: MaxBlockSize + 1}},
		{"MaxPartitions", PublisherConfig{Zone: testZone, MaxPartitions: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.field, func(t *testing.T) {
			_, err := NewPublisher(tc.cfg)
			assert.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestPublisherRuns(t *testing.T) {
	p := newTestPublisher(t, nil)
	var rs []Route
	for i := range uint32(1000) {
		rs = append(rs, route(i, 1, "eastus"))
	}
	res, err := p.Apply(rs...)
	require.NoError(t, err)
	assert.Equal(t, ApplyResult{Applied: 1000}, res)
	assert.Equal(t, 1000, p.Partitions())
	// One run per block of 256.
	assert.Equal(t, Run{Lo: 0, Hi: 255, Epoch: 1, WriteRegion: "eastus", Priority: rs[0].Priority, ConfigVersion: 1}, lookupRun(t, p, 42))
	last := lookupRun(t, p, 999)
	assert.Equal(t, uint32(768), last.Lo)
	assert.Equal(t, uint32(999), last.Hi)

	// Fail partition 100 over: its block splits in three.
	res, err = p.Apply(route(100, 2, "westus"))
	require.NoError(t, err)
	assert.Equal(t, 1, res.Applied)
	r := lookupRun(t, p, 100)
	assert.Equal(t, [2]uint32{100, 100}, [2]uint32{r.Lo, r.Hi})
	assert.Equal(t, "westus", r.WriteRegion)
	assert.Equal(t, uint64(2), r.Epoch)
	left, right := lookupRun(t, p, 42), lookupRun(t, p, 101)
	assert.Equal(t, [2]uint32{0, 99}, [2]uint32{left.Lo, left.Hi})
	assert.Equal(t, [2]uint32{101, 255}, [2]uint32{right.Lo, right.Hi})

	ans, err := p.LookupTXT(BlockName(testZone, 0))
	require.NoError(t, err)
	assert.Len(t, ans.Records, 3)

	// Failing the whole block over merges it back into one run.
	rs = rs[:0]
	for i := range uint32(256) {
		rs = append(rs, route(i, 2, "westus"))
	}
	res, err = p.Apply(rs...)
	require.NoError(t, err)
	assert.Equal(t, ApplyResult{Applied: 255, Unchanged: 1}, res)
	r = lookupRun(t, p, 7)
	assert.Equal(t, [2]uint32{0, 255}, [2]uint32{r.Lo, r.Hi})
}

func TestPublisherMonotonic(t *testing.T) {
	p := newTestPublisher(t, nil)
	cur := route(5, 5, "westus")
	cur.ConfigVersion = 3
	_, err := p.Apply(cur)
	require.NoError(t, err)

	older := func(mod func(*Route)) Route { r := cur; r.Priority = []string{"westus", "eastus"}; mod(&r); return r }
	tests := []struct {
		name string
		r    Route
		want ApplyResult
	}{
		{"same route", cur, ApplyResult{Unchanged: 1}},
		{"older epoch", older(func(r *Route) { r.Epoch = 4; r.ConfigVersion = 9 }), ApplyResult{Stale: 1}},
		{"same epoch older config", older(func(r *Route) { r.ConfigVersion = 2 }), ApplyResult{Stale: 1}},
		{"same epoch and config, different content", older(func(r *Route) {}), ApplyResult{Stale: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := p.Apply(tc.r)
			require.NoError(t, err)
			assert.Equal(t, tc.want, res)
			got, ok := p.Route(5)
			require.True(t, ok)
			assert.Equal(t, cur.Epoch, got.Epoch)
			assert.Equal(t, cur.ConfigVersion, got.ConfigVersion)
			assert.Equal(t, cur.Priority, got.Priority)
		})
	}
	newer := cur
	newer.ConfigVersion = 4
	newer.Priority = []string{"westus", "eastus"}
	res, err := p.Apply(newer)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Applied)
}

func TestPublisherInvalidAndFull(t *testing.T) {
	p := newTestPublisher(t, func(c *PublisherConfig) { c.MaxPartitions = 2 })
	bad := route(9, 0, "eastus")
	res, err := p.Apply(route(1, 1, "eastus"), bad, route(2, 1, "eastus"), route(3, 1, "eastus"))
	assert.ErrorIs(t, err, ErrInvalidRoute)
	assert.ErrorIs(t, err, ErrFull)
	assert.Contains(t, err.Error(), "partition 9")
	assert.Equal(t, 2, res.Applied)
	assert.Equal(t, 2, p.Partitions())
}

func TestPublisherRegionsAndMeta(t *testing.T) {
	p := newTestPublisher(t, nil)
	res, err := p.SetRegions(
		RegionInfo{Region: "westus", Endpoints: []string{"127.0.0.31:7000"}, ConfigVersion: 1},
		RegionInfo{Region: "eastus", Endpoints: []string{"127.0.0.21:7000", "127.0.0.22:7000"}, ConfigVersion: 1},
	)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Applied)
	res, err = p.SetRegions(RegionInfo{Region: "eastus", Endpoints: []string{"stale:1"}, ConfigVersion: 0})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Stale)
	ri, ok := p.Region("eastus")
	require.True(t, ok)
	assert.Equal(t, []string{"127.0.0.21:7000", "127.0.0.22:7000"}, ri.Endpoints)

	ans, err := p.LookupTXT(RegionName(testZone, "eastus"))
	require.NoError(t, err)
	got, err := DecodeRegion(ans.Records[0])
	require.NoError(t, err)
	assert.Equal(t, ri, got)

	ans, err = p.LookupTXT(testZone)
	require.NoError(t, err)
	m, err := DecodeMeta(ans.Records[0])
	require.NoError(t, err)
	assert.Equal(t, Meta{BlockSize: DefaultBlockSize, Partitions: 0, Regions: []string{"eastus", "westus"}}, m)
}

func TestPublisherLookupErrors(t *testing.T) {
	p := newTestPublisher(t, nil)
	_, err := p.Apply(route(1, 1, "eastus"))
	require.NoError(t, err)
	tests := []struct {
		name string
		err  error
	}{
		{PartitionName(testZone, 2), ErrNXDomain},
		{BlockName(testZone, 1), ErrNXDomain},
		{RegionName(testZone, "nowhere"), ErrNXDomain},
		{"www." + testZone, ErrNXDomain},
		{"p-1.other.", ErrRefused},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.LookupTXT(tc.name)
			assert.ErrorIs(t, err, tc.err)
		})
	}
}

func TestPublisherLookupAllocatesNothing(t *testing.T) {
	p := newTestPublisher(t, nil)
	_, err := p.Apply(route(1, 1, "eastus"))
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(200, func() {
		_, _ = p.LookupTXT("p-1.fm.example.")
		_, _ = p.LookupTXT("b-0.fm.example.")
		_, _ = p.LookupTXT("p-2.fm.example.")
	})
	assert.Zero(t, allocs)
}

// TestPublisherMatchesModel applies random routes and checks the published
// state against a plain map with the same monotonic rule, and that runs
// are maximal and within their block.
func TestPublisherMatchesModel(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			const n = 200
			p := newTestPublisher(t, func(c *PublisherConfig) { c.BlockSize = uint32(1 + rng.IntN(64)) })
			model := map[uint32]Route{}
			regions := []string{"eastus", "westus", "northeu"}
			for range 40 {
				batch := make([]Route, 1+rng.IntN(20))
				for i := range batch {
					w := regions[rng.IntN(len(regions))]
					batch[i] = Route{Partition: uint32(rng.IntN(n)), Epoch: uint64(1 + rng.IntN(4)), WriteRegion: w,
						Priority: regions, ConfigVersion: uint64(rng.IntN(2))}
				}
				_, err := p.Apply(batch...)
				require.NoError(t, err)
				for _, r := range batch {
					cur, ok := model[r.Partition]
					if !ok || r.Newer(cur) {
						model[r.Partition] = r
					}
				}
			}
			bs := p.BlockSize()
			for part := range uint32(n) {
				want, ok := model[part]
				ans, err := p.LookupTXT(PartitionName(testZone, part))
				if !ok {
					require.ErrorIs(t, err, ErrNXDomain)
					continue
				}
				require.NoError(t, err)
				run, err := DecodeRun(ans.Records[0])
				require.NoError(t, err)
				require.True(t, run.Contains(part))
				require.Equal(t, part/bs, run.Lo/bs, "run crosses its block")
				require.Equal(t, part/bs, run.Hi/bs, "run crosses its block")
				got := run.Route(part)
				require.Equal(t, want.Epoch, got.Epoch, "partition %d", part)
				require.Equal(t, want.WriteRegion, got.WriteRegion, "partition %d", part)
				require.Equal(t, want.ConfigVersion, got.ConfigVersion, "partition %d", part)
				for q := run.Lo; q <= run.Hi; q++ {
					require.Contains(t, model, q, "run covers unpublished partition %d", q)
				}
			}
			require.Equal(t, len(model), p.Partitions())
			// Runs are maximal: neighbours in a block never share a route.
			for blk := range uint32(n/bs + 1) {
				ans, err := p.LookupTXT(BlockName(testZone, blk))
				if err != nil {
					continue
				}
				var prev *Run
				for _, rec := range ans.Records {
					r, err := DecodeRun(rec)
					require.NoError(t, err)
					if prev != nil {
						require.Less(t, prev.Hi, r.Lo)
						if prev.Hi+1 == r.Lo {
							require.False(t, prev.SameRoute(r), "adjacent runs %+v %+v not merged", *prev, r)
						}
					}
					prev = &r
				}
			}
		})
	}
}

func TestFollowMeasuresPublishLag(t *testing.T) {
	reg := prometheus.NewRegistry()
	clock := NewManualClock(time.Unix(1000, 0))
	p := newTestPublisher(t, func(c *PublisherConfig) { c.Registerer = reg; c.Clock = clock })
	feed, err := NewChanFeed(4)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Follow(ctx, feed) }()

	r := route(3, 1, "eastus")
	r.CommittedAt = clock.Now().Add(-3 * time.Millisecond)
	require.NoError(t, feed.Send(ctx, r))
	require.Eventually(t, func() bool { _, ok := p.Route(3); return ok }, time.Second, time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	var lag *dto.Histogram
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "fmnode_txtdns_publish_lag_seconds" {
			lag = mf.GetMetric()[0].GetHistogram()
		}
	}
	require.NotNil(t, lag)
	assert.Equal(t, uint64(1), lag.GetSampleCount())
	assert.InDelta(t, 0.003, lag.GetSampleSum(), 1e-9)

	feed.Close()
	err = p.Follow(context.Background(), feed)
	assert.ErrorIs(t, err, ErrFeedClosed)
}
