// Package partitiontest is the deterministic multi-region harness for
// package partition: Hosts over MemStores, an event heap, a simulated
// network and disk. It lives outside the core because the core has no
// clock, scheduler or network of its own; the partition property tests
// (as package partition_test), package replcheck and through it the
// simulator's replication scenario drive it.
package partitiontest

import (
	"bytes"
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fmnode/fmnode/partition"
)

// Cluster is a deterministic in-memory harness: one Host per region over
// MemStores and a simulated network, driven single-threaded by explicit
// Step/RunUntil calls on a virtual clock, with randomness from one seeded
// *rand.Rand. Same seed, same calls: same run. It injects message loss,
// delay, duplication and reordering, one-way link cuts, and crash-restart
// of a region's node that keeps only what its store committed (a Ready
// whose disk write had not completed is lost, as are the messages and
// acknowledgements that depended on it). The simulator reaches it through
// package replcheck; the property tests drive it directly.
//
// It also checks safety continuously (see Violation): an (epoch, LSN) names
// one op everywhere (nothing from a stale or foreign lineage is applied
// under a known position), applied positions advance by contiguous ops and
// move back only through a truncation or a snapshot, and every host's own
// invariants hold.
type Cluster struct {
	cfg    ClusterConfig
	rng    *rand.Rand
	now    time.Duration
	nodes  []*clusterNode
	events eventHeap
	seq    uint64

	cut     map[[2]int]bool
	replies []ClientReply

	// canonical op per (epoch, LSN): the first time anyone persisted it.
	canon     map[canonKey]opDigest
	applied   map[[2]uint64]partition.LSN // (node, partition) -> applied LSN seen in writes
	violation error
	stats     ClusterStats

	// Observe, if set, sees every write a node commits (after the built-in
	// checks) and every message delivered.
	Observe func(ev ObservedEvent)
}

// ClusterConfig shapes a Cluster.
type ClusterConfig struct {
	Regions []partition.Region
	// Host is the template for every host; Region and Boot are set per node.
	Host partition.Config
	// Network: each message is delivered after a delay uniform in
	// [MinDelay, MaxDelay] (so messages reorder), lost with LossRate,
	// duplicated with DupRate.
	MinDelay, MaxDelay time.Duration
	LossRate, DupRate  float64
	// Disk: each Ready's commit takes a delay uniform in [MinDisk, MaxDisk]
	// after the previous one of the node completes (one fsync at a time).
	MinDisk, MaxDisk time.Duration
	// CrashAfterCommitRate is the chance that a node crashes right after a
	// commit became durable, before it acted on it (sent the messages).
	CrashAfterCommitRate float64
	// Lease, if positive, is granted to every replica at every restart
	// (the stand-in for the failover issue's lease): strong reads work
	// until Now+Lease.
	Lease time.Duration
}

// ClusterStats counts what the harness did.
type ClusterStats struct {
	Delivered, Lost, Duplicated, Cut uint64
	Commits, Crashes, Restarts       uint64
	CrashesAfterCommit               uint64
}

// ClientReply is a reply delivered to a client of the cluster.
type ClientReply struct {
	Region partition.Region
	At     time.Duration
	Reply  partition.Reply
}

// ObservedEvent is what Cluster.Observe sees.
type ObservedEvent struct {
	At      time.Duration
	Region  partition.Region
	Commit  []partition.Write  // a durable commit
	Message *partition.Message // a delivered message
}

type clusterNode struct {
	idx         int
	region      partition.Region
	host        *partition.Host
	store       *partition.MemStore
	up          bool
	incarnation uint64
	diskFree    time.Duration
	inflight    []partition.Ready // taken, commit not yet complete, in order
	tickAt      time.Duration
}

type canonKey struct {
	p   partition.ID
	e   partition.Epoch
	lsn partition.LSN
}

type opDigest struct {
	del   bool
	key   string
	value string
}

type eventKind uint8

const (
	evDeliver eventKind = iota + 1
	evDisk
	evTick
)

type event struct {
	at          time.Duration
	seq         uint64
	kind        eventKind
	node        int
	incarnation uint64
	msg         partition.Message
}

type eventHeap []event

func (e eventHeap) Len() int { return len(e) }
func (e eventHeap) Less(i, j int) bool {
	if e[i].at != e[j].at {
		return e[i].at < e[j].at
	}
	return e[i].seq < e[j].seq
}
func (e eventHeap) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *eventHeap) Push(x any)   { *e = append(*e, x.(event)) }
func (e *eventHeap) Pop() any {
	old := *e
	x := old[len(old)-1]
	old[len(old)-1] = event{}
	*e = old[:len(old)-1]
	return x
}

// NewCluster builds a cluster with every node up and no partitions.
func NewCluster(cfg ClusterConfig, rng *rand.Rand) (*Cluster, error) {
	if len(cfg.Regions) == 0 {
		return nil, configErr("ClusterConfig.Regions", "must not be empty")
	}
	if rng == nil {
		return nil, configErr("rng", "must not be nil")
	}
	switch {
	case cfg.MinDelay < 0 || cfg.MaxDelay < cfg.MinDelay:
		return nil, configErr("ClusterConfig.MaxDelay", "need 0 <= MinDelay <= MaxDelay, got %v, %v", cfg.MinDelay, cfg.MaxDelay)
	case cfg.MinDisk < 0 || cfg.MaxDisk < cfg.MinDisk:
		return nil, configErr("ClusterConfig.MaxDisk", "need 0 <= MinDisk <= MaxDisk, got %v, %v", cfg.MinDisk, cfg.MaxDisk)
	case cfg.LossRate < 0 || cfg.LossRate >= 1:
		return nil, configErr("ClusterConfig.LossRate", "must be in [0, 1), got %v", cfg.LossRate)
	case cfg.DupRate < 0 || cfg.DupRate >= 1:
		return nil, configErr("ClusterConfig.DupRate", "must be in [0, 1), got %v", cfg.DupRate)
	case cfg.CrashAfterCommitRate < 0 || cfg.CrashAfterCommitRate >= 1:
		return nil, configErr("ClusterConfig.CrashAfterCommitRate", "must be in [0, 1), got %v", cfg.CrashAfterCommitRate)
	}
	c := &Cluster{cfg: cfg, rng: rng, cut: map[[2]int]bool{}, canon: map[canonKey]opDigest{}, applied: map[[2]uint64]partition.LSN{}}
	for i, reg := range cfg.Regions {
		n := &clusterNode{idx: i, region: reg, store: partition.NewMemStore()}
		c.nodes = append(c.nodes, n)
		if err := c.boot(n); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Now returns the virtual time.
func (c *Cluster) Now() time.Duration { return c.now }

// Config returns the configuration the cluster was built with.
func (c *Cluster) Config() ClusterConfig { return c.cfg }

// Stats returns the harness counters.
func (c *Cluster) Stats() ClusterStats { return c.stats }

// Regions returns the regions, in node order.
func (c *Cluster) Regions() []partition.Region { return slices.Clone(c.cfg.Regions) }

func (c *Cluster) node(reg partition.Region) *clusterNode {
	for _, n := range c.nodes {
		if n.region == reg {
			return n
		}
	}
	return nil
}

// Host returns the host of region (nil while it is down).
func (c *Cluster) Host(reg partition.Region) *partition.Host {
	if n := c.node(reg); n != nil && n.up {
		return n.host
	}
	return nil
}

// Store returns the store of region.
func (c *Cluster) Store(reg partition.Region) *partition.MemStore {
	if n := c.node(reg); n != nil {
		return n.store
	}
	return nil
}

// Up reports whether region's node is running.
func (c *Cluster) Up(reg partition.Region) bool {
	n := c.node(reg)
	return n != nil && n.up
}

// Violation returns the first safety violation found by the harness or a host.
func (c *Cluster) Violation() error {
	if c.violation != nil {
		return c.violation
	}
	for _, n := range c.nodes {
		if n.up {
			if err := n.host.Violation(); err != nil {
				return fmt.Errorf("region %s: %w", n.region, err)
			}
		}
	}
	return nil
}

func (c *Cluster) violate(format string, args ...any) {
	if c.violation == nil {
		c.violation = fmt.Errorf("%w: cluster at %v: %s", partition.ErrInvariant, c.now, fmt.Sprintf(format, args...))
	}
}

func (c *Cluster) boot(n *clusterNode) error {
	cfg := c.cfg.Host
	cfg.Region = n.region
	n.incarnation++
	cfg.Boot = n.incarnation
	h, err := partition.NewHost(cfg)
	if err != nil {
		return err
	}
	ids, err := n.store.Partitions()
	if err != nil {
		return fmt.Errorf("region %s: %w", n.region, err)
	}
	for _, p := range ids {
		rec, err := n.store.Load(p)
		if err != nil {
			return fmt.Errorf("region %s: %w", n.region, err)
		}
		if err := h.Open(c.now, rec); err != nil {
			return fmt.Errorf("region %s: %w", n.region, err)
		}
		c.applied[[2]uint64{uint64(n.idx), uint64(p)}] = rec.Apply.Applied
	}
	if c.cfg.Lease > 0 {
		h.SetLeaseAll(c.now + c.cfg.Lease)
	}
	n.host, n.up, n.diskFree, n.inflight, n.tickAt = h, true, c.now, nil, 0
	c.pump(n)
	return nil
}

// Create creates partition p on every replica region of spec (every node
// must be up; creation is the control plane's job, retried until done).
func (c *Cluster) Create(p partition.ID, spec partition.Spec) error {
	for _, n := range c.nodes {
		if !n.up {
			return fmt.Errorf("cluster: create %d: region %s is down", p, n.region)
		}
	}
	for _, n := range c.nodes {
		if !spec.Quorum.IsReplica(n.region) {
			continue
		}
		if err := n.host.Create(c.now, p, spec, 0); err != nil {
			return err
		}
		if c.cfg.Lease > 0 {
			_ = n.host.SetLease(p, c.now+c.cfg.Lease)
		}
		c.pump(n)
	}
	return nil
}

// Write submits a client write to region's replica.
func (c *Cluster) Write(reg partition.Region, req partition.WriteRequest) {
	n := c.node(reg)
	if n == nil || !n.up {
		return // the client's request is lost; it times out
	}
	n.host.Write(c.now, &req)
	c.pump(n)
}

// Read submits a client read to region's replica.
func (c *Cluster) Read(reg partition.Region, req partition.ReadRequest) {
	n := c.node(reg)
	if n == nil || !n.up {
		return
	}
	n.host.Read(c.now, &req)
	c.pump(n)
}

// Control runs fn on region's host (Fence, Promote, Truncate, ...) at the
// current time and pumps the node.
func (c *Cluster) Control(reg partition.Region, fn func(now time.Duration, h *partition.Host) error) error {
	n := c.node(reg)
	if n == nil || !n.up {
		return fmt.Errorf("cluster: region %s is down", reg)
	}
	err := fn(c.now, n.host)
	c.pump(n)
	return err
}

// Replies drains the client replies delivered so far.
func (c *Cluster) Replies() []ClientReply {
	out := c.replies
	c.replies = nil
	return out
}

// WaitReply runs the cluster until the reply for ref arrives or d passes,
// and returns it. Replies for other refs stay queued for Replies.
func (c *Cluster) WaitReply(ref partition.ClientRef, d time.Duration) (ClientReply, bool) {
	deadline := c.now + d
	var pending []ClientReply
	defer func() { c.replies = append(pending, c.replies...) }()
	for {
		rs := c.Replies()
		for i, r := range rs {
			if r.Reply.Ref == ref {
				pending = append(pending, rs[i+1:]...) // keep the others of the batch
				return r, true
			}
			pending = append(pending, r)
		}
		if c.now >= deadline {
			return ClientReply{}, false
		}
		if !c.Step() {
			c.RunUntil(deadline)
		} else if c.now > deadline {
			c.RunUntil(c.now)
		}
	}
}

// Crash stops region's node: everything not committed is lost.
func (c *Cluster) Crash(reg partition.Region) {
	n := c.node(reg)
	if n == nil || !n.up {
		return
	}
	n.up = false
	n.host = nil
	n.inflight = nil
	c.stats.Crashes++
}

// Restart boots region's node from its store.
func (c *Cluster) Restart(reg partition.Region) error {
	n := c.node(reg)
	if n == nil || n.up {
		return nil
	}
	c.stats.Restarts++
	return c.boot(n)
}

// Cut drops every message from a to b until Heal.
func (c *Cluster) Cut(a, b partition.Region) {
	na, nb := c.node(a), c.node(b)
	if na != nil && nb != nil {
		c.cut[[2]int{na.idx, nb.idx}] = true
	}
}

// Isolate cuts region off in both directions.
func (c *Cluster) Isolate(reg partition.Region) {
	for _, n := range c.nodes {
		if n.region != reg {
			c.Cut(reg, n.region)
			c.Cut(n.region, reg)
		}
	}
}

// Heal removes every cut.
func (c *Cluster) Heal() { clear(c.cut) }

// SetLoss changes the message loss rate.
func (c *Cluster) SetLoss(rate float64) {
	if rate >= 0 && rate < 1 {
		c.cfg.LossRate = rate
	}
}

// SetCrashAfterCommitRate changes the chance of a crash right after a commit.
func (c *Cluster) SetCrashAfterCommitRate(rate float64) {
	if rate >= 0 && rate < 1 {
		c.cfg.CrashAfterCommitRate = rate
	}
}

// Step fires the next event. It reports false if there is none.
func (c *Cluster) Step() bool {
	if c.events.Len() == 0 {
		return false
	}
	ev := heap.Pop(&c.events).(event)
	if ev.at > c.now {
		c.now = ev.at
	}
	n := c.nodes[ev.node]
	switch ev.kind {
	case evDeliver:
		if !n.up {
			c.stats.Lost++
			return true
		}
		c.stats.Delivered++
		if c.Observe != nil {
			m := ev.msg
			c.Observe(ObservedEvent{At: c.now, Region: n.region, Message: &m})
		}
		_ = n.host.Step(c.now, &ev.msg)
	case evDisk:
		if !n.up || ev.incarnation != n.incarnation || len(n.inflight) == 0 {
			return true
		}
		c.completeDisk(n)
	case evTick:
		if !n.up || ev.incarnation != n.incarnation || ev.at != n.tickAt {
			return true
		}
		n.tickAt = 0
		n.host.Tick(c.now)
	}
	if n.up {
		c.pump(n)
	}
	return true
}

// RunUntil fires every event due at or before t, then sets the clock to t.
func (c *Cluster) RunUntil(t time.Duration) {
	for c.events.Len() > 0 && c.events[0].at <= t {
		c.Step()
	}
	if t > c.now {
		c.now = t
	}
	for _, n := range c.nodes {
		if n.up {
			c.pump(n)
		}
	}
}

// RunFor advances the clock by d.
func (c *Cluster) RunFor(d time.Duration) { c.RunUntil(c.now + d) }

// Pending returns the number of queued events.
func (c *Cluster) Pending() int { return c.events.Len() }

func (c *Cluster) push(ev event) {
	c.seq++
	ev.seq = c.seq
	heap.Push(&c.events, ev)
}

func (c *Cluster) uniform(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(c.rng.Int64N(int64(hi-lo)+1))
}

// pump takes the node's Ready (if any) and schedules its disk commit and
// the node's next timer.
func (c *Cluster) pump(n *clusterNode) {
	for n.up && n.host.HasReady() {
		rd := n.host.Ready(c.now)
		c.deliver(n, rd.Replies)
		rd.Replies = nil
		start := max(c.now, n.diskFree)
		done := start
		if len(rd.Writes) > 0 {
			done = start + c.uniform(c.cfg.MinDisk, c.cfg.MaxDisk)
		}
		n.diskFree = done
		n.inflight = append(n.inflight, rd)
		c.push(event{at: done, kind: evDisk, node: n.idx, incarnation: n.incarnation})
	}
	if n.up {
		if d, ok := n.host.NextDeadline(); ok && (n.tickAt == 0 || d < n.tickAt) {
			n.tickAt = max(d, c.now)
			c.push(event{at: n.tickAt, kind: evTick, node: n.idx, incarnation: n.incarnation})
		}
	}
}

// completeDisk makes the oldest in-flight Ready of n durable and acts on it.
func (c *Cluster) completeDisk(n *clusterNode) {
	rd := n.inflight[0]
	n.inflight = n.inflight[1:]
	if len(rd.Writes) > 0 {
		if err := n.store.Commit(rd.Writes); err != nil {
			c.violate("region %s: commit failed: %v", n.region, err)
			return
		}
		c.stats.Commits++
		c.checkWrites(n, rd.Writes)
		if c.Observe != nil {
			c.Observe(ObservedEvent{At: c.now, Region: n.region, Commit: rd.Writes})
		}
		if c.cfg.CrashAfterCommitRate > 0 && c.rng.Float64() < c.cfg.CrashAfterCommitRate {
			c.stats.CrashesAfterCommit++
			c.Crash(n.region)
			return
		}
	}
	replies, fetched := partition.ExecReads(n.store, &rd)
	c.deliver(n, n.host.Finish(c.now, &rd, replies, fetched))
	for i := range rd.Messages {
		c.send(n, rd.Messages[i])
	}
}

func (c *Cluster) deliver(n *clusterNode, rs []partition.Reply) {
	for _, r := range rs {
		c.replies = append(c.replies, ClientReply{Region: n.region, At: c.now, Reply: r})
	}
}

func (c *Cluster) send(from *clusterNode, m partition.Message) {
	to := c.node(m.To)
	if to == nil {
		c.stats.Lost++
		return
	}
	if c.cut[[2]int{from.idx, to.idx}] {
		c.stats.Cut++
		return
	}
	if c.cfg.LossRate > 0 && c.rng.Float64() < c.cfg.LossRate {
		c.stats.Lost++
		return
	}
	copies := 1
	if c.cfg.DupRate > 0 && c.rng.Float64() < c.cfg.DupRate {
		copies = 2
		c.stats.Duplicated++
	}
	for i := 0; i < copies; i++ {
		c.push(event{at: c.now + c.uniform(c.cfg.MinDelay, c.cfg.MaxDelay), kind: evDeliver, node: to.idx, msg: m})
	}
}

// checkWrites checks what a node made durable against everything seen.
func (c *Cluster) checkWrites(n *clusterNode, ws []partition.Write) {
	for i := range ws {
		w := &ws[i]
		key := [2]uint64{uint64(n.idx), uint64(w.Partition)}
		applied := c.applied[key]
		if w.Reset != nil {
			applied = 0
		}
		if w.Truncate != nil && w.Truncate.Applied > w.Truncate.After {
			applied = w.Truncate.After
		}
		for j := range w.Append {
			c.checkCanon(n, w.Partition, &w.Append[j], "appended")
		}
		for j := range w.Apply {
			op := &w.Apply[j]
			c.checkCanon(n, w.Partition, op, "applied")
			if op.LSN != applied+1 {
				c.violate("region %s partition %d: applied LSN %d after %d (not contiguous)", n.region, w.Partition, op.LSN, applied)
			}
			applied = op.LSN
		}
		if w.ApplyState != nil {
			if w.ApplyState.Applied < applied && w.Reset == nil && w.Install == nil {
				c.violate("region %s partition %d: applied LSN went back from %d to %d without truncation",
					n.region, w.Partition, applied, w.ApplyState.Applied)
			}
			applied = w.ApplyState.Applied
		}
		c.applied[key] = applied
	}
}

func (c *Cluster) checkCanon(n *clusterNode, p partition.ID, op *partition.Op, what string) {
	k := canonKey{p: p, e: op.Epoch, lsn: op.LSN}
	d := opDigest{del: op.Delete, key: string(op.Key), value: string(op.Value)}
	if old, ok := c.canon[k]; !ok {
		c.canon[k] = d
	} else if old != d {
		c.violate("region %s partition %d %s op (epoch %d, LSN %d) = %q=%q, but that position holds %q=%q elsewhere",
			n.region, p, what, op.Epoch, op.LSN, op.Key, op.Value, old.key, old.value)
	}
}

// Canonical returns the op persisted first at (p, e, lsn), if any.
func (c *Cluster) Canonical(p partition.ID, e partition.Epoch, lsn partition.LSN) (key, value []byte, del, ok bool) {
	d, ok := c.canon[canonKey{p: p, e: e, lsn: lsn}]
	if !ok {
		return nil, nil, false, false
	}
	return []byte(d.key), []byte(d.value), d.del, true
}

// StateOf reads p's applied state in region (from its store).
func (c *Cluster) StateOf(reg partition.Region, p partition.ID) (map[string][]byte, partition.LSN, error) {
	n := c.node(reg)
	if n == nil {
		return nil, 0, fmt.Errorf("cluster: no region %s", reg)
	}
	out := map[string][]byte{}
	var after []byte
	var applied partition.LSN
	for {
		kvs, more, a, err := n.store.ReadKV(p, after, 1<<20)
		if err != nil {
			return nil, 0, err
		}
		applied = a
		for _, kv := range kvs {
			out[string(kv.Key)] = kv.Value
		}
		if !more || len(kvs) == 0 {
			return out, applied, nil
		}
		after = bytes.Clone(kvs[len(kvs)-1].Key)
	}
}

func configErr(field string, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", partition.ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}
