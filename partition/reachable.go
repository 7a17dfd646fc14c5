package partition

import (
	"fmt"
	"slices"
	"time"
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
	return ok && slices.Contains(r.unreachable, reg)
}

func (r *Replica) setReachable(now time.Duration, reg Region, reachable bool) {
	if reachable {
		r.markReachable(reg)
	} else if !slices.Contains(r.unreachable, reg) {
		r.unreachable = append(r.unreachable, reg)
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

// markReachable forgets reg's unreachable record.
func (r *Replica) markReachable(reg Region) {
	if i := slices.Index(r.unreachable, reg); i >= 0 {
		r.unreachable = slices.Delete(r.unreachable, i, i+1)
	}
}

// newFollower is the write region's fresh view of the follower in reg.
func (r *Replica) newFollower(now time.Duration, reg Region) follower {
	return follower{region: reg, next: r.last + 1, floor: r.last + 1, lastAck: now, lastReset: now,
		unreachable: slices.Contains(r.unreachable, reg)}
}
