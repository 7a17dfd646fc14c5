package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/quorum"
)

// ErrClusterConfig reports an invalid cluster shape.
var ErrClusterConfig = errors.New("sim: invalid cluster config")

// ClusterConfig shapes a CASPaxos deployment in a world.
type ClusterConfig struct {
	// Acceptors run on nodes 0..Acceptors-1 with ids 1..Acceptors.
	Acceptors int
	// Members are the acceptors of the starting configuration (nil: all).
	Members []caspaxos.NodeID
	// Proposers run on nodes slot % len(world nodes), or, with
	// SeparateProposers, on the nodes after the acceptors' only.
	Proposers         int
	SeparateProposers bool
	// Proposer tunes every proposer; ID and Quorum are filled in.
	Proposer caspaxos.ProposerConfig
	// KnownWriters, with forwarding on, tells every proposer that the
	// writers of every key are the cluster's proposers (their current
	// incarnations' ids, up or down): the partition layout a real node
	// reads its replicas from (caspaxos.ProposerConfig.ForwardWriters).
	KnownWriters bool
	// Factory builds acceptors (the canary swaps it).
	Factory AcceptorFactory
	// FsyncMin/FsyncMax bound a simulated fsync; SlowFsync is the chance
	// of an fsync 10-50 times slower (a device hiccup).
	FsyncMin, FsyncMax time.Duration
	SlowFsync          float64
	// MaxInFlight bounds messages on the wire.
	MaxInFlight int
}

// Proposer ids: 100 + incarnation*proposerIDStride + slot, so that a
// restarted proposer never shares an id (and so ballots) with its past.
const (
	proposerIDBase   = 100
	proposerIDStride = 1000
	// MaxProposers bounds proposers per cluster (the id scheme's room).
	MaxProposers = proposerIDStride - 1
	// MaxAcceptors bounds acceptors per cluster (ids stay below proposerIDBase).
	MaxAcceptors = proposerIDBase - 1
)

// Cluster is a CASPaxos deployment running on a world: the real acceptors
// and proposers, wired through the simulated network and disks. It owns
// nothing of the protocol: every decision is the cores'.
type Cluster struct {
	w    *World
	cfg  ClusterConfig
	net  *Network[caspaxos.Message]
	fnet *Network[caspaxos.Forward] // proposer to proposer (cluster_forward.go)
	acc  []*acceptorProc            // index id-1
	prop []*proposerProc
	byID map[caspaxos.NodeID]*proposerProc
	// writerIDs holds each slot's current proposer id (KnownWriters).
	writerIDs []caspaxos.NodeID

	quorum    quorum.Config // the configuration (re)started proposers adopt
	viol      *violations
	diskRand  *rand.Rand
	lostSyncs uint64
}

func newCluster(w *World, cfg ClusterConfig, viol *violations) (*Cluster, error) {
	if cfg.Acceptors < 1 || cfg.Acceptors > MaxAcceptors || cfg.Acceptors > len(w.Nodes) {
		return nil, fmt.Errorf("%w: %d acceptors on %d nodes", ErrClusterConfig, cfg.Acceptors, len(w.Nodes))
	}
	if cfg.Proposers < 1 || cfg.Proposers > MaxProposers {
		return nil, fmt.Errorf("%w: %d proposers (1..%d)", ErrClusterConfig, cfg.Proposers, MaxProposers)
	}
	if cfg.Factory == nil {
		cfg.Factory = NewAcceptor
	}
	if cfg.FsyncMax < cfg.FsyncMin || cfg.FsyncMin < 0 {
		return nil, fmt.Errorf("%w: fsync %v..%v", ErrClusterConfig, cfg.FsyncMin, cfg.FsyncMax)
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 1 << 20
	}
	members := cfg.Members
	if members == nil {
		for i := 1; i <= cfg.Acceptors; i++ {
			members = append(members, caspaxos.NodeID(i))
		}
	}
	c := &Cluster{
		w:         w,
		cfg:       cfg,
		byID:      make(map[caspaxos.NodeID]*proposerProc),
		writerIDs: make([]caspaxos.NodeID, cfg.Proposers),
		quorum:    quorum.MajorityConfig(members...),
		viol:      viol,
		diskRand:  NewRand(w.Seed, StreamDisk),
	}
	if err := c.quorum.Validate(); err != nil {
		return nil, fmt.Errorf("%w: members %v: %w", ErrClusterConfig, members, err)
	}
	c.net = NewNetwork[caspaxos.Message](w, c, cfg.MaxInFlight, summarizeMessage)
	c.fnet = NewNetwork[caspaxos.Forward](w, forwardReceiver{c}, cfg.MaxInFlight, summarizeForward)
	for i := 0; i < cfg.Acceptors; i++ {
		a := &acceptorProc{c: c, id: caspaxos.NodeID(i + 1), node: int32(i), disk: NewDisk()}
		if err := a.boot(); err != nil {
			return nil, err
		}
		c.acc = append(c.acc, a)
		w.Attach(a.node, a)
	}
	first, span := 0, len(w.Nodes)
	if cfg.SeparateProposers {
		first, span = cfg.Acceptors, len(w.Nodes)-cfg.Acceptors
		if span < 1 {
			return nil, fmt.Errorf("%w: no node left for proposers", ErrClusterConfig)
		}
	}
	for s := 0; s < cfg.Proposers; s++ {
		p := &proposerProc{c: c, slot: s, node: int32(first + s%span), pending: make(map[caspaxos.RequestID]pendingOp)}
		if err := p.boot(); err != nil {
			return nil, err
		}
		c.prop = append(c.prop, p)
		w.Attach(p.node, p)
	}
	return c, nil
}

// writers is the proposers' ForwardWriters with KnownWriters: every
// slot's current id, for every key. The slice is the cluster's; the
// proposer only reads it during the call.
func (c *Cluster) writers(string) []caspaxos.NodeID { return c.writerIDs }

// leaderNode is the node of the proposer with the smallest id, the leader
// of a shared key whose writers are known (caspaxos/forward.go).
func (c *Cluster) leaderNode() int32 {
	best := c.prop[0]
	for _, p := range c.prop[1:] {
		if p.id < best.id {
			best = p
		}
	}
	return best.node
}

// Quorum returns the configuration proposers currently adopt.
func (c *Cluster) Quorum() quorum.Config { return c.quorum }

// SetQuorum moves every proposer (and every future restart) to q.
func (c *Cluster) SetQuorum(q quorum.Config) error {
	for _, p := range c.prop {
		if p.p == nil {
			continue
		}
		if err := p.p.SetQuorum(q); err != nil {
			return fmt.Errorf("sim: proposer %d: %w", p.id, err)
		}
	}
	c.quorum = q
	return nil
}

// Deliver routes a delivered message to the process it is addressed to.
func (c *Cluster) Deliver(now time.Duration, from, to int32, m caspaxos.Message) {
	if m.Type.IsReply() {
		p := c.byID[m.To]
		if p == nil || p.node != to || p.p == nil {
			return // an old incarnation's reply: nobody listens any more
		}
		p.deliver(now, m)
		return
	}
	i := int(m.To) - 1
	if i < 0 || i >= len(c.acc) || c.acc[i].node != to {
		c.viol.add(now, ViolationProtocol, "message %v routed to node %d", m, to)
		return
	}
	c.acc[i].deliver(now, m)
}

// send puts a message on the wire from node from to whoever m.To is.
func (c *Cluster) send(from int32, m caspaxos.Message) {
	var to int32 = -1
	if m.Type.IsReply() {
		if p := c.byID[m.To]; p != nil {
			to = p.node
		}
	} else if i := int(m.To) - 1; i >= 0 && i < len(c.acc) {
		to = c.acc[i].node
	}
	if to < 0 {
		return // addressed to a proposer incarnation that no longer exists
	}
	c.net.Send(from, to, m)
}

func (c *Cluster) fsyncDelay() time.Duration {
	d := time.Duration(uniform(c.diskRand, int64(c.cfg.FsyncMin), int64(c.cfg.FsyncMax)+1))
	if c.cfg.SlowFsync > 0 && c.diskRand.Float64() < c.cfg.SlowFsync {
		d *= time.Duration(10 + c.diskRand.IntN(41))
	}
	return d
}

// Quiet reports that nothing is in flight: no message on the wire and no
// fsync pending. The liveness phase waits for it before comparing replicas.
func (c *Cluster) Quiet() bool {
	if c.net.InFlight() > 0 || c.fnet.InFlight() > 0 {
		return false
	}
	for _, a := range c.acc {
		if a.pendingSyncs() > 0 {
			return false
		}
	}
	return true
}

// PendingOps returns the operations submitted and not yet returned.
func (c *Cluster) PendingOps() int {
	n := 0
	for _, p := range c.prop {
		n += len(p.pending)
	}
	return n
}

// ProposerStats sums the counters of every proposer incarnation.
func (c *Cluster) ProposerStats() caspaxos.ProposerStats {
	var t caspaxos.ProposerStats
	for _, p := range c.prop {
		add(&t, p.totalStats())
	}
	return t
}

// Acceptor returns the acceptor with id (nil when down or unknown).
func (c *Cluster) Acceptor(id caspaxos.NodeID) *caspaxos.Acceptor {
	i := int(id) - 1
	if i < 0 || i >= len(c.acc) {
		return nil
	}
	return c.acc[i].acc
}

// summarizeMessage folds a CASPaxos message into the trace canonically.
func summarizeMessage(t *Trace, m *caspaxos.Message) {
	t.Byte(byte(m.Type))
	t.U64(uint64(m.From))
	t.U64(uint64(m.To))
	t.U64(m.Age)
	t.U64(uint64(len(m.Items)))
	for i := range m.Items {
		it := &m.Items[i]
		t.Str(it.Key)
		t.U64(it.Ballot.Counter)
		t.U64(uint64(it.Ballot.Proposer))
		t.U64(it.Next.Counter)
		t.U64(it.Accepted.Counter)
		t.U64(it.Value.Version)
		t.U64(uint64(len(it.Value.Data)))
		t.U64(it.Conflict.Counter)
		t.Byte(byte(it.Reject))
	}
}
