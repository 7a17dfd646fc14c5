package node

import (
	"container/heap"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
)

// tcluster is a deterministic test driver: N nodes, one thread, a shared
// clock, messages delivered after a fixed one-way delay, disks durable at
// once. The simulator is the thorough driver; this one keeps the node's
// own tests quick and readable.
type tcluster struct {
	t       *testing.T
	now     time.Duration
	delay   time.Duration
	nodes   []*Node
	acc     []*caspaxos.MemoryStore
	stores  []*partition.MemStore
	down    []bool
	boots   []uint64
	regions []quorum.Region
	q       msgQueue
	seq     uint64
	replies map[partition.ClientRef]partition.Reply
	places  []Placement
	obs     []*recObserver
	// drop, when set, loses the batches it returns true for.
	drop func(b *nodewire.Batch) bool
	// edit, when set, changes every node's config (restarts too).
	edit func(*Config)
}

type inflightMsg struct {
	at  time.Duration
	seq uint64
	b   nodewire.Batch
}

type msgQueue []inflightMsg

func (q msgQueue) Len() int { return len(q) }
func (q msgQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q msgQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *msgQueue) Push(x any)   { *q = append(*q, x.(inflightMsg)) }
func (q *msgQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

type recObserver struct {
	NopObserver
	promoted map[partition.ID][]failover.Epoch
	// cas counts CASDone by decision kind and outcome.
	cas map[failover.DecisionKind]map[CASOutcome]int
}

func (o *recObserver) CASDone(_ partition.ID, prop failover.Proposal, outcome CASOutcome, took time.Duration) {
	if o.cas == nil {
		o.cas = map[failover.DecisionKind]map[CASOutcome]int{}
	}
	if o.cas[prop.Kind] == nil {
		o.cas[prop.Kind] = map[CASOutcome]int{}
	}
	if took < 0 {
		panic("CASDone: negative duration")
	}
	o.cas[prop.Kind][outcome]++
}

func (o *recObserver) Promoted(p partition.ID, e failover.Epoch) {
	o.promoted[p] = append(o.promoted[p], e)
}

func fastProfile(t *testing.T) failover.Config {
	cfg, err := failover.Profile("fast")
	require.NoError(t, err)
	return cfg
}

func nodeConfig(t *testing.T, id NodeID, regions []quorum.Region, boot uint64, st caspaxos.State) Config {
	var nodes []failover.Node
	var accs []NodeID
	for i, r := range regions {
		nodes = append(nodes, failover.Node{ID: NodeID(i + 1), Region: r})
		accs = append(accs, NodeID(i+1))
	}
	return Config{
		ID: id, Region: regions[id-1], Boot: boot, Nodes: nodes, Acceptors: accs, AcceptorState: st,
		Failover: fastProfile(t),
		Manager:  failover.ManagerConfig{VerifySkips: 1},
		Host:     partition.DefaultConfig(regions[id-1], boot),
		Proposer: caspaxos.DefaultProposerConfig(0, quorum.Config{}),
		Rand:     rand.New(rand.NewPCG(uint64(id), boot)),
	}
}

func newTCluster(t *testing.T, parts int) *tcluster { return newTClusterWith(t, parts, nil) }

// newTClusterWith is newTCluster with every node's config changed by edit.
func newTClusterWith(t *testing.T, parts int, edit func(*Config)) *tcluster {
	c := &tcluster{t: t, delay: 5 * time.Millisecond, replies: map[partition.ClientRef]partition.Reply{},
		regions: []quorum.Region{"east", "west", "north"}, now: time.Second, edit: edit}
	for i := range c.regions {
		c.acc = append(c.acc, caspaxos.NewMemoryStore())
		c.stores = append(c.stores, partition.NewMemStore())
		c.down = append(c.down, false)
		c.boots = append(c.boots, 1)
		c.obs = append(c.obs, &recObserver{promoted: map[partition.ID][]failover.Epoch{}})
		n, err := New(c.config(NodeID(i+1), 1, caspaxos.State{}))
		require.NoError(t, err)
		c.nodes = append(c.nodes, n)
	}
	for p := 1; p <= parts; p++ {
		pl := Placement{ID: partition.ID(p)}
		for i, r := range c.regions {
			pl.Replicas = append(pl.Replicas, failover.RegionNode{Region: r, Node: NodeID(i + 1)})
		}
		c.places = append(c.places, pl)
		wq := quorum.WriteQuorum{Replicas: c.regions, WriteRegion: "east", Members: c.regions, MinDurability: 2}
		wq.Replicas = sortRegions(wq.Replicas)
		wq.Members = wq.Replicas
		for _, n := range c.nodes {
			require.NoError(t, n.CreatePartition(c.now, pl, partition.Spec{Level: partition.Level{Consistency: partition.Strong}, Quorum: wq, Epoch: 1}))
		}
		st, err := failover.NewState(partition.RegisterKey(pl.ID), "east", c.regions, failover.Strong, 2)
		require.NoError(t, err)
		require.NoError(t, c.nodes[0].CreateRegister(pl.ID, st))
	}
	for _, n := range c.nodes {
		n.Start(c.now)
	}
	return c
}

func withObserver(cfg Config, o Observer) Config { cfg.Observer = o; return cfg }

// config is node id's config in boot boot, with its observer and c.edit.
func (c *tcluster) config(id NodeID, boot uint64, st caspaxos.State) Config {
	cfg := withObserver(nodeConfig(c.t, id, c.regions, boot, st), c.obs[id-1])
	if c.edit != nil {
		c.edit(&cfg)
	}
	return cfg
}

func sortRegions(rs []quorum.Region) []quorum.Region {
	out := append([]quorum.Region(nil), rs...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// drain carries out every node's Ready: disks durable at once, messages
// queued with the delay.
func (c *tcluster) drain() {
	for i, n := range c.nodes {
		if c.down[i] {
			continue
		}
		for range 16 {
			rd := n.Ready()
			if rd.Empty() {
				break
			}
			c.deliver(rd.Replies)
			for _, b := range rd.Acceptor {
				require.NoError(c.t, c.acc[i].Apply(b))
			}
			for j := range rd.Host {
				require.NoError(c.t, c.stores[i].Commit(rd.Host[j].Writes))
			}
			c.deliver(n.Advance(&rd, rd.Read(c.stores[i])))
			for _, b := range append(rd.Messages, rd.Synced...) {
				c.seq++
				heap.Push(&c.q, inflightMsg{at: c.now + c.delay, seq: c.seq, b: b})
			}
		}
	}
}

func (c *tcluster) deliver(rs []partition.Reply) {
	for _, r := range rs {
		if r.Ref != 0 {
			c.replies[r.Ref] = r
		}
	}
}

// run advances time to until, delivering messages and firing timers.
func (c *tcluster) run(until time.Duration) {
	for {
		c.drain()
		next := until
		if len(c.q) > 0 && c.q[0].at < next {
			next = c.q[0].at
		}
		for i, n := range c.nodes {
			if d, ok := n.NextDeadline(); ok && !c.down[i] && d < next {
				next = max(d, c.now)
			}
		}
		if next >= until && (len(c.q) == 0 || c.q[0].at > until) {
			c.now = until
			for i, n := range c.nodes {
				if !c.down[i] {
					n.Tick(c.now)
				}
			}
			c.drain()
			return
		}
		c.now = next
		for len(c.q) > 0 && c.q[0].at <= c.now {
			m := heap.Pop(&c.q).(inflightMsg)
			to := int(m.b.To - 1)
			if c.down[to] || c.down[m.b.From-1] || (c.drop != nil && c.drop(&m.b)) {
				continue
			}
			_ = c.nodes[to].Step(c.now, &m.b)
		}
		for i, n := range c.nodes {
			if !c.down[i] {
				n.Tick(c.now)
			}
		}
	}
}

// write sends a strong write to node i and runs until it is answered or
// the bound passes.
func (c *tcluster) write(i int, p partition.ID, ref partition.ClientRef, epoch partition.Epoch, key, val string, bound time.Duration) (partition.Reply, bool) {
	c.nodes[i].Write(c.now, &partition.WriteRequest{Partition: p, Epoch: epoch, Ref: ref, Key: []byte(key), Value: []byte(val)})
	end := c.now + bound
	for c.now < end {
		c.run(c.now + 10*time.Millisecond)
		if r, ok := c.replies[ref]; ok {
			return r, true
		}
	}
	return partition.Reply{}, false
}

func (c *tcluster) known(i int, p partition.ID) (failover.State, bool) {
	s, _, ok := c.nodes[i].Manager().State(partition.RegisterKey(p))
	return s, ok
}

func (c *tcluster) crash(i int) { c.down[i] = true }

// restart boots node i again from its stores, as a new incarnation.
func (c *tcluster) restart(i int) {
	st, err := c.acc[i].Load()
	require.NoError(c.t, err)
	c.boots[i]++
	c.stores[i] = c.stores[i].Reopen()
	n, err := New(c.config(NodeID(i+1), c.boots[i], st))
	require.NoError(c.t, err)
	for _, pl := range c.places {
		rec, err := c.stores[i].Load(pl.ID)
		require.NoError(c.t, err)
		require.NoError(c.t, n.OpenPartition(c.now, pl, rec))
	}
	n.Start(c.now)
	c.nodes[i] = n
	c.down[i] = false
}
