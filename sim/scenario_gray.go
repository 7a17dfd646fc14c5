package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
)

// grayScenario stalls the data plane of the write-heavy region's node for
// --outage: its partition store's disk never completes a write (every
// Ready waits), so it replicates, commits and answers nothing, while its
// heartbeats, lease, acceptor and failover manager run as usual. No node
// is ever declared failed for silence; the partitions must fail over on
// gray evidence: clients report their timeouts to the next replica they
// reach, whose manager sees its own commit LSN (and last LSN) stand still.
// That verdict withholds the node's lease acks (every observer follows a
// claim), and the takeover waits until a quorum of observers has withheld
// them for lease + maximum drift: no failover commits while the stalled
// node holds a lease (with which it could serve stale strong reads).
// Its follower replicas stall too: the write regions elsewhere see their
// match LSN stand still and shrink it out of the write quorum, so strong
// writes continue there.
type grayScenario struct{}

func (grayScenario) Name() string { return "gray-failure" }
func (grayScenario) Description() string {
	return "the write-heavy region's disk stalls for --outage (heartbeats and lease fine): clients' errors and the stalled commit LSN withhold its lease; it fails over after GrayStall + lease + drift, never while its lease holds"
}
func (s grayScenario) Run(cfg Config) (Result, error) {
	res, _, err := runScripted(s, cfg)
	return res, err
}

func (grayScenario) profile() string { return "paper" }
func (grayScenario) shape(*foSpec)   {}
func (grayScenario) settle(*foRun)   {}

// GrayFigures is what the gray-failure scenario measures.
type GrayFigures struct {
	Affected int `json:"affected"`
	// ByGray counts the failovers whose recorded reason is a gray
	// failure; BySilence those a liveness verdict caused (expected 0).
	ByGray    int `json:"failed_over_on_gray_evidence"`
	BySilence int `json:"failed_over_on_silence"`
	// StalledShrinks counts write quorums the stalled region was dropped
	// from as a stalled follower (partitions written elsewhere).
	StalledShrinks int     `json:"stalled_follower_shrinks"`
	GrayStallS     float64 `json:"gray_stall_s"`
	// LeaseHeldAtTakeover counts failovers committed while the stalled
	// node still held its lease: had its reads worked, it could have
	// served stale strong reads after the new epoch's first write
	// (expected 0: the takeover waits for the lease to lapse).
	LeaseHeldAtTakeover int `json:"lease_held_at_takeover"`
}

func (f *GrayFigures) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-34s %d of %d affected failed over on gray evidence (%d on silence); GrayStall %.0f s; %d write quorums shrank a stalled follower; %d takeovers while its lease held\n",
		"gray failure", f.ByGray, f.Affected, f.BySilence, f.GrayStallS, f.StalledShrinks, f.LeaseHeldAtTakeover)
	return b.String()
}

type foGrayState struct {
	stalled int32
}

func (grayScenario) inject(r *foRun) {
	fw := r.fw
	node := fw.busiestWriteNode(0)
	r.down[node] = true
	r.gray = &foGrayState{stalled: int32(node)}
	r.fig.Gray = &GrayFigures{GrayStallS: r.profile.GrayStall.Seconds()}
	r.fig.Gray.Affected = fw.m.startOutage(fw, r.down, fw.now())
	fw.onLearn = func(i int, old, s failover.State, at time.Duration) {
		if len(s.History) == 0 || (len(old.History) > 0 && old.History[len(old.History)-1] == s.History[len(s.History)-1]) {
			return
		}
		g, t := r.fig.Gray, s.History[len(s.History)-1]
		if n := fw.nodes[r.gray.stalled]; s.WriteRegion != old.WriteRegion && old.WriteRegion == n.region && n.mgr != nil {
			if end, gap := fw.leaseGapAtTakeover(n, i, at); gap {
				g.LeaseHeldAtTakeover++
				r.violation(ViolationInvariant, "partition %s: failover to %s committed at %v while the gray write region %s held its lease until %v: it could serve stale strong reads",
					fw.parts[i].name, s.WriteRegion, at, n.region, end)
			}
		}
		switch {
		case t.Kind == failover.DecideFailover && strings.Contains(t.Reason, "gray failure"):
			g.ByGray++
		case t.Kind == failover.DecideFailover:
			g.BySilence++
		case t.Kind == failover.DecideShrinkQuorum && strings.Contains(t.Reason, "stalled"):
			g.StalledShrinks++
		}
	}
}

// run stalls the node's disk until the outage ends: every Ready it queues
// completes then, not before.
func (grayScenario) run(r *foRun, until time.Duration) {
	n := r.fw.nodes[r.gray.stalled]
	n.diskFree = max(n.diskFree, until)
	r.fw.e.run(until)
}

// heal: the disk recovers by itself at the end of the outage.
func (grayScenario) heal(*foRun) {}

func (grayScenario) check(r *foRun) {
	fw := r.fw
	g := r.fig.Gray
	if !fw.alone() {
		// Background partitions make the stalled node silent too, and
		// their own failovers can come first: how (and whether) the gray
		// failure was detected is pinned only when it is the only fault.
		return
	}
	r.requireFailedOver()
	if g.BySilence > 0 {
		r.violation(ViolationInvariant, "%d failovers on a liveness verdict: the stalled node kept heartbeating", g.BySilence)
	}
	if g.ByGray == 0 {
		r.violation(ViolationLiveness, "no failover on gray evidence")
	}
	for i := range fw.parts {
		if fw.m.affected[i] && fw.m.detect[i] != 0 && fw.m.detect[i]-1 < r.profile.GrayStall {
			r.violation(ViolationInvariant, "partition %s failed over %v after the stall began, before GrayStall %v",
				fw.parts[i].name, fw.m.detect[i]-1, r.profile.GrayStall)
		}
	}
}

// leaseGapAtTakeover is the check run when partition i's write region
// moves away from n's region at at: strong reads at the old write region
// are gated on its node's lease, which must have lapsed before the
// takeover commits, so before the new epoch acknowledges anything. It
// returns the lease's end (virtual time) and whether n could still serve:
// leased and its replica not fenced. A switchover completes only once the
// old replica is paused, and a paused replica redirects writes and strong
// reads whatever its lease: counting those, as this check did, flagged
// every switchover completing within a lease of its fence as a lease gap
// (gray-failure swarm seeds 4 and 11).
func (fw *foWorld) leaseGapAtTakeover(n *foNode, i int, at time.Duration) (time.Duration, bool) {
	if n.mgr == nil {
		return 0, false
	}
	end := fw.e.w.VirtualAt(n.idx, n.mgr.Liveness().LeaseUntil())
	return end, end > at && fw.actsAsWriteRegion(n, i)
}

// actsAsWriteRegion reports whether n's replica of partition i still acts
// as its write region: it is the leader (not fenced for a switchover, not
// a follower of a newer epoch), so with its lease it would acknowledge
// writes and serve strong reads.
func (fw *foWorld) actsAsWriteRegion(n *foNode, i int) bool {
	if n.node == nil {
		return false // down: it serves nothing
	}
	p, err := n.node.Host().Progress(fw.parts[i].id)
	return err == nil && p.Role == partition.RoleLeader
}

// servesOnLease reports whether n's replica of partition i could
// acknowledge a write or serve a strong read now: it acts as write region
// and its lease holds by the replica's own rule, which also asks that the
// node's current lease run was validated at the replica's epoch. A node
// that restarts, or regains its lease after a lapse, holds a node lease at
// once, but none of its replicas acts on it before its reassert commits;
// the node lease alone flagged such a write region as still serving
// (cluster-edge-min-durability seed 2: node 0 restarted while a failover
// out of its region was in flight).
func (fw *foWorld) servesOnLease(n *foNode, i int) bool {
	return fw.actsAsWriteRegion(n, i) && n.node.Host().LeaseErr(fw.parts[i].id, fw.e.w.Local(n.idx)) == nil
}
