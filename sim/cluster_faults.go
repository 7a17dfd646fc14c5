package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/quorum"
)

// clusterState is the cluster scenario's own fault layer and operator,
// driven by the world's scheduler (Fire), all choices from one seeded
// stream.
type clusterState struct {
	r   *foRun
	fw  *foWorld
	rng *rand.Rand
	mix clusterMix
	fig *ClusterFigures
	// down counts the outages holding each node down: a node restarts
	// when the last one ends.
	down    []int
	outages []clusterOutage
	actions []clusterAction
	// pausedBy: partitions an operator paused (index into actions), until
	// resumed.
	pausedBy map[int]int
	drain    *clusterDrain
	md       *clusterMinDur
	stopped  bool
	// guards the checks count.
	staleChecked, falseChecked int
	// staleRejectedPast: the fenced stale messages of incarnations that
	// crashed (their hosts' counters went with them).
	staleRejectedPast        uint64
	sessionReads, eventReads int
	// acksWithheldPast: the lease gate's withheld acknowledgements of
	// incarnations that crashed (partition.HostStats.AcksWithheld).
	acksWithheldPast uint64
	// edge is the edge script running on top (nil: plain cluster).
	edge *edgeState
}

type clusterOutage struct {
	kind  string
	nodes []int32
	ended bool
}

// Operator action kinds.
const (
	caSwitchover = iota + 1
	caPause
	caResume
	caMinDurability
)

// clusterAction is one operator request on a partition and how it ended.
type clusterAction struct {
	kind   int
	part   int
	target quorum.Region
	// min is a minimum-durability change's value (part is -1: every
	// partition).
	min int
	at  time.Duration
	// state: "requested" until the register shows it began, then
	// "started"; it ends "done", "aborted: reason", "refused: reason" or
	// "overtaken: reason" (a failover moved the partition first).
	state string
	ended bool
	// node is the node that accepted the request (-1: none).
	node int32
}

type clusterDrain struct {
	region  quorum.Region
	drivers []*foNode
	at      time.Duration
	done    bool
}

// Scheduler args of the cluster layer: the kind in the low byte, an index
// above it.
const (
	ceOutage uint64 = iota + 1
	ceOutageEnd
	ceStall
	ceOp
	ceResume
	ceDriverCrash
	ceDriverRestart
	ceMinDur
	ceMinDurPoll
)

func newClusterState(r *foRun, seed uint64) *clusterState {
	fw := r.fw
	cs := &clusterState{r: r, fw: fw, rng: SubRand(seed, StreamScenario, 0xc2), down: make([]int, len(fw.nodes)), pausedBy: map[int]int{}}
	cs.mix = drawClusterMix(fw.e.cfg.Faults, cs.rng)
	cs.fig = &ClusterFigures{NodesPerRegion: fw.spec.nodesPerRegion, MinDurability: fw.spec.minDurability, Mix: cs.mix.String()}
	r.fig.Cluster = cs.fig
	cs.startMinDur(seed)
	return cs
}

func (cs *clusterState) after(d time.Duration, kind uint64, idx int) {
	cs.fw.e.w.Sched.After(d, NoNode, cs, uint64(idx)<<8|kind)
}

func (cs *clusterState) gap(mean time.Duration) time.Duration {
	return time.Duration(cs.rng.ExpFloat64() * float64(mean))
}

func (cs *clusterState) start() {
	if cs.mix.OutageEvery > 0 {
		cs.after(cs.gap(cs.mix.OutageEvery), ceOutage, 0)
	}
	if cs.mix.StallEvery > 0 {
		cs.after(cs.gap(cs.mix.StallEvery), ceStall, 0)
	}
	if cs.mix.OpEvery > 0 {
		cs.after(cs.gap(cs.mix.OpEvery), ceOp, 0)
	}
}

// Fire runs the cluster layer's events.
func (cs *clusterState) Fire(now time.Duration, arg uint64) {
	idx := int(arg >> 8)
	switch arg & 0xff {
	case ceOutageEnd:
		cs.endOutage(idx)
		return
	case ceResume:
		cs.resume(idx, 0)
		return
	case ceMinDurPoll:
		cs.applyMinDur()
		return
	case ceDriverRestart:
		cs.endOutage(idx)
		if d := cs.drain; d != nil && !cs.stopped {
			for _, n := range d.drivers {
				cs.askDrain(n)
			}
			cs.fw.ct.fault(now, "drain of %s asked again after its driver restarted", d.region)
		}
		return
	}
	if cs.stopped {
		return
	}
	switch arg & 0xff {
	case ceOutage:
		cs.startOutage()
		cs.after(cs.gap(cs.mix.OutageEvery), ceOutage, 0)
	case ceStall:
		cs.stall()
		cs.after(cs.gap(cs.mix.StallEvery), ceStall, 0)
	case ceOp:
		cs.operate()
		cs.after(cs.gap(cs.mix.OpEvery), ceOp, 0)
	case ceMinDur:
		cs.changeMinDur()
		cs.after(cs.minDurGap(), ceMinDur, 0)
	case ceDriverCrash:
		if d := cs.drain; d != nil && len(d.drivers) > 0 {
			n := d.drivers[cs.rng.IntN(len(d.drivers))]
			k := cs.outage("drain driver", []int32{n.idx})
			cs.fig.DrainDriverRestarts++
			cs.after(time.Duration(uniform(cs.rng, int64(200*time.Millisecond), int64(3*time.Second))), ceDriverRestart, k)
		}
	}
}

// outage takes nodes down (counted) and returns the outage's index.
func (cs *clusterState) outage(kind string, nodes []int32) int {
	w := cs.fw.e.w
	for _, x := range nodes {
		cs.down[x]++
		if cs.down[x] == 1 {
			w.Crash(x)
			w.Faults[FaultCrash]++
			cs.nodeLost(x)
		}
	}
	cs.outages = append(cs.outages, clusterOutage{kind: kind, nodes: nodes})
	cs.fw.ct.fault(w.Now(), "%s outage %d: nodes %v down", kind, len(cs.outages)-1, nodes)
	return len(cs.outages) - 1
}

func (cs *clusterState) endOutage(k int) {
	o := &cs.outages[k]
	if o.ended {
		return
	}
	o.ended = true
	w := cs.fw.e.w
	for _, x := range o.nodes {
		cs.down[x]--
		if cs.down[x] == 0 {
			w.Restart(x)
		}
	}
	cs.fw.ct.fault(w.Now(), "%s outage %d over: nodes %v", o.kind, k, o.nodes)
}

func (cs *clusterState) startOutage() {
	fw, m := cs.fw, cs.mix
	x := cs.rng.Float64() * (m.RegionW + m.ZoneW + m.NodeW)
	var nodes []int32
	var kind string
	var length time.Duration
	switch {
	case x < m.RegionW:
		reg := cs.rng.IntN(len(fw.regions))
		for i := range fw.nodes {
			if fw.e.w.Nodes[i].Region == reg {
				nodes = append(nodes, int32(i))
			}
		}
		kind, length = "region "+string(fw.regions[reg]), time.Duration(uniform(cs.rng, int64(time.Second), int64(m.RegionMax)+1))
		cs.fig.RegionOutages++
	case x < m.RegionW+m.ZoneW:
		n := int32(cs.rng.IntN(len(fw.nodes)))
		nodes, kind = []int32{n}, fmt.Sprintf("zone %s-%d", fw.nodes[n].region, int(n)/len(fw.regions))
		length = time.Duration(uniform(cs.rng, int64(time.Second), int64(m.ZoneMax)+1))
		cs.fig.ZoneOutages++
	default:
		// A process crash: back after a restart's delay, with what it
		// had fsynced.
		n := int32(cs.rng.IntN(len(fw.nodes)))
		nodes, kind = []int32{n}, fmt.Sprintf("node %d crash", n)
		length = time.Duration(uniform(cs.rng, int64(50*time.Millisecond), int64(m.NodeMax)+1))
		cs.fig.NodeCrashes++
	}
	k := cs.outage(kind, nodes)
	cs.after(length, ceOutageEnd, k)
}

// stall makes a node's disk complete nothing for a while (its heartbeats,
// lease and acceptor messages that need no fsync go on): a gray failure.
func (cs *clusterState) stall() {
	fw := cs.fw
	n := fw.nodes[cs.rng.IntN(len(fw.nodes))]
	if n.node == nil {
		return
	}
	d := time.Duration(uniform(cs.rng, int64(500*time.Millisecond), int64(cs.mix.StallMax)+1))
	n.diskFree = max(n.diskFree, fw.now()+d)
	cs.fig.DiskStalls++
	fw.ct.fault(fw.now(), "node %d disk stalled for %v", n.idx, d)
}

// operate issues one operator action at random.
func (cs *clusterState) operate() {
	m := cs.mix
	x := cs.rng.Float64() * (m.SwitchW + m.PauseW + m.DrainW)
	switch {
	case x < m.SwitchW:
		cs.switchover()
	case x < m.SwitchW+m.PauseW:
		cs.pause()
	default:
		cs.startDrain()
	}
}

func (cs *clusterState) act(a clusterAction) int {
	if a.node == 0 && a.kind != caResume {
		a.node = -1
	}
	cs.actions = append(cs.actions, a)
	return len(cs.actions) - 1
}

func (cs *clusterState) refused(k int, err error) {
	a := &cs.actions[k]
	a.state, a.ended = "refused: "+err.Error(), true
	cs.fig.ActionsRefused++
	if a.kind == caSwitchover {
		cs.fig.SwitchoversRefused++
	}
}

// switchover asks the write region's node of a random partition to move
// it to another region (the admin API forwards it there).
func (cs *clusterState) switchover() {
	fw := cs.fw
	i := cs.rng.IntN(len(fw.parts))
	st := fw.reg[i].state
	others := make([]quorum.Region, 0, len(fw.regions))
	for _, r := range fw.regions {
		if r != st.WriteRegion {
			others = append(others, r)
		}
	}
	target := others[cs.rng.IntN(len(others))]
	k := cs.act(clusterAction{kind: caSwitchover, part: i, target: target, at: fw.now(), state: "requested"})
	cs.fig.Switchovers++
	fw.ct.fault(fw.now(), "operator: switchover of %s to %s (action %d)", fw.parts[i].name, target, k)
	n := fw.partNode(i, st.WriteRegion)
	if n == nil || n.node == nil || !fw.e.w.Live(n.idx) {
		cs.refused(k, fmt.Errorf("the write region's node is down"))
		return
	}
	cs.actions[k].node = n.idx
	if err := n.node.Switchover(n.local(), fw.parts[i].id, target, fmt.Sprintf("cluster action %d", k)); err != nil {
		cs.refused(k, err)
	}
	n.pump()
}

// pause pauses a random partition's automatic failover and schedules its
// resume. The node answers as the admin API does: refused at once, or
// later with how the request's register write ended (node.RequestDone).
func (cs *clusterState) pause() {
	fw := cs.fw
	i := cs.rng.IntN(len(fw.parts))
	if _, ok := cs.pausedBy[i]; ok {
		return
	}
	k := cs.act(clusterAction{kind: caPause, part: i, at: fw.now(), state: "requested"})
	cs.fig.Pauses++
	fw.ct.fault(fw.now(), "operator: pause %s (action %d)", fw.parts[i].name, k)
	n := fw.liveHost(i)
	if n == nil {
		cs.refused(k, fmt.Errorf("no live node hosts it"))
		return
	}
	cs.actions[k].node = n.idx
	if err := n.node.SetPaused(n.local(), fw.parts[i].id, true, fmt.Sprintf("cluster action %d", k), func(o node.RequestOutcome) { cs.requestDone(k, o) }); err != nil {
		cs.refused(k, err)
		n.pump()
		return
	}
	n.pump()
	cs.pausedBy[i] = k
	cs.after(time.Duration(uniform(cs.rng, int64(2*time.Second), int64(20*time.Second))), ceResume, i)
}

// requestDone ends pause or resume action k with the node's answer.
func (cs *clusterState) requestDone(k int, o node.RequestOutcome) {
	a := &cs.actions[k]
	if a.ended {
		return
	}
	switch {
	case o.Err != nil:
		a.state = "aborted: " + o.Err.Error()
	case o.Already:
		a.state = fmt.Sprintf("done: already so at register version %d", o.Version)
	default:
		a.state = fmt.Sprintf("done: committed at register version %d", o.Version)
	}
	a.ended = true
	if a.kind == caResume && o.Err == nil {
		delete(cs.pausedBy, a.part)
	}
}

// clusterResumeTries bounds an operator's retries of a refused or
// not applied resume, one a second.
const clusterResumeTries = 120

// resume resumes partition i. The operator retries a refusal and a
// resume whose register write was lost; the partition counts as paused
// (pausedBy) until a resume is done.
func (cs *clusterState) resume(i, try int) {
	fw := cs.fw
	if _, ok := cs.pausedBy[i]; !ok {
		return
	}
	retry := func() {
		if try < clusterResumeTries {
			fw.e.w.Sched.After(time.Second, NoNode, clusterRetry{cs, i, try + 1}, 0)
		}
	}
	n := fw.liveHost(i)
	if n == nil {
		retry()
		return
	}
	k := cs.act(clusterAction{kind: caResume, part: i, at: fw.now(), state: "requested", node: n.idx})
	err := n.node.SetPaused(n.local(), fw.parts[i].id, false, "cluster resume", func(o node.RequestOutcome) {
		cs.requestDone(k, o)
		if o.Err != nil {
			retry()
		}
	})
	n.pump()
	if err != nil {
		// Refused before anything was written (a proposal in flight):
		// not an action to follow, asked again.
		cs.actions = slices.Delete(cs.actions, k, k+1)
		retry()
		return
	}
	cs.fig.Resumes++
	fw.ct.fault(fw.now(), "operator: resume %s (action %d)", fw.parts[i].name, k)
}

// clusterRetry retries a resume.
type clusterRetry struct {
	cs        *clusterState
	part, try int
}

func (h clusterRetry) Fire(time.Duration, uint64) { h.cs.resume(h.part, h.try) }

// startDrain drains a region (one drain at a time): every partition's
// node in the next region drives it (a node drives the partitions it
// hosts), and one driver crashes and restarts midway, asked again once
// back.
func (cs *clusterState) startDrain() {
	fw := cs.fw
	if cs.drain != nil {
		return
	}
	ri := cs.rng.IntN(len(fw.regions))
	d := &clusterDrain{region: fw.regions[ri], at: fw.now()}
	seen := map[int32]bool{}
	for i := range fw.parts {
		x := fw.parts[i].nodeOfReg[(ri+1)%len(fw.regions)]
		if !seen[x] {
			seen[x] = true
			d.drivers = append(d.drivers, fw.nodes[x])
		}
	}
	cs.drain = d
	cs.fig.Drains++
	fw.ct.fault(fw.now(), "operator: drain %s (drivers %d)", d.region, len(d.drivers))
	for _, n := range d.drivers {
		cs.askDrain(n)
	}
	cs.after(time.Duration(uniform(cs.rng, int64(300*time.Millisecond), int64(5*time.Second))), ceDriverCrash, 0)
}

func (cs *clusterState) askDrain(n *foNode) {
	if n.node == nil || !cs.fw.e.w.Live(n.idx) {
		return
	}
	n.node.Drain(n.local(), cs.drain.region, "cluster drain")
	n.pump()
}

// stop ends the cluster layer's faults: every outage heals (the nodes
// restart from their disks); stalls end by themselves. Operator actions
// in progress go on.
func (cs *clusterState) stop() {
	cs.stopped = true
	for k := range cs.outages {
		cs.endOutage(k)
	}
	cs.fw.ct.fault(cs.fw.now(), "faults healed")
}

// cleanUp is the operator after the heal: the drain is asked again on
// every driver and must finish, then is stopped and the drained region
// allowed again (never-promote cleared); every paused partition is
// resumed. All of it within clusterSettle.
func (cs *clusterState) cleanUp() {
	fw := cs.fw
	deadline := fw.now() + clusterSettle
	if d := cs.drain; d != nil {
		for _, n := range d.drivers {
			cs.askDrain(n)
		}
		drained := func() bool {
			for i := range fw.parts {
				if fw.reg[i].state.WriteRegion == d.region {
					return false
				}
			}
			return true
		}
		if fw.runUntil(deadline, drained) {
			d.done = true
			cs.fig.DrainsDone++
		} else {
			cs.r.violation(ViolationLiveness, "drain of %s not done %v after the heal: %s", d.region, clusterSettle,
				fw.unconverged(func(i int) bool { return fw.reg[i].state.WriteRegion != d.region }))
		}
		for _, n := range d.drivers {
			if n.node != nil {
				n.node.StopDrain(d.region)
			}
		}
		fw.ct.fault(fw.now(), "operator: drain of %s stopped (done %v)", d.region, d.done)
		// Undrain: clear never-promote everywhere, by each write
		// region's node.
		clear := func() bool {
			left := 0
			for _, n := range fw.nodes {
				if n.node == nil {
					continue
				}
				_, pending, err := n.node.ApplyNeverPromote(n.local(), nil, "cluster undrain")
				if err != nil {
					cs.r.violation(ViolationProtocol, "never-promote on node %d: %v", n.idx, err)
				}
				left += pending
				n.pump()
			}
			for i := range fw.parts {
				if len(fw.reg[i].state.NeverPromote) > 0 {
					left++
				}
			}
			return left == 0
		}
		if !fw.runUntil(deadline, clear) {
			cs.r.violation(ViolationLiveness, "never-promote not cleared %v after the heal", clusterSettle)
		}
	}
	if md := cs.md; md.k >= 0 && !cs.actions[md.k].ended {
		if !md.polling {
			cs.applyMinDur()
		}
		if !fw.runUntil(deadline, func() bool { return cs.actions[md.k].ended }) {
			cs.r.violation(ViolationLiveness, "minimum durability %d not in every register %v after the heal: %s", md.want, clusterSettle,
				fw.unconverged(func(i int) bool { return fw.reg[i].state.WriteQuorum.MinDurability != md.want }))
		}
	}
	for i := range cs.pausedBy {
		cs.resume(i, 0)
	}
	// Every partition the register shows paused is resumed, asked again
	// at each poll until the register says so (a refusal while a proposal
	// is in flight, or a resume whose write lost, is retried).
	resumed := func() bool {
		left := false
		for i := range fw.parts {
			if !fw.reg[i].state.Paused {
				continue
			}
			left = true
			if _, ok := cs.pausedBy[i]; !ok {
				cs.pausedBy[i] = -1 // a re-ask: no action to follow
			}
			cs.resume(i, clusterResumeTries)
		}
		return !left
	}
	if !fw.runUntil(deadline, resumed) {
		cs.r.violation(ViolationLiveness, "partitions still paused %v after the heal", clusterSettle)
	}
}

// learn follows the operator's actions through the register's
// transitions, and checks each transition against the epochs.
func (cs *clusterState) learn(i int, old, s failover.State, at time.Duration) {
	fw := cs.fw
	cs.checkMinDurValue(i, s)
	fresh := newTransitions(old.History, s.History)
	prev := failover.Epoch(0)
	if len(old.History) > 0 {
		prev = old.History[len(old.History)-1].Epoch
	}
	for _, t := range fresh {
		if t.Epoch > s.Epoch || t.Epoch < prev {
			cs.r.violation(ViolationInvariant, "partition %s: register history has %v at epoch %d after epoch %d, value at epoch %d",
				fw.parts[i].name, t.Kind, t.Epoch, prev, s.Epoch)
		}
		prev = t.Epoch
		if (t.Kind == failover.DecideFailover || t.Kind == failover.DecideCompleteSwitchover) && t.Epoch == s.Epoch && t.To != s.WriteRegion {
			cs.r.violation(ViolationInvariant, "partition %s: %v to %s at epoch %d but the write region is %s",
				fw.parts[i].name, t.Kind, t.To, t.Epoch, s.WriteRegion)
		}
		if t.Kind == failover.DecideFailover && t.Epoch > old.Epoch {
			cs.fig.Failovers++
		}
		cs.follow(i, t)
	}
	if s.Paused != old.Paused {
		for k := range cs.actions {
			a := &cs.actions[k]
			if a.ended || a.part != i || (a.kind == caPause) != s.Paused || (a.kind != caPause && a.kind != caResume) {
				continue
			}
			a.state, a.ended = "done", true
		}
	}
}

// follow moves partition i's switchover actions along transition t.
func (cs *clusterState) follow(i int, t failover.Transition) {
	for k := range cs.actions {
		a := &cs.actions[k]
		// Register times are the proposer's clock, within the drift
		// bound of the simulator's.
		if a.ended || a.part != i || a.kind != caSwitchover || t.At < a.at-time.Second {
			continue
		}
		switch {
		case t.Kind == failover.DecideStartSwitchover && t.To == a.target && a.state == "requested":
			a.state = "started"
		case t.Kind == failover.DecideCompleteSwitchover && a.state == "started":
			a.state, a.ended = "done", true
			cs.fig.SwitchoversDone++
		case t.Kind == failover.DecideAbortSwitchover && a.state == "started":
			a.state, a.ended = "aborted: "+t.Reason, true
			cs.fig.AbortedSwitchovers++
		case t.Kind == failover.DecideFailover:
			a.state, a.ended = "overtaken: "+t.Reason, true
			cs.fig.SwitchoversOvertook++
		}
	}
}

// newTransitions returns the entries of cur after the last entry of old
// (all of cur's entries newer than it when old's last entry was trimmed).
func newTransitions(old, cur []failover.Transition) []failover.Transition {
	if len(old) == 0 {
		return cur
	}
	last := old[len(old)-1]
	for k := len(cur) - 1; k >= 0; k-- {
		if cur[k] == last {
			return cur[k+1:]
		}
	}
	for k := range cur {
		if cur[k].At > last.At {
			return cur[k:]
		}
	}
	return nil
}

// casLost ends the operator's switchover whose start's register write
// lost (a conflict, or a proposer that gave up): aborted, with the
// outcome as the reason. (Pauses and resumes hear their end from the
// node: node.RequestDone.)
func (cs *clusterState) casLost(i int, prop failover.Proposal, out fmt.Stringer) {
	if prop.Kind != failover.DecideStartSwitchover {
		return
	}
	for k := range cs.actions {
		a := &cs.actions[k]
		if a.ended || a.part != i || a.kind != caSwitchover || a.state != "requested" || prop.Target != a.target {
			continue
		}
		a.state, a.ended = fmt.Sprintf("aborted: its register write %v", out), true
		cs.fig.AbortedSwitchovers++
		return
	}
}

// nodeLost ends the requests node x had accepted and not yet written to
// the register: the operator's call loses its connection with the node
// (what the admin API answers then), so the request is aborted with that
// reason. A request already started in the register goes on.
func (cs *clusterState) nodeLost(x int32) {
	for k := range cs.actions {
		if a := &cs.actions[k]; !a.ended && a.node == x && a.state == "requested" {
			a.state, a.ended = fmt.Sprintf("aborted: node %d crashed before its register write", x), true
			if a.kind == caSwitchover {
				cs.fig.AbortedSwitchovers++
			}
		}
	}
}
