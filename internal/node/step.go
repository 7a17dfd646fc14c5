package node

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
)

// Step hands the node a batch a peer sent. A message the node cannot use
// (for a partition it does not host, for an earlier incarnation's
// proposer) is dropped and counted: the protocols retransmit. An error
// means the batch broke a protocol rule (the driver logs it; the node
// stays consistent).
func (n *Node) Step(now time.Duration, b *nodewire.Batch) error {
	n.now = now
	if _, ok := n.peer(b.From); !ok || b.From == n.cfg.ID {
		return fmt.Errorf("node %d: batch from unknown node %d: %w", n.cfg.ID, b.From, ErrUnknownPeer)
	}
	var first error
	keep := func(err error) {
		if first == nil && err != nil {
			first = err
		}
	}
	for i := range b.CAS {
		keep(n.stepCAS(now, b.CAS[i]))
	}
	for i := range b.Data {
		n.stepData(now, &b.Data[i])
	}
	for i := range b.Heartbeats {
		if err := n.mgr.StepHeartbeat(now, b.Heartbeats[i]); err != nil {
			keep(fmt.Errorf("node %d: heartbeat from %d: %w", n.cfg.ID, b.From, err))
		}
		n.fed = true
	}
	for i := range b.Learns {
		keep(n.stepLearn(now, b.From, &b.Learns[i]))
	}
	for i := range b.LearnAcks {
		n.stepLearnAck(b.From, &b.LearnAcks[i])
	}
	return first
}

func (n *Node) stepCAS(now time.Duration, m caspaxos.Message) error {
	if m.Type.IsReply() {
		if m.To != n.prop.ID() {
			n.stats.DroppedCAS++ // for a proposer of an earlier incarnation
			return nil
		}
		n.prop.Step(now, m)
		return nil
	}
	if n.acc == nil || m.To != n.cfg.ID {
		n.stats.DroppedCAS++
		return nil
	}
	if err := n.acc.Step(m); err != nil {
		return fmt.Errorf("node %d: acceptor: %w", n.cfg.ID, err)
	}
	return nil
}

func (n *Node) stepData(now time.Duration, m *partition.Message) {
	if int(m.Partition) >= len(n.state) || n.state[m.Partition] == 0 {
		n.stats.DroppedData++
		return
	}
	_ = n.host.Step(now, m) // a refused message is the core's answer (it replies or ignores), not a fault of the node
	n.markDirtyID(m.Partition)
}

// stepLearn takes a committed register value a peer shares, and answers
// it with the newest version this node knows (the peer shares it until
// then).
func (n *Node) stepLearn(now time.Duration, from NodeID, l *nodewire.Learn) error {
	s, err := failover.Decode(l.Data)
	if err != nil {
		return fmt.Errorf("node %d: learn of %s v%d: %w", n.cfg.ID, l.Key, l.Version, err)
	}
	p := n.partOfKey(l.Key)
	if p == nil {
		// A register this node watches without hosting the partition: it
		// only feeds the DNS routes (the publisher keeps the newest).
		if id, ok := parseRegisterKey(l.Key); ok {
			n.pending.Routes = append(n.pending.Routes, RouteOf(id, s, now))
		}
		n.ackLearn(from, l.Key, l.Version)
		return nil
	}
	n.stats.Learns++
	n.observe(now, p, l.Version, s)
	n.ackLearn(from, l.Key, max(l.Version, p.version))
	return nil
}

// Tick advances the node's clock; each core runs its timers that are due.
func (n *Node) Tick(now time.Duration) {
	n.now = now
	if n.hostAt > 0 && now >= n.hostAt {
		n.hostAt = 0
		n.host.Tick(now)
	}
	if n.mgrAt > 0 && now >= n.mgrAt {
		n.mgrAt = 0
		n.mgr.Tick(now)
		n.fed = true
	}
	if n.propAt > 0 && now >= n.propAt {
		n.propAt = 0
		n.prop.Tick(now)
	}
	if n.learnAt > 0 && now >= n.learnAt {
		n.resendLearns(now)
	}
}

// NextDeadline is when the node next needs a Tick (ok false: no timer).
// Call it after Ready: the cores' deadlines move as they work.
func (n *Node) NextDeadline() (time.Duration, bool) {
	var d time.Duration
	for _, t := range [...]time.Duration{n.hostAt, n.mgrAt, n.propAt, n.learnAt} {
		if t > 0 && (d == 0 || t < d) {
			d = t
		}
	}
	return d, d > 0
}

// armTimers records each core's next deadline.
func (n *Node) armTimers() {
	n.hostAt = 0
	if d, ok := n.host.NextDeadline(); ok {
		g := n.cfg.HostTickGrain
		n.hostAt = max((d+g-1)/g*g, 1)
	}
	n.mgrAt = 0
	if d := n.mgr.NextDeadline(); d > 0 && d < time.Duration(1<<62) {
		n.mgrAt = d
	}
	n.propAt = 0
	if d, ok := n.prop.NextDeadline(); ok {
		n.propAt = max(d, 1)
	}
}

// Write hands the node a client write for a hosted partition; the reply
// comes in a Ready (Replies, or from Advance once it is durable).
func (n *Node) Write(now time.Duration, req *partition.WriteRequest) {
	n.now = now
	n.host.Write(now, req)
	n.markDirtyID(req.Partition)
}

// Read hands the node a client read.
func (n *Node) Read(now time.Duration, req *partition.ReadRequest) {
	n.now = now
	n.host.Read(now, req)
	n.markDirtyID(req.Partition)
}

// ClientError is a client's report that its attempt at region r, epoch e,
// of partition id got no answer (a timeout or an unknown outcome): the
// clients' half of gray-failure detection. The manager weighs it against
// its own replica's progress.
func (n *Node) ClientError(now time.Duration, id partition.ID, r partition.Region, e partition.Epoch) {
	n.now = now
	if p := n.part(id); p != nil {
		n.mgr.ReportClientError(now, p.name, r, failover.Epoch(e))
		n.fed = true
	}
}

// Switchover asks for partition id's write region to move to target.
func (n *Node) Switchover(now time.Duration, id partition.ID, target partition.Region, reason string) error {
	n.now = now
	p, err := n.hosted(id, "switchover of")
	if err != nil {
		return err
	}
	n.fed = true
	return n.mgr.Switchover(now, p.name, target, reason)
}

// Drain moves every partition this node drives off region r, rate-limited.
func (n *Node) Drain(now time.Duration, r partition.Region, reason string) {
	n.now = now
	n.mgr.Drain(now, r, reason)
	n.fed = true
}

// StopDrain ends a drain of region r.
func (n *Node) StopDrain(r partition.Region) {
	n.mgr.StopDrain(r)
	n.fed = true
}

// SetNeverPromote proposes partition id's new never-promote regions (the
// cluster spec's policy); nothing when they are already so.
func (n *Node) SetNeverPromote(now time.Duration, id partition.ID, regions []partition.Region, reason string) error {
	n.now = now
	p, err := n.hosted(id, "policy of")
	if err != nil {
		return err
	}
	n.fed = true
	return n.mgr.SetNeverPromote(now, p.name, regions, reason)
}

// ApplyNeverPromote brings every partition this node is the write region
// of to the never-promote regions want (one proposer per partition: the
// write region's node; the others learn the new value). A partition with
// a proposal in flight or a full window is counted as pending, for the
// driver to call again later. want must be sorted.
func (n *Node) ApplyNeverPromote(now time.Duration, want []partition.Region, reason string) (proposed, pending int, err error) {
	n.now = now
	for _, id := range n.host.Partitions() {
		p, err := n.hosted(id, "policy of")
		if err != nil {
			continue
		}
		s, _, ok := n.mgr.State(p.name)
		if !ok || s.WriteRegion != n.cfg.Region || slices.Equal(s.NeverPromote, want) || len(s.NeverPromote)+len(want) == 0 {
			continue
		}
		switch err := n.mgr.SetNeverPromote(now, p.name, want, reason); {
		case err == nil:
			proposed++
		case errors.Is(err, failover.ErrRefused):
			pending++
		default:
			return proposed, pending, fmt.Errorf("node %d: never-promote of partition %d: %w", n.cfg.ID, id, err)
		}
	}
	n.fed = true
	return proposed, pending, nil
}

// ApplyMinDurability brings every partition this node is the write
// region of to minimum durability want (the cluster spec's
// min_durability; one proposer per partition, the others learn the new
// value), under the core's guard (failover.RequestMinDurability): a
// partition whose write quorum has fewer members than want is refused,
// counted in refused with the first reason in why, and asked again at the
// next call. A partition with a proposal in flight or a full window is
// pending.
func (n *Node) ApplyMinDurability(now time.Duration, want int, reason string) (proposed, pending, refused int, why error) {
	n.now = now
	for _, id := range n.host.Partitions() {
		p, err := n.hosted(id, "minimum durability of")
		if err != nil {
			continue
		}
		s, _, ok := n.mgr.State(p.name)
		if !ok || s.WriteRegion != n.cfg.Region || s.WriteQuorum.MinDurability == want {
			continue
		}
		switch err := n.mgr.SetMinDurability(now, p.name, want, reason); {
		case err == nil:
			proposed++
		case errors.Is(err, failover.ErrBusy):
			pending++
		default:
			refused++
			if why == nil {
				why = fmt.Errorf("node %d: minimum durability of partition %d: %w", n.cfg.ID, id, err)
			}
		}
	}
	n.fed = true
	return proposed, pending, refused, why
}

// SetBlastRadius changes how many failovers may be in flight into one
// region (the cluster spec's blast_radius).
func (n *Node) SetBlastRadius(max int) error {
	n.fed = true
	return n.mgr.SetMaxConcurrentPerTarget(max)
}

// SetGlobalPause pauses or resumes automatic failover of every partition.
func (n *Node) SetGlobalPause(paused bool, reason string) {
	n.mgr.SetGlobalPause(paused, reason)
	n.fed = true
}
