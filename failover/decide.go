package failover

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fmnode/fmnode/guard"
	"github.com/fmnode/fmnode/progress"
	"github.com/fmnode/fmnode/quorum"
)

// DecisionKind names what a decision does to the register.
type DecisionKind uint8

const (
	// DecideNone: nothing to write (the steady state: zero register writes).
	DecideNone DecisionKind = iota
	// DecideFailover: ungraceful move of the write region to a live candidate.
	DecideFailover
	// DecideStartSwitchover: fence the write region and wait for the target.
	DecideStartSwitchover
	// DecideCompleteSwitchover: the target caught up; it becomes write region.
	DecideCompleteSwitchover
	// DecideAbortSwitchover: the target did not catch up in time; unfence.
	DecideAbortSwitchover
	// DecideSwitchoverFenced: the fenced write region records its final LSN.
	DecideSwitchoverFenced
	// DecideShrinkQuorum: drop a failed region from the write quorum.
	DecideShrinkQuorum
	// DecideGrowQuorum: add a caught-up region back to the write quorum.
	DecideGrowQuorum
	// DecidePause / DecideResume: operator maintenance switch.
	DecidePause
	DecideResume
	// DecideReopen: a fenced write region resumes writes at a new epoch.
	DecideReopen
	// DecidePrepareGrow writes nothing to the register: the write region
	// first counts a caught-up region in its commit rule (a pending
	// member); the register grows only once that region is in sync, so it
	// never lists a member that may lack an acknowledged write.
	DecidePrepareGrow
	// DecideReassert: a node that regained its lease rewrites its
	// partition's register value unchanged (a new version) before it
	// serves as write region again: a takeover decided while its lease had
	// lapsed, still in flight, then either committed first (the reassert
	// fails and shows it) or can no longer commit.
	DecideReassert
	// DecidePolicy: the operator changed the partition's standing policy
	// (the never-promote regions) through the cluster spec.
	DecidePolicy
)

func (k DecisionKind) String() string {
	switch k {
	case DecideNone:
		return "none"
	case DecideFailover:
		return "failover"
	case DecideStartSwitchover:
		return "start-switchover"
	case DecideCompleteSwitchover:
		return "complete-switchover"
	case DecideAbortSwitchover:
		return "abort-switchover"
	case DecideSwitchoverFenced:
		return "switchover-fenced"
	case DecideShrinkQuorum:
		return "shrink-quorum"
	case DecideGrowQuorum:
		return "grow-quorum"
	case DecidePause:
		return "pause"
	case DecideResume:
		return "resume"
	case DecideReopen:
		return "reopen"
	case DecidePrepareGrow:
		return "prepare-grow"
	case DecideReassert:
		return "reassert"
	case DecidePolicy:
		return "policy"
	}
	return fmt.Sprintf("DecisionKind(%d)", uint8(k))
}

// ReplicaEvidence is what the deciding node knows of one replica region.
type ReplicaEvidence struct {
	Region Region
	// Live: the node hosting the replica is not declared failed.
	Live bool
	// Reported: Epoch, LastLSN and Fenced are known (recently reported).
	Reported bool
	Epoch    Epoch
	LastLSN  LSN
	// Fenced: the replica stopped accepting writes at Epoch.
	Fenced bool
	// InSync is reported by the write region for another region: the write
	// region already counts it in its commit rule and it holds every
	// committed LSN, so adding it to the write quorum loses nothing.
	InSync bool
	// CaughtUp is reported by the write region for another region: it
	// holds everything assigned so far (it may still be outside the commit
	// rule, so writes may commit without it).
	CaughtUp bool
	// HealthySince: the replica has been continuously live since then.
	HealthySince time.Duration
	// Stalled, reported by the write region: the replica's node is live
	// but its match LSN has stood still below the write region's last LSN
	// for GrayStall (its data path is gray). It holds every strong commit
	// back, so it is shrunk out of the write quorum like a failed region;
	// it grows back once InSync.
	Stalled string
}

// Evidence is everything a decision looks at besides the state. Liveness
// enters here as events (simulated heartbeats in sim, memberlist in the
// daemon), never as per-partition register writes.
type Evidence struct {
	Now time.Duration
	// Proposer is the region of the deciding node (recorded in history).
	Proposer Region
	// WriteRegionFailed: a quorum of observer regions declared the write
	// region's node failed, or it is gray-failed (alive, commit LSN stalled
	// while clients report errors). FailureWhy says which, with the votes.
	WriteRegionFailed bool
	FailureWhy        string
	Replicas          []ReplicaEvidence
	// GlobalPause suppresses automatic failover on every partition.
	GlobalPause       bool
	GlobalPauseReason string
	// Drain, if set, says what a drain of the write region that this
	// node runs is waiting on before it moves the partition (Explain
	// prints it; decisions ignore it).
	Drain *DrainWait
}

// Replica returns the evidence for region r.
func (ev Evidence) Replica(r Region) (ReplicaEvidence, bool) {
	for _, x := range ev.Replicas {
		if x.Region == r {
			return x, true
		}
	}
	return ReplicaEvidence{}, false
}

// Candidate is one region considered for promotion, with its rank and the
// reason it is or is not eligible.
type Candidate struct {
	Region   Region
	Eligible bool
	Why      string
	Priority int
	Epoch    Epoch
	LastLSN  LSN
	// LagOps is how far behind the best-known progress it is.
	LagOps uint64
}

// Decision is the outcome of Decide: the next state to write (if any), the
// reasons, the candidate ranking and any action a policy suppressed.
type Decision struct {
	Kind DecisionKind
	// Next is the state to compare-and-set; nil when nothing is written.
	Next   *State
	Target Region
	// Reasons explain the decision (or the absence of one).
	Reasons []string
	// Suppressed names the policy that blocked an action the evidence
	// called for (pause, hysteresis, no candidate, minimum durability).
	Suppressed string
	// Candidates is the ranking a failover or switchover looked at.
	Candidates []Candidate
	// Divergence tells a promoted candidate what it must set aside.
	Divergence progress.Divergence
	// RetryAt, when non-zero, is when the decision may change by the
	// passage of time alone (hold-off expiry, switchover timeout).
	RetryAt time.Duration
	// Guards are the guards the decision passed through (a policy hold, a
	// candidate filtered out, a shrink refused); the Manager counts them.
	Guards guard.Set
}

func (d *Decision) because(format string, args ...any) {
	d.Reasons = append(d.Reasons, fmt.Sprintf(format, args...))
}

// Decide is the pure heart of failover: from a partition's state and the
// current evidence it computes what, if anything, to write to the
// register. The caller compares-and-sets Next against the version the state
// was read at; on a conflict it decides again from the fresh state, so at
// most one of the competing decisions takes effect.
func Decide(cfg Config, s State, ev Evidence) Decision {
	var d Decision
	if ev.WriteRegionFailed {
		d = decideFailover(cfg, s, ev)
		if d.Kind != DecideNone || s.Phase != PhaseSwitchover {
			return d
		}
		// No region qualifies for a takeover, and a switchover runs: its
		// own fence stalls the write region's commits while clients get
		// errors, which observers may take for a gray failure. The
		// switchover must still complete or time out and unfence the
		// write region, or the partition stays fenced for as long as no
		// candidate qualifies.
		sd := decideSwitchover(cfg, s, ev)
		if sd.Kind != DecideNone {
			sd.Reasons = append(d.Reasons, sd.Reasons...)
			return sd
		}
		if sd.RetryAt != 0 && (d.RetryAt == 0 || sd.RetryAt < d.RetryAt) {
			d.RetryAt = sd.RetryAt
		}
		return d
	}
	if s.Phase == PhaseSwitchover {
		return decideSwitchover(cfg, s, ev)
	}
	if d, ok := decideReopen(cfg, s, ev); ok {
		return d
	}
	qd, ok := decideQuorumChange(cfg, s, ev)
	if ok {
		return qd
	}
	if cfg.AutoFailback {
		fb, ok := decideFailback(cfg, s, ev)
		if ok {
			return fb
		}
		d.RetryAt = fb.RetryAt
	}
	// As because("write region %s healthy at epoch %d"), without fmt: every
	// evaluation that changes nothing ends here.
	d.Reasons = append(d.Reasons, "write region "+string(s.WriteRegion)+" healthy at epoch "+strconv.FormatUint(uint64(s.Epoch), 10))
	if qd.Suppressed != "" {
		// A grow held off by hysteresis: nothing else to do, say why.
		d.Guards |= qd.Guards
		d.Suppressed = qd.Suppressed
		d.Reasons = append(d.Reasons, qd.Reasons...)
		if d.RetryAt == 0 || qd.RetryAt < d.RetryAt {
			d.RetryAt = qd.RetryAt
		}
	}
	return d
}

// suppressedBy returns the automatic-action policy in force, if any.
func suppressedBy(cfg Config, s State, now time.Duration) (string, time.Duration, guard.Name) {
	switch {
	case s.Paused:
		return "paused: " + s.PauseReason, 0, guard.HoldPaused
	case now < s.HoldOffUntil:
		return fmt.Sprintf("hysteresis: %d failovers within %v, hold-off until %v",
			recentFailovers(cfg, s, now), cfg.FlapWindow, s.HoldOffUntil), s.HoldOffUntil, guard.HoldHysteresis
	}
	return "", 0, 0
}

func recentShrinks(cfg Config, f QuorumFlap, now time.Duration) int {
	return withinFlapWindow(cfg, f.Shrinks, now)
}

func recentFailovers(cfg Config, s State, now time.Duration) int {
	return withinFlapWindow(cfg, s.Failovers, now)
}

// withinFlapWindow counts the times at most FlapWindow before now.
func withinFlapWindow(cfg Config, times []time.Duration, now time.Duration) int {
	n := 0
	for _, t := range times {
		if now-t <= cfg.FlapWindow {
			n++
		}
	}
	return n
}

// Rank orders the candidates for the write region. Under strong
// consistency every member of the write quorum holds every acknowledged
// write, so priority decides and progress breaks ties; under weaker levels
// the highest progress loses the least, so progress decides first.
func Rank(s State, ev Evidence, exclude Region) []Candidate {
	return rank(s, ev, exclude, nil)
}

// rank is Rank; it adds the candidate filters that fired to g (if set).
func rank(s State, ev Evidence, exclude Region, g *guard.Set) []Candidate {
	var best LSN
	for _, r := range ev.Replicas {
		if r.Reported && r.LastLSN > best {
			best = r.LastLSN
		}
	}
	var out []Candidate
	for _, r := range s.Priority {
		if r == exclude {
			continue
		}
		c := Candidate{Region: r, Priority: s.PriorityOf(r)}
		x, ok := ev.Replica(r)
		if ok && x.Reported {
			c.Epoch, c.LastLSN = x.Epoch, x.LastLSN
			c.LagOps = uint64(best - x.LastLSN)
		}
		switch {
		case !ok || !x.Live:
			c.Why = "down"
		case slices.Contains(s.NeverPromote, r):
			c.Why = "never-promote"
		case s.Consistency == Strong && !s.WriteQuorum.IsMember(r) && !canaryIgnoreWriteQuorum:
			c.Why = "not in the write quorum: may miss acknowledged writes"
		case !x.Reported && s.Consistency != Strong:
			c.Why = "progress unknown"
		case x.Epoch > s.Epoch:
			c.Why = fmt.Sprintf("reports epoch %d above the state's %d (state is stale)", x.Epoch, s.Epoch)
		case !x.Reported:
			// Every member holds every acknowledged write, so under strong
			// consistency a member is eligible before its progress is known;
			// it reports its position itself when it promotes.
			c.Eligible = true
			c.Why = "live write-quorum member (progress reported by itself)"
		default:
			c.Eligible = true
			c.Why = fmt.Sprintf("live, epoch %d, LSN %d, lag %d", x.Epoch, x.LastLSN, c.LagOps)
		}
		out = append(out, c)
		if g != nil {
			g.Add(candidateGuard(s, ev, c, ok && x.Live))
		}
	}
	progressFirst := s.Consistency != Strong
	slices.SortStableFunc(out, func(a, b Candidate) int {
		if a.Eligible != b.Eligible {
			if a.Eligible {
				return -1
			}
			return 1
		}
		if progressFirst && a.LastLSN != b.LastLSN {
			if a.LastLSN > b.LastLSN {
				return -1
			}
			return 1
		}
		if a.Priority != b.Priority {
			return a.Priority - b.Priority
		}
		switch {
		case a.LastLSN > b.LastLSN:
			return -1
		case a.LastLSN < b.LastLSN:
			return 1
		}
		return strings.Compare(string(a.Region), string(b.Region))
	})
	return out
}

func decideFailover(cfg Config, s State, ev Evidence) Decision {
	d := Decision{}
	d.because("write region %s failed: %s", s.WriteRegion, ev.FailureWhy)
	d.Candidates = rank(s, ev, s.WriteRegion, &d.Guards)
	if ev.GlobalPause {
		d.Suppressed = "global pause: " + ev.GlobalPauseReason
		d.Guards.Add(guard.HoldGlobalPause)
		return d
	}
	if why, until, g := suppressedBy(cfg, s, ev.Now); why != "" {
		d.Suppressed, d.RetryAt = why, until
		d.Guards.Add(g)
		return d
	}
	for i, c := range d.Candidates {
		if !c.Eligible {
			continue
		}
		if x, _ := ev.Replica(c.Region); !x.Reported {
			// The floor needs no position: a candidate it rejects is
			// rejected here too (else an observer kept calling for a
			// takeover that the candidate itself refused).
			if _, err := promotedQuorum(s, ev, c); err != nil {
				d.Guards.Add(guard.CandidateBelowMinDurability)
				d.because("candidate %s rejected: %v", c.Region, err)
				d.Candidates[i].Why = fmt.Sprintf("%s, but rejected: %v", c.Why, err)
				continue
			}
			// Only the candidate knows its position: it promotes itself.
			// Others back it up after a stagger (see Manager).
			d.Kind, d.Target = DecideFailover, c.Region
			d.because("%s should promote itself (%s)", c.Region, c.Why)
			return d
		}
		next, div, err := promote(cfg, s, ev, c, DecideFailover)
		if err != nil {
			if _, qerr := promotedQuorum(s, ev, c); qerr != nil {
				d.Guards.Add(guard.CandidateBelowMinDurability)
			}
			d.because("candidate %s rejected: %v", c.Region, err)
			// The summary an operator reads names why, not only that
			// the candidate was live.
			d.Candidates[i].Why = fmt.Sprintf("%s, but rejected: %v", c.Why, err)
			continue
		}
		// Hysteresis: a partition that keeps failing over waits longer
		// each time instead of being blocked blindly.
		kept := next.Failovers[:0]
		for _, t := range next.Failovers {
			if ev.Now-t <= cfg.FlapWindow {
				kept = append(kept, t)
			}
		}
		next.Failovers = append(kept, ev.Now)
		if over := len(next.Failovers) - MaxFlapRecords; over > 0 {
			next.Failovers = slices.Delete(next.Failovers, 0, over)
		}
		if n := len(next.Failovers); n >= 2 {
			hold := cfg.HoldOffBase << min(n-2, 30)
			if hold > cfg.HoldOffMax || hold < 0 {
				hold = cfg.HoldOffMax
			}
			next.HoldOffUntil = ev.Now + hold
			d.because("hold-off %v after %d failovers within %v", hold, n, cfg.FlapWindow)
		}
		d.Kind, d.Next, d.Target, d.Divergence = DecideFailover, &next, c.Region, div
		d.because("promote %s (%s)", c.Region, c.Why)
		return d
	}
	d.Suppressed = "no candidate qualifies: " + candidateSummary(d.Candidates)
	d.Guards.Add(guard.NoCandidate)
	return d
}

// candidateGuard names the filter that made c ineligible (0: none, or it
// is down). live says whether its replica is live.
func candidateGuard(s State, ev Evidence, c Candidate, live bool) guard.Name {
	switch {
	case c.Eligible || !live:
		return 0
	case slices.Contains(s.NeverPromote, c.Region):
		return guard.CandidateNeverPromote
	case s.Consistency == Strong && !s.WriteQuorum.IsMember(c.Region):
		return guard.CandidateNotInWriteQuorum
	case c.Epoch > s.Epoch:
		return guard.CandidateStaleState
	}
	return 0
}

func candidateSummary(cs []Candidate) string {
	if len(cs) == 0 {
		return "no other region"
	}
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s: %s", c.Region, c.Why))
	}
	return strings.Join(parts, "; ")
}

// promotedQuorum is the write quorum candidate c would promote into: the
// live members and c; the old write region rejoins once it has caught up.
// Below the minimum durability it is an error (no takeover then).
func promotedQuorum(s State, ev Evidence, c Candidate) (quorum.WriteQuorum, error) {
	wq := s.WriteQuorum
	wq.WriteRegion = c.Region
	wq.Members = nil
	for _, r := range s.WriteQuorum.Replicas {
		x, ok := ev.Replica(r)
		if r == c.Region || (r != s.WriteRegion && ok && x.Live && s.WriteQuorum.IsMember(r)) {
			wq.Members = append(wq.Members, r)
		}
	}
	if len(wq.Members) < wq.MinDurability {
		return wq, fmt.Errorf("only %d live write-quorum members, minimum durability %d", len(wq.Members), wq.MinDurability)
	}
	return wq, nil
}

// promote builds the state in which candidate c is write region at the
// next epoch, starting after its common LSN with the lineage.
func promote(cfg Config, s State, ev Evidence, c Candidate, kind DecisionKind) (State, progress.Divergence, error) {
	next := s.Clone()
	epoch := s.Epoch + 1
	tbl, div, err := s.Table.Promote(epoch, string(c.Region), c.Epoch, c.LastLSN)
	if err != nil {
		return State{}, div, err
	}
	wq, err := promotedQuorum(s, ev, c)
	if err != nil {
		return State{}, div, err
	}
	if err := wq.Validate(); err != nil {
		return State{}, div, err
	}
	if old, ok := ev.Replica(s.WriteRegion); ok && old.Reported {
		next.setProgress(RegionProgress{Region: s.WriteRegion, Epoch: old.Epoch, LSN: old.LastLSN})
	}
	next.setProgress(RegionProgress{Region: c.Region, Epoch: epoch, LSN: div.CommonLSN})
	next.Epoch = epoch
	next.WriteRegion = c.Region
	next.WriteQuorum = wq
	next.Table = tbl
	next.Phase = PhaseSteady
	next.Target = ""
	next.PhaseSince = ev.Now
	next.SwitchoverLSN = 0
	next.FenceRecorded = false
	reason := fmt.Sprintf("%s; %s", ev.FailureWhy, c.Why)
	if kind != DecideFailover {
		reason = c.Why
	}
	next.record(cfg, Transition{Epoch: epoch, At: ev.Now, Kind: kind, From: s.WriteRegion, To: c.Region, Proposer: ev.Proposer, Reason: reason})
	return next, div, nil
}

func decideSwitchover(cfg Config, s State, ev Evidence) Decision {
	d := Decision{Target: s.Target}
	old, _ := ev.Replica(s.WriteRegion)
	tgt, _ := ev.Replica(s.Target)
	deadline := s.PhaseSince + cfg.GracefulTimeout
	switch {
	case s.FenceRecorded && tgt.Live && tgt.Reported && tgt.Epoch == s.Epoch && tgt.LastLSN >= s.SwitchoverLSN:
		next := s.Clone()
		epoch := s.Epoch + 1
		tbl, err := s.Table.Open(epoch, string(s.Target), s.SwitchoverLSN)
		if err != nil {
			d.because("cannot open epoch %d: %v", epoch, err)
			return d
		}
		next.Table = tbl
		next.Epoch = epoch
		next.WriteRegion = s.Target
		next.WriteQuorum.WriteRegion = s.Target
		if !next.WriteQuorum.IsMember(s.Target) {
			next.WriteQuorum.Members = append(next.WriteQuorum.Members, s.Target)
			slices.Sort(next.WriteQuorum.Members)
		}
		next.Phase = PhaseSteady
		next.Target = ""
		next.PhaseSince = ev.Now
		next.FenceRecorded = false
		next.SwitchoverLSN = 0
		next.setProgress(RegionProgress{Region: s.WriteRegion, Epoch: s.Epoch, LSN: s.SwitchoverLSN})
		next.setProgress(RegionProgress{Region: s.Target, Epoch: epoch, LSN: s.SwitchoverLSN})
		next.record(cfg, Transition{Epoch: epoch, At: ev.Now, Kind: DecideCompleteSwitchover, From: s.WriteRegion, To: s.Target,
			Proposer: ev.Proposer, Reason: fmt.Sprintf("target holds every LSN up to %d", s.SwitchoverLSN)})
		d.Kind, d.Next = DecideCompleteSwitchover, &next
		d.because("%s fenced at LSN %d and %s caught up", s.WriteRegion, s.SwitchoverLSN, s.Target)
	case ev.Now >= deadline:
		next := s.Clone()
		next.Phase = PhaseSteady
		next.Target = ""
		next.PhaseSince = ev.Now
		next.FenceRecorded = false
		next.SwitchoverLSN = 0
		if s.FenceRecorded {
			// The data plane never unpauses a write region within its
			// epoch: the old write region resumes at the next epoch,
			// continuing after the LSN it was fenced at.
			tbl, err := s.Table.Open(s.Epoch+1, string(s.WriteRegion), s.SwitchoverLSN)
			if err != nil {
				d.because("cannot reopen %s at epoch %d: %v", s.WriteRegion, s.Epoch+1, err)
				return d
			}
			next.Epoch, next.Table = s.Epoch+1, tbl
		}
		lag := "unknown"
		if s.FenceRecorded && tgt.Reported && s.SwitchoverLSN >= tgt.LastLSN {
			lag = fmt.Sprintf("%d ops", s.SwitchoverLSN-tgt.LastLSN)
		}
		next.record(cfg, Transition{Epoch: next.Epoch, At: ev.Now, Kind: DecideAbortSwitchover, From: s.WriteRegion, To: s.Target,
			Proposer: ev.Proposer, Reason: fmt.Sprintf("target not caught up within %v (lag %s)", cfg.GracefulTimeout, lag)})
		d.Kind, d.Next = DecideAbortSwitchover, &next
		d.because("switchover to %s timed out after %v; unfence %s", s.Target, cfg.GracefulTimeout, s.WriteRegion)
	case !s.FenceRecorded && ev.Proposer == s.WriteRegion && old.Reported && old.Fenced && old.Epoch == s.Epoch:
		// The fenced write region records its final LSN: the target needs
		// exactly that much before it may take over (RPO 0).
		next := s.Clone()
		next.FenceRecorded = true
		next.SwitchoverLSN = old.LastLSN
		d.Kind, d.Next = DecideSwitchoverFenced, &next
		d.RetryAt = deadline
		d.because("%s fenced at LSN %d; %s must reach it", s.WriteRegion, old.LastLSN, s.Target)
	default:
		d.RetryAt = deadline
		switch {
		case !s.FenceRecorded:
			d.because("waiting for %s to fence", s.WriteRegion)
		case !tgt.Live:
			d.because("target %s is down; abort at %v", s.Target, deadline)
		case tgt.Reported:
			d.because("waiting for %s to catch up: at %d of %d", s.Target, tgt.LastLSN, s.SwitchoverLSN)
		default:
			d.because("waiting for %s to reach LSN %d", s.Target, s.SwitchoverLSN)
		}
	}
	return d
}

// decideReopen resumes writes in a write region that is fenced while the
// state says it is steady (a switchover aborted before its fence LSN was
// recorded, or a fence that outlived its switchover): a paused write region
// resumes only at a new epoch, starting after its own last LSN, which only
// its own node knows.
func decideReopen(cfg Config, s State, ev Evidence) (Decision, bool) {
	var d Decision
	if ev.Proposer != s.WriteRegion {
		return d, false
	}
	me, ok := ev.Replica(s.WriteRegion)
	if !ok || !me.Reported || !me.Fenced || me.Epoch != s.Epoch {
		return d, false
	}
	tbl, err := s.Table.Open(s.Epoch+1, string(s.WriteRegion), me.LastLSN)
	if err != nil {
		d.because("cannot reopen %s: %v", s.WriteRegion, err)
		return d, true
	}
	next := s.Clone()
	next.Epoch, next.Table = s.Epoch+1, tbl
	next.setProgress(RegionProgress{Region: s.WriteRegion, Epoch: next.Epoch, LSN: me.LastLSN})
	next.record(cfg, Transition{Epoch: next.Epoch, At: ev.Now, Kind: DecideReopen, From: s.WriteRegion, To: s.WriteRegion,
		Proposer: ev.Proposer, Reason: fmt.Sprintf("resume writes after a fence at LSN %d", me.LastLSN)})
	d.Kind, d.Next, d.Target = DecideReopen, &next, s.WriteRegion
	d.because("%s is fenced at epoch %d with no switchover running: reopen at epoch %d", s.WriteRegion, s.Epoch, next.Epoch)
	return d, true
}

// decideQuorumChange shrinks the write quorum when a member fails (so
// strong writes continue while members >= minimum durability) and grows it
// when a region is back in sync.
func decideQuorumChange(cfg Config, s State, ev Evidence) (Decision, bool) {
	var d Decision
	for _, r := range s.WriteQuorum.Members {
		if r == s.WriteRegion {
			continue
		}
		x, ok := ev.Replica(r)
		if ok && x.Live && x.Stalled == "" {
			continue
		}
		why := "failed"
		if ok && x.Live {
			why = "stalled: " + x.Stalled
		}
		wq, err := s.WriteQuorum.Shrink(r)
		if err != nil {
			var below *quorum.BelowMinDurabilityError
			if errors.As(err, &below) {
				d.Guards.Add(guard.ShrinkMinDurability)
			}
			d.Suppressed = fmt.Sprintf("cannot drop failed region %s from the write quorum: %v", r, err)
			d.because("write quorum %v keeps %s", s.WriteQuorum.Members, r)
			return d, true
		}
		next := s.Clone()
		next.WriteQuorum = wq
		hold, n := next.noteShrink(cfg, r, ev.Now)
		next.record(cfg, Transition{Epoch: s.Epoch, At: ev.Now, Kind: DecideShrinkQuorum, From: r, Proposer: ev.Proposer,
			Reason: fmt.Sprintf("%s %s; write quorum now %v; grow held off %v (shrink %d within %v)", r, why, wq.Members, hold, n, cfg.FlapWindow)})
		d.Kind, d.Next, d.Target = DecideShrinkQuorum, &next, r
		d.because("drop %s region %s from the write quorum", why, r)
		return d, true
	}
	// Growth is decided where the write region's replica is: only it knows
	// whether a region counts in its commit rule and holds every committed
	// LSN. It takes two steps so that the register never lists a member
	// that may lack an acknowledged write: a caught-up region first joins
	// the write region's commit rule (prepare-grow, a local change: no
	// register write), and the register grows only once the write region
	// reports it in sync. Growing an in-sync region is safe even if it has
	// failed since (it holds every commit; a shrink follows), so a prepared
	// grow whose proposal has an unknown outcome is always completed.
	if ev.Proposer != s.WriteRegion {
		return d, false
	}
	for _, r := range s.WriteQuorum.Replicas {
		if s.WriteQuorum.IsMember(r) {
			continue
		}
		x, ok := ev.Replica(r)
		if !ok || x.Epoch != s.Epoch {
			continue
		}
		if f, ok := s.QuorumFlapOf(r); ok && ev.Now < f.GrowAfter && (x.InSync || x.CaughtUp && x.Live && x.Stalled == "") {
			// Hysteresis: a region that keeps being shrunk out waits
			// longer each time before it grows back (no decision, no
			// register write; the suppression is reported).
			d.Guards.Add(guard.HoldGrowHysteresis)
			if d.Suppressed == "" {
				d.Suppressed = fmt.Sprintf("hysteresis: grow of %s held off until %v after %d shrinks within %v",
					r, f.GrowAfter, recentShrinks(cfg, f, ev.Now), cfg.FlapWindow)
				d.RetryAt = f.GrowAfter
				d.because("%s caught up but shrunk out recently", r)
			}
			continue
		}
		if !x.InSync {
			if x.Live && x.CaughtUp && x.Stalled == "" {
				d.Kind, d.Target = DecidePrepareGrow, r
				d.because("%s caught up at LSN %d: count it in the commit rule before growing the write quorum", r, x.LastLSN)
				return d, true
			}
			continue
		}
		wq, err := s.WriteQuorum.Grow(r, true)
		if err != nil {
			continue
		}
		next := s.Clone()
		next.WriteQuorum = wq
		next.setProgress(RegionProgress{Region: r, Epoch: x.Epoch, LSN: x.LastLSN})
		next.record(cfg, Transition{Epoch: s.Epoch, At: ev.Now, Kind: DecideGrowQuorum, To: r, Proposer: ev.Proposer,
			Reason: fmt.Sprintf("%s in the commit rule and in sync at LSN %d; write quorum now %v", r, x.LastLSN, wq.Members)})
		d.Kind, d.Next, d.Target = DecideGrowQuorum, &next, r
		d.because("add in-sync region %s to the write quorum", r)
		return d, true
	}
	return d, false
}

// decideFailback starts a graceful return to the preferred region once it
// has been healthy and in the write quorum for FailbackAfter.
func decideFailback(cfg Config, s State, ev Evidence) (Decision, bool) {
	var d Decision
	var pref Region
	for _, r := range s.Priority {
		if !slices.Contains(s.NeverPromote, r) {
			pref = r
			break
		}
	}
	if pref == "" || pref == s.WriteRegion || !s.WriteQuorum.IsMember(pref) {
		return d, false
	}
	x, ok := ev.Replica(pref)
	if !ok || !x.Live || !x.Reported || x.Epoch != s.Epoch {
		return d, false
	}
	if ev.Now-x.HealthySince < cfg.FailbackAfter {
		d.RetryAt = x.HealthySince + cfg.FailbackAfter
		return d, false
	}
	if why, until, g := suppressedBy(cfg, s, ev.Now); why != "" {
		d.Guards.Add(g)
		d.Suppressed, d.RetryAt = "failback to "+string(pref)+" "+why, until
		d.because("preferred region %s healthy", pref)
		return d, true
	}
	if ev.GlobalPause {
		return d, false
	}
	next, err := startSwitchover(cfg, s, ev, pref, fmt.Sprintf("fail back to preferred region %s after %v of health", pref, ev.Now-x.HealthySince))
	if err != nil {
		return d, false
	}
	d.Kind, d.Next, d.Target = DecideStartSwitchover, &next, pref
	d.because("fail back to preferred region %s", pref)
	return d, true
}

func startSwitchover(cfg Config, s State, ev Evidence, target Region, reason string) (State, error) {
	if s.Phase != PhaseSteady {
		return State{}, fmt.Errorf("%w: a switchover to %s is already running", ErrRefused, s.Target)
	}
	if target == s.WriteRegion {
		return State{}, fmt.Errorf("%w: %s is already the write region", ErrRefused, target)
	}
	if !slices.Contains(s.Priority, target) {
		return State{}, fmt.Errorf("%w: %s hosts no replica of %s", ErrRefused, target, s.Partition)
	}
	if !s.WriteQuorum.IsMember(target) {
		return State{}, fmt.Errorf("%w: %s is not in the write quorum %v (not caught up)", ErrRefused, target, s.WriteQuorum.Members)
	}
	if x, ok := ev.Replica(target); !ok || !x.Live {
		return State{}, fmt.Errorf("%w: %s is down", ErrRefused, target)
	}
	next := s.Clone()
	next.Phase = PhaseSwitchover
	next.Target = target
	next.PhaseSince = ev.Now
	next.record(cfg, Transition{Epoch: s.Epoch, At: ev.Now, Kind: DecideStartSwitchover, From: s.WriteRegion, To: target,
		Proposer: ev.Proposer, Reason: reason})
	return next, nil
}

// ErrRefused: an operator request is not allowed in the current state.
var ErrRefused = errors.New("failover: request refused")

// ErrBusy: refused for now (with ErrRefused) because the partition has a
// proposal in flight or the window is full; asking again later may
// succeed.
var ErrBusy = errors.New("failover: busy")

// RequestSwitchover is the operator's graceful switchover (also used by a
// region drain). Pause does not block it: manual moves stay possible during
// maintenance.
func RequestSwitchover(cfg Config, s State, ev Evidence, target Region, reason string) (Decision, error) {
	next, err := startSwitchover(cfg, s, ev, target, "operator: "+reason)
	if err != nil {
		return Decision{}, err
	}
	d := Decision{Kind: DecideStartSwitchover, Next: &next, Target: target}
	d.because("operator switchover to %s: %s", target, reason)
	return d, nil
}

// RequestNeverPromote is the operator's change of the regions never made
// write region (the cluster spec's never_promote): a new register value
// with the change in its history, refused when it names a region that
// holds no replica or leaves no region to fail over to.
func RequestNeverPromote(cfg Config, s State, ev Evidence, regions []Region, reason string) (Decision, error) {
	next := s.Clone()
	next.NeverPromote = slices.Clone(regions)
	slices.Sort(next.NeverPromote)
	next.NeverPromote = slices.Compact(next.NeverPromote)
	if len(next.NeverPromote) == 0 {
		next.NeverPromote = nil
	}
	if slices.Equal(next.NeverPromote, s.NeverPromote) || (len(next.NeverPromote) == 0 && len(s.NeverPromote) == 0) {
		return Decision{Reasons: []string{"never-promote already " + fmt.Sprint(s.NeverPromote)}}, nil
	}
	promotable := 0
	for _, r := range next.NeverPromote {
		if !slices.Contains(s.Priority, r) {
			return Decision{}, fmt.Errorf("%w: never-promote region %q is not a replica region of %s (%v)", ErrRefused, r, s.Partition, s.Priority)
		}
	}
	for _, r := range s.Priority {
		if !slices.Contains(next.NeverPromote, r) {
			promotable++
		}
	}
	if promotable == 0 {
		return Decision{}, fmt.Errorf("%w: never-promote %v leaves %s no region to fail over to", ErrRefused, next.NeverPromote, s.Partition)
	}
	next.record(cfg, Transition{Epoch: s.Epoch, At: ev.Now, Kind: DecidePolicy, Proposer: ev.Proposer,
		Reason: fmt.Sprintf("operator: never-promote %v (was %v): %s", next.NeverPromote, s.NeverPromote, reason)})
	return Decision{Kind: DecidePolicy, Next: &next, Reasons: []string{fmt.Sprintf("policy: never-promote %v: %s", next.NeverPromote, reason)}}, nil
}

// RequestMinDurability changes the partition's minimum durability: the
// regions a strong write must be durable in before it is acknowledged,
// and the floor below which the write quorum never shrinks and no
// takeover promotes. The guard: the new minimum must be met by the
// write quorum's members now, which hold every acknowledged write (a
// strong write commits on every member), so a change never leaves the
// register claiming more durability than the acknowledged writes have;
// a lower one never drops a member by itself (only a later shrink of a
// failed member does, under the new floor). Nothing when it is already
// so.
func RequestMinDurability(cfg Config, s State, ev Evidence, min int, reason string) (Decision, error) {
	wq := s.WriteQuorum
	switch {
	case min == wq.MinDurability:
		return Decision{Reasons: []string{fmt.Sprintf("minimum durability already %d", min)}}, nil
	case min < 1 || min > len(wq.Replicas):
		return Decision{}, fmt.Errorf("%w: minimum durability %d of %s: must be in 1..%d (its replica regions)", ErrRefused, min, s.Partition, len(wq.Replicas))
	case min > len(wq.Members):
		return Decision{}, fmt.Errorf("%w: minimum durability %d of %s: only %d regions %v hold every acknowledged write (the write quorum); it grows first",
			ErrRefused, min, s.Partition, len(wq.Members), wq.Members)
	}
	next := s.Clone()
	next.WriteQuorum.MinDurability = min
	if err := next.WriteQuorum.Validate(); err != nil {
		return Decision{}, fmt.Errorf("%w: minimum durability %d of %s: %w", ErrRefused, min, s.Partition, err)
	}
	next.record(cfg, Transition{Epoch: s.Epoch, At: ev.Now, Kind: DecidePolicy, Proposer: ev.Proposer,
		Reason: fmt.Sprintf("operator: minimum durability %d (was %d): %s", min, wq.MinDurability, reason)})
	return Decision{Kind: DecidePolicy, Next: &next, Reasons: []string{fmt.Sprintf("policy: minimum durability %d: %s", min, reason)}}, nil
}

// RequestPause sets or clears the partition's pause flag.
func RequestPause(cfg Config, s State, ev Evidence, paused bool, reason string) (Decision, error) {
	if s.Paused == paused {
		return Decision{Reasons: []string{"pause flag already " + fmt.Sprint(paused)}}, nil
	}
	next := s.Clone()
	next.Paused = paused
	next.PauseReason = reason
	kind := DecidePause
	if !paused {
		kind = DecideResume
		next.PauseReason = ""
	}
	next.record(cfg, Transition{Epoch: s.Epoch, At: ev.Now, Kind: kind, Proposer: ev.Proposer, Reason: "operator: " + reason})
	return Decision{Kind: kind, Next: &next, Reasons: []string{kind.String() + ": " + reason}}, nil
}
