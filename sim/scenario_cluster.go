package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
)

// clusterScenario is the VOPR of the whole system (issue 13): three
// regions of two or three nodes each (a zone per node) run the real node
// core (internal/node) for every partition, with strong clients, session
// clients and eventual readers, under every fault the simulator has at
// once: the register scenario's network faults (loss, duplication,
// reordering, delay spikes, partitions of a node, a region,
// majority/minority, ring, bridge, one-way), pauses and clock drift
// within the profile's bound (the nemesis), and its own layer: outages of
// a region, a zone or a node (random length, overlapping, counted per
// node so one healing never ends another), crashes that keep only what
// was fsynced, disk stalls (gray failures), and operator actions at
// random moments (switchovers, pause and resume, a region drain whose
// driving node restarts midway and is asked again). Under swarm each seed
// draws its own mix and intensities.
//
// Checked on every seed, besides the failover scenarios' standard checks
// (one write region per epoch and epochs only grow, as values are
// learned; no acknowledged strong write lost; porcupine per key, where
// Unknown fails; convergence within the liveness bound with every
// partition's write region on a live node and every replica caught up):
// read-your-writes and monotonic reads of session clients; no replica
// applying an append of an epoch older than its own; every op that was
// durable in a replica and is not in the final lineage is in that
// replica's conflict record; every register transition agrees with the
// epochs and write regions promoted; every operator action ends, done or
// aborted with the core's reason. A failure prints porcupine's HTML and
// the failing partition's last events.
type clusterScenario struct{ seed uint64 }

// Cluster scenario defaults (a seed takes about a second of CPU).
const (
	clusterPartitions = 36
	clusterWarm       = 20 * time.Second
	clusterWindow     = 90 * time.Second
	// clusterSettle bounds the operator's clean-up after the heal: the
	// drain finishing, resumes, never-promote cleared.
	clusterSettle = 2 * time.Minute
)

func (clusterScenario) Name() string { return "cluster" }
func (clusterScenario) Description() string {
	return "the whole system: 3 regions of 2-3 nodes (a zone each), strong, session and eventual clients, every network fault, region/zone/node outages, crashes, pauses, disk stalls, drift and operator actions (swarm: a mix per seed); every safety check, then liveness"
}

func (s clusterScenario) Run(cfg Config) (Result, error) {
	s.seed = cfg.Seed
	res, _, err := runCluster(s, cfg)
	return res, err
}

// runCluster runs sc with the cluster scenario's defaults (partitions,
// fault window, warm-up) and its failure report; the edge scripts share
// it.
func runCluster(sc foScript, cfg Config) (Result, *foRun, error) {
	if cfg.Partitions == 0 {
		cfg.Partitions = clusterPartitions
	}
	if cfg.Outage == 0 {
		cfg.Outage = clusterWindow
	}
	if cfg.Duration == 0 {
		cfg.Duration = clusterWarm
	}
	res, r, err := runScripted(sc, cfg)
	if err != nil {
		return res, r, err
	}
	res.Faults = cfg.Faults.String()
	if r != nil && r.cluster != nil {
		r.cluster.finishFailure(&res)
	}
	return res, r, nil
}

func (clusterScenario) profile() string { return "fast" }

// shape: 2 or 3 nodes per region (drawn per seed), minimum durability 1
// or 2, writes spread over the regions, session and eventual clients.
func (s clusterScenario) shape(spec *foSpec) {
	r := SubRand(s.seed, StreamScenario, 0xc1)
	spec.nodesPerRegion = 2 + r.IntN(2)
	spec.minDurability = 1 + r.IntN(2)
	spec.writeShare = []float64{0.4, 0.3, 0.3}
	spec.thinkMin, spec.thinkMax = 500*time.Millisecond, 3*time.Second
	spec.clientsPerPartition, spec.sessionClients, spec.eventualClients = 2, 1, 1
	spec.pausable = true
	spec.background = func(p FaultProfile) FaultProfile { return clusterBackground(p, spec.profile) }
}

// clusterBackground keeps the nemesis's network faults, pauses and drift
// (bounded by the profile's MaxClockDrift over the fault window); crashes
// are the cluster layer's own, counted per node so that overlapping
// outages heal one at a time.
func clusterBackground(p FaultProfile, prof failover.Config) FaultProfile {
	pause := p.Weights[FaultPause]
	p = foBackground(p, prof, clusterWindow)
	p.Weights[FaultPause] = pause
	return p
}

// clusterMix is one seed's mix of the cluster layer's faults and actions:
// mean gaps (0: off), weights and bounds.
type clusterMix struct {
	OutageEvery                 time.Duration
	RegionW, ZoneW, NodeW       float64
	RegionMax, ZoneMax, NodeMax time.Duration
	StallEvery, StallMax        time.Duration
	OpEvery                     time.Duration
	SwitchW, PauseW, DrainW     float64
}

func (m clusterMix) String() string {
	return fmt.Sprintf("outages every %v (region %.1f zone %.1f node %.1f; up to %v/%v/%v) stalls every %v (up to %v) operator every %v (switchover %.1f pause %.1f drain %.1f)",
		m.OutageEvery, m.RegionW, m.ZoneW, m.NodeW, m.RegionMax, m.ZoneMax, m.NodeMax, m.StallEvery, m.StallMax,
		m.OpEvery, m.SwitchW, m.PauseW, m.DrainW)
}

// drawClusterMix: none runs the operator's actions without faults; light
// and heavy fixed intensities; swarm turns each kind on or off and draws
// its intensity per seed.
func drawClusterMix(level FaultLevel, r *rand.Rand) clusterMix {
	m := clusterMix{OpEvery: 8 * time.Second, SwitchW: 1, PauseW: 1, DrainW: 0.3,
		RegionW: 1, ZoneW: 1, NodeW: 1, RegionMax: 20 * time.Second, ZoneMax: 30 * time.Second, NodeMax: 3 * time.Second,
		StallMax: 10 * time.Second}
	switch level {
	case FaultsLight:
		m.OutageEvery, m.StallEvery = 30*time.Second, 40*time.Second
	case FaultsHeavy:
		m.OutageEvery, m.StallEvery, m.OpEvery = 8*time.Second, 15*time.Second, 4*time.Second
	case FaultsSwarm:
		on := func() bool { return r.IntN(3) != 0 }
		w := func() float64 {
			if on() {
				return 0.2 + r.Float64()
			}
			return 0
		}
		m.RegionW, m.ZoneW, m.NodeW = w(), w(), w()
		if m.RegionW+m.ZoneW+m.NodeW > 0 {
			m.OutageEvery = time.Duration(3+r.IntN(40)) * time.Second
		}
		m.RegionMax = time.Duration(2+r.IntN(40)) * time.Second
		m.ZoneMax = time.Duration(2+r.IntN(60)) * time.Second
		m.NodeMax = time.Duration(200+r.IntN(5000)) * time.Millisecond
		if on() {
			m.StallEvery = time.Duration(5+r.IntN(50)) * time.Second
		}
		m.StallMax = time.Duration(1+r.IntN(20)) * time.Second
		m.OpEvery = time.Duration(1+r.IntN(20)) * time.Second
		m.SwitchW, m.PauseW, m.DrainW = w(), w(), w()
		if m.SwitchW+m.PauseW+m.DrainW == 0 {
			m.SwitchW = 1
		}
	}
	return m
}

// ClusterFigures is what a cluster seed reports (JSON key "cluster").
type ClusterFigures struct {
	NodesPerRegion int    `json:"nodes_per_region"`
	MinDurability  int    `json:"min_durability"`
	Mix            string `json:"mix"`
	RegionOutages  int    `json:"region_outages"`
	ZoneOutages    int    `json:"zone_outages"`
	NodeCrashes    int    `json:"node_crashes"`
	DiskStalls     int    `json:"disk_stalls"`
	// Operator actions and how they ended.
	Switchovers         int `json:"switchovers"`
	SwitchoversDone     int `json:"switchovers_done"`
	AbortedSwitchovers  int `json:"aborted_switchovers"`
	SwitchoversRefused  int `json:"switchovers_refused"`
	SwitchoversOvertook int `json:"switchovers_overtaken"`
	Pauses              int `json:"pauses"`
	Resumes             int `json:"resumes"`
	ActionsRefused      int `json:"actions_refused"`
	Drains              int `json:"drains"`
	DrainsDone          int `json:"drains_done"`
	DrainDriverRestarts int `json:"drain_driver_restarts"`
	// MinDurabilityChanges counts the operator's changes of minimum
	// durability, MinDurabilityDone those every register took, and
	// MinDurabilityRefused the partitions the guard refused (per ask:
	// fewer write-quorum members than asked).
	MinDurabilityChanges int `json:"min_durability_changes"`
	MinDurabilityDone    int `json:"min_durability_done"`
	MinDurabilityRefused int `json:"min_durability_refused"`
	// Failovers counts write-region moves by automatic failover.
	Failovers uint64 `json:"failovers"`
	// RegisterConflictRate is NAKed rounds over all rounds of the nodes'
	// register proposers (every failover register write).
	RegisterRounds       uint64  `json:"register_rounds"`
	RegisterNAKs         uint64  `json:"register_naks"`
	RegisterConflictRate float64 `json:"register_conflict_rate"`
	// StaleRejected counts messages of a stale epoch the replicas fenced
	// (the guard a stale-epoch apply would skip); StaleChecked the stale
	// appends the checker watched.
	StaleRejected uint64 `json:"stale_epoch_rejected"`
	StaleChecked  int    `json:"stale_appends_checked"`
	SessionReads  int    `json:"session_reads"`
	EventualReads int    `json:"eventual_reads"`
	// FalseProgressChecked counts durable ops outside the final lineage
	// found in their replica's conflict record.
	FalseProgressChecked int `json:"false_progress_in_conflicts"`
	StuckPartitions      int `json:"stuck_partitions"`
	// Edge is an edge script's record (cluster-edge-* scenarios only).
	Edge *EdgeFigures `json:"edge,omitempty"`
	// Trace is the failing partition's last events (only on a failure).
	Trace []string `json:"failing_partition_trace,omitempty"`
}

func (f *ClusterFigures) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-34s %d nodes/region, min durability %d; %d region, %d zone outages, %d node crashes, %d disk stalls; %d failovers\n",
		"cluster", f.NodesPerRegion, f.MinDurability, f.RegionOutages, f.ZoneOutages, f.NodeCrashes, f.DiskStalls, f.Failovers)
	fmt.Fprintf(&b, "%-34s %d switchovers (%d done, %d aborted, %d refused, %d overtaken), %d pauses, %d resumes, %d drains (%d done, %d driver restarts)\n",
		"operator actions", f.Switchovers, f.SwitchoversDone, f.AbortedSwitchovers, f.SwitchoversRefused, f.SwitchoversOvertook,
		f.Pauses, f.Resumes, f.Drains, f.DrainsDone, f.DrainDriverRestarts)
	fmt.Fprintf(&b, "%-34s %d changes (%d done), %d refusals by the guard\n", "minimum durability", f.MinDurabilityChanges, f.MinDurabilityDone, f.MinDurabilityRefused)
	fmt.Fprintf(&b, "%-34s conflict rate %.4f over %d rounds; %d stale-epoch messages fenced; %d session, %d eventual reads; %d false-progress ops in conflicts; %d stuck\n",
		"checks", f.RegisterConflictRate, f.RegisterRounds, f.StaleRejected, f.SessionReads, f.EventualReads, f.FalseProgressChecked, f.StuckPartitions)
	if f.Edge != nil {
		b.WriteString(f.Edge.table())
	}
	for _, l := range f.Trace {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

func (s clusterScenario) inject(r *foRun) {
	fw := r.fw
	cs := newClusterState(r, s.seed)
	r.cluster = cs
	fw.clusterLayer = cs
	fw.durable = map[foDurKey]partition.Epoch{}
	fw.ct = newClusterTrace(len(fw.parts))
	fw.onLearn = cs.learn
	fw.checkStale = true
	fw.trackDurable = true
	cs.start()
}

func (clusterScenario) run(r *foRun, until time.Duration) { r.fw.e.run(until) }

func (clusterScenario) heal(r *foRun) { r.cluster.stop() }

func (clusterScenario) settle(r *foRun) { r.cluster.cleanUp() }

func (clusterScenario) check(r *foRun) { r.cluster.check() }

// partNode returns the node hosting partition i's replica in region reg.
func (fw *foWorld) partNode(i int, reg quorum.Region) *foNode {
	n, ok := fw.nodeFor(i, reg)
	if !ok {
		return nil
	}
	return fw.nodes[n]
}

// liveHost returns a live node hosting partition i, preferring its write
// region's (the one that proposes an operator's request in the daemon).
func (fw *foWorld) liveHost(i int) *foNode {
	if n := fw.partNode(i, fw.reg[i].state.WriteRegion); n != nil && n.node != nil && fw.e.w.Live(n.idx) {
		return n
	}
	for _, rn := range fw.parts[i].replicas {
		if n := fw.nodes[rn.Node-1]; n.node != nil && fw.e.w.Live(n.idx) {
			return n
		}
	}
	return nil
}
