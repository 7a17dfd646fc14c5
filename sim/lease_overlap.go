package sim

import (
	"time"

	"github.com/fmnode/fmnode/failover"
)

// The lease-overlap check: at most one replica of a partition serves
// strong reads (and acknowledges writes) on a valid lease at any instant,
// across epochs. A replica that could serve on its lease when another
// region became the write region would serve stale strong reads beside
// the new epoch's first writes. The check runs in every failover world
// (every failover script, the cluster scenario and its edge scripts) on
// each register value that moves the write region, for every replica but
// the new write region's. After the move no older replica can start
// serving again (its lease run must be validated at its epoch by a
// register write, which the move supersedes), and the new write region
// serves only from its promotion on: checking at the move covers every
// instant.
//
// "Serves on its lease" is the replica's own rule (partition.Host.ServeErr,
// the rule its strong reads are admitted by), never a copy of it here:
// the gray-failure scenario and the edge scripts read their figures from
// the same answer.

// servesOnLease reports whether n's replica of partition i would serve a
// strong read now: it leads its epoch (not a follower, not paused for a
// switchover) and may act on its lease by its own rule, which also asks
// that the node's current lease run was validated at the replica's epoch.
// A node that restarts, or regains its lease after a lapse, holds a node
// lease at once, but none of its replicas acts on it before its reassert
// commits; the node lease alone flagged such a write region as still
// serving (cluster-edge-min-durability seed 2: node 0 restarted while a
// failover out of its region was in flight). A down node serves nothing.
func (fw *foWorld) servesOnLease(n *foNode, i int) bool {
	return n.node != nil && n.node.Host().ServeErr(fw.parts[i].id, fw.e.w.Local(n.idx)) == nil
}

// leaseOverlap is the check run when partition i's register value moves
// the write region (old to s, learned now): the first replica outside
// s's write region that still serves on its lease, with its node's lease
// end in virtual time, or ok false.
func (fw *foWorld) leaseOverlap(i int, s failover.State) (n *foNode, end time.Duration, ok bool) {
	for _, x := range fw.parts[i].nodeOfReg {
		n := fw.nodes[x]
		if n.region == s.WriteRegion || !fw.servesOnLease(n, i) {
			continue
		}
		return n, fw.e.w.VirtualAt(x, n.lease), true
	}
	return nil, 0, false
}

// checkLeaseOverlap runs leaseOverlap on a learned value that moved the
// write region and reports an overlap as an invariant violation.
func (fw *foWorld) checkLeaseOverlap(i int, old, s failover.State, at time.Duration) {
	if old.WriteRegion == s.WriteRegion {
		return
	}
	fw.m.leaseChecks++
	n, end, ok := fw.leaseOverlap(i, s)
	if !ok {
		return
	}
	fw.m.leaseOverlaps++
	fw.e.viol.add(at, ViolationInvariant, "lease overlap: partition %s moved from %s to %s (epoch %d) at %v while node %d of %s still served on its lease (its node's lease until %v)",
		fw.parts[i].name, old.WriteRegion, s.WriteRegion, s.Epoch, at, n.idx, n.region, end)
}
