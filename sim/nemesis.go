package sim

import (
	"math/rand/v2"
	"time"
)

// maxEpisodes bounds the episode table; FaultProfile.MaxConcurrent is
// clamped to it.
const maxEpisodes = 8

type episode struct {
	used   bool
	kind   FaultKind
	cuts   CutSet
	node   int32
	region int
	drift  float64 // drift to restore on heal
}

// Nemesis injects fault episodes into a world during the safety phase:
// after an exponential gap it picks an episode kind by weight, applies it,
// and schedules its heal. Heal undoes exactly what the episode did. All of
// its choices come from the nemesis stream of the seed.
type Nemesis struct {
	w       *World
	p       FaultProfile
	r       *rand.Rand
	nodes   []int32 // partition targets: every node
	crash   []int32 // nodes that may crash or pause
	eps     [maxEpisodes]episode
	next    EventID
	stopped bool
	total   float64
}

// Nemesis event args: 0 starts the next episode, 1+i heals episode i.
const nemesisNext = 0

// NewNemesis prepares a nemesis; crashable lists the nodes it may crash
// or pause (nil: all).
func NewNemesis(w *World, p FaultProfile, crashable []int32) *Nemesis {
	nm := &Nemesis{w: w, p: p, r: NewRand(w.Seed, StreamNemesis)}
	for i := range w.Nodes {
		nm.nodes = append(nm.nodes, int32(i))
	}
	nm.crash = crashable
	if nm.crash == nil {
		nm.crash = nm.nodes
	}
	if nm.p.MaxConcurrent > maxEpisodes {
		nm.p.MaxConcurrent = maxEpisodes
	}
	for _, k := range episodeKinds() {
		nm.total += p.Weights[k]
	}
	return nm
}

// Profile returns the profile the nemesis runs.
func (nm *Nemesis) Profile() FaultProfile { return nm.p }

// Start turns on the message faults, gives each node a drift within the
// bound (if drift is in the mix) and schedules the first episode.
func (nm *Nemesis) Start() {
	w := nm.w
	w.Links.Loss, w.Links.Duplicate, w.Links.Reorder = nm.p.Loss, nm.p.Duplicate, nm.p.Reorder
	if nm.p.Weights[FaultClockDrift] > 0 && nm.p.DriftBound > 0 {
		for _, x := range nm.nodes {
			w.SetDrift(x, (2*nm.r.Float64()-1)*nm.p.DriftBound)
			w.Faults[FaultClockDrift]++
		}
	}
	nm.schedule()
}

func (nm *Nemesis) schedule() {
	if nm.stopped || nm.p.EpisodeEvery <= 0 || nm.total <= 0 {
		return
	}
	gap := time.Duration(nm.r.ExpFloat64() * float64(nm.p.EpisodeEvery))
	nm.next = nm.w.Sched.After(gap, NoNode, nm, nemesisNext)
}

// Stop ends the safety phase: no new episode, every active one healed,
// message faults and drift off. Crashed nodes restart and paused nodes
// resume, so the liveness phase starts from a whole system.
func (nm *Nemesis) Stop() {
	nm.stopped = true
	nm.w.Sched.Cancel(nm.next)
	for i := range nm.eps {
		if nm.eps[i].used {
			nm.heal(i)
		}
	}
	w := nm.w
	w.Links.HealAll()
	for i := range w.Nodes {
		x := int32(i)
		w.Resume(x)
		w.Restart(x)
		if w.Drift(x) != 0 {
			w.SetDrift(x, 0)
		}
	}
}

// Fire starts an episode (arg 0) or heals episode arg-1.
func (nm *Nemesis) Fire(now time.Duration, arg uint64) {
	if arg != nemesisNext {
		i := int(arg - 1)
		if nm.eps[i].used {
			nm.heal(i)
		}
		return
	}
	if nm.stopped {
		return
	}
	nm.start(now)
	nm.schedule()
}

func (nm *Nemesis) pick() FaultKind {
	x := nm.r.Float64() * nm.total
	for _, k := range episodeKinds() {
		x -= nm.p.Weights[k]
		if x < 0 && nm.p.Weights[k] > 0 {
			return k
		}
	}
	for _, k := range episodeKinds() { // float rounding: the last kind in the mix
		if nm.p.Weights[k] > 0 {
			return k
		}
	}
	return FaultCrash
}

func (nm *Nemesis) freeSlot() int {
	n := 0
	free := -1
	for i := range nm.eps {
		if nm.eps[i].used {
			n++
		} else if free < 0 {
			free = i
		}
	}
	if n >= nm.p.MaxConcurrent {
		return -1
	}
	return free
}

func (nm *Nemesis) start(now time.Duration) {
	slot := nm.freeSlot()
	if slot < 0 {
		return
	}
	w := nm.w
	kind := nm.pick()
	e := episode{used: true, kind: kind, node: NoNode, region: -1}
	n := len(w.Nodes)
	switch kind {
	case FaultDelaySpike:
		e.region = nm.r.IntN(len(w.Topo.Regions))
		if w.Links.regionSpike[e.region] > 1 {
			return // one spike per region at a time
		}
		w.Links.SetSpike(e.region, 2+nm.r.Float64()*max(0, nm.p.SpikeMax-2))
	case FaultPartitionNode:
		e.cuts = isolateNode(n, nm.nodes, nm.nodes[nm.r.IntN(n)])
	case FaultPartitionRegion:
		e.region = nm.r.IntN(len(w.Topo.Regions))
		e.cuts = isolateRegion(n, nm.nodes, func(x int32) bool { return w.Nodes[x].Region == e.region })
	case FaultPartitionMajority:
		e.cuts = majorityMinority(nm.r, n, nm.nodes)
	case FaultPartitionRing:
		e.cuts = ring(nm.r, n, nm.nodes)
	case FaultPartitionBridge:
		e.cuts = bridge(nm.r, n, nm.nodes)
	case FaultPartitionOneWay:
		var group []int32
		if nm.r.IntN(2) == 0 {
			group = []int32{nm.nodes[nm.r.IntN(n)]}
		} else {
			r := nm.r.IntN(len(w.Topo.Regions))
			group = without(nm.nodes, func(x int32) bool { return w.Nodes[x].Region != r })
		}
		e.cuts = oneWay(nm.r, n, nm.nodes, group)
	case FaultCrash, FaultPause:
		x := nm.crash[nm.r.IntN(len(nm.crash))]
		if !w.Live(x) {
			return
		}
		e.node = x
		if kind == FaultCrash {
			w.Crash(x)
		} else {
			w.Pause(x)
		}
	case FaultClockDrift:
		if nm.p.DriftBound <= 0 {
			return
		}
		e.node = nm.nodes[nm.r.IntN(n)]
		e.drift = w.Drift(e.node)
		w.SetDrift(e.node, (2*nm.r.Float64()-1)*nm.p.DriftBound)
	}
	w.Links.Apply(e.cuts, +1)
	w.Faults[kind]++
	w.Trace.Begin(traceFault, now)
	w.Trace.Byte(byte(kind))
	w.Trace.U64(uint64(int64(e.node)))
	w.Trace.U64(uint64(int64(e.region)))
	w.Trace.U64(uint64(len(e.cuts)))
	nm.eps[slot] = e
	d := uniform(nm.r, int64(nm.p.EpisodeMin), int64(nm.p.EpisodeMax)+1)
	w.Sched.After(time.Duration(d), NoNode, nm, uint64(slot+1))
}

func (nm *Nemesis) heal(i int) {
	w := nm.w
	e := nm.eps[i]
	nm.eps[i] = episode{}
	w.Links.Apply(e.cuts, -1)
	switch e.kind {
	case FaultDelaySpike:
		w.Links.SetSpike(e.region, 1)
	case FaultCrash:
		w.Restart(e.node)
	case FaultPause:
		w.Resume(e.node)
	case FaultClockDrift:
		w.SetDrift(e.node, e.drift)
	}
	w.Trace.Begin(traceHeal, w.Now())
	w.Trace.Byte(byte(e.kind))
	w.Trace.U64(uint64(int64(e.node)))
}
