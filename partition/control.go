package partition

import (
	"fmt"
	"slices"
	"time"

	"github.com/fmnode/fmnode/guard"
	"github.com/fmnode/fmnode/quorum"
)

// doneReply queues the completion of a control operation; it is delivered
// after the Ready that holds its writes is durable.
func (r *Replica) doneReply(ref ClientRef, err error) {
	r.done = append(r.done, Reply{Kind: ReplyControl, Partition: r.id, Ref: ref, Err: err})
	r.markDirty()
}

// fence stops writes at epoch e: at the replica's own epoch a write region
// pauses (graceful failover: pending writes still replicate and commit);
// at a newer epoch the replica becomes a follower of it.
func (r *Replica) fence(e Epoch, writeRegion Region) error {
	switch {
	case e < r.epoch:
		r.h.guards.Fire(guard.ReplicaStaleRoute)
		return &RedirectError{Partition: r.id, Epoch: r.epoch, WriteRegion: r.writeRegion, Reason: ReasonStaleEpoch, RequestEpoch: e}
	case e > r.epoch:
		r.adoptEpoch(e, writeRegion, "fence")
		r.fol.announce = true
		return nil
	}
	if r.role == RoleLeader {
		r.h.logger().Info("partition: write region paused", "partition", r.id, "region", r.region(), "epoch", e)
		r.role = RolePaused
		for _, hw := range r.leader.held {
			r.h.reply(Reply{Kind: ReplyWrite, Partition: r.id, Ref: hw.req.Ref, Err: r.redirect(hw.req.Epoch)})
		}
		r.leader.held = nil
		r.metaDirty = true
		r.markDirty()
		return nil
	}
	if !r.role.writeRegion() && writeRegion != "" && r.writeRegion == "" {
		r.writeRegion = writeRegion
		r.metaDirty = true
		r.markDirty()
	}
	return nil
}

// promote makes the replica the write region of epoch e, its log ending at
// startAfter (ops above it go to the conflict records), with quorum wq.
// graceful says the epoch began without waiting out the previous write
// region's lease, whose freshness grants may then still run
// (inheritGrants).
func (r *Replica) promote(now time.Duration, e Epoch, startAfter LSN, wq quorum.WriteQuorum, graceful bool) error {
	if err := wq.Validate(); err != nil {
		return fmt.Errorf("partition %d: promote: %w: %w", r.id, ErrBadRequest, err)
	}
	if wq.WriteRegion != r.region() {
		return fmt.Errorf("partition %d: promote in %s with quorum write region %q: %w", r.id, r.region(), wq.WriteRegion, ErrBadRequest)
	}
	switch {
	case e < r.epoch:
		r.h.guards.Fire(guard.ReplicaStaleRoute)
		return &RedirectError{Partition: r.id, Epoch: r.epoch, WriteRegion: r.writeRegion, Reason: ReasonStaleEpoch, RequestEpoch: e}
	case e == r.epoch && r.role == RoleLeader:
		return nil // idempotent
	case e == r.epoch && (r.role == RolePaused || (r.writeRegion != "" && r.writeRegion != r.region())):
		return fmt.Errorf("partition %d: epoch %d already had write region %q; promote needs a newer epoch: %w",
			r.id, e, r.writeRegion, ErrBadRequest)
	}
	if r.needSnapshot {
		return fmt.Errorf("partition %d region %s: promote: %w", r.id, r.region(), ErrNeedSnapshot)
	}
	if startAfter > r.last {
		return fmt.Errorf("partition %d region %s: promote after LSN %d but the log ends at %d: %w",
			r.id, r.region(), startAfter, r.last, ErrBehind)
	}
	if startAfter < r.last && !r.truncateLog(startAfter, ConflictTruncate) {
		return fmt.Errorf("partition %d region %s: promote after LSN %d would truncate ops it cannot undo (undo floor %d, log base %d): %w",
			r.id, r.region(), startAfter, r.undoFloor, r.logBase, ErrNeedSnapshot)
	}
	r.h.logger().Info("partition: promoted to write region", "partition", r.id, "region", r.region(),
		"epoch", e, "after", startAfter, "members", wq.Members)
	// The write region of the epoch just before e, if it surely took that
	// epoch (we heard it lead): it holds no older grant (inheritGrants).
	var prev Region
	if r.epoch+1 == e && r.fol.heardLeader {
		prev = r.writeRegion
	}
	// After a graceful promotion, grants may still run on regions the new
	// quorum leaves out, which hear nothing of it: those this replica
	// issued as write region of the epoch before (a reopen after a
	// fence), and the previous write region's on any region of the quorum
	// this replica knew (keepDeparted). A takeover waited them out.
	var gone []departedGrant
	if l := r.leader; l != nil && graceful {
		for i := range l.followers {
			if f := &l.followers[i]; !wq.IsReplica(f.region) {
				gone = append(gone, departedGrant{region: f.region, match: min(f.match, startAfter), grantState: f.grantState})
			}
		}
		for _, d := range l.departed {
			if !wq.IsReplica(d.region) {
				d.match = min(d.match, startAfter)
				gone = append(gone, d)
			}
		}
	}
	if graceful {
		for _, reg := range r.wq.Replicas {
			if reg != r.region() && reg != prev && !wq.IsReplica(reg) {
				gone = append(gone, departedGrant{region: reg, grantState: grantState{priorGrantUntil: now + r.grantWindow()}})
			}
		}
	}
	r.epoch = e
	r.role = RoleLeader
	r.writeRegion = r.region()
	r.dropWriteRegion() // of an earlier epoch, if any
	r.setQuorum(wq)
	r.hist = r.hist.push(e, r.last).trim(r.logBase, r.h.cfg.MaxEpochHistory)
	r.fol = followerState{}
	r.becomeWriteRegion(now)
	if graceful {
		r.inheritGrants(now, prev)
	}
	for _, d := range gone {
		r.keepDeparted(now, d)
	}
	r.readBarrier = r.last
	r.metaDirty = true
	r.markDirty()
	r.advanceCommit()
	return nil
}

// truncate removes the log above after (not on a write region).
func (r *Replica) truncate(after LSN) error {
	if r.role.writeRegion() {
		return fmt.Errorf("partition %d region %s: truncate on the write region (fence it first): %w", r.id, r.region(), ErrBadRequest)
	}
	if r.needSnapshot {
		return fmt.Errorf("partition %d region %s: truncate: %w", r.id, r.region(), ErrNeedSnapshot)
	}
	if !r.truncateLog(after, ConflictTruncate) {
		r.enterNeedSnapshot(fmt.Sprintf("truncate after %d: below log base %d or undo floor %d", after, r.logBase, r.undoFloor))
	}
	r.markDirty()
	return nil
}

// setWriteQuorum changes the write quorum of the write region's epoch
// (shrink or grow, decided by the failover register).
func (r *Replica) setWriteQuorum(now time.Duration, wq quorum.WriteQuorum) error {
	if !r.role.writeRegion() {
		return fmt.Errorf("partition %d region %s: set write quorum: %w", r.id, r.region(), ErrNotWriteRegion)
	}
	if err := wq.Validate(); err != nil {
		return fmt.Errorf("partition %d: set write quorum: %w: %w", r.id, ErrBadRequest, err)
	}
	if wq.WriteRegion != r.region() {
		return fmt.Errorf("partition %d: set write quorum with write region %q in %s: %w", r.id, wq.WriteRegion, r.region(), ErrBadRequest)
	}
	r.setQuorum(wq)
	l := r.leader
	// A follower leaving the replica set hears nothing more, so it may
	// serve bounded reads on its grant until the grant ends: keep it.
	for i := range l.followers {
		if f := &l.followers[i]; !wq.IsReplica(f.region) {
			r.keepDeparted(now, departedGrant{region: f.region, match: f.match, grantState: f.grantState})
		}
	}
	l.followers = slices.DeleteFunc(l.followers, func(f follower) bool { return !wq.IsReplica(f.region) })
	for _, reg := range wq.Replicas {
		if reg != r.region() && r.follower(reg) == nil {
			l.followers = append(l.followers, r.newFollower(now, reg))
			r.rejoin(&l.followers[len(l.followers)-1])
		}
	}
	r.metaDirty = true
	r.markDirty()
	r.advanceCommit()
	return nil
}

// catchUp makes the write region stream its log to region from LSN from
// (a delta catch-up), or a snapshot if the log no longer reaches back.
func (r *Replica) catchUp(now time.Duration, reg Region, from LSN) error {
	f := r.follower(reg)
	if f == nil {
		return fmt.Errorf("partition %d: catch up %q: not a follower of this write region: %w", r.id, reg, ErrBadRequest)
	}
	if from == 0 {
		from = 1
	}
	if from-1 < r.logBase {
		f.needSnap = true
	} else {
		f.next = min(from, r.last+1)
		f.floor = f.next
		f.match = min(f.match, f.next-1)
		f.lastReset = now
	}
	// The control plane knows the region is back: contact it now, not at
	// the end of a backoff.
	f.silent = 0
	if f.unreachable {
		f.unreachable = false
		r.markReachable(reg)
	}
	r.markDirty()
	return nil
}

// SetLeaseGen tells the host the node's lease run (the failover Liveness's
// LeaseGen) and from then on gates every replica's lease on it: a replica
// counts its lease (SetLease) only once ValidateLease validated it for
// this run and its current epoch. A lease regained after a lapse says
// nothing about the register: a takeover decided during the lapse may
// commit after the regain, and a write region cut from the new one would
// otherwise serve strong reads and writes of its old epoch on the new
// lease. Drivers without a failover manager never call it.
func (h *Host) SetLeaseGen(gen uint64) {
	h.leaseGen, h.leaseGated = gen, true
}

// ValidateLease lets p's replica count lease run gen while it is at epoch
// e: the failover manager saw a register write it proposed within the run
// commit with this region as write region of e.
func (h *Host) ValidateLease(p ID, gen uint64, e Epoch) error {
	r, err := h.replica(p)
	if err != nil {
		return err
	}
	r.leaseGen, r.leaseEpoch = gen, e
	r.resumeCommit()
	return nil
}

// resumeCommit commits what waited for the lease once it holds again
// (every ack may have come in meanwhile: nothing else would commit it).
func (r *Replica) resumeCommit() {
	if l := r.leader; l != nil && l.commitHeld && r.leased(r.h.now) {
		r.advanceCommit()
		r.markDirty()
		r.h.schedule(r.h.now, r) // heartbeats carry the new commit
	}
}

// leased reports whether the replica may act on its lease at now.
func (r *Replica) leased(now time.Duration) bool { return r.leaseErr(now) == nil }

// leaseErr explains why the replica may not act on its lease at now.
func (r *Replica) leaseErr(now time.Duration) error {
	if now >= r.leaseUntil {
		return fmt.Errorf("partition %d region %s: lease ended at %v, now %v: %w", r.id, r.region(), r.leaseUntil, now, ErrLeaseExpired)
	}
	if h := r.h; h.leaseGated && (r.leaseGen != h.leaseGen || r.leaseEpoch != r.epoch) {
		return fmt.Errorf("partition %d region %s: lease run %d not validated at epoch %d (validated run %d at epoch %d): %w",
			r.id, r.region(), h.leaseGen, r.epoch, r.leaseGen, r.leaseEpoch, ErrLeaseExpired)
	}
	return nil
}
