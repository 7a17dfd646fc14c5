package replcheck

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/partition"
)

// SoakFailoverConfig is the failover configuration of the runner's moves:
// the fast profile with timings shortened to the soak's seconds-long runs
// (a 500 ms lease, 50 ms drift bound, hold-offs of a fraction of a second
// doubling up to 4 s) and without automatic failback, so that the write
// region moves only when the runner asks.
func SoakFailoverConfig() failover.Config {
	c := failover.FastConfig()
	c.HeartbeatInterval = 100 * time.Millisecond
	c.SuspectProbeInterval = 100 * time.Millisecond
	c.LeaseDuration = 500 * time.Millisecond
	c.MaxClockDrift = 50 * time.Millisecond
	c.GracefulTimeout = 2 * time.Second
	c.HoldOffBase = 500 * time.Millisecond
	c.HoldOffMax = 4 * time.Second
	c.FlapWindow = 30 * time.Second
	c.GrowHoldOffBase = 250 * time.Millisecond
	c.GrowHoldOffMax = 2 * time.Second
	c.GrayStall = time.Second
	c.AutoFailback = false
	return c
}

// evalEvery is how often the runner evaluates every partition's register
// (Decide and Reconcile) while moves are enabled.
const evalEvery = 5 * time.Millisecond

// register is a partition's failover register. The runner is its only
// writer and evaluates decisions one at a time, so a single in-memory
// value stands in for the CASPaxos register: every compare-and-set the
// real path would make succeeds here, and what is tested is the failover
// core's transitions (Decide, RequestSwitchover, Reconcile) and their
// execution by node.Do on the data plane.
type register struct {
	st failover.State
	// wrOf records the write region of every epoch the register opened
	// (one write region per epoch).
	wrOf map[failover.Epoch]partition.Region
	// pending lists the regions the write region counts in its commit
	// rule ahead of the register (Decide's prepare-grow), sorted.
	pending []partition.Region
	// Leases: the runner renews the write region's lease every quarter
	// lease (lastRenew is the last renewal that reached it). A takeover
	// stops the renewal (failing) and is decided no earlier than
	// takeoverAt, the lease plus the drift bound after lastRenew.
	renewAt, lastRenew time.Duration
	failing            bool
	takeoverAt         time.Duration
}

func (p *part) writeRegion() partition.Region { return p.reg.st.WriteRegion }
func (p *part) epoch() partition.Epoch        { return partition.Epoch(p.reg.st.Epoch) }

// startMoves begins a move of every partition that is steady: a takeover
// if its write region is down, else a takeover or a graceful switchover
// to another region, at random.
func (r *runner) startMoves(now time.Duration) {
	fc := r.cfg.Failover
	for _, p := range r.parts {
		g := &p.reg
		if g.failing || g.st.Phase != failover.PhaseSteady {
			continue // a move is under way
		}
		wr := g.st.WriteRegion
		if !r.c.Up(wr) || r.rng.IntN(2) == 0 {
			// The write region is declared failed once its lease has
			// surely run out: stop renewing it.
			g.failing = true
			g.takeoverAt = max(now, g.lastRenew+fc.TakeoverDelay())
			continue
		}
		others := slices.DeleteFunc(slices.Clone(r.cfg.Regions), func(x partition.Region) bool { return x == wr })
		target := others[r.rng.IntN(len(others))]
		d, err := failover.RequestSwitchover(fc, g.st, r.evidence(p, now, false), target, "replcheck: planned move")
		if err != nil {
			r.suppressed("switchover refused: " + reasonClass(err.Error()))
			continue
		}
		r.commit(p, now, d)
	}
}

// evaluate renews leases, decides every partition's next register value
// (a due takeover, else Decide's steady-state and switchover steps) and
// reconciles every reachable replica with the register.
func (r *runner) evaluate(now time.Duration) {
	if r.cfg.FailoverEvery <= 0 || now < r.evalAt {
		return
	}
	r.evalAt = now + evalEvery
	fc := r.cfg.Failover
	for _, p := range r.parts {
		g := &p.reg
		switch {
		case g.failing && now >= g.takeoverAt:
			r.takeover(p, now)
		case !g.failing:
			r.prunePending(p)
			d := failover.Decide(fc, g.st, r.evidence(p, now, false))
			switch {
			case d.Kind == failover.DecidePrepareGrow:
				if !slices.Contains(g.pending, d.Target) {
					g.pending = append(g.pending, d.Target)
					slices.Sort(g.pending)
				}
			case d.Next != nil:
				r.commit(p, now, d)
			}
		}
		r.reconcile(p)
		if !g.failing && now >= g.renewAt {
			g.renewAt = now + fc.LeaseDuration/4
			if r.c.Control(g.st.WriteRegion, func(now time.Duration, h *partition.Host) error {
				return h.SetLease(p.id, now+fc.LeaseDuration)
			}) == nil {
				g.lastRenew = now
			}
		}
	}
}

// takeover decides the failover of a write region whose lease the runner
// stopped renewing a lease plus the drift bound ago.
func (r *runner) takeover(p *part, now time.Duration) {
	g := &p.reg
	g.failing = false
	fc := r.cfg.Failover
	if now < g.lastRenew+fc.TakeoverDelay() {
		r.fail("partition %d: takeover at %v before the lease of %s (renewed at %v) plus drift ran out", p.id, now, g.st.WriteRegion, g.lastRenew)
		return
	}
	ev := r.evidence(p, now, true)
	ev.WriteRegionFailed = true
	ev.FailureWhy = fmt.Sprintf("replcheck: lease of %s not renewed since %v (takeover delay %v)", g.st.WriteRegion, g.lastRenew, fc.TakeoverDelay())
	d := failover.Decide(fc, g.st, ev)
	if d.Kind != failover.DecideFailover || d.Next == nil {
		// The old write region's lease is renewed again: it stays.
		why := d.Suppressed
		if why == "" {
			why = strings.Join(d.Reasons, "; ")
		}
		r.suppressed("takeover: " + reasonClass(why))
		return
	}
	r.commit(p, now, d)
}

// evidence is what the runner knows of p's replicas: every reachable
// replica's own progress (failover.StatusFromProgress), and the write
// region's view of its followers. With failed, the write region is the
// one declared failed (not live).
func (r *runner) evidence(p *part, now time.Duration, failed bool) failover.Evidence {
	s := p.reg.st
	ev := failover.Evidence{Now: now, Proposer: s.WriteRegion}
	var wr failover.ReplicaStatus
	for _, reg := range s.Priority {
		x := failover.ReplicaEvidence{Region: reg}
		if h := r.c.Host(reg); h != nil {
			x.Live = !(failed && reg == s.WriteRegion)
			if pr, err := h.Progress(p.id); err == nil {
				st := failover.StatusFromProgress(pr, reg)
				x.Reported, x.Epoch, x.LastLSN, x.Fenced = true, st.Epoch, st.Durable(), st.Fenced
				if reg == s.WriteRegion {
					wr = st
				}
			}
			if failed && reg != s.WriteRegion && ev.Proposer == s.WriteRegion {
				ev.Proposer = reg // an observer decides the takeover
			}
		}
		ev.Replicas = append(ev.Replicas, x)
	}
	if wr.WriteRegion && wr.Epoch == s.Epoch {
		for _, f := range wr.Followers {
			for i := range ev.Replicas {
				if x := &ev.Replicas[i]; x.Region == f.Region {
					// In sync only as a prepared grow (it joined the
					// commit rule by the runner's decision).
					x.InSync = f.InSync && slices.Contains(p.reg.pending, f.Region)
					x.CaughtUp = f.CaughtUp
				}
			}
		}
	}
	return ev
}

// prunePending drops prepared grows that no longer apply: the region is a
// member now or is down (a grow is committed in the same evaluation as
// the status it was decided on, so none is ever in flight).
func (r *runner) prunePending(p *part) {
	g := &p.reg
	g.pending = slices.DeleteFunc(g.pending, func(x partition.Region) bool {
		return g.st.WriteQuorum.IsMember(x) || !r.c.Up(x)
	})
}

// commit makes d's next state the register's value, checking that the
// epoch only grows, that the write region changes only with it and that
// no epoch gets two write regions.
func (r *runner) commit(p *part, now time.Duration, d failover.Decision) {
	g := &p.reg
	old, next := g.st, d.Next.Clone()
	if err := next.Validate(); err != nil {
		r.fail("partition %d: %v decision at %v: %w", p.id, d.Kind, now, err)
		return
	}
	switch {
	case next.Epoch < old.Epoch:
		r.fail("partition %d: %v decision lowers the epoch from %d to %d", p.id, d.Kind, old.Epoch, next.Epoch)
		return
	case next.Epoch == old.Epoch && next.WriteRegion != old.WriteRegion:
		r.fail("partition %d: %v decision moves the write region from %s to %s within epoch %d", p.id, d.Kind, old.WriteRegion, next.WriteRegion, old.Epoch)
		return
	case next.Epoch > old.Epoch:
		if wr, ok := g.wrOf[next.Epoch]; ok && wr != next.WriteRegion {
			r.fail("partition %d: epoch %d gets write region %s, had %s", p.id, next.Epoch, next.WriteRegion, wr)
			return
		}
		g.wrOf[next.Epoch] = next.WriteRegion
		g.pending = nil // prepared grows belong to the old epoch's write region
		g.renewAt = now // lease the (new) write region right away
	}
	g.st = next
	r.rep.Transitions[d.Kind.String()]++
	if next.WriteRegion != old.WriteRegion {
		r.rep.Failovers++
		if d.Kind == failover.DecideFailover {
			r.rep.Takeovers++
		} else {
			r.rep.Switchovers++
		}
	}
}

// reconcile carries out failover.Reconcile's actions on every reachable
// replica of p with node.Do, the one mapping of failover actions onto the
// data plane.
func (r *runner) reconcile(p *part) {
	s := p.reg.st
	for _, reg := range s.Priority {
		if !r.c.Up(reg) {
			continue
		}
		_ = r.c.Control(reg, func(now time.Duration, h *partition.Host) error {
			pr, err := h.Progress(p.id)
			if err != nil {
				return err
			}
			st := failover.StatusFromProgress(pr, reg)
			if st.WriteRegion && p.reg.wrOf[st.Epoch] != reg {
				r.fail("partition %d: %s acts as write region of epoch %d, the register's is %q", p.id, reg, st.Epoch, p.reg.wrOf[st.Epoch])
			}
			local := failover.LocalReplica{Region: reg, Epoch: st.Epoch, LastLSN: st.LastLSN, WriteRegion: st.WriteRegion,
				Fenced: st.Fenced, WriteQuorum: st.WriteQuorum}
			if reg == s.WriteRegion {
				local.Pending = p.reg.pending
			}
			acts, err := failover.Reconcile(s, local)
			if err != nil {
				r.fail("partition %d: reconcile %s: %w", p.id, reg, err)
				return err
			}
			for _, a := range acts {
				done, err := node.Do(h, now, p.id, a)
				if err != nil {
					r.rep.ActionErrors++
					break // as the daemon: the next evaluation tries again
				}
				if done.Promoted {
					// The lineage the epoch's write region inherited.
					p.starts[partition.Epoch(a.Epoch)] = epochStart{after: partition.LSN(a.AfterLSN), hist: pr.History}
				}
			}
			return nil
		})
	}
}

func (r *runner) suppressed(why string) {
	r.rep.Suppressed[why]++
}

// reasonClass is a reason's leading clause (before any ':'), so that
// suppressions are counted by kind rather than by their details.
func reasonClass(why string) string {
	why = strings.TrimPrefix(why, "failover: request refused: ")
	if i := strings.IndexByte(why, ':'); i >= 0 {
		why = why[:i]
	}
	if len(why) > 60 {
		why = why[:60]
	}
	return why
}
