//go:build fmnode_canary_stale || fmnode_canary_wq || fmnode_canary_drift

package sim

import (
	"context"
	"strings"
	"testing"
)

// The cluster canaries, each built only with its tag, never into a
// binary: a follower that applies appends of an older epoch
// (partition/canary_on.go), a failover that ignores the write-quorum set
// (failover/canary_wq_on.go), a takeover without the drift margin
// (failover/canary_drift_on.go). Each must be caught within 50 cluster
// swarm seeds with a safety violation (a liveness failure can happen
// without any canary):
//
//	go test -tags fmnode_canary_stale -run TestCanaryIsCaught ./sim/
//	go test -tags fmnode_canary_wq -run TestCanaryIsCaught ./sim/
//	go test -tags fmnode_canary_drift -run TestCanaryIsCaught ./sim/
func TestCanaryIsCaught(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	caught := uint64(0)
	Sweep(ctx, Config{Scenario: "cluster", Faults: FaultsSwarm}, 1, 50, 2, func(r SweepResult) {
		if r.Err != nil {
			t.Error(r.Err)
			return
		}
		if safetyFailure(r.Result) && caught == 0 {
			caught = r.Result.Seed
			t.Logf("caught at seed %d: %v", caught, r.Result.Violations)
			cancel()
		}
	})
	if caught == 0 {
		t.Fatal("the canary passed 50 cluster seeds")
	}
}

// safetyFailure: the run broke a safety check. A liveness failure does not
// count as a catch: seeds can fail liveness without any canary (swarm seed
// 49 does), so only a safety violation shows the canary was caught.
func safetyFailure(r Result) bool {
	if r.Linearizable != LinOK && r.Linearizable != LinSkipped {
		return true
	}
	for _, v := range r.Violations {
		for _, k := range []string{ViolationInvariant, ViolationConvergence, ViolationLinearizability} {
			if strings.HasPrefix(v, k+" ") {
				return true
			}
		}
	}
	return false
}
