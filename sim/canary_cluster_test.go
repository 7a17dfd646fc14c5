//go:build fmnode_canary_stale || fmnode_canary_wq || fmnode_canary_drift

package sim

import (
	"context"
	"testing"
)

// The cluster canaries, each built only with its tag, never into a
// binary: a follower that applies appends of an older epoch
// (partition/canary_on.go), a failover that ignores the write-quorum set
// (failover/canary_wq_on.go), a takeover without the drift margin
// (failover/canary_drift_on.go). Each must be caught within 50 seeds with
// a safety violation (a liveness failure can happen without any canary):
// 10 seeds of cluster-edge-drift (drift at the bound, the write region cut
// from the others: the edge the drift margin guards) and 40 cluster swarm
// seeds.
//
//	go test -tags fmnode_canary_stale -run TestCanaryIsCaught ./sim/
//	go test -tags fmnode_canary_wq -run TestCanaryIsCaught ./sim/
//	go test -tags fmnode_canary_drift -run TestCanaryIsCaught ./sim/
func TestCanaryIsCaught(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	caught, runs := "", 0
	for _, sw := range []struct {
		cfg    Config
		lo, hi uint64
	}{
		{Config{Scenario: "cluster-edge-drift", Faults: FaultsNone}, 1, 10},
		{Config{Scenario: "cluster", Faults: FaultsSwarm}, 1, 40},
	} {
		if caught != "" {
			break
		}
		Sweep(ctx, sw.cfg, sw.lo, sw.hi, 2, func(r SweepResult) {
			runs++
			if r.Err != nil {
				t.Error(r.Err)
				return
			}
			if safetyFailure(r.Result) && caught == "" {
				caught = r.Result.Replay
				t.Logf("caught after %d runs by %s: %v", runs, caught, r.Result.Violations)
				cancel()
			}
		})
	}
	if caught == "" {
		t.Fatalf("the canary passed %d seeds (10 cluster-edge-drift, 40 cluster swarm)", runs)
	}
}
