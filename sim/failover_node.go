package sim

import (
	"fmt"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
)

// Timer kinds of a node (the low byte of an event's arg; the rest is the
// incarnation that armed it).
const (
	foEvTick uint64 = iota + 1
	foEvDisk
)

// foNode drives one node.Node, the same core the daemon runs: it hands it
// the network's batches, its local (drifting) time and its disk's
// completions, and carries out its Readys. It owns no decision and knows
// nothing a real node could not: the world (network, disk, clock, faults)
// is all it adds.
type foNode struct {
	fw     *foWorld
	idx    int32
	region quorum.Region
	fnodes []failover.Node
	inc    uint64

	node *node.Node
	// mgr and host are node's cores while it runs (nil while down), for
	// the checkers and the scenario scripts to inspect.
	mgr  *failover.Manager
	host *partition.Host
	// store and acc are the node's disk: what an fsync completed.
	store *partition.MemStore
	acc   *caspaxos.MemoryStore

	diskFree time.Duration
	// batchStart and batchDone: the last fsync queued (group commit).
	batchStart, batchDone time.Duration
	// maxDiskQueue is the longest wait a Ready had for its fsync.
	maxDiskQueue time.Duration
	// inflight[inflightHead:] are the Readys waiting for their fsync, in
	// order; popping advances the head (a shift per pop was quadratic in
	// the queue, which grows long with tens of thousands of partitions).
	inflight     []node.Ready
	inflightHead int
	ev           EventID
	// evAt is the local deadline ev was armed for.
	evAt    time.Duration
	pumping bool
	// lease is the node's lease as of its last Ready (the checkers compare
	// acknowledgements against it; it outlives a crash until the restart).
	lease time.Duration
	// reuse is the node acceptor's first ballot reuse, once reported.
	reuse error
	// propPast sums the register proposer's stats of the incarnations
	// that crashed.
	propPast caspaxos.ProposerStats
}

func (n *foNode) local() time.Duration { return n.fw.e.w.Local(n.idx) }

// boot starts (or restarts) the node from its disk. A restarted node
// knows no register value: it reads every partition's back.
func (n *foNode) boot(first bool) error {
	fw := n.fw
	n.checkNode() // before a restart replaces it
	n.inc++
	st, err := n.acc.Load()
	if err != nil {
		return fmt.Errorf("sim: node %d acceptor store: %w", n.idx, err)
	}
	hcfg := partition.DefaultConfig(n.region, n.inc)
	// Leases are real here: a write region without one stops acknowledging.
	hcfg.LeaseGatesWrites = true
	accs := make([]node.NodeID, len(n.fnodes))
	for i, fn := range n.fnodes {
		accs[i] = fn.ID
	}
	nd, err := node.New(node.Config{
		ID: node.NodeID(n.idx + 1), Region: n.region, Boot: n.inc, Nodes: n.fnodes,
		Acceptors: accs, AcceptorState: st,
		Failover: fw.spec.profile,
		Manager:  failover.ManagerConfig{MaxInFlight: fw.window, VerifySkips: foVerifySkips},
		Host:     hcfg,
		Proposer: fw.pcfg,
		Rand:     SubRand(fw.e.w.Seed, StreamProposer, uint64(n.idx)*proposerIDStride+n.inc),
		Observer: foObserver{n},
		Guards:   &fw.e.guards,
	})
	if err != nil {
		return fmt.Errorf("sim: node %d: %w", n.idx, err)
	}
	n.node, n.mgr, n.host = nd, nd.Manager(), nd.Host()
	n.inflight, n.inflightHead, n.lease = nil, 0, 0
	n.diskFree = fw.now()
	n.batchStart, n.batchDone = 0, 0
	now := n.local()
	for i := range fw.parts {
		p := &fw.parts[i]
		if !p.hostedOn(node.NodeID(n.idx + 1)) {
			continue
		}
		pl := node.Placement{ID: p.id, Replicas: p.replicas}
		if first {
			wq := quorum.WriteQuorum{Replicas: sortedRegions(p.replicas), WriteRegion: p.initial, Members: sortedRegions(p.replicas), MinDurability: fw.spec.minDurability}
			spec := partition.Spec{Level: partition.Level{Consistency: partition.Strong}, Quorum: wq, Epoch: 1}
			err = nd.CreatePartition(now, pl, spec)
		} else {
			var rec partition.Recovered
			if rec, err = n.store.Load(p.id); err == nil {
				err = nd.OpenPartition(now, pl, rec)
			}
		}
		if err != nil {
			return fmt.Errorf("sim: node %d: %w", n.idx, err)
		}
	}
	nd.Start(now)
	n.pump()
	return nil
}

func (p *foPart) hostedOn(id node.NodeID) bool {
	for _, rn := range p.replicas {
		if rn.Node == id {
			return true
		}
	}
	return false
}

func sortedRegions(rs []failover.RegionNode) []quorum.Region {
	out := make([]quorum.Region, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Region)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Crash loses the node and everything not on disk.
func (n *foNode) Crash(now time.Duration) {
	n.checkNode()
	if n.node != nil {
		s := n.node.Proposer().Stats()
		n.propPast.Rounds += s.Rounds
		n.propPast.NAKs += s.NAKs
		if cs := n.fw.clusterLayer; cs != nil {
			cs.staleRejectedPast += n.host.Stats().StaleRejected
			cs.acksWithheldPast += n.host.Stats().AcksWithheld
		}
	}
	n.node, n.mgr, n.host = nil, nil, nil
	n.inflight, n.inflightHead = nil, 0
	n.store = n.store.Reopen()
	n.fw.e.w.Sched.Cancel(n.ev)
}

// Restart boots from the disk.
func (n *foNode) Restart(now time.Duration) {
	if err := n.boot(false); err != nil {
		n.fw.e.viol.add(now, ViolationRecovery, "%v", err)
	}
}

// Fire runs the node's timer and its disk completions.
func (n *foNode) Fire(now time.Duration, arg uint64) {
	if arg>>8 != n.inc || n.node == nil || !n.fw.e.w.Live(n.idx) {
		return
	}
	switch arg & 0xff {
	case foEvTick:
		n.ev = EventID{}
		n.node.Tick(n.local())
	case foEvDisk:
		n.completeDisk()
	}
	n.pump()
}

// step hands the node a batch from the network.
func (n *foNode) step(b *nodewire.Batch) {
	if n.node == nil {
		return
	}
	if n.fw.checkStale {
		n.staleBeforeStep(b)
	}
	if err := n.node.Step(n.local(), b); err != nil {
		n.fw.e.viol.add(n.fw.now(), ViolationProtocol, "node %d: %v", n.idx, err)
	}
	if n.fw.checkStale {
		n.staleAfterStep()
	}
	n.node.Recycle(b) // the network's copy of the batch ends here
	n.pump()
}

// pump carries out the node's Readys until it has none: what needs no
// write leaves at once, the rest waits for its fsync (group commit); then
// it re-arms the node's timer.
func (n *foNode) pump() {
	if n.node == nil || n.pumping {
		return
	}
	n.pumping = true
	defer func() { n.pumping = false }()
	fw := n.fw
	for range foPumpRounds {
		rd := n.node.Ready()
		if rd.Empty() {
			break
		}
		n.send(rd.Messages)
		fw.deliverReplies(n, rd.Replies)
		rd.Replies = nil
		fw.dns.routes(n, rd.Routes)
		rd.Messages, rd.Routes = nil, nil
		// Group commit: a Ready that comes while an fsync is running
		// joins the next one, which starts when the running one ends;
		// only a Ready with nothing queued starts a new fsync. A
		// separate fsync per Ready let the disk queue grow with the
		// message rate: under a failover's or a re-sync's load it grew
		// past the partitions' RetransmitTimeout, every window was
		// sent again and the retransmissions queued more fsyncs.
		done := max(fw.now(), n.diskFree)
		if rd.MustSync() {
			if n.batchDone > fw.now() && n.batchStart > fw.now() {
				done = n.batchDone // the queued fsync has not started: join it
			} else {
				n.batchStart = max(fw.now(), n.diskFree)
				n.batchDone = n.batchStart + fw.fsyncDelay()
				done = n.batchDone
			}
		}
		n.diskFree = max(n.diskFree, done)
		n.maxDiskQueue = max(n.maxDiskQueue, done-fw.now())
		n.inflight = append(n.inflight, rd)
		if !rd.MustSync() && len(n.inflight)-n.inflightHead == 1 && done <= fw.now() {
			// Nothing to make durable and nothing queued before it:
			// complete it now instead of through an event at this
			// same instant.
			n.completeDisk()
			continue
		}
		// On the node's index, so that a pause holds the completion
		// until the node resumes: with NoNode it fired while paused and
		// was dropped, leaving the node a Ready behind for good (its
		// newest Ready waited for the next one's fsync: a quiet world
		// never converged; found by the cluster scenario under heavy).
		fw.e.w.Sched.At(done, n.idx, n, n.inc<<8|foEvDisk)
	}
	n.lease = n.mgr.Liveness().LeaseUntil()
	n.arm()
}

// arm re-arms the node's timer, only when its time moved: pump runs after
// every event the node gets, and most leave the deadline as it was.
func (n *foNode) arm() {
	w := n.fw.e.w
	d, ok := n.node.NextDeadline()
	if !ok {
		w.Sched.Cancel(n.ev)
		n.ev = EventID{}
		return
	}
	if d != n.evAt || !w.Sched.Pending(n.ev) {
		n.evAt = d
		n.ev = w.Sched.Reschedule(n.ev, max(w.VirtualAt(n.idx, d), w.Now()), n.idx, n, n.inc<<8|foEvTick)
	}
}

// send puts the node's batches on the network.
func (n *foNode) send(bs []nodewire.Batch) {
	fw := n.fw
	for i := range bs {
		b := bs[i]
		to := int32(b.To - 1)
		for j := range b.Data {
			fw.m.dataSent(fw, to, &b.Data[j])
		}
		if !fw.e.w.Live(to) {
			fw.dataToDown += uint64(len(b.Data))
		}
		fw.net.Send(n.idx, to, b)
	}
}

// checkNode folds the node's invariant checks into the run.
func (n *foNode) checkNode() {
	if n.node == nil {
		return
	}
	if err := n.node.Violation(); err != nil {
		n.fw.e.viol.add(n.fw.now(), ViolationInvariant, "node %d: %v", n.idx, err)
	}
	// Every proposer here is the real core: a reused ballot is its bug.
	if acc := n.node.Acceptor(); acc != nil {
		if _, err := acc.BallotReuse(); err != nil && err != n.reuse {
			n.reuse = err
			n.fw.e.viol.add(n.fw.now(), ViolationInvariant, "node %d: %v", n.idx, err)
		}
	}
}

// foVerifySkips: every run checks one in this many of the evaluations its
// managers skip as quiet (failover.ManagerConfig.VerifySkips).
const foVerifySkips = 16

// completeDisk makes the oldest in-flight Ready durable and acts on it.
func (n *foNode) completeDisk() {
	if n.inflightHead >= len(n.inflight) {
		return
	}
	fw := n.fw
	rd := n.inflight[n.inflightHead]
	n.inflight[n.inflightHead] = node.Ready{}
	n.inflightHead++
	switch {
	case n.inflightHead == len(n.inflight):
		n.inflight, n.inflightHead = n.inflight[:0], 0
	case n.inflightHead >= 64 && 2*n.inflightHead >= len(n.inflight):
		// Reuse the front: the copy is paid for by the pops before it.
		k := copy(n.inflight, n.inflight[n.inflightHead:])
		clear(n.inflight[k:])
		n.inflight, n.inflightHead = n.inflight[:k], 0
	}
	for _, b := range rd.Acceptor {
		if err := n.acc.Apply(b); err != nil {
			fw.e.viol.add(fw.now(), ViolationInvariant, "node %d acceptor store: %v", n.idx, err)
			return
		}
	}
	for i := range rd.Host {
		if len(rd.Host[i].Writes) == 0 {
			continue
		}
		if err := n.store.Commit(rd.Host[i].Writes); err != nil {
			fw.e.viol.add(fw.now(), ViolationInvariant, "node %d commit: %v", n.idx, err)
			return
		}
		if fw.trackDurable {
			n.noteDurable(rd.Host[i].Writes)
		}
	}
	fw.deliverReplies(n, n.node.Advance(&rd, rd.Read(n.store)))
	n.send(rd.Synced)
}

// foObserver turns what a node reports into the world's checks and
// metrics (never into input for another node).
type foObserver struct{ n *foNode }

func (o foObserver) Committed(p partition.ID, version uint64, s failover.State) {
	o.n.fw.learned(int(p)-1, version, s, o.n.fw.now())
}

func (o foObserver) Proposed(p partition.ID, prop failover.Proposal) {
	fw := o.n.fw
	fw.m.proposal(fw, int(p)-1, prop, fw.now())
}

func (o foObserver) Promoted(p partition.ID, e failover.Epoch) {
	fw := o.n.fw
	fw.recordPromote(int(p)-1, e, o.n.region, fw.now())
	fw.m.promoted(fw, int(p)-1, fw.now())
}

func (o foObserver) Truncated(p partition.ID, ops uint64) { o.n.fw.m.falseProgress += ops }

func (o foObserver) ActionFailed(p partition.ID, a failover.Action, err error) {
	fw := o.n.fw
	fw.m.actionErrors++
	if fw.m.firstActionErr == "" {
		fw.m.firstActionErr = fmt.Sprintf("node %d %s %v: %v", o.n.idx, fw.parts[int(p)-1].name, a.Kind, err)
	}
}

// CASDone: the simulator's checkers read outcomes from the registers; the
// cluster scenario's operator learns here that its request lost its CAS
// (what the admin API answers a --wait with).
func (o foObserver) CASDone(p partition.ID, prop failover.Proposal, out node.CASOutcome, _ time.Duration) {
	if cs := o.n.fw.clusterLayer; cs != nil && out != node.CASCommitted {
		cs.casLost(int(p)-1, prop, out)
	}
}

func (o foObserver) RegisterRefused(p partition.ID, kind node.OpKind, err error) {
	switch kind {
	case node.OpCAS:
		o.n.fw.m.refused.CAS++
	case node.OpRead:
		o.n.fw.m.refused.Read++
	}
}
