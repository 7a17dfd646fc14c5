package sim

import (
	"fmt"
	"time"
)

// FailoverLayout is the shape of a real cluster, for the region-outage
// scenario to predict it (fmnode demo runs one and this beside it): how
// many regions and nodes, where the write regions start, the minimum
// durability the spec recorded, and the round trip between any two
// nodes. Placement within a region stays the simulator's (partition i on
// the (i mod NodesPerRegion)-th node of every region), as even a spread
// as the agents' rendezvous hash.
type FailoverLayout struct {
	// Regions is the data regions (2..3 on DefaultWAN; up to
	// MaxLayoutRegions with an RTT, named as fmnode demo names them);
	// NodesPerRegion the nodes of each (1..MaxLayoutNodesPerRegion).
	Regions, NodesPerRegion int
	// FirstRegionWrites: every partition's first write region is the
	// first region (a cluster spec's preferred region), rather than the
	// scenario's 60/25/15 split. The outage powers off the first region
	// either way.
	FirstRegionWrites bool
	// MinDurability is every register's minimum durability (1..Regions).
	MinDurability int
	// ProcessKill: the outage kills the nodes' processes and leaves their
	// machines up, so a client's attempt to a down node is refused after
	// a round trip (a reset, as on loopback) instead of timing out (a
	// powered-off machine, the scenario's own fault).
	ProcessKill bool
	// RTT, if positive, is the round trip between any two nodes, in a
	// region or across (1 ms stands for loopback under load); 0 keeps
	// DefaultWAN's.
	RTT time.Duration
	// ServiceSlots and RequestService, if set (both or neither), make
	// every node share one machine, where each client request a node
	// serves holds one of ServiceSlots servers for RequestService
	// (failover_service.go); 0 charges nothing.
	ServiceSlots   int
	RequestService time.Duration
	// HeldPollService, if set (at most RequestService), is what a held
	// poll's answer costs instead (failover_service.go): the agent
	// received and parsed it while it was held, before the commit. 0
	// charges it the whole RequestService.
	HeldPollService time.Duration
	// NoPollWait: the clients' polls of a pending failover are answered
	// at once, as before the replicas held them (routing's
	// RouterConfig.NoPollWait; partition/poll.go): the model of clients
	// or agents without the long poll.
	NoPollWait bool
}

// Bounds of a FailoverLayout.
const (
	MaxLayoutNodesPerRegion = 10
	MaxLayoutRegions        = 5
)

// layoutRegionNames name the regions of a uniform topology.
func layoutRegionNames() []string { return []string{"east", "north", "west", "south", "central"} }

// uniformTopology is base with n regions, every round trip rtt (in a
// region and across), and base's loopback and jitter.
func uniformTopology(base Topology, n int, rtt time.Duration) Topology {
	t := base
	names := layoutRegionNames()
	t.Regions = names[:min(n, len(names))]
	t.RTT = make([][]time.Duration, len(t.Regions))
	for i := range t.RTT {
		t.RTT[i] = make([]time.Duration, len(t.Regions))
		for j := range t.RTT[i] {
			t.RTT[i][j] = rtt
		}
	}
	return t
}

func (l *FailoverLayout) validate() error {
	switch {
	case l.Regions < 2 || l.Regions > MaxLayoutRegions || (l.RTT == 0 && l.Regions > len(DefaultWAN().Regions)):
		return fmt.Errorf("%w: layout: %d regions (2..%d with an RTT, else 2..%d)", ErrConfig, l.Regions, MaxLayoutRegions, len(DefaultWAN().Regions))
	case l.NodesPerRegion < 1 || l.NodesPerRegion > MaxLayoutNodesPerRegion:
		return fmt.Errorf("%w: layout: %d nodes per region (1..%d)", ErrConfig, l.NodesPerRegion, MaxLayoutNodesPerRegion)
	case l.MinDurability < 1 || l.MinDurability > l.Regions:
		return fmt.Errorf("%w: layout: minimum durability %d (1..%d regions)", ErrConfig, l.MinDurability, l.Regions)
	case l.RTT < 0 || l.RTT > time.Second:
		return fmt.Errorf("%w: layout: RTT %v (0..1s)", ErrConfig, l.RTT)
	}
	if err := validateLayoutService(l.ServiceSlots, l.RequestService); err != nil {
		return err
	}
	if l.HeldPollService < 0 || l.HeldPollService > l.RequestService {
		return fmt.Errorf("%w: layout: HeldPollService %v (0..RequestService %v)", ErrConfig, l.HeldPollService, l.RequestService)
	}
	return nil
}

// apply shapes spec by the layout.
func (l *FailoverLayout) apply(spec *foSpec) {
	spec.regions, spec.nodesPerRegion, spec.minDurability, spec.rtt = l.Regions, l.NodesPerRegion, l.MinDurability, l.RTT
	spec.refuseDown = l.ProcessKill
	spec.serviceSlots, spec.requestService, spec.heldPollService = l.ServiceSlots, l.RequestService, l.HeldPollService
	spec.noPollWait = l.NoPollWait
	spec.staggerBoot = true
	if l.FirstRegionWrites {
		spec.writeShare = []float64{1}
	}
}

// bootAt is when node i of a layout boots: the nodes of one region a
// heartbeat interval apart divided evenly (slot k of n at k/n of it), the
// same slot of every region together. Real processes never start in step,
// and the phase of a node's heartbeats is its start's: with every node
// beating at once, a region's loss was detected at one instant for every
// partition and the failovers committed together, which no real cluster
// does (fmnode demo's three killed agents spread detection over 0.1-0.3 s,
// and the burst after the commits with it). Evenly spread phases keep the
// mean detection where one phase put it (a kill halfway between beats).
// Runs without a layout boot every node at 0, as before.
func (fw *foWorld) bootAt(i, regions int) time.Duration {
	if !fw.spec.staggerBoot || fw.spec.nodesPerRegion < 2 {
		return 0
	}
	slot := i / regions
	return time.Duration(slot) * fw.spec.profile.HeartbeatInterval / time.Duration(fw.spec.nodesPerRegion)
}

// foBoot boots a layout's node at its staggered start (bootAt).
type foBoot struct{ n *foNode }

func (b foBoot) Fire(now time.Duration, _ uint64) {
	if err := b.n.boot(true); err != nil {
		b.n.fw.e.viol.add(now, ViolationRecovery, "%v", err)
	}
}

// awaitBoots runs the world until every staggered node has booted
// (bootAt), before anything else is set up on them.
func (fw *foWorld) awaitBoots() error {
	var last time.Duration
	for i := range fw.nodes {
		last = max(last, fw.bootAt(i, len(fw.regions)))
	}
	if last == 0 {
		return nil
	}
	booted := func() bool {
		for _, n := range fw.nodes {
			if n.node == nil {
				return false
			}
		}
		return true
	}
	if !fw.e.runUntil(fw.now()+last+time.Millisecond, booted) {
		return fmt.Errorf("sim: layout nodes not booted by %v: %v", last, fw.e.viol.strings())
	}
	return nil
}
