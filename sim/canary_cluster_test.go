//go:build fmnode_canary_stale || fmnode_canary_wq || fmnode_canary_drift

package sim

import (
	"sync"
	"testing"
)

// The cluster canaries, each built only with its tag, never into a
// binary: a follower that applies appends of an older epoch
// (partition/canary_on.go), a failover that ignores the write-quorum set
// (failover/canary_wq_on.go), a takeover without the drift margin
// (failover/canary_drift_on.go). Each must be caught within 50 seeds with
// a safety violation (a liveness failure can happen without any canary).
// The sweep interleaves seed k of cluster-edge-drift (drift at the bound,
// the write region cut from the others: the edge the drift margin guards)
// with seed k of cluster under swarm, k = 1..25, two at a time.
//
//	go test -tags fmnode_canary_stale -run TestCanaryIsCaught ./sim/
//	go test -tags fmnode_canary_wq -run TestCanaryIsCaught ./sim/
//	go test -tags fmnode_canary_drift -run TestCanaryIsCaught ./sim/
func TestCanaryIsCaught(t *testing.T) {
	cfgs := []Config{{Scenario: "cluster-edge-drift", Faults: FaultsNone}, {Scenario: "cluster", Faults: FaultsSwarm}}
	runs := 0
	for seed := uint64(1); seed <= 25; seed++ {
		res := make([]Result, len(cfgs))
		errs := make([]error, len(cfgs))
		var wg sync.WaitGroup
		for i, c := range cfgs {
			c.Seed = seed
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[i], errs[i] = Run(c)
			}()
		}
		wg.Wait()
		for i := range cfgs {
			runs++
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if safetyFailure(res[i]) {
				t.Logf("caught after %d runs by %s: %v", runs, res[i].Replay, res[i].Violations)
				return
			}
		}
	}
	t.Fatalf("the canary passed %d seeds (25 cluster-edge-drift, 25 cluster swarm)", runs)
}
