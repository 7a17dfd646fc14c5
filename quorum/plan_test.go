package quorum

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// idsOf lists the IDs in mask, ascending.
func idsOf(mask uint8) []ID { return bfSet{mask: mask}.toSet().Members }

// assertPlanSafe checks a plan with the brute-force checker, checks that every
// rescan flag is necessary (clearing it makes the checker fail, which also
// proves the checker can fail), and checks the plan's shape: each step changes
// one set by at most one acceptor.
func assertPlanSafe(t *testing.T, bf *bruteForce, cur Config, steps []Step) {
	t.Helper()
	bsteps := fromSteps(steps)
	require.NoError(t, bf.checkPlan(fromConfig(cur), bsteps), "plan from %v:\n%s", cur, formatPlan(steps))
	for i := range bsteps {
		if !bsteps[i].rescan {
			continue
		}
		bsteps[i].rescan = false
		require.Error(t, bf.checkPlan(fromConfig(cur), bsteps),
			"step %d rescan is not needed; plan from %v:\n%s", i, cur, formatPlan(steps))
		bsteps[i].rescan = true
	}
	prev := cur
	for i, st := range steps {
		require.NoError(t, st.Config.Validate(), "step %d", i)
		require.NotEmpty(t, st.Why, "step %d", i)
		require.False(t, st.Config.Equal(prev), "step %d repeats the previous config", i)
		dp := symDiff(prev.Prepare.Members, st.Config.Prepare.Members)
		da := symDiff(prev.Accept.Members, st.Config.Accept.Members)
		require.LessOrEqual(t, dp+da, 1, "step %d changes more than one membership: %v -> %v", i, prev, st.Config)
		prev = st.Config
	}
}

func symDiff(a, b []ID) int {
	n := 0
	for _, x := range a {
		if !slices.Contains(b, x) {
			n++
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			n++
		}
	}
	return n
}

func formatPlan(steps []Step) string {
	s := ""
	for i, st := range steps {
		s += fmt.Sprintf("  %d: %v rescan=%v\n", i, st.Config, st.RescanBefore)
	}
	return s
}

func countRescans(steps []Step) int {
	n := 0
	for _, st := range steps {
		if st.RescanBefore {
			n++
		}
	}
	return n
}

// TestPlanGrowShrinkMajorityExhaustive: for every majority config over IDs
// 1..7 of size 1..6 and every acceptor to add or remove, the plan is safe
// under the brute-force checker, every rescan is needed, and the plan ends in
// the majority config of the new membership.
func TestPlanGrowShrinkMajorityExhaustive(t *testing.T) {
	bf := newBruteForce(7)
	for mask := 1; mask < 1<<7; mask++ {
		members := idsOf(uint8(mask))
		if len(members) > 6 {
			continue
		}
		cur := MajorityConfig(members...)
		for id := ID(1); id <= 7; id++ {
			if slices.Contains(members, id) {
				steps, err := PlanShrink(cur, id)
				if len(members) == 1 {
					require.ErrorIs(t, err, ErrLastMember)
					continue
				}
				require.NoError(t, err)
				require.Len(t, steps, 2)
				assert.True(t, steps[1].Config.Equal(MajorityConfig(without(members, id)...)))
				assertPlanSafe(t, bf, cur, steps)
			} else {
				steps, err := PlanGrow(cur, id)
				require.NoError(t, err)
				require.Len(t, steps, 2)
				assert.True(t, steps[1].Config.Equal(MajorityConfig(with(members, id)...)))
				assertPlanSafe(t, bf, cur, steps)
			}
		}
	}
}

// TestRescanParity pins down the finding documented in doc.go: with
// single-acceptor steps between majority configs, a rescan is needed exactly
// when the new acceptor count is odd. Growing to an odd size rescans under
// the intermediate config (before the prepare set grows); shrinking to an odd
// size rescans under the starting config (before the prepare set shrinks).
func TestRescanParity(t *testing.T) {
	for n := 1; n <= 8; n++ {
		members := make([]ID, n)
		for i := range members {
			members[i] = ID(i + 1)
		}
		cur := MajorityConfig(members...)

		grow, err := PlanGrow(cur, ID(n+1))
		require.NoError(t, err)
		odd := (n+1)%2 == 1
		assert.Equal(t, []bool{false, odd}, []bool{grow[0].RescanBefore, grow[1].RescanBefore}, "grow %d -> %d", n, n+1)

		if n == 1 {
			continue
		}
		shrink, err := PlanShrink(cur, ID(n))
		require.NoError(t, err)
		odd = (n-1)%2 == 1
		assert.Equal(t, []bool{odd, false}, []bool{shrink[0].RescanBefore, shrink[1].RescanBefore}, "shrink %d -> %d", n, n-1)
	}
}

// TestPlanFromFlexibleConfigs: from every settled config over five
// acceptors (same members in both sets, any valid thresholds), growing by
// each absent ID and shrinking by each member gives a safe plan that first
// reaches the majority thresholds.
func TestPlanFromFlexibleConfigs(t *testing.T) {
	bf := newBruteForce(6)
	for mask := 1; mask < 1<<5; mask++ {
		members := idsOf(uint8(mask))
		n := len(members)
		for tp := 1; tp <= n; tp++ {
			for ta := 1; ta <= n; ta++ {
				cur := Config{Prepare: Set{Members: members, Threshold: tp}, Accept: Set{Members: members, Threshold: ta}}
				if cur.Validate() != nil {
					continue
				}
				for id := ID(1); id <= 6; id++ {
					var steps []Step
					var err error
					if slices.Contains(members, id) {
						if n == 1 {
							continue
						}
						steps, err = PlanShrink(cur, id)
					} else {
						steps, err = PlanGrow(cur, id)
					}
					require.NoError(t, err, "%v id %d", cur, id)
					assertPlanSafe(t, bf, cur, steps)
				}
				steps, err := PlanChange(cur, members)
				require.NoError(t, err)
				if cur.isMajority() {
					assert.Empty(t, steps)
				} else {
					assertPlanSafe(t, bf, cur, steps)
					assert.True(t, steps[len(steps)-1].Config.Equal(MajorityConfig(members...)))
				}
			}
		}
	}
}

// TestPlanChangeExhaustive: every majority config over IDs 1..5 to every
// nonempty target over IDs 1..5.
func TestPlanChangeExhaustive(t *testing.T) {
	bf := newBruteForce(5)
	for from := 1; from < 1<<5; from++ {
		cur := MajorityConfig(idsOf(uint8(from))...)
		for to := 1; to < 1<<5; to++ {
			target := idsOf(uint8(to))
			steps, err := PlanChange(cur, target)
			require.NoError(t, err)
			if from == to {
				assert.Empty(t, steps)
				continue
			}
			assertPlanSafe(t, bf, cur, steps)
			assert.True(t, steps[len(steps)-1].Config.Equal(MajorityConfig(target...)), "%v -> %v", cur, target)
			// Two steps per added or removed acceptor.
			assert.Len(t, steps, 2*symDiff(cur.Prepare.Members, target))
		}
	}
}

// TestReplacingEveryAcceptorRescans is the paper's warning: replacing every
// acceptor one by one without rescans loses all data. The plan must contain
// rescans, and without them the checker must object.
func TestReplacingEveryAcceptorRescans(t *testing.T) {
	bf := newBruteForce(6)
	cur := MajorityConfig(1, 2, 3)
	steps, err := PlanChange(cur, []ID{4, 5, 6})
	require.NoError(t, err)
	assertPlanSafe(t, bf, cur, steps)
	assert.Positive(t, countRescans(steps))
	bare := fromSteps(steps)
	for i := range bare {
		bare[i].rescan = false
	}
	assert.Error(t, bf.checkPlan(fromConfig(cur), bare))
}

// TestCheckerRejectsUnsafePlans: hand-written plans that the brute-force
// checker must refuse, so that a passing check means something.
func TestCheckerRejectsUnsafePlans(t *testing.T) {
	bf := newBruteForce(6)
	tests := []struct {
		name  string
		cur   Config
		steps []Step
	}{
		{"jump to disjoint members", MajorityConfig(1, 2, 3), []Step{{Config: MajorityConfig(4, 5, 6), RescanBefore: true}}},
		{"jump 3 -> 5 in one step", MajorityConfig(1, 2, 3), []Step{{Config: MajorityConfig(1, 2, 3, 4, 5), RescanBefore: true}}},
		{"mixed proposers: prepare 1-of-3 next to accept 2-of-3", MajorityConfig(1, 2, 3), []Step{
			{Config: Config{Prepare: Set{Members: []ID{1, 2, 3}, Threshold: 1}, Accept: Set{Members: []ID{1, 2, 3}, Threshold: 3}}, RescanBefore: true},
		}},
		{"grow 4 -> 5 without rescan", MajorityConfig(1, 2, 3, 4), []Step{
			{Config: Config{Prepare: Majority(1, 2, 3, 4), Accept: Majority(1, 2, 3, 4, 5)}},
			{Config: MajorityConfig(1, 2, 3, 4, 5)},
		}},
		{"shrink 2 -> 1 without rescan", MajorityConfig(1, 2), []Step{
			{Config: Config{Prepare: Majority(1), Accept: Majority(1, 2)}},
			{Config: MajorityConfig(1)},
		}},
		{"rescan too late", MajorityConfig(1, 2, 3, 4), []Step{
			{Config: Config{Prepare: Majority(1, 2, 3), Accept: Majority(1, 2, 3, 4)}},
			{Config: MajorityConfig(1, 2, 3), RescanBefore: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Error(t, bf.checkPlan(fromConfig(tt.cur), fromSteps(tt.steps)))
		})
	}
}

func TestPlanErrors(t *testing.T) {
	midGrow := Config{Prepare: Majority(1, 2, 3), Accept: Majority(1, 2, 3, 4)}
	tests := []struct {
		name    string
		plan    func() ([]Step, error)
		wantErr error
	}{
		{"grow existing", func() ([]Step, error) { return PlanGrow(MajorityConfig(1, 2, 3), 2) }, ErrAlreadyMember},
		{"grow invalid", func() ([]Step, error) { return PlanGrow(Config{}, 2) }, ErrEmptySet},
		{"grow mid-change", func() ([]Step, error) { return PlanGrow(midGrow, 5) }, ErrMembersDiffer},
		{"shrink absent", func() ([]Step, error) { return PlanShrink(MajorityConfig(1, 2, 3), 4) }, ErrNotMember},
		{"shrink last", func() ([]Step, error) { return PlanShrink(MajorityConfig(1), 1) }, ErrLastMember},
		{"shrink mid-change", func() ([]Step, error) { return PlanShrink(midGrow, 1) }, ErrMembersDiffer},
		{"change to nothing", func() ([]Step, error) { return PlanChange(MajorityConfig(1, 2, 3), nil) }, ErrEmptySet},
		{"change from disjoint", func() ([]Step, error) {
			return PlanChange(Config{Prepare: Set{Members: []ID{1, 2}, Threshold: 1}, Accept: Set{Members: []ID{1, 2}, Threshold: 1}}, []ID{1})
		}, ErrNoIntersection},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps, err := tt.plan()
			assert.ErrorIs(t, err, tt.wantErr)
			assert.Nil(t, steps)
		})
	}
}

func TestHistoryRefusesUnsafeMove(t *testing.T) {
	cur := MajorityConfig(1, 2, 3)
	h := newHistory(cur)
	_, _, err := h.advance(cur, MajorityConfig(4, 5, 6))
	require.ErrorIs(t, err, ErrUnsafeTransition)
	assert.ErrorIs(t, err, ErrNoIntersection)
	_, _, err = h.advance(cur, Config{Prepare: Majority(1, 2, 3), Accept: Set{Members: []ID{1}, Threshold: 2}})
	assert.ErrorIs(t, err, ErrUnsafeTransition)
	assert.ErrorIs(t, err, ErrThresholdRange)
}

func TestPlanDoesNotAliasInput(t *testing.T) {
	cur := Config{Prepare: Set{Members: []ID{1, 2, 3}, Threshold: 3}, Accept: Set{Members: []ID{1, 2, 3}, Threshold: 1}}
	steps, err := PlanGrow(cur, 4)
	require.NoError(t, err)
	cur.Prepare.Members[0] = 99
	cur.Accept.Members[0] = 99
	for _, st := range steps {
		assert.NotContains(t, st.Config.Acceptors(), ID(99))
	}
}

func TestPlanWhyExplainsRescan(t *testing.T) {
	steps, err := PlanGrow(MajorityConfig(1, 2, 3, 4), 5)
	require.NoError(t, err)
	assert.Equal(t, "add acceptor 5 to the accept set (3-of-{1,2,3,4,5}); prepare quorums are unchanged, so they still see every value while 5 starts receiving writes", steps[0].Why)
	assert.Equal(t, "add acceptor 5 to the prepare set (3-of-{1,2,3,4,5}); rescan under the previous config first: "+
		"prepare 3-of-{1,2,3,4,5} may miss a value accepted by only 2-of-{1,2,3,4}, which earlier prepare 3-of-{1,2,3,4} was guaranteed to see", steps[1].Why)
}

// TestDeriveMatchesCheckerOnRandomWalks drives the rescan derivation with
// arbitrary sequences of valid configs over four acceptors (not just
// single-acceptor steps): when derive refuses, no choice of rescans makes the
// sequence safe; when it accepts, the brute-force checker agrees and every
// rescan it asked for is needed.
func TestDeriveMatchesCheckerOnRandomWalks(t *testing.T) {
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
	rng := rand.New(rand.NewPCG(1, 2))
	accepted := 0
	for range 20000 {
		cur := cfgs[rng.IntN(len(cfgs))]
		var moves []move
		all := make([]bfStep, 0, 5)
		// Bias the walk towards nearby configs so that many walks are safe.
		prev := cur
		for range 1 + rng.IntN(5) {
			var next bfConfig
			for {
				next = cfgs[rng.IntN(len(cfgs))]
				if bits.OnesCount8(next.p.mask^prev.p.mask)+bits.OnesCount8(next.a.mask^prev.a.mask) <= 1 {
					break
				}
			}
			moves = append(moves, move{cfg: toConfig(next), why: "walk"})
			all = append(all, bfStep{cfg: next, rescan: true})
			prev = next
		}
		steps, err := derive(toConfig(cur), moves)
		if err != nil {
			require.ErrorIs(t, err, ErrUnsafeTransition)
			require.Error(t, bf.checkPlan(cur, all), "derive refused a walk that rescans make safe: %v", err)
			continue
		}
		accepted++
		assertPlanSafeRescans(t, bf, cur, steps)
	}
	assert.Greater(t, accepted, 2000, "walks should often be safe")
}

// assertPlanSafeRescans is assertPlanSafe without the shape checks.
func assertPlanSafeRescans(t *testing.T, bf *bruteForce, cur bfConfig, steps []Step) {
	t.Helper()
	bsteps := fromSteps(steps)
	require.NoError(t, bf.checkPlan(cur, bsteps), "\n%s", formatPlan(steps))
	for i := range bsteps {
		if bsteps[i].rescan {
			bsteps[i].rescan = false
			require.Error(t, bf.checkPlan(cur, bsteps), "step %d rescan not needed:\n%s", i, formatPlan(steps))
			bsteps[i].rescan = true
		}
	}
}
