package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/fmnode/fmnode/failover"
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
	// LeaseHeldAtTakeover counts moves of a write region out of the
	// stalled node's region while its replica still served on its lease
	// (servesOnLease, the replica's own rule): had its reads worked, it
	// could have served stale strong reads after the new epoch's first
	// write (expected 0: the takeover waits for the lease to lapse; each
	// one is a lease-overlap violation).
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
		if n := fw.nodes[r.gray.stalled]; s.WriteRegion != old.WriteRegion && old.WriteRegion == n.region && fw.servesOnLease(n, i) {
			// The lease-overlap check (run on every move of a write
			// region, lease_overlap.go) reports it; counted here.
			g.LeaseHeldAtTakeover++
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
