// Status intake: the local replica's status (ReplicaStatus, with the
// followers as the write region sees them), fed through UpdateReplica or,
// without the name lookup, UpdateReplicaAt and a PartitionHandle. A report
// equal to the last is dropped; one that only flips write-quorum members'
// catch-up flags queues a recheck (quiet) instead of a full evaluation.

package failover

import (
	"slices"
	"time"
)

// FollowerStatus is the write region's view of one follower.
type FollowerStatus struct {
	Region   Region
	MatchLSN LSN
	// InRule: the write region counts the follower in its commit rule.
	InRule bool
	// CaughtUp: it holds everything the write region has assigned.
	CaughtUp bool
	// InSync: the follower counts in the write region's commit rule and
	// holds every committed LSN.
	InSync bool
}

// ReplicaStatus is what the local replica of a partition reports.
type ReplicaStatus struct {
	Epoch   Epoch
	LastLSN LSN
	// Unsynced counts the ops at the log's end not yet durable (LastLSN
	// minus the store's end). The manager's evidence counts a replica
	// only as far as Durable: a crash loses the rest, and an epoch that
	// starts above what its write region keeps could never begin.
	Unsynced    LSN
	CommitLSN   LSN
	WriteRegion bool
	Fenced      bool
	WriteQuorum []Region
	// MinDurability is the replica's commit rule's minimum durability (0:
	// not reported): a write region whose differs from the register's
	// adopts the register's (Reconcile).
	MinDurability int
	Followers     []FollowerStatus
}

// Durable is the end of the replica's log that survives a crash: the
// position the evidence reports for it (a takeover's start, a switchover
// target's catch-up, a fence's final LSN).
func (st *ReplicaStatus) Durable() LSN { return st.LastLSN - min(st.Unsynced, st.LastLSN) }

// PartitionHandle names a hosted partition without its name: a driver
// that feeds status for thousands of partitions keeps one per partition
// (Handle) instead of having the manager hash the name on every report.
// It is valid for the Manager that returned it only; the zero handle
// names no partition.
type PartitionHandle struct{ p *partition }

// Handle returns the handle of a hosted partition.
func (m *Manager) Handle(name string) (PartitionHandle, bool) {
	p := m.parts[name]
	return PartitionHandle{p}, p != nil
}

// UpdateReplica feeds the local replica's status.
func (m *Manager) UpdateReplica(now time.Duration, name string, st ReplicaStatus) {
	m.UpdateReplicaAt(now, PartitionHandle{m.parts[name]}, st)
}

// UpdateReplicaAt is UpdateReplica for the partition h names.
func (m *Manager) UpdateReplicaAt(now time.Duration, h PartitionHandle, st ReplicaStatus) {
	m.now = now
	p := h.p
	if p == nil {
		return
	}
	if p.grayErrs() > 0 && (st.CommitLSN > p.gs.commit || st.LastLSN > p.gs.lastOp || st.Epoch != p.local.Epoch) {
		// The commit LSN moves again, or ops still arrive (a member, not
		// the write region, holds commits back): the write region's data
		// plane works, whatever the clients saw.
		m.clearGray(p)
	}
	if p.hasLocal && sameStatus(&p.local, &st) {
		m.stats.StatusUnchanged++
		// The driver reports after every event that may have moved the
		// replica (a third of the reports in the drill move nothing):
		// the lag it shows was tracked, with its timer, and every flag
		// and position was seen by the report before.
		return
	}
	p.statusSeq++
	m.trackLag(now, p, st)
	replica := !p.hasLocal || p.local.Epoch != st.Epoch || p.local.Fenced != st.Fenced ||
		p.local.WriteRegion != st.WriteRegion || !equalRegions(p.local.WriteQuorum, st.WriteQuorum) || p.local.MinDurability != st.MinDurability
	changed := replica || !sameInSync(p.local, st)
	// A switchover target completes the switchover on its own evidence
	// once its durable end reaches the fence: that moves with no other
	// field of the report (the ops arrived before they were durable).
	target := !changed && p.hasLocal && p.state.Phase == PhaseSwitchover && p.state.Target == p.myRegion &&
		st.Durable() != p.local.Durable()
	sameList, membersOnly := followerFlips(p.state.WriteQuorum.Members, p.local.Followers, st.Followers)
	if !sameList {
		// Which followers are listed is evidence too (Reported, Epoch):
		// whether or not this report queues an evaluation (as before),
		// the next one must not be skipped.
		p.changed = true
	}
	if len(st.Followers) > 0 {
		// Keep a copy in the partition's own array: the caller may reuse
		// st's (StatusFromProgressInto), and nothing else holds p.local's.
		st.Followers = append(p.local.Followers[:0], st.Followers...)
	}
	p.local, p.hasLocal = st, true
	if changed {
		if replica || !sameList || !membersOnly {
			m.markDirty(p)
		} else {
			// Only followers in the register's write quorum flipped a
			// catch-up flag (a write makes them lag for a moment, then
			// they catch up again). Decide reads InSync and CaughtUp only
			// for regions outside the write quorum (its grow loop); they
			// count otherwise only through the fenced write region's
			// match LSN in a switchover and through stall verdicts, and
			// quiet evaluates the partition whenever either may apply.
			m.markRecheck(p)
		}
		m.reconcile(p)
	} else if target {
		m.markRecheck(p)
	}
}

// sameStatus reports whether a and b are the same report.
func sameStatus(a, b *ReplicaStatus) bool {
	return a.Epoch == b.Epoch && a.LastLSN == b.LastLSN && a.Unsynced == b.Unsynced && a.CommitLSN == b.CommitLSN &&
		a.WriteRegion == b.WriteRegion && a.Fenced == b.Fenced && equalRegions(a.WriteQuorum, b.WriteQuorum) && a.MinDurability == b.MinDurability &&
		slices.Equal(a.Followers, b.Followers)
}

// followerFlips compares a partition's follower lists before and after a
// status report: sameList says they name the same regions in the same
// order, and membersOnly that every follower whose flags (InSync,
// CaughtUp, InRule) differ is one of members.
func followerFlips(members []Region, a, b []FollowerStatus) (sameList, membersOnly bool) {
	if len(a) != len(b) {
		return false, false
	}
	membersOnly = true
	for i := range a {
		fa, fb := &a[i], &b[i]
		if fa.Region != fb.Region {
			return false, false
		}
		if membersOnly && (fa.InSync != fb.InSync || fa.CaughtUp != fb.CaughtUp || fa.InRule != fb.InRule) &&
			!slices.Contains(members, fa.Region) {
			membersOnly = false
		}
	}
	return true, membersOnly
}

// growFlagged reports whether a follower carries any flag grow decisions
// look at.
func growFlagged(f FollowerStatus) bool { return f.InSync || f.CaughtUp || f.InRule }

// sameInSync reports whether a and b list the same followers with the same
// grow flags (InSync, CaughtUp, InRule) in the same order. It runs on every
// replica status update, so it compares in place rather than building a
// string per side.
func sameInSync(a, b ReplicaStatus) bool {
	i, j := 0, 0
	for {
		for i < len(a.Followers) && !growFlagged(a.Followers[i]) {
			i++
		}
		for j < len(b.Followers) && !growFlagged(b.Followers[j]) {
			j++
		}
		if i == len(a.Followers) || j == len(b.Followers) {
			return i == len(a.Followers) && j == len(b.Followers)
		}
		fa, fb := a.Followers[i], b.Followers[j]
		if fa.Region != fb.Region || fa.InSync != fb.InSync || fa.CaughtUp != fb.CaughtUp || fa.InRule != fb.InRule {
			return false
		}
		i, j = i+1, j+1
	}
}
