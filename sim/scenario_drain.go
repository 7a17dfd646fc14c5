package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fmnode/fmnode/failover"
)

// drainScenario has an operator drain the write-heavy region: the node of
// another region runs failover.Manager.Drain, which moves every partition
// written there elsewhere by graceful switchovers (fence, record the fence
// LSN in the register, wait for the target to hold it, switch; abort and
// reopen after GracefulTimeout), at most DrainConcurrency at once, started
// at most DrainBurst at once and DrainRate per second after that. A third
// of the way through, the node driving the drain is powered off for half a
// lease (too short to be declared failed) and, once back, the operator
// issues the drain again: it resumes with what is left, without a fresh
// burst past the rate. RPO 0; no automatic failover; every partition
// leaves the region; the starts (register times, the driver's clock)
// conform to the rate limit across the restart.
type drainScenario struct{}

func (drainScenario) Name() string { return "graceful-drain" }
func (drainScenario) Description() string {
	return "an operator drains the write-heavy region by graceful switchovers (RPO 0, DrainConcurrency at once, DrainRate per second); the driving node restarts a third of the way and the drain resumes within the rate; time per partition"
}
func (s drainScenario) Run(cfg Config) (Result, error) {
	res, _, err := runScripted(s, cfg)
	return res, err
}

func (drainScenario) profile() string { return "paper" }
func (drainScenario) shape(*foSpec)   {}
func (drainScenario) heal(*foRun)     {}
func (drainScenario) settle(*foRun)   {}

// drained is the index of the drained region (the write-heavy one).
func (drainScenario) drained() int { return 0 }

// foDrainStep is how finely the drain is watched (for the interruption
// point and the concurrency it reaches).
const foDrainStep = 10 * time.Millisecond

// DrainFigures is what the drain measures: seconds per partition from the
// switchover's start to its completion, the whole drain, and the
// interruption it resumed from.
type DrainFigures struct {
	Partitions  int     `json:"partitions"`
	Concurrency int     `json:"drain_concurrency"`
	PerPart     Dist    `json:"per_partition_s"`
	TotalS      float64 `json:"total_s"`
	// RatePerS and Burst are the drain's rate limit (DrainRate,
	// DrainBurst). Starts counts the switchovers started out of the region
	// (aborted ones restart), StartedPerS is the observed rate from the
	// first start to the last (restart pause included), and MaxStartsIn1S
	// the most starts in any one second (at most Burst + RatePerS), all by
	// the start times in the registers.
	RatePerS      float64 `json:"drain_rate_per_s"`
	Burst         int     `json:"drain_burst"`
	Starts        int     `json:"switchovers_started"`
	StartedPerS   float64 `json:"switchovers_started_per_s"`
	MaxStartsIn1S int     `json:"max_switchovers_started_in_1s"`
	// MaxRunning is the most switchovers out of the region at once.
	MaxRunning int `json:"max_running"`
	// Aborts counts switchovers that timed out (GracefulTimeout) and
	// reopened the old write region (from the registers' histories).
	Aborts int `json:"aborts"`
	// RemainingAtRestart is what was left when the driver went down;
	// ResumedAfterS is when (from the drain's start) it was asked again.
	RemainingAtRestart int     `json:"remaining_at_restart"`
	ResumedAfterS      float64 `json:"resumed_after_s"`
	NotDrained         int     `json:"not_drained"`
}

func (f *DrainFigures) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-34s %d partitions in %.2f s, %d at once at most (cap %d), %d aborts; per partition p50 %.3f p99 %.3f max %.3f s\n",
		"graceful drain", f.Partitions, f.TotalS, f.MaxRunning, f.Concurrency, f.Aborts, f.PerPart.P50, f.PerPart.P99, f.PerPart.Max)
	fmt.Fprintf(&b, "%-34s %d started at %.1f/s first to last, at most %d in 1 s (rate %g/s, burst %d)\n", "drain rate",
		f.Starts, f.StartedPerS, f.MaxStartsIn1S, f.RatePerS, f.Burst)
	fmt.Fprintf(&b, "%-34s driver restarted with %d left, drain resumed at %.2f s; %d not drained\n", "interrupted and resumed",
		f.RemainingAtRestart, f.ResumedAfterS, f.NotDrained)
	return b.String()
}

type foDrainState struct {
	from        time.Duration
	start, done []time.Duration
	// inSwitch: the partition is in a switchover out of the drained
	// region; running counts them.
	inSwitch      []bool
	running       int
	ungraceful    int
	firstUngraced string
	// counted are each partition's switchover starts already counted in
	// starts, by their register time: a learn replays the whole history,
	// which keeps earlier starts next to the new one (comparing with the
	// latest start only counted an earlier one again once a partition
	// had started twice: graceful-drain swarm seed 8's start 50 ms before
	// the rate allowed was one start counted twice).
	counted []map[time.Duration]bool
	starts  []time.Duration
}

// drainDriver is the node that runs the drain: another region's.
func (fw *foWorld) drainDriver() *foNode { return fw.nodes[fw.parts[0].nodeOfReg[1]] }

func (s drainScenario) inject(r *foRun) {
	fw := r.fw
	drained := fw.regions[s.drained()]
	st := &foDrainState{from: fw.now(), start: make([]time.Duration, len(fw.parts)), done: make([]time.Duration, len(fw.parts))}
	r.drain = st
	r.fig.Drain = &DrainFigures{Concurrency: failover.DefaultDrainConcurrency,
		RatePerS: failover.DefaultDrainRate, Burst: failover.DefaultDrainBurst}
	// The drained partitions count as "affected": failover completion in
	// the report is then the time each left the region.
	r.downRegion(s.drained())
	r.fig.Drain.Partitions = fw.m.startOutage(fw, r.down, fw.now())
	r.down = make([]bool, len(fw.nodes)) // nothing is down: no re-sync to count
	st.inSwitch = make([]bool, len(fw.parts))
	st.counted = make([]map[time.Duration]bool, len(fw.parts))
	fw.onLearn = func(i int, old, sv failover.State, at time.Duration) {
		in := sv.Phase == failover.PhaseSwitchover && sv.WriteRegion == drained
		if in {
			for _, t := range sv.History {
				if t.Kind == failover.DecideStartSwitchover && t.From == drained && t.At >= st.from && !st.counted[i][t.At] {
					if st.counted[i] == nil {
						st.counted[i] = map[time.Duration]bool{}
					}
					st.counted[i][t.At] = true
					st.starts = append(st.starts, t.At)
				}
			}
		}
		if in != st.inSwitch[i] {
			st.inSwitch[i] = in
			if in {
				st.running++
				r.fig.Drain.MaxRunning = max(r.fig.Drain.MaxRunning, st.running)
				if st.start[i] == 0 {
					st.start[i] = at
				}
			} else {
				st.running--
			}
		}
		if old.WriteRegion != drained || sv.WriteRegion == drained {
			return
		}
		if st.done[i] == 0 {
			st.done[i] = at
		}
		for _, t := range sv.History {
			if t.Epoch == sv.Epoch && t.Kind == failover.DecideFailover {
				st.ungraceful++
				if st.firstUngraced == "" {
					st.firstUngraced = fmt.Sprintf("partition %s moved from %s to %s at epoch %d: %s",
						fw.parts[i].name, old.WriteRegion, sv.WriteRegion, sv.Epoch, t.Reason)
				}
			}
		}
	}
	s.ask(r)
}

// ask has the driver start (or resume) the drain.
func (s drainScenario) ask(r *foRun) {
	n := r.fw.drainDriver()
	if n.node == nil {
		return
	}
	n.node.Drain(n.local(), r.fw.regions[s.drained()], "scenario graceful-drain")
	n.pump()
}

// remaining counts the partitions still written in the drained region.
func (s drainScenario) remaining(r *foRun) int {
	n := 0
	for i := range r.fw.parts {
		if r.fw.reg[i].state.WriteRegion == r.fw.regions[s.drained()] {
			n++
		}
	}
	return n
}

// run interrupts the drain once a third of it is done: the driver is
// powered off for half a lease, restarts, and is asked again.
func (s drainScenario) run(r *foRun, until time.Duration) {
	fw := r.fw
	total := r.fig.Drain.Partitions
	for fw.now() < until && total-s.remaining(r) < (total+2)/3 {
		fw.e.run(min(until, fw.now()+foDrainStep))
	}
	driver := fw.drainDriver()
	r.fig.Drain.RemainingAtRestart = s.remaining(r)
	fw.e.w.Crash(driver.idx)
	fw.e.run(fw.now() + r.profile.LeaseDuration/2)
	fw.e.w.Restart(driver.idx)
	r.fig.Drain.ResumedAfterS = (fw.now() - r.drain.from).Seconds()
	s.ask(r)
	for fw.now() < until && s.remaining(r) > 0 {
		fw.e.run(min(until, fw.now()+foDrainStep))
	}
	fw.e.run(until)
}

func (s drainScenario) check(r *foRun) {
	fw := r.fw
	st, f := r.drain, r.fig.Drain
	var per []float64
	last := time.Duration(0)
	for i := range fw.parts {
		if !fw.m.affected[i] {
			continue
		}
		if st.done[i] == 0 {
			f.NotDrained++
			r.violation(ViolationLiveness, "partition %s was not drained from %s", fw.parts[i].name, fw.regions[s.drained()])
			continue
		}
		per = append(per, (st.done[i] - st.start[i]).Seconds())
		last = max(last, st.done[i])
	}
	f.PerPart = distOf(per)
	for i := range fw.parts {
		for _, t := range fw.reg[i].state.History {
			if t.Kind == failover.DecideAbortSwitchover && t.At >= st.from {
				f.Aborts++
			}
		}
	}
	f.TotalS = (last - st.from).Seconds()
	if st.ungraceful > 0 && fw.alone() { // background partitions fail some over
		r.violation(ViolationInvariant, "%d partitions left the drained region by automatic failover: %s", st.ungraceful, st.firstUngraced)
	}
	if f.MaxRunning > f.Concurrency {
		r.violation(ViolationInvariant, "%d switchovers out of the drained region at once, the cap is %d", f.MaxRunning, f.Concurrency)
	}
	if f.RemainingAtRestart == 0 || f.RemainingAtRestart == f.Partitions {
		r.violation(ViolationInvariant, "the driver restarted with %d of %d left: the drain was not interrupted midway", f.RemainingAtRestart, f.Partitions)
	}
	if f.Partitions == 0 {
		r.violation(ViolationInvariant, "no partition to drain")
	}
	s.checkRate(r)
}

// checkRate measures the drain's starts and checks them against its rate
// limit, replayed as the same bucket: DrainBurst at once, then one per
// 1/DrainRate.
func (drainScenario) checkRate(r *foRun) {
	st, f := r.drain, r.fig.Drain
	starts := slices.Clone(st.starts)
	slices.Sort(starts)
	f.Starts = len(starts)
	if len(starts) > 1 {
		f.StartedPerS = float64(len(starts)-1) / (starts[len(starts)-1] - starts[0]).Seconds()
	}
	j := 0
	for i := range starts {
		for starts[i]-starts[j] >= time.Second {
			j++
		}
		f.MaxStartsIn1S = max(f.MaxStartsIn1S, i-j+1)
	}
	iv := time.Duration(float64(time.Second) / f.RatePerS)
	tat := time.Duration(math.MinInt64 / 2)
	for _, at := range starts {
		if allowed := tat - time.Duration(f.Burst-1)*iv; at < allowed {
			r.violation(ViolationInvariant, "drain switchover started at %v, before the rate limit allowed (%v; %g/s, burst %d)",
				at, allowed, f.RatePerS, f.Burst)
			return
		}
		tat = max(tat, at) + iv
	}
}
