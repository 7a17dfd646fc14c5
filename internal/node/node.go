package node

import (
	"fmt"
	"slices"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
)

// Node is one machine's acceptor, proposer, partition host, failover
// manager and register watch, composed as one deterministic state machine.
// It is not safe for concurrent use: one driver goroutine (or the
// simulator's one thread) owns it.
type Node struct {
	cfg  Config
	obs  Observer
	acc  *caspaxos.Acceptor // nil: not in the acceptor set
	prop *caspaxos.Proposer
	host *partition.Host
	mgr  *failover.Manager

	// peers are the cluster's nodes in id order; now[i] and synced[i]
	// collect what goes to peers[i] until the next Ready: now what depends
	// on no write (heartbeats, proposer requests, learns of committed
	// values), synced what may leave only once the Ready's writes are
	// durable (acceptor replies, replication).
	peers []NodeID
	// peerPos is each node id's index in peers (-1: not in the cluster).
	peerPos []int32
	// regions are the cluster's regions, sorted; nodeOfReg is, for every
	// hosted partition id, the node of each region's replica (flat, by
	// id*len(regions)+region; 0: none), and state is 0 for an id not
	// hosted, stateClean or stateDirty: the per-message lookups read these
	// flat arrays, not the partition's entry (a cache miss each).
	// known is, by partition id, the epoch of the newest register value
	// this node knows (MaxUint64: none yet), and handles the manager's
	// handle: the status path reads them per report.
	known      []failover.Epoch
	handles    []failover.PartitionHandle
	regions    []quorum.Region
	nodeRegion map[NodeID]quorum.Region
	nodeOfReg  []NodeID
	state      []uint8
	outNow     []nodewire.Batch
	outSync    []nodewire.Batch
	// watchAll are peers that learn every committed value.
	watchAll []NodeID

	// parts are the hosted partitions by id (nil: not hosted).
	parts []*part
	// dirty lists partitions whose replica status the manager has not seen.
	dirty, dirtySpare []partition.ID

	// Register operations at the proposer, by request id.
	ops     map[caspaxos.RequestID]regOp
	nextReq caspaxos.RequestID
	// reqs are the operator requests whose register writes are in
	// flight, by partition (requests.go).
	reqs map[partition.ID]*opRequest

	// pending is what the next Ready hands out.
	pending Ready
	fed     bool
	lease   time.Duration
	now     time.Duration

	// Timers: the deadline each core asked for (0: none), and the next
	// resend of a shared value (learnAt).
	hostAt, mgrAt, propAt, learnAt time.Duration
	// learnOut are the values this node shared that not every peer
	// acknowledged, by register key (see learn.go).
	learnOut map[string]*outLearn

	// scratch for the status path (the manager copies what it keeps).
	progBuf   []partition.FollowerProgress
	peerCount []int
	// freeData and freeHost are arrays drivers handed back (Recycle,
	// Advance), reused for the next per-peer batches and Readys: a drill
	// allocated a quarter of its bytes in them.
	freeData [][]partition.Message
	freeHost [][]partition.Ready
	statBuf  []failover.FollowerStatus
	// inflight counts Readys handed out and not yet advanced.
	inflight int
	stats    Stats
}

// part is one hosted partition.
type part struct {
	id       partition.ID
	name     string
	replicas []failover.RegionNode
	handle   failover.PartitionHandle
	// version is the newest committed register value's this node knows (0:
	// none yet; its epoch is in Node.known).
	version uint64
}

// Partition states (Node.state).
const (
	stateClean uint8 = iota + 1
	stateDirty
)

// peer returns node id's index in peers.
func (n *Node) peer(id NodeID) (int, bool) {
	if uint64(id) >= uint64(len(n.peerPos)) || n.peerPos[id] < 0 {
		return 0, false
	}
	return int(n.peerPos[id]), true
}

// regionIndex is r's index in regions (-1: unknown).
func (n *Node) regionIndex(r quorum.Region) int {
	for i, x := range n.regions {
		if x == r {
			return i
		}
	}
	return -1
}

// regOp is a register operation in flight at the proposer.
type regOp struct {
	part partition.ID
	kind OpKind
	// prop and at are an OpCAS's transition and submission time, for
	// Observer.CASDone.
	prop failover.Proposal
	at   time.Duration
}

// Stats counts what a node did.
type Stats struct {
	Readys       uint64
	Learns       uint64 // committed values learned from peers
	LearnsSent   uint64
	LearnsResent uint64 // shared values sent again for want of an ack
	LearnAcks    uint64 // acknowledgements of shared values
	ReadsBack    uint64 // register reads asked for by the node's own evidence
	ReadsUnknown uint64 // register reads after a CAS of unknown outcome
	DroppedCAS   uint64 // replies for an earlier incarnation's proposer
	DroppedData  uint64 // messages for partitions this node does not host
	ActionErrors uint64
}

// New builds a node from its config and its acceptor's recovered state.
// Partitions are added with CreatePartition or OpenPartition, and Start
// begins the liveness view.
func New(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, obs: cfg.Observer, ops: make(map[caspaxos.RequestID]regOp), reqs: map[partition.ID]*opRequest{}, learnOut: make(map[string]*outLearn)}
	if n.obs == nil {
		n.obs = NopObserver{}
	}
	if n.cfg.HostTickGrain == 0 {
		n.cfg.HostTickGrain = DefaultHostTickGrain
	}
	if n.cfg.PumpRounds == 0 {
		n.cfg.PumpRounds = DefaultPumpRounds
	}
	if n.cfg.LearnRetry == 0 {
		n.cfg.LearnRetry = DefaultLearnRetry
	}
	for _, nd := range cfg.Nodes {
		n.peers = append(n.peers, nd.ID)
	}
	slices.Sort(n.peers)
	n.peerPos = make([]int32, n.peers[len(n.peers)-1]+1)
	for i := range n.peerPos {
		n.peerPos[i] = -1
	}
	for i, id := range n.peers {
		n.peerPos[id] = int32(i)
	}
	n.nodeRegion = make(map[NodeID]quorum.Region, len(cfg.Nodes))
	for _, nd := range cfg.Nodes {
		n.nodeRegion[nd.ID] = nd.Region
		if !slices.Contains(n.regions, nd.Region) {
			n.regions = append(n.regions, nd.Region)
		}
	}
	slices.Sort(n.regions)
	n.outNow = make([]nodewire.Batch, len(n.peers))
	n.outSync = make([]nodewire.Batch, len(n.peers))
	for _, id := range cfg.WatchAll {
		if id != cfg.ID {
			n.watchAll = append(n.watchAll, id)
		}
	}
	if slices.Contains(cfg.Acceptors, cfg.ID) {
		acc, err := caspaxos.NewAcceptor(cfg.ID, cfg.AcceptorState)
		if err != nil {
			return nil, fmt.Errorf("node %d: acceptor: %w", cfg.ID, err)
		}
		acc.SetGuards(cfg.Guards)
		n.acc = acc
	}
	pc := cfg.Proposer
	if cfg.Guards != nil {
		pc.Guards = cfg.Guards
	}
	pc.ID = proposerID(cfg.ID, cfg.Boot)
	pc.Quorum = quorum.MajorityConfig(cfg.Acceptors...)
	prop, err := caspaxos.NewProposer(pc, cfg.Rand)
	if err != nil {
		return nil, fmt.Errorf("node %d: proposer: %w", cfg.ID, err)
	}
	n.prop = prop
	mc := cfg.Manager
	mc.Failover, mc.Self, mc.Nodes, mc.Boot = cfg.Failover, cfg.ID, cfg.Nodes, cfg.Boot
	if cfg.Guards != nil {
		mc.Guards = cfg.Guards
	}
	if n.mgr, err = failover.NewManager(mc); err != nil {
		return nil, fmt.Errorf("node %d: manager: %w", cfg.ID, err)
	}
	hc := cfg.Host
	hc.Region, hc.Boot = cfg.Region, cfg.Boot
	if cfg.Guards != nil {
		hc.Guards = cfg.Guards
	}
	if n.host, err = partition.NewHost(hc); err != nil {
		return nil, fmt.Errorf("node %d: host: %w", cfg.ID, err)
	}
	return n, nil
}

// ID is the node's id.
func (n *Node) ID() NodeID { return n.cfg.ID }

// Region is the node's region.
func (n *Node) Region() quorum.Region { return n.cfg.Region }

// Manager is the node's failover manager, for inspection (Explain,
// Evidence, Events). Calls that change it go through the node.
func (n *Node) Manager() *failover.Manager { return n.mgr }

// Host is the node's data plane, for inspection (Progress).
func (n *Node) Host() *partition.Host { return n.host }

// Acceptor is the node's register acceptor (nil if it hosts none).
func (n *Node) Acceptor() *caspaxos.Acceptor { return n.acc }

// Proposer is the node's register proposer, for its stats.
func (n *Node) Proposer() *caspaxos.Proposer { return n.prop }

// Stats returns the node's counters.
func (n *Node) Stats() Stats { return n.stats }

// Violation reports the first invariant a core of this node broke.
func (n *Node) Violation() error {
	if err := n.mgr.Violation(); err != nil {
		return fmt.Errorf("node %d manager: %w", n.cfg.ID, err)
	}
	if err := n.host.Violation(); err != nil {
		return fmt.Errorf("node %d host: %w", n.cfg.ID, err)
	}
	if n.acc != nil {
		if err := n.acc.Violation(); err != nil {
			return fmt.Errorf("node %d acceptor: %w", n.cfg.ID, err)
		}
	}
	return nil
}

// Start begins the liveness view: its first heartbeat round goes out in
// the next Ready.
func (n *Node) Start(now time.Duration) {
	n.now = now
	n.mgr.Tick(now)
	n.fed = true
}
