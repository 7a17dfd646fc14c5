package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/progress"
)

// failbackScenario cuts the write-heavy region off from the other regions
// (not from its clients) while the clients write often: until its lease
// lapses it appends writes it can never commit, which is false progress
// once another region takes over. When the cut heals, the returning region
// must find that false progress from the progress table, set it aside in
// its conflict record, receive only the delta (no snapshot; re-sync bytes
// at most the changed data plus 1% of a full copy), and the partitions
// must move back to it, their preferred region, only after it has been
// healthy for FailbackAfter.
type failbackScenario struct{}

// Failback clients write every 1-3 s, so that the lease window of the cut
// leaves false progress in most partitions.
const (
	foFailbackThinkMin = time.Second
	foFailbackThinkMax = 3 * time.Second
)

func (failbackScenario) Name() string { return "failback" }
func (failbackScenario) Description() string {
	return "the write-heavy region cut off (not from its clients) for --outage, then back: its false progress found, set aside in the conflict record, only the delta shipped; failback after sustained health"
}
func (s failbackScenario) Run(cfg Config) (Result, error) {
	res, _, err := runScripted(s, cfg)
	return res, err
}

func (failbackScenario) profile() string { return "paper" }

func (failbackScenario) shape(spec *foSpec) {
	spec.thinkMin, spec.thinkMax = foFailbackThinkMin, foFailbackThinkMax
}

// FailbackFigures is what the failback scenario measures.
type FailbackFigures struct {
	// FalseProgressOps is the ops the returning replicas held past their
	// epoch's end (progress.Table.Diverge at the heal), in how many
	// partitions, and how many of them the conflict records hold.
	FalseProgressOps        uint64 `json:"false_progress_ops"`
	FalseProgressPartitions int    `json:"false_progress_partitions"`
	ConflictRecords         uint64 `json:"conflict_records"`
	// ByTruncate and ByLogMatching split the conflict records by what set
	// them aside: the follow action's truncation (Reconcile, from the
	// progress table) or the data plane's log matching against the new
	// write region. FollowTruncatedOps is what the follow actions
	// reported truncating.
	ByTruncate         uint64 `json:"set_aside_by_truncate"`
	ByLogMatching      uint64 `json:"set_aside_by_log_matching"`
	FollowTruncatedOps uint64 `json:"follow_truncated_ops"`
	// Start and Done: seconds from the heal to the failback switchover's
	// start and to the preferred region being write region again, per
	// partition; FailbackAfter is the sustained health it waits for.
	Start         Dist    `json:"start_s"`
	Done          Dist    `json:"done_s"`
	FailbackAfter float64 `json:"failback_after_s"`
	NotFailedBack int     `json:"not_failed_back"`
}

func (f *FailbackFigures) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-34s %d ops in %d partitions, %d in the conflict records (%d by truncation, %d by log matching)\n", "false progress found / set aside",
		f.FalseProgressOps, f.FalseProgressPartitions, f.ConflictRecords, f.ByTruncate, f.ByLogMatching)
	fmt.Fprintf(&b, "%-34s start p50 %.1f max %.1f, done p50 %.1f max %.1f s after the return (waits %.0f s of health); %d not back\n",
		"failback to the preferred region", f.Start.P50, f.Start.Max, f.Done.P50, f.Done.Max, f.FailbackAfter, f.NotFailedBack)
	return b.String()
}

// foFailbackState is the failback script's record, kept in the run.
type foFailbackState struct {
	// at the heal: each affected partition's returning replica and its
	// divergence from the lineage.
	div   []progress.Divergence
	epoch []partition.Epoch
	node  []int32
	start []time.Duration
	done  []time.Duration
}

func (failbackScenario) inject(r *foRun) {
	fw := r.fw
	r.downRegion(0)
	fw.m.startOutage(fw, r.down, fw.now())
	r.cutDown()
}

func (failbackScenario) run(r *foRun, until time.Duration) { r.fw.e.run(until) }

// heal computes, before the cut heals, each affected partition's
// divergence from the register's progress table: the false progress the
// returning replica holds. Then it heals.
func (failbackScenario) heal(r *foRun) {
	fw := r.fw
	st := &foFailbackState{div: make([]progress.Divergence, len(fw.parts)), epoch: make([]partition.Epoch, len(fw.parts)),
		node: make([]int32, len(fw.parts)), start: make([]time.Duration, len(fw.parts)), done: make([]time.Duration, len(fw.parts))}
	fb := &FailbackFigures{FailbackAfter: r.profile.FailbackAfter.Seconds()}
	r.fig.Failback = fb
	for i := range fw.parts {
		if !fw.m.affected[i] {
			continue
		}
		node := fw.parts[i].nodeOfReg[0]
		st.node[i] = node
		pr, err := fw.nodes[node].host.Progress(fw.parts[i].id)
		lead, lerr := fw.leaderProgress(i)
		if err != nil || lerr != nil {
			r.violation(ViolationInvariant, "partition %s: no progress at the heal: %v %v", fw.parts[i].name, err, lerr)
			continue
		}
		div, err := fw.reg[i].state.Table.Diverge(progress.Epoch(pr.Epoch), progress.LSN(pr.LastLSN), progress.LSN(lead.LastLSN))
		if err != nil {
			r.violation(ViolationInvariant, "partition %s: divergence of the returning replica: %v", fw.parts[i].name, err)
			continue
		}
		st.div[i], st.epoch[i] = div, pr.Epoch
		if div.FalseProgressOps > 0 {
			fb.FalseProgressOps += div.FalseProgressOps
			fb.FalseProgressPartitions++
		}
	}
	r.resync = fw.resyncMark(r.down)
	initial := func(i int) failover.Region { return fw.parts[i].initial }
	back := fw.now()
	fw.onLearn = func(i int, old, s failover.State, at time.Duration) {
		if !fw.m.affected[i] || at < back {
			return
		}
		if st.start[i] == 0 && s.Phase == failover.PhaseSwitchover && s.Target == initial(i) && old.Phase == failover.PhaseSteady {
			st.start[i] = at
		}
		if st.done[i] == 0 && s.WriteRegion == initial(i) && old.WriteRegion != initial(i) {
			st.done[i] = at
		}
	}
	r.fb = st
	r.healDown()
}

// settle waits until every affected partition is back on its preferred
// region (bounded by the health it waits for, a switchover and the
// convergence bound).
func (failbackScenario) settle(r *foRun) {
	fw := r.fw
	st := r.fb
	bound := r.back + r.profile.FailbackAfter + r.profile.GracefulTimeout + foConvergeBound
	fw.runUntil(bound, func() bool {
		for i := range fw.parts {
			if fw.m.affected[i] && st.done[i] == 0 {
				return false
			}
		}
		return true
	})
}

func (failbackScenario) check(r *foRun) {
	fw := r.fw
	st, fb := r.fb, r.fig.Failback
	r.requireFailedOver()
	if fb.FalseProgressOps == 0 {
		r.violation(ViolationInvariant, "no returning replica held false progress: the script showed nothing (more writes or a longer lease needed)")
	}
	// Set aside: every false-progress op of the returning replica is in
	// its conflict record, removed from its log either by the follow
	// action (Reconcile's truncation at the common LSN the progress table
	// gives) or by the data plane's log matching when the new write
	// region's appends reached it before its manager read the register;
	// never by a snapshot (that would be a full copy).
	for i := range fw.parts {
		if !fw.m.affected[i] || st.div[i].FalseProgressOps == 0 {
			continue
		}
		n := fw.nodes[st.node[i]]
		recs, err := n.store.Conflicts(fw.parts[i].id, partition.Token{}, 1<<16)
		if err != nil {
			r.violation(ViolationInvariant, "partition %s: conflict records: %v", fw.parts[i].name, err)
			continue
		}
		fp := st.div[i].FalseProgress
		var found uint64
		for _, c := range recs {
			if c.Op.Epoch != st.epoch[i] || !fp.Contains(progress.LSN(c.Op.LSN)) {
				continue
			}
			found++
			switch c.Reason {
			case partition.ConflictTruncate:
				fb.ByTruncate++
			case partition.ConflictOverwrite:
				fb.ByLogMatching++
			default:
				r.violation(ViolationInvariant, "partition %s: false-progress op %d set aside by %v", fw.parts[i].name, c.Op.LSN, c.Reason)
			}
		}
		fb.ConflictRecords += found
		if found != st.div[i].FalseProgressOps {
			r.violation(ViolationInvariant, "partition %s: %d false-progress ops %v, %d of them in the conflict record",
				fw.parts[i].name, st.div[i].FalseProgressOps, fp, found)
		}
	}
	fb.FollowTruncatedOps = fw.m.falseProgress
	// Only the delta: no snapshot, and the bytes within the target (under
	// background faults a partitioned replica may legitimately fall
	// behind the log's retention and need a snapshot).
	if !fw.alone() {
		return
	}
	if r.fig.ResyncSnapshots > 0 {
		r.violation(ViolationInvariant, "%d snapshots sent to the returning region: a full copy, not the delta", r.fig.ResyncSnapshots)
	}
	if !r.fig.ResyncTargetMet {
		r.violation(ViolationInvariant, "re-sync shipped %.3f%% of a full copy; the changed data is %.3f%% (target: changed + 1%%)",
			100*r.fig.ResyncFraction, 100*r.fig.ChangedFraction)
	}
	// Failback only after sustained health, and it happened.
	early := r.back + r.profile.FailbackAfter - r.profile.MaxClockDrift
	for i := range fw.parts {
		if !fw.m.affected[i] {
			continue
		}
		switch {
		case st.done[i] == 0:
			fb.NotFailedBack++
			r.violation(ViolationLiveness, "partition %s did not fail back to %s", fw.parts[i].name, fw.parts[i].initial)
		case st.start[i] != 0 && st.start[i] < early:
			r.violation(ViolationInvariant, "partition %s failed back %v after the return, before %v of health",
				fw.parts[i].name, st.start[i]-r.back, r.profile.FailbackAfter)
		}
	}
	fb.Start, fb.Done = distOf(secsSince(st.start, r.back)), distOf(secsSince(st.done, r.back))
}

// leaderProgress is the progress of partition i's current write region.
func (fw *foWorld) leaderProgress(i int) (partition.Progress, error) {
	node, ok := fw.nodeFor(i, fw.reg[i].state.WriteRegion)
	if !ok || fw.nodes[node].host == nil {
		return partition.Progress{}, fmt.Errorf("sim: partition %s: write region %s has no live host", fw.parts[i].name, fw.reg[i].state.WriteRegion)
	}
	pr, err := fw.nodes[node].host.Progress(fw.parts[i].id)
	if err != nil {
		return partition.Progress{}, fmt.Errorf("sim: partition %s: %w", fw.parts[i].name, err)
	}
	return pr, nil
}
