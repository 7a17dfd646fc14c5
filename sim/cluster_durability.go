package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fmnode/fmnode/failover"
)

// The cluster operator's changes of minimum durability (issue 13's
// "a change of minimum durability"), through the path a real operator's
// takes: `fmnode config set min_durability N` commits the cluster spec,
// and every agent then calls node.ApplyMinDurability after each read of
// it, so each partition's write region's node proposes the change to the
// register, under the core's guard (failover.RequestMinDurability: never
// above the write quorum's members, which hold every acknowledged write).
// The operator here asks every live node again each poll, as the agents'
// spec loops do, until every register holds the value; a newer change
// overtakes one in progress. The checks: every register value keeps at
// least MinDurability write-quorum members (learn), each write region's
// commit rule ends at the register's minimum (check), and the standard
// checks that no acknowledged strong write is lost, across every change.

// clusterMinDurPoll is how often the operator's agents apply the spec.
const clusterMinDurPoll = 500 * time.Millisecond

// clusterMinDur is the operator's minimum-durability state, drawn from a
// stream of its own (the other faults' draws stay as they were).
type clusterMinDur struct {
	rng *rand.Rand
	// want is the value the spec asks for, k the action of that change
	// (-1: none yet).
	want, k int
	polling bool
}

func (cs *clusterState) startMinDur(seed uint64) {
	cs.md = &clusterMinDur{rng: SubRand(seed, StreamScenario, 0xc3), want: cs.fw.spec.minDurability, k: -1}
	if cs.mix.OpEvery > 0 {
		cs.after(cs.minDurGap(), ceMinDur, 0)
	}
}

// minDurGap: changes are rarer than the other operator actions.
func (cs *clusterState) minDurGap() time.Duration {
	return time.Duration(cs.md.rng.ExpFloat64() * float64(6*cs.mix.OpEvery))
}

// changeMinDur asks for a new minimum durability, any other value in
// 1..regions.
func (cs *clusterState) changeMinDur() {
	fw, md := cs.fw, cs.md
	want := 1 + md.rng.IntN(len(fw.regions)-1)
	if want >= md.want {
		want++
	}
	if md.k >= 0 && !cs.actions[md.k].ended {
		a := &cs.actions[md.k]
		a.state, a.ended = fmt.Sprintf("overtaken: minimum durability %d asked", want), true
	}
	md.want = want
	md.k = cs.act(clusterAction{kind: caMinDurability, part: -1, min: want, at: fw.now(), state: "requested"})
	cs.fig.MinDurabilityChanges++
	fw.ct.fault(fw.now(), "operator: minimum durability %d (action %d)", want, md.k)
	cs.applyMinDur()
}

// applyMinDur is one pass of every live agent's spec loop; it polls
// again until the change is done.
func (cs *clusterState) applyMinDur() {
	fw, md := cs.fw, cs.md
	if md.k < 0 || cs.actions[md.k].ended {
		md.polling = false
		return
	}
	for _, n := range fw.nodes {
		if n.node == nil || !fw.e.w.Live(n.idx) {
			continue
		}
		_, _, refused, _ := n.node.ApplyMinDurability(n.local(), md.want, fmt.Sprintf("cluster action %d", md.k))
		cs.fig.MinDurabilityRefused += refused
		n.pump()
	}
	if cs.minDurDone() {
		cs.actions[md.k].state, cs.actions[md.k].ended = fmt.Sprintf("done: every register at minimum durability %d", md.want), true
		cs.fig.MinDurabilityDone++
		md.polling = false
		return
	}
	md.polling = true
	cs.after(clusterMinDurPoll, ceMinDurPoll, 0)
}

func (cs *clusterState) minDurDone() bool {
	for i := range cs.fw.parts {
		if cs.fw.reg[i].state.WriteQuorum.MinDurability != cs.md.want {
			return false
		}
	}
	return true
}

// checkMinDurValue: no register value claims more durability than its
// write quorum's members give (the guard on a raise, the floor on a
// shrink or a takeover).
func (cs *clusterState) checkMinDurValue(i int, s failover.State) {
	if wq := s.WriteQuorum; len(wq.Members) < wq.MinDurability {
		cs.r.violation(ViolationInvariant, "partition %s: register value at epoch %d has %d write-quorum members %v, below its minimum durability %d",
			cs.fw.parts[i].name, s.Epoch, len(wq.Members), wq.Members, wq.MinDurability)
	}
}

// checkMinDurRules: after the heal, each write region's commit rule is at
// its register's minimum durability.
func (cs *clusterState) checkMinDurRules() {
	fw := cs.fw
	for i := range fw.parts {
		want := fw.reg[i].state.WriteQuorum.MinDurability
		n := fw.partNode(i, fw.reg[i].state.WriteRegion)
		if n == nil || n.host == nil {
			continue
		}
		pr, err := n.host.Progress(fw.parts[i].id)
		if err != nil {
			continue
		}
		if pr.Quorum.MinDurability != want {
			cs.r.violation(ViolationLiveness, "partition %s: the write region %s commits at minimum durability %d, the register says %d",
				fw.parts[i].name, fw.reg[i].state.WriteRegion, pr.Quorum.MinDurability, want)
		}
	}
}
