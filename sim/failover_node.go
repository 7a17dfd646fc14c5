package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
)

// Timer kinds of a node (the low byte of an event's arg; the rest is the
// incarnation that armed it).
const (
	foEvHostTick uint64 = iota + 1
	foEvMgrTick
	foEvDisk
)

// foTickGrain is the resolution of a node's host timer.
const foTickGrain = 10 * time.Millisecond

// foNode drives one node's failover.Manager and partition.Host. It owns
// no decision: it hands the cores messages, time and disk results and
// carries out what their Ready asks.
type foNode struct {
	fw     *foWorld
	idx    int32
	region quorum.Region
	fnodes []failover.Node
	inc    uint64

	mgr   *failover.Manager
	host  *partition.Host
	store *partition.MemStore

	diskFree time.Duration
	// batchStart and batchDone: the last fsync queued (group commit).
	batchStart, batchDone time.Duration
	// maxDiskQueue is the longest wait a Ready had for its fsync.
	maxDiskQueue time.Duration
	// inflight[inflightHead:] are the Readys waiting for their fsync, in
	// order; popping advances the head (a shift per pop was quadratic in
	// the queue, which grows long with tens of thousands of partitions).
	inflight     []partition.Ready
	inflightHead int
	hostEv       EventID
	mgrEv        EventID
	// hostAt and mgrAt are the local deadlines hostEv and mgrEv were armed for.
	hostAt, mgrAt time.Duration
	lease         time.Duration

	dirty      []int
	dirtySpare []int
	// progBuf and statBuf are flushStatus's scratch for the followers of
	// one replica's progress and status (the manager copies what it keeps).
	progBuf []partition.FollowerProgress
	statBuf []failover.FollowerStatus
	isDirty []bool // by partition index: one byte each, where a map cost tens
	// handles are the manager's handles of the hosted partitions, by
	// partition index (zero: not hosted): status reports hash no name.
	handles []failover.PartitionHandle
	// inflightCAS is the proposal each partition has at this node's proposer.
	inflightCAS map[int]failover.Proposal
	pumping     bool
	// fed: the manager got input since its last Tick (Tick evaluates
	// what the input marked; ticking it on every event would cost a
	// liveness scan per event).
	fed bool
}

func (n *foNode) local() time.Duration { return n.fw.e.w.Local(n.idx) }

// boot starts (or restarts) the node's cores from its store. A restarted
// node knows no register value: it reads every partition's back.
func (n *foNode) boot(first bool) error {
	fw := n.fw
	n.checkManager() // before a restart replaces it
	n.inc++
	mgr, err := failover.NewManager(failover.ManagerConfig{Failover: fw.spec.profile, Self: failover.NodeID(n.idx + 1), Nodes: n.fnodes,
		MaxInFlight: fw.window, VerifySkips: foVerifySkips})
	if err != nil {
		return fmt.Errorf("sim: node %d manager: %w", n.idx, err)
	}
	hcfg := partition.DefaultConfig(n.region, n.inc)
	// Leases are real here: a write region without one stops acknowledging.
	hcfg.LeaseGatesWrites = true
	h, err := partition.NewHost(hcfg)
	if err != nil {
		return fmt.Errorf("sim: node %d host: %w", n.idx, err)
	}
	n.mgr, n.host = mgr, h
	n.fed = true
	n.isDirty = make([]bool, len(fw.parts))
	n.handles = make([]failover.PartitionHandle, len(fw.parts))
	n.dirty, n.inflight, n.inflightHead, n.lease = nil, nil, 0, 0
	clear(n.inflightCAS)
	n.diskFree = fw.now()
	n.batchStart, n.batchDone = 0, 0
	now := n.local()
	for i := range fw.parts {
		p := &fw.parts[i]
		hosted := false
		for _, rn := range p.replicas {
			if rn.Node == failover.NodeID(n.idx+1) {
				hosted = true
			}
		}
		if !hosted {
			continue
		}
		if err := mgr.AddPartition(failover.Placement{Partition: p.name, Replicas: p.replicas}); err != nil {
			return fmt.Errorf("sim: node %d: %w", n.idx, err)
		}
		n.handles[i], _ = mgr.Handle(p.name)
		if first {
			wq := quorum.WriteQuorum{Replicas: sortedRegions(p.replicas), WriteRegion: p.initial, Members: sortedRegions(p.replicas), MinDurability: fw.spec.minDurability}
			spec := partition.Spec{Level: partition.Level{Consistency: partition.Strong}, Quorum: wq, Epoch: 1}
			if err := h.Create(now, p.id, spec, 0); err != nil {
				return fmt.Errorf("sim: node %d create %d: %w", n.idx, p.id, err)
			}
		} else {
			rec, err := n.store.Load(p.id)
			if err != nil {
				return fmt.Errorf("sim: node %d load %d: %w", n.idx, p.id, err)
			}
			if err := h.Open(now, rec); err != nil {
				return fmt.Errorf("sim: node %d open %d: %w", n.idx, p.id, err)
			}
			mgr.RequestRead(p.name)
		}
		n.markDirty(i)
	}
	mgr.Tick(now) // starts the liveness view: its first round goes out now
	n.pump()
	return nil
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

// Crash loses the cores and everything not on disk.
func (n *foNode) Crash(now time.Duration) {
	n.mgr, n.host = nil, nil
	n.inflight, n.inflightHead = nil, 0
	n.store = n.store.Reopen()
	n.fw.e.w.Sched.Cancel(n.hostEv)
	n.fw.e.w.Sched.Cancel(n.mgrEv)
}

// Restart boots from the store.
func (n *foNode) Restart(now time.Duration) {
	if err := n.boot(false); err != nil {
		n.fw.e.viol.add(now, ViolationRecovery, "%v", err)
	}
}

func (n *foNode) markDirty(i int) {
	if i >= 0 && i < len(n.fw.parts) && !n.isDirty[i] {
		n.isDirty[i] = true
		n.dirty = append(n.dirty, i)
	}
}

// submit hands a register operation to this node's proposer.
func (n *foNode) submit(i int, kind uint64, ch caspaxos.Change) {
	pp := n.fw.cas.prop[n.idx]
	err := pp.submit(n, uint64(i)*foTagKinds+kind, n.fw.parts[i].name, ch)
	if err == nil {
		return
	}
	switch kind {
	case foTagInit:
		n.fw.m.refused.Init++
	case foTagCAS:
		n.fw.m.refused.CAS++
	case foTagRead:
		n.fw.m.refused.Read++
	}
	if n.mgr != nil && kind == foTagCAS {
		n.mgr.CASDone(n.local(), n.fw.parts[i].name, false, err)
		n.fed = true
	}
	if n.mgr != nil && kind == foTagRead {
		n.mgr.ReadDone(n.local(), n.fw.parts[i].name, err)
		n.fed = true
	}
}

// opDone is the proposer's result for a register operation.
func (n *foNode) opDone(tag uint64, res caspaxos.Result) {
	fw := n.fw
	i, kind := int(tag/foTagKinds), tag%foTagKinds
	if n.mgr == nil || i >= len(fw.parts) {
		return
	}
	name := fw.parts[i].name
	now := n.local()
	cur, ok := res.Value, res.Err == nil
	var vm *caspaxos.VersionMismatchError
	if errors.As(res.Err, &vm) {
		cur, ok = vm.Current, true
	}
	if kind == foTagCAS {
		prop := n.inflightCAS[i]
		delete(n.inflightCAS, i)
		switch {
		case res.Err == nil:
			n.mgr.CASDone(now, name, true, nil)
		case vm != nil:
			n.mgr.CASDone(now, name, false, nil)
		default:
			n.mgr.CASDone(now, name, false, res.Err)
		}
		n.fed = true
		_ = prop
	}
	if ok && cur.Exists() {
		s, err := failover.Decode(cur.Data)
		if err != nil {
			fw.e.viol.add(fw.now(), ViolationProtocol, "partition %s register: %v", name, err)
			return
		}
		fw.learned(i, cur.Version, s, fw.now())
		n.mgr.ObserveState(now, name, cur.Version, s)
		n.fed = true
		if res.Err == nil && cur.Version > 0 {
			// Share the committed value: every manager learns it without
			// another register operation. Values read back are shared
			// too (a stand-in for the register watch): a proposer that
			// crashed after its CAS committed but before sharing it
			// leaves the others ignorant until someone reads it back.
			for _, o := range fw.nodes {
				if o != n {
					fw.ctl.Send(n.idx, o.idx, foCtl{isLearn: true, part: int32(i), version: cur.Version, data: cur.Data})
				}
			}
		}
	}
	if kind == foTagRead {
		n.mgr.ReadDone(now, name, res.Err)
		n.fed = true
	}
	n.pump()
}

func (n *foNode) opLost(tag uint64) {}

// Fire runs the node's timers.
func (n *foNode) Fire(now time.Duration, arg uint64) {
	if arg>>8 != n.inc || n.host == nil || !n.fw.e.w.Live(n.idx) {
		return
	}
	switch arg & 0xff {
	case foEvHostTick:
		n.hostEv = EventID{}
		n.host.Tick(n.local())
	case foEvMgrTick:
		n.mgrEv = EventID{}
		n.mgr.Tick(n.local())
	case foEvDisk:
		n.completeDisk()
	}
	n.pump()
}

// pump runs the driver loop until the cores have nothing more to hand
// over: host Readys to disk, replica status to the manager, the manager's
// heartbeats, proposals and actions out; then re-arms the timers.
func (n *foNode) pump() {
	if n.host == nil || n.pumping {
		return
	}
	n.pumping = true
	defer func() { n.pumping = false }()
	fw := n.fw
	for range foPumpRounds {
		busy := false
		for n.host.HasReady() {
			busy = true
			rd := n.host.Ready(n.local())
			fw.deliverReplies(n, rd.Replies)
			rd.Replies = rd.Replies[:0] // delivered; the array goes back to the host with the rest
			// Group commit: a Ready that comes while an fsync is running
			// joins the next one, which starts when the running one ends;
			// only a Ready with nothing queued starts a new fsync. A
			// separate fsync per Ready let the disk queue grow with the
			// message rate: under a failover's or a re-sync's load it grew
			// past the partitions' RetransmitTimeout, every window was
			// sent again and the retransmissions queued more fsyncs.
			done := max(fw.now(), n.diskFree)
			if len(rd.Writes) > 0 {
				if n.batchDone > fw.now() && n.batchStart > fw.now() {
					done = n.batchDone // the queued fsync has not started: join it
				} else {
					n.batchStart = max(fw.now(), n.diskFree)
					n.batchDone = n.batchStart + fw.cas.fsyncDelay()
					done = n.batchDone
				}
				for i := range rd.Writes {
					n.markDirty(int(rd.Writes[i].Partition) - 1)
				}
			}
			n.diskFree = max(n.diskFree, done)
			n.maxDiskQueue = max(n.maxDiskQueue, done-fw.now())
			n.inflight = append(n.inflight, rd)
			if len(rd.Writes) == 0 && len(n.inflight)-n.inflightHead == 1 && done <= fw.now() {
				// Nothing to make durable and nothing queued before it:
				// complete it now instead of through an event at this
				// same instant (a third of a drill's events were these).
				n.completeDisk()
				continue
			}
			fw.e.w.Sched.At(done, NoNode, n, n.inc<<8|foEvDisk)
		}
		if len(n.dirty) > 0 {
			busy = true
			n.flushStatus()
		}
		if n.fed {
			// Inputs (heartbeats included: StepHeartbeat refreshed the
			// view) only mark partitions; the view's own clock is
			// ticked at its deadlines (foEvMgrTick).
			n.fed = false
			n.mgr.Evaluate(n.local())
		}
		rd := n.mgr.Ready()
		if len(rd.Heartbeats)+len(rd.Proposals)+len(rd.Actions)+len(rd.Reads) > 0 {
			busy = true
		}
		for _, hb := range rd.Heartbeats {
			fw.ctl.Send(n.idx, int32(hb.To-1), foCtl{hb: hb})
		}
		for _, p := range rd.Proposals {
			n.propose(p)
		}
		for _, name := range rd.Reads {
			if i := fw.partIndex(name); i >= 0 {
				n.submit(i, foTagRead, caspaxos.Read())
			}
		}
		for _, pa := range rd.Actions {
			n.act(pa)
		}
		for _, r := range rd.Reachability {
			// Write regions stop probing replicas on nodes the view
			// suspects, and contact them at once when they are back.
			if i := fw.partIndex(r.Partition); i >= 0 {
				_ = n.host.SetReachable(n.local(), fw.parts[i].id, r.Region, r.Reachable) // a replica closed meanwhile has nothing to mark
				busy = true
			}
		}
		if !busy {
			break
		}
	}
	if l := n.mgr.Liveness().LeaseUntil(); l != n.lease {
		// One lease per node, handed to every replica when it changes:
		// never a per-partition, per-tick cost.
		n.lease = l
		n.host.SetLeaseAll(l)
	}
	// A replica counts the lease only in the run its manager validated
	// it for (a regained lease first reasserts the register).
	n.host.SetLeaseGen(n.mgr.Liveness().LeaseGen())
	// Re-arm the node's two timers only when their time moved: pump runs
	// after every event the node gets, and most leave both deadlines as
	// they were.
	w := fw.e.w
	if d, ok := n.host.NextDeadline(); ok && (d != n.hostAt || !w.Sched.Pending(n.hostEv)) {
		// Host timers fire on a foTickGrain grid: thousands of partitions'
		// heartbeat and retransmit deadlines then share tick events, at
		// the cost of firing each up to a grain late, as a kernel timer
		// wheel would.
		d = (d + foTickGrain - 1) / foTickGrain * foTickGrain
		n.hostAt = d
		n.hostEv = w.Sched.Reschedule(n.hostEv, max(w.VirtualAt(n.idx, d), w.Now()), NoNode, n, n.inc<<8|foEvHostTick)
	}
	if d := n.mgr.NextDeadline(); d > 0 && d < time.Duration(1<<62) && (d != n.mgrAt || !w.Sched.Pending(n.mgrEv)) {
		n.mgrAt = d
		n.mgrEv = w.Sched.Reschedule(n.mgrEv, max(w.VirtualAt(n.idx, d), w.Now()), NoNode, n, n.inc<<8|foEvMgrTick)
	}
}

// checkManager folds the manager's invariant check into the run.
func (n *foNode) checkManager() {
	if n.mgr == nil {
		return
	}
	if err := n.mgr.Violation(); err != nil {
		n.fw.e.viol.add(n.fw.now(), ViolationInvariant, "node %d: %v", n.idx, err)
	}
}

// foVerifySkips: every run checks one in this many of the evaluations its
// managers skip as quiet (failover.ManagerConfig.VerifySkips).
const foVerifySkips = 16

// flushStatus feeds the manager the status of every replica that changed.
func (n *foNode) flushStatus() {
	// Double-buffered: marks made while feeding (a read-back, an action)
	// go to the other slice, and neither is reallocated per flush.
	dirty := n.dirty
	n.dirty, n.dirtySpare = n.dirtySpare[:0], nil
	defer func() { n.dirtySpare = dirty[:0] }()
	now := n.local()
	for _, i := range dirty {
		n.isDirty[i] = false
		p := &n.fw.parts[i]
		pr, err := n.host.ProgressWithoutHistory(p.id, n.progBuf) // the status needs no history
		if err != nil {
			continue
		}
		if pr.Followers != nil {
			n.progBuf = pr.Followers[:0]
		}
		st := failover.StatusFromProgressInto(pr, n.region, n.statBuf)
		if st.Followers != nil {
			n.statBuf = st.Followers[:0]
		}
		if st.Epoch > n.fw.regEpoch[i] { // reg[i].have && st.Epoch > reg[i].state.Epoch
			// The data plane heard of a newer epoch than this node's
			// manager: read the register back.
			n.mgr.RequestRead(p.name)
		}
		n.mgr.UpdateReplicaAt(now, n.handles[i], st)
		n.fed = true
	}
}

// propose turns a manager proposal into a CAS on the register.
func (n *foNode) propose(p failover.Proposal) {
	fw := n.fw
	i := fw.partIndex(p.Partition)
	if i < 0 {
		return
	}
	data, err := failover.Encode(nil, p.Next)
	if err != nil {
		fw.e.viol.add(fw.now(), ViolationProtocol, "encode %s: %v", p.Partition, err)
		n.mgr.CASDone(n.local(), p.Partition, false, err)
		return
	}
	fw.m.proposal(fw, i, p, fw.now())
	n.inflightCAS[i] = p
	n.submit(i, foTagCAS, caspaxos.CAS(p.Version, data))
}

// act carries out a manager's local actions on the partition replica.
func (n *foNode) act(pa failover.PartitionActions) {
	fw := n.fw
	i := fw.partIndex(pa.Partition)
	if i < 0 {
		return
	}
	id := fw.parts[i].id
	now := n.local()
	for _, a := range pa.Actions {
		var err error
		e := partition.Epoch(a.Epoch)
		switch a.Kind {
		case failover.ActPromote:
			fw.recordPromote(i, a.Epoch, n.region, fw.now())
			if a.Graceful {
				err = n.host.PromoteGraceful(now, id, e, partition.LSN(a.AfterLSN), a.WriteQuorum, 0)
			} else {
				err = n.host.Promote(now, id, e, partition.LSN(a.AfterLSN), a.WriteQuorum, 0)
			}
			if err == nil {
				fw.m.promoted(fw, i, fw.now())
			}
		case failover.ActFence:
			err = n.host.Fence(now, id, e, a.WriteRegion, 0)
		case failover.ActFollow:
			err = n.host.Fence(now, id, e, a.WriteRegion, 0)
			if err == nil && a.TruncateSet {
				err = n.host.Truncate(now, id, partition.LSN(a.TruncateAfter), 0)
				if err == nil {
					fw.m.falseProgress += a.Divergence.FalseProgressOps
				}
			}
		case failover.ActSetWriteQuorum:
			err = n.host.SetWriteQuorum(now, id, a.WriteQuorum, 0)
		case failover.ActValidateLease:
			err = n.host.ValidateLease(id, a.LeaseGen, e)
		}
		if err != nil {
			fw.m.actionErrors++
			if fw.m.firstActionErr == "" {
				fw.m.firstActionErr = fmt.Sprintf("node %d %s %v: %v", n.idx, pa.Partition, a.Kind, err)
			}
			return
		}
	}
	n.markDirty(i)
}

// completeDisk makes the oldest in-flight Ready durable and acts on it.
func (n *foNode) completeDisk() {
	if n.inflightHead >= len(n.inflight) {
		return
	}
	fw := n.fw
	rd := n.inflight[n.inflightHead]
	n.inflight[n.inflightHead] = partition.Ready{}
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
	if len(rd.Writes) > 0 {
		if err := n.store.Commit(rd.Writes); err != nil {
			fw.e.viol.add(fw.now(), ViolationInvariant, "node %d commit: %v", n.idx, err)
			return
		}
	}
	replies, fetched := partition.ExecReads(n.store, &rd)
	now := n.local()
	n.host.Advance(&rd)
	for i := range fetched {
		n.host.StepFetch(now, &fetched[i])
	}
	fw.deliverReplies(n, replies)
	fw.deliverReplies(n, rd.Done)
	for i := range rd.Messages {
		m := rd.Messages[i]
		to, ok := fw.nodeFor(int(m.Partition)-1, m.To)
		if !ok {
			continue
		}
		fw.m.dataSent(fw, to, &m)
		fw.data.Send(n.idx, to, m)
	}
	// The network copied the messages and the store the writes: the
	// host may reuse the Ready's slices.
	n.host.Recycle(&rd)
}

// partIndex maps a register key back to the partition's index.
func (fw *foWorld) partIndex(name string) int {
	var id uint64
	if _, err := fmt.Sscanf(name, "p/%d", &id); err != nil || id < 1 || id > uint64(len(fw.parts)) {
		return -1
	}
	return int(id - 1)
}
