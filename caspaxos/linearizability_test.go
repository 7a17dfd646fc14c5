package caspaxos_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/sim"
)

// TestLinearizableUnderFaults runs the real acceptors and proposers in the
// deterministic simulator: 5 acceptors and 6 proposers (register scenario)
// and 3 acceptors with restarting acceptors (the canary's setting with the
// real acceptor), under message loss, duplication, reordering, partitions
// and crashes that keep only fsynced data. Histories are checked with
// porcupine per key; an Unknown verdict counts as a failure.
func TestLinearizableUnderFaults(t *testing.T) {
	cases := []struct {
		name string
		cfg  sim.Config
	}{
		{"5 acceptors, heavy faults", sim.Config{Scenario: "register", Faults: sim.FaultsHeavy}},
		{"5 acceptors, swarm faults", sim.Config{Scenario: "register", Faults: sim.FaultsSwarm}},
		{"3 acceptors, restarting", sim.Config{Scenario: "register", CanaryControl: true}},
	}
	for _, tc := range cases {
		for seed := uint64(1); seed <= 8; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", tc.name, seed), func(t *testing.T) {
				cfg := tc.cfg
				cfg.Seed, cfg.OutDir = seed, t.TempDir()
				r, err := sim.Run(cfg)
				require.NoError(t, err)
				assert.Equal(t, sim.LinOK, r.Linearizable, "replay: %s", r.Replay)
				assert.Empty(t, r.Violations, "replay: %s", r.Replay)
			})
		}
	}
}

// TestLinearizabilityCheckCanFail is the negative control: an acceptor that
// forgets its promises on restart (compiled only into the simulator) must
// make the same check fail, or the check above proves nothing.
func TestLinearizabilityCheckCanFail(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		r, err := sim.Run(sim.Config{Scenario: "register", Canary: true, Seed: seed, OutDir: t.TempDir()})
		require.NoError(t, err)
		assert.True(t, r.Failed(), "seed %d: the forgetful acceptor went unnoticed", seed)
		assert.Equal(t, sim.LinIllegal, r.Linearizable, "seed %d", seed)
	}
}
