package sim

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFaultLevel(t *testing.T) {
	tests := []struct {
		in   string
		want FaultLevel
		ok   bool
	}{
		{"none", FaultsNone, true}, {"light", FaultsLight, true}, {"HEAVY", FaultsHeavy, true},
		{"swarm", FaultsSwarm, true}, {"medium", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseFaultLevel(tt.in)
			if !tt.ok {
				assert.ErrorIs(t, err, ErrFaultLevel)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, got, must(ParseFaultLevel(got.String())))
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestSwarmDrawsPerSeed(t *testing.T) {
	a, b := ProfileFor(FaultsSwarm, 1), ProfileFor(FaultsSwarm, 1)
	assert.Equal(t, a, b, "a seed's mix is fixed")
	distinct := map[string]bool{}
	for seed := uint64(1); seed <= 20; seed++ {
		p := ProfileFor(FaultsSwarm, seed)
		distinct[p.String()] = true
		any := false
		for _, k := range episodeKinds() {
			any = any || p.Weights[k] > 0
		}
		assert.True(t, any, "seed %d has at least one episode kind", seed)
	}
	assert.Greater(t, len(distinct), 15, "seeds draw different mixes")
}

func TestParseSeedRange(t *testing.T) {
	tests := []struct {
		in     string
		lo, hi uint64
		ok     bool
	}{
		{"5", 5, 5, true}, {"1..200", 1, 200, true}, {" 3 .. 4 ", 3, 4, true},
		{"4..3", 0, 0, false}, {"a..b", 0, 0, false}, {"", 0, 0, false}, {"0..2000000", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			lo, hi, err := ParseSeedRange(tt.in)
			if !tt.ok {
				assert.ErrorIs(t, err, ErrSeedRange)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, [2]uint64{tt.lo, tt.hi}, [2]uint64{lo, hi})
		})
	}
}

func TestSweepEmitsInSeedOrder(t *testing.T) {
	var seeds []uint64
	Sweep(context.Background(), Config{Scenario: "register", Faults: FaultsNone, Duration: 200 * 1e6}, 3, 12, 4, func(r SweepResult) {
		require.NoError(t, r.Err)
		seeds = append(seeds, r.Result.Seed)
	})
	assert.Equal(t, []uint64{3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, seeds)
}

func TestSweepStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n := 0
	Sweep(ctx, Config{Scenario: "register", Faults: FaultsNone}, 1, 1000, 2, func(SweepResult) { n++ })
	assert.Less(t, n, 1000)
}
