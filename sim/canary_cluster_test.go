//go:build fmnode_canary

package sim

import "testing"

// The stale-epoch canary (partition/canary_on.go, built only with
// -tags fmnode_canary): a follower that applies appends of an older
// epoch must be caught within 50 cluster seeds.
//
//	go test -tags fmnode_canary -run TestCanaryStaleEpochApplyIsCaught ./sim/
func TestCanaryStaleEpochApplyIsCaught(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		res, err := Run(Config{Scenario: "cluster", Seed: seed, Faults: FaultsSwarm})
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed() {
			t.Logf("caught at seed %d: %v", seed, res.Violations[0])
			return
		}
	}
	t.Fatal("a follower applying stale-epoch appends passed 50 cluster seeds")
}
