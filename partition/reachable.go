package partition

import (
	"fmt"
	"slices"
	"time"

	"github.com/fmnode/fmnode/quorum"
)

// Reachability: the driver's node liveness (one heartbeat stream per pair
// of nodes, not per partition) tells the write region which followers
// live on nodes it considers down. Without it every partition with a
// replica on a dead node keeps probing that replica once per
// MaxContactBackoff: a region outage cost 4,300 partitions a probe each
// every 4 s for the whole outage (half of a simulated drill's network
// events), and 100,000 partitions 25,000 messages a second from the
// surviving regions, just when they take over the dead region's load.
//
// An unreachable follower gets no heartbeats, probes, window resends,
// snapshot chunks or new ops. Nothing else changes: it still counts in
// the commit rule until the failover manager shrinks the write quorum, and
// a freshness grant it may hold is still waited out. It becomes reachable
// again when the driver says so, when the control plane asks for a catch
// up (CatchUp), or when any answer of it arrives: a message is better
// evidence than a verdict that may lag behind. Then the write region
// contacts it at once, resending its window, instead of at the end of a
// backoff.

// SetReachable records whether p's replica in region reg can be reached:
// the driver calls it when its node liveness view of the node holding that
// replica changes. It is kept for a write region p's replica becomes
// later too.
func (h *Host) SetReachable(now time.Duration, p ID, reg Region, reachable bool) error {
	r, err := h.replica(p)
	if err != nil {
		return err
	}
	if reg == r.region() || !r.wq.IsReplica(reg) {
		// Only the other replicas' regions: the record stays as small as
		// the replica set.
		return fmt.Errorf("partition %d: set reachable %q from %s: not another replica's region: %w", p, reg, r.region(), ErrBadRequest)
	}
	r.setReachable(now, reg, reachable)
	h.schedule(now, r)
	return nil
}

// Unreachable reports whether p's replica in region reg is recorded as
// unreachable.
func (h *Host) Unreachable(p ID, reg Region) bool {
	r, ok := h.lookup(p)
	return ok && r.isUnreachable(reg)
}

func (r *Replica) setReachable(now time.Duration, reg Region, reachable bool) {
	if reachable {
		r.markReachable(reg)
	} else {
		r.markUnreachable(reg)
	}
	f := r.follower(reg)
	if f == nil || f.unreachable == !reachable {
		return
	}
	f.unreachable = !reachable
	if reachable {
		// Back: contact it now with everything it may lack.
		f.silent = 0
		if f.snap == nil && f.inflight() > 0 {
			r.resendWindow(now, f)
		}
		r.markDirty()
	}
}

// unreachableBit is reg's mark in Replica.unreachable (0: not a replica,
// or past the 64th: never marked, such a follower is probed as before).
func (r *Replica) unreachableBit(reg Region) uint64 {
	if i := slices.Index(r.wq.Replicas, reg); i >= 0 && i < 64 {
		return 1 << i
	}
	return 0
}

func (r *Replica) isUnreachable(reg Region) bool { return r.unreachable&r.unreachableBit(reg) != 0 }
func (r *Replica) markUnreachable(reg Region)    { r.unreachable |= r.unreachableBit(reg) }

// markReachable forgets reg's unreachable mark.
func (r *Replica) markReachable(reg Region) { r.unreachable &^= r.unreachableBit(reg) }

// setQuorum installs wq, keeping the unreachable marks of the regions
// that stay replicas (the marks go by index into wq.Replicas).
func (r *Replica) setQuorum(wq quorum.WriteQuorum) {
	old, marks := r.wq.Replicas, r.unreachable
	r.wq = r.h.internQuorum(wq)
	r.unreachable = 0
	for i, reg := range old {
		if i < 64 && marks&(1<<i) != 0 {
			r.markUnreachable(reg)
		}
	}
}

// newFollower is the write region's fresh view of the follower in reg.
func (r *Replica) newFollower(now time.Duration, reg Region) follower {
	return follower{region: reg, next: r.last + 1, floor: r.last + 1, lastAck: now, lastReset: now,
		unreachable: r.isUnreachable(reg)}
}
