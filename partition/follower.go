package partition

import (
	"time"

	"github.com/fmnode/fmnode/guard"
)

// step handles one replica-to-replica message.
func (r *Replica) step(now time.Duration, m *Message) {
	if m.Epoch < r.epoch && !(canaryStaleApply && m.Type == MsgAppend) {
		// Fencing: nothing from a stale epoch is acted on. Tell the sender
		// where writes go now (it adopts our epoch and stops).
		if m.Type != MsgStale {
			r.h.send(Message{Type: MsgStale, Partition: r.id, Epoch: r.epoch, From: r.region(), To: m.From, WriteRegion: r.writeRegion})
		}
		r.h.stats.StaleRejected++
		r.h.guards.Fire(guard.ReplicaStaleEpoch)
		return
	}
	if m.Epoch > r.epoch {
		var wr Region
		switch m.Type {
		case MsgAppend, MsgSnapshot:
			wr = m.From
		case MsgStale:
			wr = m.WriteRegion
		}
		r.adoptEpoch(m.Epoch, wr, "message from "+string(m.From)+" ("+m.Type.String()+")")
		if m.Type == MsgStale {
			r.fol.announce = true // the write region named may not be contacting us
		}
	}
	switch m.Type {
	case MsgAppend:
		r.onAppend(now, m)
	case MsgAppendResp:
		if r.leader != nil {
			r.onAppendResp(now, m)
		}
	case MsgSnapshot:
		r.onSnapshot(now, m)
	case MsgSnapshotResp:
		if r.leader != nil {
			r.onSnapshotResp(now, m)
		}
	case MsgStale:
		// Same epoch: the sender knows nothing newer. Learn the write
		// region if we did not know it.
		if r.writeRegion == "" && m.WriteRegion != "" && !r.role.writeRegion() {
			r.writeRegion = m.WriteRegion
			r.metaDirty = true
			r.markDirty()
		}
	}
}

// adoptEpoch moves the replica to a newer epoch as a follower: it has been
// fenced by a failover. The write region, if it was one, stops.
func (r *Replica) adoptEpoch(e Epoch, writeRegion Region, why string) {
	if e <= r.epoch {
		return
	}
	r.h.logger().Info("partition: adopting newer epoch", "partition", r.id, "region", r.region(),
		"from", r.epoch, "to", e, "write_region", writeRegion, "was", r.role.String(), "why", why)
	r.epoch = e
	r.role = RoleFollower
	r.writeRegion = writeRegion
	r.dropWriteRegion()
	r.verified = 0
	r.readBarrier = 0
	// Freshness grants of the older epoch go with it, at once: their
	// write region's promise no longer covers the partition, and the new
	// one counts on it (Replica.inheritGrants releases a follower that
	// answered in its epoch).
	r.fol = followerState{}
	r.metaDirty = true
	r.markDirty()
}

func (r *Replica) appendResp(now time.Duration, to Region) Message {
	return Message{Type: MsgAppendResp, Partition: r.id, Epoch: r.epoch, From: r.region(), To: to,
		ProbeBoot: r.h.cfg.Boot, Probe: now}
}

// checkLeader verifies that m comes from the one write region of the epoch.
func (r *Replica) checkLeader(m *Message) bool {
	if r.role.writeRegion() {
		r.fail("two write regions in epoch %d: %s and %s", r.epoch, r.region(), m.From)
		return false
	}
	if r.writeRegion == "" {
		r.writeRegion = m.From
		r.metaDirty = true
		r.markDirty()
	} else if r.writeRegion != m.From {
		r.fail("two write regions in epoch %d: %s and %s", r.epoch, r.writeRegion, m.From)
		return false
	}
	r.fol.heardLeader = true
	return true
}

func (r *Replica) onAppend(now time.Duration, m *Message) {
	if !r.checkLeader(m) {
		return
	}
	if r.fol.snapIn != nil {
		return // installing a snapshot: the write region sends no ops meanwhile
	}
	resp := r.appendResp(now, m.From)
	if r.needSnapshot {
		resp.NeedSnapshot = true
		r.h.send(resp)
		return
	}
	for i := range m.Entries {
		e := &m.Entries[i]
		if e.LSN != m.Prev+1+LSN(i) || e.Epoch == 0 || e.Epoch > m.Epoch || (i > 0 && e.Epoch < m.Entries[i-1].Epoch) {
			r.h.logger().Warn("partition: malformed append dropped", "partition", r.id, "msg", m.String())
			return
		}
	}
	r.fol.member = m.Member
	prev := m.Prev
	if prev > r.last {
		resp.Hint, resp.HintEpoch = r.last, r.lastEpoch
		r.h.send(resp)
		return
	}
	pe, ok := r.epochAt(prev)
	if !ok {
		// prev lies below what this replica knows of its log: it cannot
		// check consistency there; only a snapshot can resolve it.
		resp.NeedSnapshot = true
		r.h.send(resp)
		return
	}
	if pe != m.PrevEpoch {
		h := r.hintBelow(prev, m.PrevEpoch)
		he, ok := r.epochAt(h)
		if !ok || h < r.logBase {
			resp.NeedSnapshot = true
		} else {
			resp.Hint, resp.HintEpoch = h, he
		}
		r.h.send(resp)
		return
	}
	if len(m.Entries) == 0 && m.LeaderLast == prev && r.last > prev && r.lastEpoch < m.Epoch {
		// The write region of m.Epoch held nothing after prev when it
		// built this (its epoch began at or below prev), and every op we
		// hold after prev is of an older epoch: false progress it can
		// never replicate. Set it aside now, into the conflict record,
		// rather than when the next op of the epoch overwrites it: a
		// quiet partition would otherwise keep it in the log, reported
		// as progress, indefinitely.
		if !r.truncateLog(prev, ConflictOverwrite) {
			r.enterNeedSnapshot("false progress cannot be truncated (compacted or below the undo floor)")
			resp.NeedSnapshot = true
			r.h.send(resp)
			return
		}
	}
	verifiedBefore := r.verified
	for i := range m.Entries {
		e := m.Entries[i]
		if e.LSN <= r.last {
			le, ok := r.epochAt(e.LSN)
			if ok && le == e.Epoch {
				continue
			}
			if !ok || !r.truncateLog(e.LSN-1, ConflictOverwrite) {
				r.enterNeedSnapshot("a conflicting op cannot be truncated (compacted or below the undo floor)")
				resp.NeedSnapshot = true
				r.h.send(resp)
				return
			}
		}
		r.appendOp(e, now)
	}
	r.verified = max(r.verified, prev+LSN(len(m.Entries)))
	if c := min(m.Commit, r.verified); c > r.commit {
		r.commit = c
	}
	if s := min(m.Stable, r.verified); s > r.stable {
		r.stable = s
	}
	echoed := m.EchoBoot == r.h.cfg.Boot && m.Echo <= now && m.Grant > 0
	if echoed {
		f := &r.fol
		if !f.hasGrant || m.Echo > f.grantP {
			f.grantP, f.grantNeed, f.grantFor, f.hasGrant = m.Echo, m.LeaderLast, m.Grant, true
		}
	}
	r.markDirty()
	// A heartbeat that changed nothing the write region tracks needs no
	// answer (bounded staleness always answers: its probes renew grants).
	if len(m.Entries) == 0 && !m.WantAck && verifiedBefore == r.verified && !echoed && r.level.Consistency != BoundedStaleness {
		return
	}
	resp.Success, resp.Match, resp.Commit = true, r.verified, r.commit
	r.h.send(resp)
}

// hintBelow returns the greatest LSN at or below prev whose op (in this
// replica's log) has an epoch at most e: where our log can still equal a
// log whose op at prev has epoch e.
func (r *Replica) hintBelow(prev LSN, e Epoch) LSN {
	h := prev
	for i := len(r.hist) - 1; i >= 0; i-- {
		if r.hist[i].Epoch <= e {
			return h
		}
		h = min(h, r.hist[i].After)
	}
	return h
}

func (r *Replica) flushFollower(now time.Duration) {
	f := &r.fol
	if f.announce {
		f.announce = false
		// Match is what this replica has verified in this epoch (often
		// 0): it only confirms, never moves the write region's view back.
		if r.writeRegion != "" && r.writeRegion != r.region() && !r.needSnapshot && f.snapIn == nil {
			resp := r.appendResp(now, r.writeRegion)
			resp.Success, resp.Match = true, r.verified
			r.h.send(resp)
		}
	}
	if f.wantGrant && r.writeRegion != "" && r.writeRegion != r.region() &&
		(f.lastProbe == 0 || now-f.lastProbe >= r.h.cfg.HeartbeatInterval) {
		resp := r.appendResp(now, r.writeRegion)
		resp.Success, resp.Match, resp.WantGrant = true, r.verified, true
		r.h.send(resp)
		f.lastProbe = now
		f.wantGrant = false
	}
}

// ----- snapshot install (follower side) -----

func (r *Replica) onSnapshot(now time.Duration, m *Message) {
	if !r.checkLeader(m) {
		return
	}
	resp := Message{Type: MsgSnapshotResp, Partition: r.id, Epoch: r.epoch, From: r.region(), To: m.From, Seq: m.Seq}
	si := r.fol.snapIn
	if m.Seq == 0 && (si == nil || si.nextSeq > 1 || si.base != m.Base) {
		r.h.logger().Info("partition: installing snapshot", "partition", r.id, "region", r.region(),
			"base", m.Base, "from", m.From, "last", r.last, "applied", r.applied)
		r.seal()
		w := r.w()
		w.Reset = &Reset{Lineage: append([]EpochRange(nil), m.History...), Last: m.LeaderLast, RemovedAt: r.epoch}
		r.resetVolatile()
		r.needSnapshot = true
		r.metaDirty = true
		si = &snapIn{base: m.Base, baseEpoch: m.BaseEpoch}
		r.fol.snapIn = si
	}
	if si == nil || m.Seq > si.nextSeq || m.Base != si.base {
		nr := r.appendResp(now, m.From)
		nr.NeedSnapshot = true
		r.h.send(nr)
		return
	}
	if m.Seq < si.nextSeq {
		r.h.send(resp) // duplicate: already installed
		return
	}
	w := r.w()
	w.Install = append(w.Install, m.KVs...)
	si.nextSeq++
	if m.Last {
		r.finishSnapshot(m)
	}
	r.h.send(resp)
}

func (r *Replica) finishSnapshot(m *Message) {
	h := history(append([]EpochRange(nil), m.History...)).truncate(m.Base)
	if len(h) == 0 || h[len(h)-1].Epoch != m.BaseEpoch {
		h = h.push(m.BaseEpoch, m.Base)
	}
	r.hist = h.trim(m.Base, r.h.cfg.MaxEpochHistory)
	r.logBase, r.logBaseEpoch = m.Base, m.BaseEpoch
	r.last, r.lastEpoch = m.Base, m.BaseEpoch
	r.tail, r.tailAt, r.tailBase = nil, nil, m.Base
	r.applied, r.appliedEpoch = m.Base, m.BaseEpoch
	r.commit, r.verified = m.Base, m.Base
	r.readableFrom = m.ConsistentAt
	r.undoFloor = m.ConsistentAt
	r.needSnapshot = false
	r.fol.snapIn = nil
	r.metaDirty, r.applyDirty = true, true
	r.h.logger().Info("partition: snapshot installed", "partition", r.id, "region", r.region(),
		"base", m.Base, "consistent_at", m.ConsistentAt)
}
