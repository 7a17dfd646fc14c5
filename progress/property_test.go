package progress

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// explore visits every state reachable under lim, checking each state and
// each transition. It returns the number of distinct states and what the
// search exercised.
func explore(t *testing.T, lim modelLimits) (int, *modelStats) {
	t.Helper()
	seen := map[string]struct{}{}
	var buf []byte
	var visit func(m *model)
	visit = func(m *model) {
		buf = m.key(buf[:0])
		if _, ok := seen[string(buf)]; ok {
			return
		}
		seen[string(buf)] = struct{}{}
		if err := m.check(); err != nil {
			t.Fatalf("after %s: %v", m, err)
		}
		for _, a := range m.actions() {
			next := m.clone()
			ok, err := next.apply(a)
			if err != nil {
				t.Fatalf("after %s: %v", next, err)
			}
			if !ok {
				t.Fatalf("after %s: refused without forced compaction", next)
			}
			visit(next)
		}
	}
	m := newModel(lim)
	visit(m)
	return len(seen), m.stats
}

// TestExhaustiveAgainstModel: every history within small bounds — writes,
// partial and full syncs, deposed write regions writing on, and failovers
// to any region, including back and forth between the same two — gives the
// same divergence point, false progress and delta as comparing logs.
func TestExhaustiveAgainstModel(t *testing.T) {
	cases := []struct {
		name string
		lim  modelLimits
	}{
		{"3 regions, 3 LSNs, 3 failovers", modelLimits{regions: 3, maxLSN: 3, maxFailovers: 3, gaps: []int{1}, syncCopies: []int{0, 1, -1}}},
		{"2 regions, 5 LSNs, 4 failovers", modelLimits{regions: 2, maxLSN: 5, maxFailovers: 4, gaps: []int{1}, syncCopies: []int{0, 1, -1}}},
		{"4 regions, 2 LSNs, 2 failovers", modelLimits{regions: 4, maxLSN: 2, maxFailovers: 2, gaps: []int{1}, syncCopies: []int{0, -1}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, stats := explore(t, tc.lim)
			t.Logf("%d states: %v", n, stats)
			require.Empty(t, stats.missing(false), "rules never exercised")
		})
	}
}

// TestRandomHistoriesAgainstModel: long seeded histories with more regions
// and more failovers than MaxEpochs, so Open's forced drops, compacted
// answers and NeedsSnapshot are exercised too.
func TestRandomHistoriesAgainstModel(t *testing.T) {
	lim := modelLimits{regions: 5, maxLSN: 40, maxFailovers: 60, gaps: []int{1, 1, 1, 2, 3}, syncCopies: []int{0, 1, 2, -1}}
	walks, steps := 120, 300
	if testing.Short() {
		walks = 12
	}
	stats := &modelStats{}
	var failovers, forced int
	for seed := range uint64(walks) {
		rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
		m := newModel(lim)
		m.stats = stats
		// Each walk draws its own failover rate (swarm testing): frequent
		// failovers pass MaxEpochs, rare ones grow long epochs and logs.
		failoverOneIn := []int{2, 4, 12, 40}[seed%4]
		for range steps {
			acts := m.actions()
			var a action
			if rng.IntN(failoverOneIn) == 0 && m.failovers < lim.maxFailovers {
				c := rng.IntN(lim.regions)
				a = action{kind: 'f', a: c, n: lim.gaps[rng.IntN(len(lim.gaps))]}
			} else {
				acts = slices.DeleteFunc(acts, func(a action) bool { return a.kind == 'f' })
				a = acts[rng.IntN(len(acts))]
			}
			next := m.clone()
			ok, err := next.apply(a)
			require.NoError(t, err, "seed %d after %s", seed, next)
			if !ok {
				continue
			}
			m = next
			require.NoError(t, m.check(), "seed %d after %s", seed, m)
		}
		failovers += m.failovers
		if m.forced {
			forced++
		}
	}
	t.Logf("%d walks, %d failovers, %d walks passed MaxEpochs: %v", walks, failovers, forced, stats)
	require.Positive(t, forced, "no walk exercised the MaxEpochs cap")
	require.Less(t, forced, walks, "every walk passed MaxEpochs")
	require.Empty(t, stats.missing(true), "rules never exercised")
}
