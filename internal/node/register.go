package node

import (
	"errors"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/failover"
)

// The register path: the manager's proposals and reads become operations
// on this node's CASPaxos proposer; the proposer's messages go to the
// acceptors (this node's own is stepped in place); its results feed the
// manager, the watch (Learns to the nodes hosting the partition) and the
// DNS routes.

// pumpRegister moves the proposer's and the acceptor's output into the
// pending Ready and hands results back. It reports whether it moved
// anything.
func (n *Node) pumpRegister() bool {
	busy := false
	for range n.cfg.PumpRounds {
		moved := false
		if n.prop.HasReady() {
			moved = true
			msgs, results := n.prop.Ready()
			for _, m := range msgs {
				n.sendCAS(m)
			}
			for i := range results {
				n.opDone(&results[i])
			}
		}
		if n.acc != nil && n.acc.HasReady() {
			moved = true
			b, msgs := n.acc.Ready()
			if !b.Empty() {
				n.pending.Acceptor = append(n.pending.Acceptor, b)
			}
			for _, m := range msgs {
				n.sendCAS(m)
			}
		}
		if !moved {
			break
		}
		busy = true
	}
	return busy
}

// sendCAS routes one register message: to this node's acceptor at once
// (a request carries no state of the proposer's to make durable), to this
// node's proposer after the Ready is durable (a reply depends on the
// acceptor's write), or to the peer it names.
func (n *Node) sendCAS(m caspaxos.Message) {
	to := NodeID(m.To)
	if m.Type.IsReply() {
		to = nodeOfProposer(m.To)
	}
	if to == n.cfg.ID {
		if m.Type.IsReply() {
			n.pending.selfReplies = append(n.pending.selfReplies, m)
		} else if n.acc != nil {
			_ = n.acc.Step(m) // a refused request is the acceptor's answer; Violation reports a broken invariant
		}
		return
	}
	// A reply rests on the acceptor's write; a request on nothing.
	if b := n.queue(to, m.Type.IsReply()); b != nil {
		b.CAS = append(b.CAS, m)
	}
}

// pumpManager carries out the manager's Ready.
func (n *Node) pumpManager() bool {
	rd := n.mgr.Ready()
	if len(rd.Heartbeats)+len(rd.Proposals)+len(rd.Actions)+len(rd.Reads)+len(rd.Reachability) == 0 {
		return false
	}
	for _, hb := range rd.Heartbeats {
		if b := n.queue(hb.To, false); b != nil {
			b.Heartbeats = append(b.Heartbeats, hb)
		}
	}
	for _, p := range rd.Proposals {
		n.propose(p)
	}
	for _, name := range rd.Reads {
		if p := n.partOfKey(name); p != nil {
			n.submit(p, regOp{part: p.id, kind: OpRead}, caspaxos.Read())
		} else {
			n.mgr.ReadDone(n.now, name, errNotHosted)
		}
	}
	for _, pa := range rd.Actions {
		n.act(pa)
	}
	for _, r := range rd.Reachability {
		// Write regions stop probing replicas on nodes the view suspects,
		// and contact them at once when they are back.
		if p := n.partOfKey(r.Partition); p != nil {
			_ = n.host.SetReachable(n.now, p.id, r.Region, r.Reachable) // a replica closed meanwhile has nothing to mark
		}
	}
	return true
}

var errNotHosted = errors.New("node: partition not hosted here")

// propose turns a manager proposal into a CAS on the register.
func (n *Node) propose(pr failover.Proposal) {
	p := n.partOfKey(pr.Partition)
	if p == nil {
		n.mgr.CASDone(n.now, pr.Partition, false, errNotHosted)
		n.fed = true
		return
	}
	data, err := failover.Encode(nil, pr.Next)
	if err != nil {
		n.mgr.CASDone(n.now, pr.Partition, false, err)
		n.fed = true
		return
	}
	n.obs.Proposed(p.id, pr)
	n.submit(p, regOp{part: p.id, kind: OpCAS, prop: pr, at: n.now}, caspaxos.CAS(pr.Version, data))
}

// submit hands a register operation to the proposer; a refusal goes back
// to the manager at once.
func (n *Node) submit(p *part, op regOp, ch caspaxos.Change) {
	n.nextReq++
	id := n.nextReq
	if err := n.prop.Propose(n.now, id, p.name, ch); err != nil {
		n.obs.RegisterRefused(p.id, op.kind, err)
		if op.kind == OpCAS {
			n.obs.CASDone(p.id, op.prop, CASFailed, 0)
			n.mgr.CASDone(n.now, p.name, false, err)
			n.requestCASDone(p, op.prop, CASFailed, err)
		} else {
			n.mgr.ReadDone(n.now, p.name, err)
		}
		n.fed = true
		return
	}
	n.ops[id] = op
}

// opDone is the proposer's result for a register operation.
func (n *Node) opDone(res *caspaxos.Result) {
	op, ok := n.ops[res.ID]
	if !ok {
		return
	}
	delete(n.ops, res.ID)
	p := n.part(op.part)
	if p == nil {
		return
	}
	cur, committed := res.Value, res.Err == nil
	var vm *caspaxos.VersionMismatchError
	if errors.As(res.Err, &vm) {
		cur, committed = vm.Current, true
	}
	var out CASOutcome
	if op.kind == OpCAS {
		switch {
		case res.Err == nil:
			out = CASCommitted
		case vm != nil:
			out = CASConflict
		default:
			out = CASFailed
		}
		var cause error
		if out == CASFailed {
			cause = res.Err
		}
		n.obs.CASDone(p.id, op.prop, out, n.now-op.at)
		n.mgr.CASDone(n.now, p.name, out == CASCommitted, cause)
		n.fed = true
		if out == CASFailed && errors.Is(res.Err, caspaxos.ErrUnknownOutcome) {
			// An accept of this CAS may have been chosen unheard: then
			// the register holds a value that no node knows, this one
			// included (only what a node knows it wrote or read is
			// shared), and nothing may ever make one read it (the
			// manager proposes again only while its reason lasts). A
			// failover to this node's region whose outcome was lost
			// left it a follower of the old epoch while the old write
			// region, told by its own conflicting CAS, followed the new
			// one: no write region at all (graceful-drain and flapping
			// swarm seeds 7 and 10). Read to learn, and share it.
			n.stats.ReadsUnknown++
			n.mgr.RequestRead(p.name)
		}
	}
	if committed && cur.Exists() {
		if s, err := failover.Decode(cur.Data); err == nil {
			if n.observe(n.now, p, cur.Version, s) {
				// Share what this node committed, read back or found
				// in its CAS's conflict: the nodes hosting the
				// partition learn it without a register operation of
				// their own. A conflict's value is shared too: its
				// committer may never have heard that it won (an
				// unknown outcome) and stopped before reading it back,
				// and then no other node would ever learn it.
				n.share(p, cur)
			}
		}
	}
	if op.kind == OpRead {
		n.mgr.ReadDone(n.now, p.name, res.Err)
		n.fed = true
	}
	if op.kind == OpCAS {
		// After the value that won is fed: a lost operator request is
		// tried again against it.
		n.requestCASDone(p, op.prop, out, res.Err)
	}
}

// observe feeds a committed register value to the manager; it reports
// whether the value was newer than any this node knew.
func (n *Node) observe(now time.Duration, p *part, version uint64, s failover.State) bool {
	n.mgr.ObserveState(now, p.name, version, s)
	n.fed = true
	n.obs.Committed(p.id, version, s)
	if version <= p.version {
		return false
	}
	p.version = version
	n.known[p.id] = s.Epoch
	n.supersedeLearn(p.name, version)
	n.pending.Routes = append(n.pending.Routes, RouteOf(p.id, s, now))
	return true
}
