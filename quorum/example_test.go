package quorum_test

import (
	"fmt"

	"github.com/fmnode/fmnode/quorum"
)

// Growing four acceptors to five: the accept set grows first; before the
// prepare set grows, every key must be rewritten (rescan), because a value
// committed before the plan may sit on only two of the four old acceptors.
func ExamplePlanGrow() {
	steps, err := quorum.PlanGrow(quorum.MajorityConfig(1, 2, 3, 4), 5)
	if err != nil {
		panic(err)
	}
	for _, s := range steps {
		fmt.Println(s.Config, "rescan before:", s.RescanBefore)
	}
	// Output:
	// prepare=3-of-{1,2,3,4} accept=3-of-{1,2,3,4,5} rescan before: false
	// prepare=3-of-{1,2,3,4,5} accept=3-of-{1,2,3,4,5} rescan before: true
}

func ExamplePlanChange() {
	// Replace acceptor 3 by 4.
	steps, err := quorum.PlanChange(quorum.MajorityConfig(1, 2, 3), []quorum.ID{1, 2, 4})
	if err != nil {
		panic(err)
	}
	for _, s := range steps {
		fmt.Println(s.Config, "rescan before:", s.RescanBefore)
	}
	// Output:
	// prepare=2-of-{1,2,3} accept=3-of-{1,2,3,4} rescan before: false
	// prepare=3-of-{1,2,3,4} accept=3-of-{1,2,3,4} rescan before: false
	// prepare=2-of-{1,2,4} accept=3-of-{1,2,3,4} rescan before: true
	// prepare=2-of-{1,2,4} accept=2-of-{1,2,4} rescan before: false
}

func ExampleSet_IsQuorum() {
	s := quorum.Majority(1, 2, 3)
	acked := map[quorum.ID]bool{1: true, 3: true}
	fmt.Println(s.IsQuorum(func(id quorum.ID) bool { return acked[id] }))
	// Output: true
}

func ExampleWriteQuorum_Steps() {
	w := quorum.WriteQuorum{
		Replicas:      []quorum.Region{"eu", "jp", "us"},
		WriteRegion:   "us",
		Members:       []quorum.Region{"eu", "jp", "us"},
		MinDurability: 2,
	}
	live := func(r quorum.Region) bool { return r != "jp" }
	caughtUp := func(quorum.Region) bool { return true }
	fmt.Println(w.Writable(live))
	for _, s := range w.Steps(live, caughtUp) {
		fmt.Println(s.Kind, s.Region)
		w, _ = w.Shrink(s.Region)
	}
	fmt.Println(w.Members, w.Writable(live))
	// Output:
	// quorum: write-quorum members [jp] are down; shrink them out before writes can commit: write-quorum member down
	// shrink jp
	// [eu us] <nil>
}
