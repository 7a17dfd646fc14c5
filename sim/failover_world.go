package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
)

// foSpec shapes a failover world: how many regions, nodes and partitions,
// which timing profile, and the client load.
type foSpec struct {
	regions        int // from DefaultWAN, at most 3
	nodesPerRegion int
	partitions     int
	profile        failover.Config
	// writeShare is the share of partitions whose write region is each
	// region (the first region gets the most: it is the one the drill
	// powers off).
	writeShare    []float64
	minDurability int
	// clientsPerPartition closed-loop clients per partition, each in
	// another region; think is the pause between two operations.
	clientsPerPartition int
	thinkMin, thinkMax  time.Duration
	readFraction        float64
	maxHistory          int
	// witness adds one node in the next region of the topology that hosts
	// an acceptor and a failover manager but no partition replica: it
	// breaks the tie between two data regions in the register's quorum
	// and in the liveness votes.
	witness bool
	// refuseDown: a client's attempt to a crashed node is refused after a
	// round trip (its process died, its machine answers with a reset)
	// rather than timing out (powered off).
	refuseDown bool
	// rtt, if positive, replaces every round trip of the topology (in a
	// region and across): a layout's loopback.
	rtt time.Duration
	// serviceSlots and requestService: the machine the nodes share
	// (failover_service.go).
	serviceSlots   int
	requestService time.Duration
	// heldPollService: a held poll's answer's service (0: requestService).
	heldPollService time.Duration
	// noPollWait: the clients' routers do not ask for held polls.
	noPollWait bool
	// staggerBoot: the nodes of a region boot a heartbeat interval apart
	// divided evenly (failover_layout.go), not all at once.
	staggerBoot bool
	// noDNS leaves out the simulated DNS path (publishers and client
	// resolvers model servers outside the nodes); only a world without
	// clients may do so.
	noDNS bool
	// background, when set, adapts the seed's fault profile instead of
	// foBackground (the cluster scenario keeps pauses in the mix), and
	// pausable lets the nemesis pause any node.
	background func(FaultProfile) FaultProfile
	pausable   bool
	// sessionClients adds per partition one client that reads at session
	// consistency in its own region (read-your-writes and monotonic reads
	// are checked), and eventualClients one that reads at eventual.
	sessionClients, eventualClients int
}

// Bounds of a failover world.
const (
	foMaxPartitions = 200000
	// foPumpRounds bounds one node's driver loop: the cores converge in a
	// few rounds; more means a core keeps asking for the same thing.
	foPumpRounds = 64
	// foCatchUpChecks bounds the partitions a catch-up poll looks at.
	foCatchUpChecks = 8192
	// foFsyncMin and foFsyncMax bound a simulated fsync.
	foFsyncMin = 200 * time.Microsecond
	foFsyncMax = 2 * time.Millisecond
)

// foWorld is the failover system on a simulated world: per node a CASPaxos
// acceptor and proposer (the sim Cluster), a failover.Manager and a
// partition.Host; per partition closed-loop clients. The simulator only
// carries messages, time and disk between the real cores.
type foWorld struct {
	e       *env
	spec    foSpec
	regions []quorum.Region
	// net carries every node-to-node batch (register, replication,
	// heartbeats, learns), as the daemon's one connection per peer does.
	net   *Network[nodewire.Batch]
	nodes []*foNode
	// pcfg is every node's register proposer config; diskRand draws fsync
	// times.
	pcfg     caspaxos.ProposerConfig
	diskRand *rand.Rand
	// dataToDown counts replication messages sent to a node that was down.
	dataToDown uint64
	parts      []foPart
	// nodeOf is every partition's nodeOfReg in one flat array: nodeFor runs
	// once per message, and reaching the partition's own slice missed the
	// cache twice.
	nodeOf  []int32
	clients []*foClient
	rng     *rand.Rand
	// dns is the simulated DNS path the clients route through.
	dns *foDNS
	// service is the machine the nodes share (nil: none is modelled).
	service *serviceQueue
	// window is each manager's bound on register operations in flight
	// (failover.ManagerConfig.MaxInFlight): the default, or less when
	// the proposer's bound on keys in flight is lower.
	window int

	// reg is the newest committed register value of each partition seen
	// anywhere (results and reads are committed values); known counts the
	// partitions with one. Only the checkers and metrics read it: no node
	// acts on it.
	reg   []foReg
	known int
	// convergeCursor is where converged starts looking.
	convergeCursor int
	// promoted records which region was promoted at each (partition,
	// epoch): a second region is a violation.
	promoted map[foEpochKey]quorum.Region
	m        foMetrics

	// testDoublePromote is a test hook: the first promotion also records
	// a second region at the same epoch, so the checker must fire.
	testDoublePromote bool
	clientsOn         bool

	// preloaded is the bytes bulk-loaded into each partition (preload).
	preloaded int
	// ct, when set (the cluster scenario), keeps each partition's last
	// events for the trace a failure prints.
	ct *clusterTrace
	// checkStale has every delivered append of an epoch older than the
	// register's checked: the replica must not apply it (clusterStale).
	// trackDurable records every op made durable per node and partition
	// (the false-progress check).
	checkStale, trackDurable bool
	stale                    clusterStale
	durable                  map[foDurKey]partition.Epoch
	// clusterLayer is the cluster scenario's fault layer and operator.
	clusterLayer *clusterState
	// onLearn, when set, sees every newer committed register value with
	// the one it replaces (scenario scripts time their transitions by it).
	onLearn func(i int, old, s failover.State, at time.Duration)
	// onAck, when set, sees every acknowledged write as its client gets
	// it; onReply every data-plane reply a client classifies (the edge
	// scripts watch the lease gate through them).
	onAck   func(i int, tok partition.Token, at time.Duration)
	onReply func(write bool, err error)
}

type foEpochKey struct {
	part  int
	epoch failover.Epoch
}

// foPart is one partition: its id, register key and placement.
type foPart struct {
	id        partition.ID
	name      string
	replicas  []failover.RegionNode
	initial   quorum.Region
	nodeOfReg []int32 // region index -> node hosting the replica
	init      []byte
}

type foReg struct {
	version uint64
	state   failover.State
	have    bool
}

// summarizeBatch folds a node-to-node batch into the trace.
func summarizeBatch(t *Trace, b *nodewire.Batch) {
	t.U64(uint64(b.From))
	t.U64(uint64(b.To))
	t.U64(uint64(len(b.CAS)))
	for i := range b.CAS {
		t.Byte(byte(b.CAS[i].Type))
		t.U64(uint64(len(b.CAS[i].Items)))
	}
	t.U64(uint64(len(b.Data)))
	for i := range b.Data {
		summarizePartMsg(t, &b.Data[i])
	}
	t.U64(uint64(len(b.Heartbeats)))
	for i := range b.Heartbeats {
		hb := &b.Heartbeats[i]
		t.Byte(byte(hb.Kind))
		t.U64(hb.Seq)
		t.U64(hb.ViewSeq)
	}
	t.U64(uint64(len(b.Learns)))
	for i := range b.Learns {
		t.Str(b.Learns[i].Key)
		t.U64(b.Learns[i].Version)
	}
	t.U64(uint64(len(b.LearnAcks)))
	for i := range b.LearnAcks {
		t.Str(b.LearnAcks[i].Key)
		t.U64(b.LearnAcks[i].Version)
	}
}

func summarizePartMsg(t *Trace, m *partition.Message) {
	t.Byte(byte(m.Type))
	t.U64(uint64(m.Partition))
	t.U64(uint64(m.Epoch))
	t.Str(string(m.From))
	t.Str(string(m.To))
	t.U64(uint64(m.Prev))
	t.U64(uint64(len(m.Entries)))
	t.U64(uint64(m.Commit))
	t.U64(uint64(m.Match))
}

func newFoWorld(cfg Config, spec foSpec) (*foWorld, error) {
	if spec.partitions < 1 || spec.partitions > foMaxPartitions {
		return nil, fmt.Errorf("%w: %d partitions (1..%d)", ErrConfig, spec.partitions, foMaxPartitions)
	}
	topo := DefaultWAN()
	// The witness takes a region of its own after the data regions.
	topoRegions := spec.regions
	if spec.witness {
		topoRegions++
	}
	if spec.rtt > 0 {
		topo = uniformTopology(topo, topoRegions, spec.rtt)
	}
	if spec.regions < 2 || topoRegions > len(topo.Regions) {
		return nil, fmt.Errorf("%w: %d regions (2..%d)", ErrConfig, topoRegions, len(topo.Regions))
	}
	topo.Regions = topo.Regions[:topoRegions]
	topo.RTT = topo.RTT[:topoRegions]
	for i := range topo.RTT {
		topo.RTT[i] = topo.RTT[i][:topoRegions]
	}
	if spec.nodesPerRegion < 1 {
		spec.nodesPerRegion = 1
	}
	if err := spec.profile.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	nodeRegion := make([]int, 0, spec.regions*spec.nodesPerRegion)
	for j := 0; j < spec.nodesPerRegion; j++ {
		for r := 0; r < spec.regions; r++ {
			nodeRegion = append(nodeRegion, r) // node i is in region i % regions
		}
	}
	if spec.witness {
		nodeRegion = append(nodeRegion, spec.regions) // the last node
	}
	// The scenario scripts its own fault; --faults adds background ones
	// (foBackground) while the script's fault lasts.
	bg := func(p FaultProfile) FaultProfile { return foBackground(p, spec.profile, cfg.Outage) }
	if spec.background != nil {
		bg = spec.background
	}
	crashable := []int32{}
	if spec.pausable {
		crashable = nil // every node
	}
	e, err := newEnv(cfg, envSpec{topo: topo, nodeRegion: nodeRegion, maxHistory: spec.maxHistory, crashable: crashable, faults: bg})
	if err != nil {
		return nil, err
	}
	fw := &foWorld{e: e, spec: spec, promoted: make(map[foEpochKey]quorum.Region), rng: NewRand(cfg.Seed, StreamScenario),
		service: newServiceQueue(spec.serviceSlots, spec.requestService)}
	// fw.regions are the data regions only: placement, clients and
	// redirects never name the witness region.
	for _, r := range topo.Regions[:spec.regions] {
		fw.regions = append(fw.regions, quorum.Region(r))
	}
	// One acceptor and one proposer per node: the register's quorum spans
	// the regions, so no single region decides a failover.
	pcfg := caspaxos.DefaultProposerConfig(1, quorum.Config{})
	// No register flow control (caspaxos.FlowConfig), as the agents run
	// it (internal/agent/host.go says why).
	if cfg.testProposerMaxInFlight > 0 {
		pcfg.MaxInFlight = cfg.testProposerMaxInFlight
	}
	fw.window = min(failover.DefaultMaxInFlight, pcfg.MaxInFlight/2)
	if fw.window < 1 {
		return nil, fmt.Errorf("%w: proposer MaxInFlight %d leaves no register window", ErrConfig, pcfg.MaxInFlight)
	}
	fw.pcfg = pcfg
	fw.diskRand = NewRand(cfg.Seed, StreamDisk)
	fw.net = NewNetwork[nodewire.Batch](e.w, foNetRcv{fw}, 1<<22, summarizeBatch)
	fw.net.Clone = cloneBatch
	if err := fw.placePartitions(); err != nil {
		return nil, err
	}
	fw.reg = make([]foReg, len(fw.parts))
	fw.m.init(len(fw.parts))
	var fnodes []failover.Node
	for i, r := range nodeRegion {
		fnodes = append(fnodes, failover.Node{ID: failover.NodeID(i + 1), Region: quorum.Region(topo.Regions[r])})
	}
	for i, r := range nodeRegion {
		n := &foNode{fw: fw, idx: int32(i), region: quorum.Region(topo.Regions[r]), fnodes: fnodes,
			store: partition.NewMemStore(), acc: caspaxos.NewMemoryStore()}
		fw.nodes = append(fw.nodes, n)
		e.w.Attach(int32(i), n)
		if at := fw.bootAt(i, len(topo.Regions)); at > 0 {
			e.w.Sched.After(at, int32(i), foBoot{n}, 0)
			continue
		}
		if err := n.boot(true); err != nil {
			return nil, err
		}
	}
	fw.makeClients()
	if spec.noDNS && len(fw.clients) > 0 {
		return nil, fmt.Errorf("%w: a failover world with clients needs its DNS path", ErrConfig)
	}
	if !spec.noDNS {
		if fw.dns, err = newFoDNS(fw, cfg.DNSTTL, cfg.DNSStale); err != nil {
			return nil, err
		}
	}
	if err := fw.awaitBoots(); err != nil {
		return nil, err
	}
	return fw, nil
}

// placePartitions draws each partition's write region by the shares and
// spreads its replicas over the nodes of every region.
func (fw *foWorld) placePartitions() error {
	nr := len(fw.regions)
	for i := 0; i < fw.spec.partitions; i++ {
		id := partition.ID(i + 1)
		x := fw.rng.Float64()
		w := nr - 1
		acc := 0.0
		for r, s := range fw.spec.writeShare {
			acc += s
			if x < acc && r < nr {
				w = r
				break
			}
		}
		p := foPart{id: id, name: partition.RegisterKey(id), initial: fw.regions[w], nodeOfReg: make([]int32, nr)}
		slot := i % fw.spec.nodesPerRegion
		for r := 0; r < nr; r++ {
			node := int32(slot*nr + r)
			p.nodeOfReg[r] = node
			p.replicas = append(p.replicas, failover.RegionNode{Region: fw.regions[r], Node: failover.NodeID(node + 1)})
		}
		prio := []quorum.Region{fw.regions[w]}
		for r := 0; r < nr; r++ {
			if r != w {
				prio = append(prio, fw.regions[r])
			}
		}
		st, err := failover.NewState(p.name, fw.regions[w], prio, failover.Strong, fw.spec.minDurability)
		if err != nil {
			return fmt.Errorf("sim: partition %d: %w", id, err)
		}
		if p.init, err = failover.Encode(nil, st); err != nil {
			return fmt.Errorf("sim: partition %d: %w", id, err)
		}
		fw.parts = append(fw.parts, p)
		fw.nodeOf = append(fw.nodeOf, p.nodeOfReg...)
	}
	return nil
}

func (fw *foWorld) regionIndex(r quorum.Region) int {
	for i, x := range fw.regions {
		if x == r {
			return i
		}
	}
	return -1
}

// nodeFor returns the node hosting partition i's replica in region r.
func (fw *foWorld) nodeFor(i int, r quorum.Region) (int32, bool) {
	ri := fw.regionIndex(r)
	if ri < 0 {
		return 0, false
	}
	return fw.nodeOf[i*len(fw.regions)+ri], true
}

func (fw *foWorld) now() time.Duration { return fw.e.w.Now() }

// initRegisters has every partition's register written with its initial
// state (failover.Manager.Create, by the node of its first replica) and
// waits until all are committed. The managers' window bounds the creates
// in flight like every register operation: the proposer refuses beyond
// its bound on active keys, so a world of 100k partitions submitted at
// once never finished.
func (fw *foWorld) initRegisters(bound time.Duration) bool {
	for i := range fw.parts {
		n := fw.nodes[fw.parts[i].replicas[0].Node-1]
		s, err := failover.Decode(fw.parts[i].init)
		if err == nil {
			err = n.node.CreateRegister(fw.parts[i].id, s)
		}
		if err != nil {
			fw.e.viol.add(fw.now(), ViolationProtocol, "create %s: %v", fw.parts[i].name, err)
			return false
		}
	}
	for _, n := range fw.nodes {
		n.pump()
	}
	return fw.e.runUntil(fw.now()+bound, func() bool { return fw.known == len(fw.parts) })
}

// learned records a committed register value: the global checks (epochs
// only grow; a write region changes only with the epoch) and the metrics.
// Every newer version is a register write, however it is first seen: a
// node's own CAS, or the value a losing CAS or a read brought back (the
// winner's own outcome may come later).
func (fw *foWorld) learned(i int, version uint64, s failover.State, at time.Duration) {
	r := &fw.reg[i]
	if r.have && version <= r.version {
		if version == r.version && (s.Epoch != r.state.Epoch || s.WriteRegion != r.state.WriteRegion) {
			fw.e.viol.add(at, ViolationInvariant, "partition %s version %d seen with two states (epoch %d/%s vs %d/%s)",
				fw.parts[i].name, version, s.Epoch, s.WriteRegion, r.state.Epoch, r.state.WriteRegion)
		}
		return
	}
	if r.have {
		if s.Epoch < r.state.Epoch {
			fw.e.viol.add(at, ViolationInvariant, "partition %s epoch went back from %d to %d at version %d", fw.parts[i].name, r.state.Epoch, s.Epoch, version)
		}
		if s.Epoch == r.state.Epoch && s.WriteRegion != r.state.WriteRegion {
			fw.e.viol.add(at, ViolationInvariant, "partition %s: two write regions %s and %s in epoch %d", fw.parts[i].name, r.state.WriteRegion, s.WriteRegion, s.Epoch)
		}
	}
	old := *r
	if !r.have {
		fw.known++
	}
	if fw.ct != nil {
		kind, reason := "", ""
		if n := len(s.History); n > 0 && (len(old.state.History) == 0 || s.History[n-1] != old.state.History[len(old.state.History)-1]) {
			kind, reason = s.History[n-1].Kind.String(), s.History[n-1].Reason
		}
		fw.ct.part(i, ctEvent{at: at, kind: ctRegister, a: version, b: uint64(s.Epoch), s: string(s.WriteRegion),
			t: describeTransition(kind, reason, s.Phase, s.Paused) + fmt.Sprintf(", members %v", s.WriteQuorum.Members)})
	}
	r.have, r.version, r.state = true, version, s
	if old.have {
		fw.m.registerWrite(fw, i, old.state, s, at)
	}
	if old.have {
		fw.checkLeaseOverlap(i, old.state, s, at)
	}
	if fw.onLearn != nil && old.have {
		fw.onLearn(i, old.state, s, at)
	}
}

// recordPromote is the one-writer-per-epoch check, run on every promotion
// a node executes.
func (fw *foWorld) recordPromote(i int, e failover.Epoch, r quorum.Region, at time.Duration) {
	k := foEpochKey{part: i, epoch: e}
	fw.ct.part(i, ctEvent{at: at, kind: ctPromote, a: uint64(e), s: string(r)})
	if prev, ok := fw.promoted[k]; ok && prev != r {
		fw.e.viol.add(at, ViolationInvariant, "partition %s epoch %d promoted in two regions: %s and %s", fw.parts[i].name, e, prev, r)
		return
	}
	fw.promoted[k] = r
	if fw.testDoublePromote {
		fw.testDoublePromote = false
		other := fw.regions[(fw.regionIndex(r)+1)%len(fw.regions)]
		fw.recordPromote(i, e, other, at)
	}
}

// foNetRcv delivers node-to-node batches.
type foNetRcv struct{ fw *foWorld }

func (r foNetRcv) Deliver(now time.Duration, from, to int32, b nodewire.Batch) {
	r.fw.nodes[to].step(&b)
}

// cloneBatch copies a batch's arrays (the messages' own contents are
// immutable and shared): nodes recycle the arrays of what they stepped.
func cloneBatch(b *nodewire.Batch) nodewire.Batch {
	c := *b
	c.CAS = slices.Clone(b.CAS)
	c.Data = slices.Clone(b.Data)
	c.Heartbeats = slices.Clone(b.Heartbeats)
	c.Learns = slices.Clone(b.Learns)
	c.LearnAcks = slices.Clone(b.LearnAcks)
	return c
}

// foBackground adapts a fault profile to a failover scenario's background
// faults: message loss, duplication, reordering, delay spikes and every
// kind of network partition, with clock drift bounded so that no two
// clocks drift apart by more than the profile's MaxClockDrift over the
// whole fault (the leases allow for that much, no more). Crashes and
// pauses are the script's: its checks count on which nodes are down.
func foBackground(p FaultProfile, prof failover.Config, outage time.Duration) FaultProfile {
	p.Weights[FaultCrash], p.Weights[FaultPause] = 0, 0
	if outage <= 0 {
		outage = time.Minute
	}
	// Two clocks drifting apart at +rate and -rate for the whole outage.
	p.DriftBound = min(p.DriftBound, prof.MaxClockDrift.Seconds()/(2*outage.Seconds()))
	return p
}

// alone reports whether the script's fault is the only one: checks that
// say nothing else moved (node-failure, az-outage) or that pin how a
// failover was decided (gray-failure) hold only then. The safety checks
// (one writer per epoch, epochs, RPO 0, porcupine, convergence) hold
// under background faults too.
func (fw *foWorld) alone() bool { return fw.e.cfg.Faults == FaultsNone }

// livenessBound is how long the settled world has to converge once the
// clients stopped (see convergeBound).
func (fw *foWorld) livenessBound() time.Duration {
	return convergeBound(fw.e.cfg.LivenessBound, fw.spec.profile)
}

// convergeBound is the liveness phase's bound, derived from the failover
// configuration so that a correct system is never failed by a window
// shorter than its own rules, and a stuck one is still caught:
//
//   - a failure verdict under way when the phase starts may still shrink
//     a region out of a write quorum: a gray or stalled-follower verdict
//     lands up to GrayStall after the evidence that began it (the clients
//     stopped, so none is new), and a node judged failed (silent, or its
//     lease withheld by a gray verdict) is shrunk out a takeover delay
//     later;
//   - that shrink holds the region out for up to GrowHoldOffMax (the
//     hysteresis doubles the hold with each shrink within FlapWindow);
//   - catchUp (Config.LivenessBound) is left for everything else: the
//     region's catch-up, the grow's two steps, the register writes.
//
// It holds for every script, with or without background faults: a
// script's own fault shrinks write quorums too. A fixed window failed
// cluster-edge-lease seed 3, a correct run: a pause of a write region's
// node led to a third shrink 0.4 s into the phase, whose grow was held
// off 1 min (15 s doubled twice), 0.35 s past the window's end.
func convergeBound(catchUp time.Duration, p failover.Config) time.Duration {
	return p.GrayStall + p.TakeoverDelay() + p.GrowHoldOffMax + catchUp
}

// livenessBoundWhy says what the bound is made of, for the violation.
func (fw *foWorld) livenessBoundWhy() string {
	p := fw.spec.profile
	return fmt.Sprintf("GrayStall %v + takeover delay %v + GrowHoldOffMax %v + catch-up %v",
		p.GrayStall, p.TakeoverDelay(), p.GrowHoldOffMax, fw.e.cfg.LivenessBound)
}

// startFaults turns the background faults on (none under --faults none).
func (fw *foWorld) startFaults() {
	if fw.e.cfg.Faults != FaultsNone {
		fw.e.nem.Start()
	}
}

// stopFaults heals every background fault; call it after the script's own
// heal (Nemesis.Stop heals every link and restarts every node).
func (fw *foWorld) stopFaults() {
	if fw.e.cfg.Faults != FaultsNone {
		fw.e.nem.Stop()
	}
}

// fsyncDelay draws one fsync's duration.
func (fw *foWorld) fsyncDelay() time.Duration {
	return time.Duration(uniform(fw.diskRand, int64(foFsyncMin), int64(foFsyncMax)+1))
}

// checkHosts folds every live host's and manager's own invariant checks
// into the run.
func (fw *foWorld) checkHosts() {
	for _, n := range fw.nodes {
		n.checkNode()
	}
}

// converged reports that every partition's register has every replica
// back in the write quorum at a stable epoch and every replica follows it
// with nothing left to replicate.
//
// It is polled every few milliseconds while the world settles, so each
// call starts at the partition that failed the previous one: a failing
// poll costs little, and only the poll that succeeds checks them all.
func (fw *foWorld) converged() bool {
	// The convergence check reads the stores: no Ready may still wait for
	// its fsync (a replica's progress runs ahead of its store until then).
	for _, nd := range fw.nodes {
		if len(nd.inflight) > nd.inflightHead {
			return false
		}
	}
	n := len(fw.parts)
	for k := range n {
		i := (fw.convergeCursor + k) % n
		if !fw.partConverged(i) {
			fw.convergeCursor = i
			return false
		}
	}
	return true
}

// caughtUpSince reports whether every partition has, at some moment since
// the caller started asking (the returned closure keeps the marks), been
// back to a full write quorum with every replica at the register's epoch
// and holding every committed LSN. Unlike converged it does not need all
// partitions idle at one instant, which never happens while clients keep
// writing to thousands of partitions (a strong write is in flight for at
// least a WAN round trip).
func (fw *foWorld) caughtUpSince() func() bool {
	marked := make([]bool, len(fw.parts))
	left := len(fw.parts)
	cursor := 0
	return func() bool {
		// At most foCatchUpChecks partitions are looked at per poll, round
		// robin: with 100k partitions a full scan every 10 ms of simulated
		// time cost more than the simulation itself. Each partition is
		// still looked at every ceil(N/foCatchUpChecks) polls.
		checks := 0
		for k := 0; k < len(fw.parts) && checks < foCatchUpChecks && left > 0; k++ {
			i := cursor
			cursor = (cursor + 1) % len(fw.parts)
			if marked[i] {
				continue
			}
			checks++
			if fw.partCaughtUp(i) {
				marked[i] = true
				left--
			}
		}
		return left == 0
	}
}

// clientsOf returns partition i's clients: makeClients appends them
// partition by partition, clientsPerPartition each. A scan of every
// client per failover commit was quadratic: 60k commits over 200k clients
// at 100k partitions.
func (fw *foWorld) clientsOf(i int) []*foClient {
	k := fw.spec.clientsPerPartition + fw.spec.sessionClients + fw.spec.eventualClients
	lo, hi := min(i*k, len(fw.clients)), min((i+1)*k, len(fw.clients))
	return fw.clients[lo:hi]
}

// foUnconvergedShown bounds the partitions a non-convergence report details.
const foUnconvergedShown = 4

// unconverged describes the partitions that fail ok: how many, and for
// the first few the register value, every replica's progress and every
// manager's view (the version it holds, a proposal in flight, stale).
func (fw *foWorld) unconverged(ok func(int) bool) string {
	var b strings.Builder
	n := 0
	for i := range fw.parts {
		if ok(i) {
			continue
		}
		n++
		if n > foUnconvergedShown {
			continue
		}
		r := &fw.reg[i]
		fmt.Fprintf(&b, "; %s register v%d epoch %d write %s phase %v members %v:", fw.parts[i].name, r.version, r.state.Epoch,
			r.state.WriteRegion, r.state.Phase, r.state.WriteQuorum.Members)
		for _, rn := range fw.parts[i].replicas {
			nd := fw.nodes[rn.Node-1]
			if nd.host == nil || nd.mgr == nil {
				fmt.Fprintf(&b, " %s down", rn.Region)
				continue
			}
			pr, err := nd.host.Progress(fw.parts[i].id)
			if err != nil {
				fmt.Fprintf(&b, " %s: %v", rn.Region, err)
				continue
			}
			mp, _ := nd.mgr.Proposing(fw.parts[i].name)
			d, _ := nd.mgr.LastDecision(fw.parts[i].name)
			fmt.Fprintf(&b, " %s[epoch %d role %v last %d commit %d applied %d; manager v%d inflight %v stale %v last %v %s]",
				rn.Region, pr.Epoch, pr.Role, pr.LastLSN, pr.CommitLSN, pr.AppliedLSN, mp.Version, mp.InFlight, mp.Stale, d.Kind, d.Suppressed)
		}
	}
	return fmt.Sprintf("%d partitions%s", n, b.String())
}

func (fw *foWorld) partCaughtUp(i int) bool {
	r := &fw.reg[i]
	if !r.have || r.state.Phase != failover.PhaseSteady || len(r.state.WriteQuorum.Members) != len(r.state.WriteQuorum.Replicas) {
		return false
	}
	var prs []partition.Progress
	var lead partition.Progress
	for _, rn := range fw.parts[i].replicas {
		n := fw.nodes[rn.Node-1]
		if n.host == nil {
			return false
		}
		pr, err := n.host.Progress(fw.parts[i].id)
		if err != nil || failover.Epoch(pr.Epoch) != r.state.Epoch {
			return false
		}
		if rn.Region == r.state.WriteRegion {
			if pr.Role != partition.RoleLeader {
				return false
			}
			lead = pr
		}
		prs = append(prs, pr)
	}
	for _, pr := range prs {
		if pr.LastLSN < lead.CommitLSN {
			return false
		}
	}
	return true
}

func (fw *foWorld) partConverged(i int) bool {
	r := &fw.reg[i]
	if !r.have || r.state.Phase != failover.PhaseSteady || len(r.state.WriteQuorum.Members) != len(r.state.WriteQuorum.Replicas) {
		return false
	}
	var lead partition.Progress
	for _, rn := range fw.parts[i].replicas {
		n := fw.nodes[rn.Node-1]
		if n.host == nil {
			return false
		}
		pr, err := n.host.Progress(fw.parts[i].id)
		if err != nil || failover.Epoch(pr.Epoch) != r.state.Epoch {
			return false
		}
		if rn.Region == r.state.WriteRegion {
			if pr.Role != partition.RoleLeader {
				return false
			}
			lead = pr
		}
	}
	for _, rn := range fw.parts[i].replicas {
		pr, _ := fw.nodes[rn.Node-1].host.Progress(fw.parts[i].id)
		if pr.LastLSN != lead.LastLSN || pr.AppliedLSN != lead.CommitLSN || lead.CommitLSN != lead.LastLSN {
			return false
		}
	}
	return true
}

// checkLineage verifies that every acknowledged write is in the final
// lineage of its partition: the write region's epoch history maps its LSN
// to its epoch and it is committed. It returns the writes lost per
// partition (the RPO in operations).
func (fw *foWorld) checkLineage() []int {
	lost := make([]int, len(fw.parts))
	for i := range fw.parts {
		r := &fw.reg[i]
		node, ok := fw.nodeFor(i, r.state.WriteRegion)
		if !ok || fw.nodes[node].host == nil {
			continue
		}
		pr, err := fw.nodes[node].host.Progress(fw.parts[i].id)
		if err != nil {
			continue
		}
		// A replica's history may not cover its oldest LSNs (it is trimmed
		// to the log base and to MaxEpochHistory rows, and a snapshot
		// starts it afresh): such an LSN is read from a replica that holds
		// the same log (same epoch, last and commit LSN) and still covers it.
		same := []partition.Progress{pr}
		for _, rn := range fw.parts[i].replicas {
			if n := fw.nodes[rn.Node-1]; rn.Region != r.state.WriteRegion && n.host != nil {
				if o, err := n.host.Progress(fw.parts[i].id); err == nil && o.Epoch == pr.Epoch && o.LastLSN == pr.LastLSN && o.CommitLSN == pr.CommitLSN {
					same = append(same, o)
				}
			}
		}
		for _, a := range fw.m.acks[i] {
			if a.LSN > pr.CommitLSN || lineageEpoch(same, a.LSN) != a.Epoch {
				lost[i]++
			}
		}
		if lost[i] > 0 {
			fw.e.viol.add(fw.now(), ViolationInvariant, "partition %s lost %d acknowledged strong writes", fw.parts[i].name, lost[i])
		}
	}
	return lost
}

// lineageEpoch is the epoch of an LSN by the first of the replicas whose
// history covers it (0 if none does: counted lost, never assumed).
func lineageEpoch(ps []partition.Progress, lsn partition.LSN) partition.Epoch {
	for _, p := range ps {
		if e, ok := partition.EpochAt(p.History, lsn); ok {
			return e
		}
	}
	return 0
}

// checkConvergence compares the applied state of every replica.
func (fw *foWorld) checkConvergence() {
	for i := range fw.parts {
		var ref map[string]string
		for _, rn := range fw.parts[i].replicas {
			st := fw.nodes[rn.Node-1].store
			kv, err := readAllKV(st, fw.parts[i].id)
			if err != nil {
				fw.e.viol.add(fw.now(), ViolationConvergence, "partition %s region %s: %v", fw.parts[i].name, rn.Region, err)
				continue
			}
			if ref == nil {
				ref = kv
				continue
			}
			if !mapsEqual(ref, kv) {
				fw.e.viol.add(fw.now(), ViolationConvergence, "partition %s: replica %s differs from %s", fw.parts[i].name, rn.Region, fw.parts[i].replicas[0].Region)
			}
		}
	}
}

func readAllKV(st *partition.MemStore, p partition.ID) (map[string]string, error) {
	out := map[string]string{}
	var after []byte
	for range 1 << 16 {
		kvs, more, _, err := st.ReadKV(p, after, 1<<20)
		if err != nil {
			return nil, fmt.Errorf("sim: read state: %w", err)
		}
		for _, kv := range kvs {
			out[string(kv.Key)] = string(kv.Value)
		}
		if !more || len(kvs) == 0 {
			return out, nil
		}
		after = slices.Clone(kvs[len(kvs)-1].Key)
	}
	return out, errors.New("sim: state read did not end")
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
