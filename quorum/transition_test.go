package quorum

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSafeTransitionExhaustive compares SafeTransition with the brute-force
// plan checker, for every pair of valid configurations over four acceptors:
// concurrentOK must equal "the one-step plan from -> to is safe with a
// rescan", and needsRescan (when concurrentOK) must equal "it is unsafe
// without one".
func TestSafeTransitionExhaustive(t *testing.T) {
	bf := newBruteForce(4)
	var cfgs []bfConfig
	for _, p := range bf.sets {
		for _, a := range bf.sets {
			if bf.intersects(p, a) {
				cfgs = append(cfgs, bfConfig{p, a})
			}
		}
	}
	toConfig := func(c bfConfig) Config { return Config{Prepare: c.p.toSet(), Accept: c.a.toSet()} }
	for _, from := range cfgs {
		for _, to := range cfgs {
			ok, rescan := SafeTransition(toConfig(from), toConfig(to))
			wantOK := bf.checkPlan(from, []bfStep{{cfg: to, rescan: true}}) == nil
			if ok != wantOK {
				t.Fatalf("SafeTransition(%v/%v -> %v/%v) concurrentOK = %v, want %v", from.p, from.a, to.p, to.a, ok, wantOK)
			}
			if !ok {
				continue
			}
			wantRescan := bf.checkPlan(from, []bfStep{{cfg: to}}) != nil
			if rescan != wantRescan {
				t.Fatalf("SafeTransition(%v/%v -> %v/%v) needsRescan = %v, want %v", from.p, from.a, to.p, to.a, rescan, wantRescan)
			}
		}
	}
}

func TestSafeTransitionExamples(t *testing.T) {
	tests := []struct {
		name               string
		from, to           Config
		wantOK, wantRescan bool
	}{
		{"identity", MajorityConfig(1, 2, 3), MajorityConfig(1, 2, 3), true, false},
		{"grow accept 3->4", MajorityConfig(1, 2, 3), Config{Prepare: Majority(1, 2, 3), Accept: Majority(1, 2, 3, 4)}, true, false},
		{"grow prepare 3->4", Config{Prepare: Majority(1, 2, 3), Accept: Majority(1, 2, 3, 4)}, MajorityConfig(1, 2, 3, 4), true, false},
		{"grow prepare 4->5 needs rescan", Config{Prepare: Majority(1, 2, 3, 4), Accept: Majority(1, 2, 3, 4, 5)}, MajorityConfig(1, 2, 3, 4, 5), true, true},
		{"shrink prepare 4->3 needs rescan", MajorityConfig(1, 2, 3, 4), Config{Prepare: Majority(1, 2, 3), Accept: Majority(1, 2, 3, 4)}, true, true},
		{"shrink prepare 3->2", MajorityConfig(1, 2, 3), Config{Prepare: Majority(1, 2), Accept: Majority(1, 2, 3)}, true, false},
		{"jump to disjoint members", MajorityConfig(1, 2, 3), MajorityConfig(4, 5, 6), false, true},
		{"jump 3 -> 5 acceptors", MajorityConfig(1, 2, 3), MajorityConfig(1, 2, 3, 4, 5), false, true},
		{"invalid from", Config{}, MajorityConfig(1), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, rescan := SafeTransition(tt.from, tt.to)
			assert.Equal(t, tt.wantOK, ok, "concurrentOK")
			assert.Equal(t, tt.wantRescan, rescan, "needsRescan")
		})
	}
}
