package sim

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
)

// clusterEdgeScenario is the cluster scenario with a fault script aimed
// at one guard's edge (issue 13, "scripts aimed at the edges"): the same
// world, clients, operator and checks, plus cycles of one fault shaped so
// that the guard decides the outcome. A random swarm rarely stands at a
// guard's edge (the drift canary, a takeover without the drift margin,
// passed 50 swarm seeds); these scripts stand there on every cycle.
//
//   - drift: the clocks of the write region's nodes run slow and every
//     other node's fast, so that over one lease they disagree by exactly
//     MaxClockDrift, and then the write region is cut from the others (not
//     from its clients). Takeovers then land within the drift margin of
//     the deposed lease's end: safe only because of the margin.
//   - drift-beyond: the same at three times the bound. The checker must
//     report the deposed write region's lease still running after the
//     takeover: the run is expected unsafe, and passes only if a safety
//     violation is found.
//   - lease: the write region's node pauses (a stop-the-world pause) for
//     about its lease, so that commits and strong reads in flight straddle
//     the lease's expiry: acknowledgements after it are withheld (unknown
//     outcome) and strong reads refused.
//   - wq-lag: the follower region first in the partitions' priority is cut
//     from the write region only (it lags, and the write region shrinks it
//     out of the write quorum), then the write region is powered off and
//     the lagging region's cut heals: the failover must pick the other
//     member, never the live, lagging, better-ranked non-member.
//   - min-durability: minimum durability 2; one follower stalls (shrunk to
//     exactly two members), then the other follower stalls too: its shrink
//     is refused at the floor and strong writes wait rather than commit in
//     fewer regions.
//   - cut: the write region cut from its followers but not from its
//     clients, under strong writes: nothing it acknowledges may come after
//     its lease, and nothing commits without the write quorum.
type clusterEdgeScenario struct {
	edge edgeKind
	seed uint64
}

type edgeKind uint8

const (
	edgeDrift edgeKind = iota + 1
	edgeDriftBeyond
	edgeLease
	edgeWQLag
	edgeMinDurability
	edgeCut
)

// Edge scripts' timing (fast profile: lease 2 s, heartbeat 500 ms,
// MaxClockDrift 250 ms, GrayStall 3 s).
const (
	// edgeFirst is when the first cycle starts after the fault window
	// opens; edgeGap the quiet time between cycles.
	edgeFirst = 2 * time.Second
	edgeGap   = 4 * time.Second
	// edgeCutFor is how long a cut lasts: past the takeover (lease plus
	// margin, votes, the register write).
	edgeCutFor = 6 * time.Second
	// edgeBeyond is how far past the bound drift-beyond drives the clocks.
	edgeBeyond = 3.0
	// edgeStallFor bounds a follower's disk stall in wq-lag and
	// min-durability: past GrayStall, so its stall verdict shrinks it.
	edgeStallFor = 12 * time.Second
	// edgeOutageFor is how long wq-lag powers the write region off.
	edgeOutageFor = 8 * time.Second
)

func clusterEdgeScenarios() []Scenario {
	var out []Scenario
	for _, k := range []edgeKind{edgeDrift, edgeDriftBeyond, edgeLease, edgeWQLag, edgeMinDurability, edgeCut} {
		out = append(out, clusterEdgeScenario{edge: k})
	}
	return out
}

func (k edgeKind) String() string {
	switch k {
	case edgeDrift:
		return "drift"
	case edgeDriftBeyond:
		return "drift-beyond"
	case edgeLease:
		return "lease"
	case edgeWQLag:
		return "wq-lag"
	case edgeMinDurability:
		return "min-durability"
	case edgeCut:
		return "cut"
	}
	return fmt.Sprintf("edge(%d)", uint8(k))
}

func (s clusterEdgeScenario) Name() string { return "cluster-edge-" + s.edge.String() }

func (s clusterEdgeScenario) Description() string {
	switch s.edge {
	case edgeDrift:
		return "cluster, plus cycles of clock drift at MaxClockDrift (write region slow, the others fast) and a cut of the write region from the others: takeovers land within the drift margin and must stay safe"
	case edgeDriftBeyond:
		return "cluster-edge-drift at 3x MaxClockDrift: expected unsafe, passes only if the checker finds the violation"
	case edgeLease:
		return "cluster, plus pauses of a write region's node for about its lease: commits and strong reads straddle the lease's expiry"
	case edgeWQLag:
		return "cluster, plus a follower region's disk stall and then the write region powered off: the failover must pick a write-quorum member, never the lagging one"
	case edgeMinDurability:
		return "cluster at minimum durability 2, plus two followers' disks stalling one after the other: the second shrink is refused at the floor"
	case edgeCut:
		return "cluster, plus cuts of the write region from its followers (not from its clients) under strong writes: no acknowledgement after its lease, no commit without the write quorum"
	}
	return ""
}

func (s clusterEdgeScenario) Run(cfg Config) (Result, error) {
	s.seed = cfg.Seed
	res, _, err := runCluster(s, cfg)
	if err != nil {
		return res, err
	}
	if s.edge == edgeDriftBeyond {
		res.ExpectedUnsafe = true
		res.UnsafeFound = safetyFailure(res)
	}
	return res, nil
}

func (clusterEdgeScenario) profile() string { return "fast" }

func (s clusterEdgeScenario) shape(spec *foSpec) {
	clusterScenario{seed: s.seed}.shape(spec)
	switch s.edge {
	case edgeMinDurability:
		spec.minDurability = 2
	case edgeWQLag:
		// At minimum durability 2 the lone member left after the power-off
		// may not take over at all (below the floor): no failover to aim at.
		spec.minDurability = 1
	}
	if s.edge == edgeDrift || s.edge == edgeDriftBeyond {
		// The script owns the clocks: the nemesis's drift would move them
		// off the edge it aims at.
		prof := spec.profile
		spec.background = func(p FaultProfile) FaultProfile {
			p = clusterBackground(p, prof)
			p.Weights[FaultClockDrift] = 0
			return p
		}
	}
}

func (s clusterEdgeScenario) inject(r *foRun) {
	clusterScenario{seed: s.seed}.inject(r)
	es := &edgeState{s: s, r: r, fw: r.fw, cs: r.cluster, fig: &EdgeFigures{Script: s.edge.String()}, target: -1, outage: -1}
	r.cluster.fig.Edge = es.fig
	r.cluster.edge = es
	prev := r.fw.onLearn
	r.fw.onLearn = func(i int, old, st failover.State, at time.Duration) {
		prev(i, old, st, at)
		es.learn(i, old, st, at)
	}
	r.fw.onAck = es.ack
	r.fw.onReply = es.reply
	es.withheldFrom = es.acksWithheld()
	es.after(edgeFirst, esCycle)
}

func (clusterEdgeScenario) run(r *foRun, until time.Duration) { r.fw.e.run(until) }

func (clusterEdgeScenario) heal(r *foRun) {
	r.cluster.edge.stop()
	r.cluster.stop()
}

func (clusterEdgeScenario) settle(r *foRun) { r.cluster.cleanUp() }

func (clusterEdgeScenario) check(r *foRun) {
	r.cluster.check()
	r.cluster.edge.finish()
}

// EdgeFigures is what an edge script reports (JSON "cluster" -> "edge"):
// how often it stood at its guard's edge and what the guard did there.
type EdgeFigures struct {
	Script string `json:"script"`
	Cycles int    `json:"cycles"`
	// Drift is the clock rate offset the drift scripts set (write region
	// -Drift, the others +Drift); DisagreementPerLease what that makes two
	// clocks disagree by over one lease (MaxClockDrift at the bound).
	Drift                float64 `json:"drift,omitempty"`
	DisagreementPerLease float64 `json:"disagreement_per_lease_s,omitempty"`
	// Takeovers: failovers out of the region the script aimed at;
	// MarginTakeovers those that committed within MaxClockDrift after the
	// deposed write region's lease ended (without the margin they would
	// have come before its end); LeaseOverlaps those that committed while
	// it still held its lease (a violation); MinLeaseGap the smallest time
	// from a deposed lease's end to its takeover (negative: an overlap).
	Takeovers       int `json:"takeovers"`
	MarginTakeovers int `json:"margin_takeovers"`
	LeaseOverlaps   int `json:"lease_overlaps"`
	// NotServing: takeovers that committed inside the deposed node's lease
	// while its replica could not act on it (fenced, or the node's lease
	// run not yet validated at its epoch, as after a restart): no overlap,
	// and left out of MinLeaseGapS.
	NotServing   int     `json:"takeovers_not_serving"`
	MinLeaseGapS float64 `json:"min_lease_gap_s"`
	// The lease gate: acknowledgements withheld because the lease had
	// lapsed (partition.HostStats.AcksWithheld, over every node) and
	// client requests refused for a lapsed lease (partition.ErrLeaseExpired).
	AcksWithheld        uint64 `json:"acks_withheld"`
	LeaseRefusedReads   int    `json:"lease_refused_reads"`
	LeaseRefusedWrites  int    `json:"lease_refused_writes"`
	CutAcks             int    `json:"cut_acks"`
	CutWritesHandedDown uint64 `json:"cut_writes_to_store"`
	// The write-quorum filter: failovers while a replica region was live
	// but not a write-quorum member (it had to be passed over).
	FailoversPastNonMember int `json:"failovers_past_non_member"`
	// The minimum-durability floor: shrinks refused by it (the managers'
	// "cannot drop" suppressions), and partitions seen at exactly the
	// floor.
	ShrinksRefusedAtFloor int `json:"shrinks_refused_at_floor"`
	AtFloor               int `json:"partitions_at_floor"`
	Shrinks               int `json:"shrinks"`
}

func (f *EdgeFigures) table() string {
	return fmt.Sprintf("%-34s %s: %d cycles; drift %.4f (%.3f s per lease); %d takeovers (%d within the margin, %d overlaps, min gap %.3f s); %d acks withheld, %d reads and %d writes refused without lease; %d acks and %d store writes of the cut region; %d failovers past a non-member; %d shrinks, %d refused at the floor, %d at the floor\n",
		"edge", f.Script, f.Cycles, f.Drift, f.DisagreementPerLease, f.Takeovers, f.MarginTakeovers, f.LeaseOverlaps, f.MinLeaseGapS,
		f.AcksWithheld, f.LeaseRefusedReads, f.LeaseRefusedWrites, f.CutAcks, f.CutWritesHandedDown,
		f.FailoversPastNonMember, f.Shrinks, f.ShrinksRefusedAtFloor, f.AtFloor)
}

// edgeState runs an edge script's cycles on the world's scheduler.
type edgeState struct {
	s   clusterEdgeScenario
	r   *foRun
	fw  *foWorld
	cs  *clusterState
	fig *EdgeFigures

	stopped bool
	// target is the region index the current cycle aims at (-1: none);
	// cut the links it cut; cutOn while they are cut.
	target int
	cut    CutSet
	cutOn  bool
	// outage is the cluster layer's outage index of a power-off (-1: none).
	outage int
	paused []int32
	// stalled: the follower regions whose disks stall in this cycle.
	stalled []int
	// withheldFrom: the lease gate's withheld acknowledgements when the
	// script began (counted from there, crashed incarnations' included).
	withheldFrom uint64
	// cutWrites0 is the cut region's store writes when the cut began.
	cutWrites0 map[*partition.Host]uint64
	gapSet     bool
	cutTries   int
	lagCut     CutSet
	refusedSet map[string]bool
}

// Edge script events (scheduler args).
const (
	esCycle uint64 = iota + 1
	esCut
	esHeal
	esUndrift
	esDriftOff
	esResume
	esSecondStall
	esPowerOff
	esPowerOn
	esScan
)

func (es *edgeState) after(d time.Duration, ev uint64) {
	es.fw.e.w.Sched.After(d, NoNode, es, ev)
}

// Fire runs the script's steps.
func (es *edgeState) Fire(now time.Duration, ev uint64) {
	switch ev {
	case esHeal:
		es.healCut()
		return
	case esUndrift:
		// As long the other way: the clocks slew back to agreement.
		es.setDrift(-1)
		es.after(es.driftPhase()+edgeCutFor, esDriftOff)
		return
	case esDriftOff:
		es.setDrift(0)
		return
	case esResume:
		es.resume()
		return
	case esPowerOn:
		es.powerOn()
		return
	case esScan:
		es.scan()
		return
	}
	if es.stopped {
		return
	}
	switch ev {
	case esCycle:
		es.cycle()
	case esCut:
		if !es.leaseFresh() && es.cutTries < edgeCutTries {
			es.cutTries++
			es.after(edgeCutPoll, esCut)
			return
		}
		es.cutTries = 0
		es.startCut()
		es.after(edgeCutFor, esHeal)
	case esSecondStall:
		es.secondStall()
	case esPowerOff:
		es.powerOff()
	}
}

// cycle starts one cycle of the script and schedules the next.
func (es *edgeState) cycle() {
	fw := es.fw
	es.fig.Cycles++
	var length time.Duration
	switch es.s.edge {
	case edgeDrift, edgeDriftBeyond:
		// East: its two peers are 20 ms apart, so votes and the register
		// write of a takeover take less than the margin; a takeover
		// without the margin then lands inside the deposed lease.
		es.target = len(fw.regions) - 1
		es.setDrift(+1)
		// A whole lease under the drifted clocks before the cut.
		es.after(es.profile().LeaseDuration+es.profile().HeartbeatInterval, esCut)
		length = es.driftPhase() + edgeCutFor + es.driftPhase()
	case edgeCut:
		es.target = es.busiestRegion()
		es.startCut()
		es.after(edgeCutFor, esHeal)
		length = edgeCutFor
	case edgeLease:
		length = es.pause()
	case edgeWQLag:
		es.target = es.busiestRegion()
		es.lagFrom(es.firstCandidate())
		// Past GrayStall: the lagging follower's stall verdict shrinks it
		// out of the write quorum.
		es.after(es.profile().GrayStall+2*time.Second, esPowerOff)
		length = es.profile().GrayStall + 2*time.Second + edgeOutageFor
	case edgeMinDurability:
		es.target = es.busiestRegion()
		es.stall(es.follower(1), edgeStallFor)
		es.after(es.profile().GrayStall+2*time.Second, esSecondStall)
		length = edgeStallFor
	}
	es.after(length+edgeGap, esCycle)
}

func (es *edgeState) profile() failover.Config { return es.fw.spec.profile }

// driftPhase is how long the drifted clocks run before the cut.
func (es *edgeState) driftPhase() time.Duration {
	return es.profile().LeaseDuration + es.profile().HeartbeatInterval
}

// edgeDriftAt is the rate offset d at which a clock running at 1-d and
// one at 1+d disagree by exactly MaxClockDrift over one lease:
// L((1+d)/(1-d) - 1) = M, so d = M/(2L+M).
func edgeDriftAt(c failover.Config) float64 {
	l, m := c.LeaseDuration.Seconds(), c.MaxClockDrift.Seconds()
	return m / (2*l + m)
}

// setDrift sets the target region slow and the others fast (sign +1),
// the other way round (-1: the clocks slew back to agreement), or every
// clock true (0).
func (es *edgeState) setDrift(sign float64) {
	fw, w := es.fw, es.fw.e.w
	d := edgeDriftAt(es.profile())
	if es.s.edge == edgeDriftBeyond {
		d *= edgeBeyond
	}
	es.fig.Drift = d
	es.fig.DisagreementPerLease = es.profile().LeaseDuration.Seconds() * ((1+d)/(1-d) - 1)
	// The world clamps drift to its bound; the script's edge is the bound.
	w.DriftBound = max(w.DriftBound, d)
	for x := range fw.nodes {
		v := sign * d
		if w.Nodes[x].Region == es.target {
			v = -v
		}
		w.SetDrift(int32(x), v)
		if sign != 0 {
			w.Faults[FaultClockDrift]++
		}
	}
	fw.ct.fault(w.Now(), "edge: drift %+.4f on %s, %+.4f elsewhere", -sign*d, fw.regions[es.target], sign*d)
}

// Timing a drift cut: poll every edgeCutPoll, at most edgeCutTries
// times, for the moment the busiest write node's lease was just renewed
// by the round it sent last: between edgeLeaseAgeMin and edgeLeaseAgeMax
// after that round (east's round trip to west is 70 ms, so west's acks
// are back; its one-way trip to central 75 ms, so central heard it).
const (
	edgeCutPoll     = 5 * time.Millisecond
	edgeCutTries    = 200
	edgeLeaseAgeMin = 85 * time.Millisecond
	edgeLeaseAgeMax = 120 * time.Millisecond
)

// leaseFresh: the target's busiest write node's lease stands on the round
// it sent last, a moment ago. A cut then leaves the observers' last word
// from it close to the round its lease stands on, so the takeover comes
// as soon after the lease's end as the margin allows (later, the node's
// acks of the observers' own rounds would have told them it lived on).
func (es *edgeState) leaseFresh() bool {
	fw, w := es.fw, es.fw.e.w
	x := int32(fw.busiestWriteNode(es.target))
	n := fw.nodes[x]
	if n.mgr == nil || !w.Live(x) {
		return true
	}
	age := w.Local(x) - (n.mgr.Liveness().LeaseUntil() - es.profile().LeaseDuration)
	return age >= edgeLeaseAgeMin && age <= edgeLeaseAgeMax
}

// busiestRegion is the region index that is write region of the most
// partitions now.
func (es *edgeState) busiestRegion() int {
	fw := es.fw
	n := make([]int, len(fw.regions))
	for i := range fw.parts {
		n[fw.regionIndex(fw.reg[i].state.WriteRegion)]++
	}
	best := 0
	for r := range n {
		if n[r] > n[best] {
			best = r
		}
	}
	return best
}

// firstCandidate is the region that the target's partitions rank first
// after their write region most often (their priority): stalled, shrunk
// out and passed over, it is the candidate the write-quorum filter has
// to refuse.
func (es *edgeState) firstCandidate() int {
	fw := es.fw
	n := make([]int, len(fw.regions))
	for i := range fw.parts {
		s := fw.reg[i].state
		if fw.regionIndex(s.WriteRegion) != es.target {
			continue
		}
		for _, r := range s.Priority {
			if r != s.WriteRegion {
				n[fw.regionIndex(r)]++
				break
			}
		}
	}
	best := es.follower(1)
	for r := range n {
		if n[r] > n[best] {
			best = r
		}
	}
	return best
}

// follower is the k-th region after the target.
func (es *edgeState) follower(k int) int { return (es.target + k) % len(es.fw.regions) }

func (es *edgeState) regionNodes(ri int) []int32 {
	var out []int32
	for x := range es.fw.nodes {
		if es.fw.e.w.Nodes[x].Region == ri {
			out = append(out, int32(x))
		}
	}
	return out
}

// startCut cuts the target region's nodes from every other node; clients
// stand on their nodes' links, so the target's own clients still reach it.
func (es *edgeState) startCut() {
	fw := es.fw
	if es.cutOn {
		return
	}
	all := make([]int32, len(fw.nodes))
	for i := range all {
		all[i] = int32(i)
	}
	es.cut = isolateRegion(len(fw.nodes), all, func(x int32) bool { return fw.e.w.Nodes[x].Region == es.target })
	fw.e.w.Links.Apply(es.cut, +1)
	fw.e.w.Faults[FaultPartitionRegion]++
	es.cutOn = true
	es.cutWrites0, _ = es.regionWrites(es.target, nil)
	fw.ct.fault(fw.now(), "edge: %s cut from the other regions (not from its clients)", fw.regions[es.target])
}

func (es *edgeState) healCut() {
	fw := es.fw
	if !es.cutOn {
		return
	}
	fw.e.w.Links.Apply(es.cut, -1)
	es.cutOn = false
	_, n := es.regionWrites(es.target, es.cutWrites0)
	es.fig.CutWritesHandedDown += n
	fw.ct.fault(fw.now(), "edge: %s's cut healed", fw.regions[es.target])
	if es.s.edge == edgeDrift || es.s.edge == edgeDriftBeyond {
		es.after(0, esUndrift)
	}
}

// regionWrites returns region ri's hosts' store writes (by host), and
// adds up how many each made since since (a host that restarted counts
// from zero).
func (es *edgeState) regionWrites(ri int, since map[*partition.Host]uint64) (map[*partition.Host]uint64, uint64) {
	now := map[*partition.Host]uint64{}
	var n uint64
	for _, x := range es.regionNodes(ri) {
		if h := es.fw.nodes[x].host; h != nil {
			w := h.Stats().Writes
			now[h] = w
			n += w - min(w, since[h])
		}
	}
	return now, n
}

// pause stops the busiest write node for about its lease: from a
// heartbeat short of the lease to past the takeover delay.
func (es *edgeState) pause() time.Duration {
	fw, w := es.fw, es.fw.e.w
	es.target = es.busiestRegion()
	x := int32(fw.busiestWriteNode(es.target))
	if !w.Live(x) {
		return 0
	}
	p := es.profile()
	lo, hi := p.LeaseDuration-p.HeartbeatInterval, p.TakeoverDelay()+p.HeartbeatInterval
	d := time.Duration(uniform(es.cs.rng, int64(lo), int64(hi)+1))
	w.Pause(x)
	w.Faults[FaultPause]++
	es.paused = append(es.paused, x)
	fw.ct.fault(w.Now(), "edge: node %d paused for %v (lease %v)", x, d, p.LeaseDuration)
	es.after(d, esResume)
	return d
}

func (es *edgeState) resume() {
	for _, x := range es.paused {
		es.fw.e.w.Resume(x)
	}
	es.paused = nil
}

// stall makes region ri's disks complete nothing for d.
func (es *edgeState) stall(ri int, d time.Duration) {
	fw := es.fw
	for _, x := range es.regionNodes(ri) {
		n := fw.nodes[x]
		n.diskFree = max(n.diskFree, fw.now()+d)
	}
	es.stalled = append(es.stalled, ri)
	es.cs.fig.DiskStalls++
	fw.ct.fault(fw.now(), "edge: %s's disks stalled for %v", fw.regions[ri], d)
	es.after(d, esScan)
}

// secondStall stalls the other follower once the first is shrunk out:
// the write quorum stands at the floor, so its shrink must be refused.
func (es *edgeState) secondStall() {
	es.scan()
	es.stall(es.follower(2), edgeStallFor-es.profile().GrayStall-2*time.Second)
	es.after(es.profile().GrayStall+time.Second, esScan)
}

// lagFrom cuts region ri from the target (both ways, nothing else): it
// stays live and heard by the third region, but receives none of the
// target's appends, so it lags.
func (es *edgeState) lagFrom(ri int) {
	fw := es.fw
	es.lagCut = cutBetween(len(fw.nodes), es.regionNodes(es.target), es.regionNodes(ri), true)
	fw.e.w.Links.Apply(es.lagCut, +1)
	fw.e.w.Faults[FaultPartitionBridge]++
	fw.ct.fault(fw.now(), "edge: %s cut from %s only (it lags)", fw.regions[ri], fw.regions[es.target])
}

func (es *edgeState) healLag() {
	if es.lagCut != nil {
		es.fw.e.w.Links.Apply(es.lagCut, -1)
		es.lagCut = nil
	}
}

// powerOff powers the target off; a lagging region's cut heals with it,
// so that region is a live candidate the failover must pass over.
func (es *edgeState) powerOff() {
	es.healLag()
	es.outage = es.cs.outage("edge write region", es.regionNodes(es.target))
	es.after(edgeOutageFor, esPowerOn)
}

func (es *edgeState) powerOn() {
	if es.outage >= 0 {
		es.cs.endOutage(es.outage)
	}
	es.outage = -1
}

// scan reads the managers' event logs for the minimum-durability guard's
// refusals (the decision's suppression text) and counts the partitions
// whose write quorum stands at its floor.
func (es *edgeState) scan() {
	fw := es.fw
	if es.refusedSet == nil {
		es.refusedSet = map[string]bool{}
	}
	for _, n := range fw.nodes {
		if n.mgr == nil {
			continue
		}
		for _, ev := range n.mgr.Events() {
			if !strings.Contains(ev.Text, "cannot drop") || !strings.Contains(ev.Text, "MinDurability") {
				continue
			}
			k := fmt.Sprintf("%d/%s/%d", n.idx, ev.Partition, ev.At)
			if !es.refusedSet[k] {
				es.refusedSet[k] = true
				es.fig.ShrinksRefusedAtFloor++
			}
		}
	}
	for i := range fw.parts {
		wq := fw.reg[i].state.WriteQuorum
		if len(wq.Members) == wq.MinDurability && wq.MinDurability > 1 {
			es.fig.AtFloor++
		}
	}
}

// stop ends the script's faults (the cluster layer heals its own).
func (es *edgeState) stop() {
	es.stopped = true
	es.healCut()
	es.healLag()
	es.resume()
	es.powerOn()
	es.scan()
	if es.s.edge == edgeDrift || es.s.edge == edgeDriftBeyond {
		es.setDrift(0)
	}
}

// learn measures every takeover out of the region the script aims at:
// how close to the deposed lease's end it came, and whether the deposed
// replica still served on its lease when it committed (a lease overlap:
// two write regions serving strong reads at once; the lease-overlap
// check, run on every move of a write region, reports it).
func (es *edgeState) learn(i int, old, s failover.State, at time.Duration) {
	fw, w := es.fw, es.fw.e.w
	for _, t := range newTransitions(old.History, s.History) {
		if t.Kind == failover.DecideShrinkQuorum {
			es.fig.Shrinks++
		}
		if t.Kind != failover.DecideFailover || old.WriteRegion == s.WriteRegion {
			continue
		}
		es.pastNonMember(i, old)
		if es.target < 0 || old.WriteRegion != fw.regions[es.target] {
			continue
		}
		x, ok := fw.nodeFor(i, old.WriteRegion)
		if !ok || !w.Up(x) {
			continue
		}
		es.fig.Takeovers++
		end := w.VirtualAt(x, fw.nodes[x].lease)
		gap := at - end
		serves := fw.servesOnLease(fw.nodes[x], i)
		fw.e.cfg.Logger.Debug("edge takeover", "part", fw.parts[i].name, "at", at, "lease_end", end, "gap", gap, "serves", serves, "proposer", t.Proposer, "to", t.To, "reason", t.Reason)
		if gap < 0 && !serves {
			// Its node's lease holds, but the replica may not act on it
			// (fenced, or its lease run not validated): no overlap.
			es.fig.NotServing++
			continue
		}
		if !es.gapSet || gap.Seconds() < es.fig.MinLeaseGapS {
			es.fig.MinLeaseGapS, es.gapSet = gap.Seconds(), true
		}
		switch {
		case serves:
			// The lease-overlap check (every move of a write region,
			// lease_overlap.go) reports it; the same answer counted here.
			es.fig.LeaseOverlaps++
		case gap < es.profile().MaxClockDrift:
			es.fig.MarginTakeovers++
		}
	}
}

// pastNonMember counts a failover that had a live replica outside the
// write quorum to pass over (the candidate filter's case).
func (es *edgeState) pastNonMember(i int, old failover.State) {
	fw := es.fw
	for _, r := range old.WriteQuorum.Replicas {
		if r == old.WriteRegion || old.WriteQuorum.IsMember(r) {
			continue
		}
		if x, ok := fw.nodeFor(i, r); ok && fw.e.w.Live(x) {
			es.fig.FailoversPastNonMember++
			return
		}
	}
}

// ack checks each acknowledgement of a write the cut region wrote, while
// it is cut: it must have left before that region's lease ended, plus the
// drift bound (the acknowledgement is dated the longest one-way trip
// before it arrived).
func (es *edgeState) ack(i int, tok partition.Token, at time.Duration) {
	fw, w := es.fw, es.fw.e.w
	if !es.cutOn || !fw.writtenBy(i, failover.Epoch(tok.Epoch), es.target) {
		return
	}
	x, ok := fw.nodeFor(i, fw.regions[es.target])
	if !ok {
		return
	}
	es.fig.CutAcks++
	left := at - es.maxOneWay()
	if end := w.VirtualAt(x, fw.nodes[x].lease); left > end+es.profile().MaxClockDrift {
		es.r.violation(ViolationInvariant, "partition %s: write %d:%d acknowledged by cut-off %s after %v, its lease ended at %v",
			fw.parts[i].name, tok.Epoch, tok.LSN, fw.regions[es.target], left, end)
	}
}

func (es *edgeState) maxOneWay() time.Duration {
	var d time.Duration
	for _, row := range es.fw.e.w.Topo.RTT {
		for _, rtt := range row {
			d = max(d, rtt/2+rtt/20+1)
		}
	}
	return d
}

// reply counts the data plane's refusals for a lapsed lease.
func (es *edgeState) reply(write bool, err error) {
	if !errors.Is(err, partition.ErrLeaseExpired) {
		return
	}
	if write {
		es.fig.LeaseRefusedWrites++
	} else {
		es.fig.LeaseRefusedReads++
	}
}

// acksWithheld sums partition.HostStats.AcksWithheld over the running
// incarnations and the ones that crashed (kept by foNode.Crash).
func (es *edgeState) acksWithheld() uint64 {
	t := es.cs.acksWithheldPast
	for _, n := range es.fw.nodes {
		if n.host != nil {
			t += n.host.Stats().AcksWithheld
		}
	}
	return t
}

// finish fills the figures the counters give at the end.
func (es *edgeState) finish() {
	es.fig.AcksWithheld = es.acksWithheld() - es.withheldFrom
}

// safetyFailure: the run broke a safety check (an invariant, convergence,
// or porcupine). A liveness failure does not count: seeds can fail
// liveness without any canary, so only a safety violation shows that a
// canary or an expected-unsafe edge was caught.
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
