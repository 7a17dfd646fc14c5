// Evaluating partitions: the partitions queued by inputs and timers, in
// name order; the skip of those whose last decision provably stands
// (quiet, sampled by VerifySkips); Decide on the evidence; the preferred
// proposer and the staggered backups; and the reassert that revalidates a
// write region's epoch in each new lease run.

package failover

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fmnode/fmnode/guard"
)

// evaluateDirty evaluates the queued partitions in name order, skipping
// the quiet ones (and re-arming their RetryAt as the evaluation would),
// then hands free window slots to the waiting partitions (admit).
func (m *Manager) evaluateDirty(now time.Duration) {
	if len(m.dirty) == 0 {
		m.admit(now)
		return
	}
	// Double-buffered: partitions marked while these are evaluated go to
	// the other slice, and neither is reallocated per round.
	ps := m.dirty
	m.dirty, m.dirtySpare = m.dirtySpare[:0], nil
	slices.SortFunc(ps, func(a, b *partition) int { return strings.Compare(a.name, b.name) })
	for _, p := range ps {
		p.dirty = false
		if m.quiet(now, p) {
			m.stats.Rechecks++
			if v := uint64(m.cfg.VerifySkips); v > 0 && m.stats.Rechecks%v == 0 {
				m.verifyQuiet(now, p)
			}
			if !p.inflight && !p.reading && !p.stale && p.last.RetryAt > now {
				m.setTimer(p, p.last.RetryAt) // as the evaluation would
			}
			continue
		}
		m.evaluate(now, p)
	}
	m.dirtySpare = ps[:0]
	m.admit(now)
}

// evaluate decides a partition afresh. A partition that waited for a slot
// and needs no register operation any more leaves the queue.
func (m *Manager) evaluate(now time.Duration, p *partition) {
	p.changed = false
	m.queuedNow = false
	m.evaluateOne(now, p)
	if !m.queuedNow {
		m.unqueue(p)
	}
}

// quiet reports whether evaluating p now (evaluateOne) would do nothing
// but re-arm the timer for its last decision's RetryAt: no proposal, no
// action, no event, no queueing, the same decision. It holds when
//
//   - no markDirty since p's last evaluation (p.changed false): every
//     input Decide or evaluateOne reads that can change without the clock
//     marks it (register value, liveness, lease, leaseGen, global pause,
//     gray verdict, CAS and read outcomes, the local replica's epoch,
//     fence, role and write quorum, the followers listed and the catch-up
//     flags of followers outside the write quorum);
//   - evaluateOne would touch neither the gray check (no client errors
//     counted) nor the wait queue (p waits in none);
//   - it would stop before Decide: a proposal or read is with the driver,
//     or p is stale (leaving the three marks p); or else:
//   - the last evaluation ran Decide on those same inputs (every way out
//     of the early returns above marks p) and it decided nothing,
//     suppressed nothing and its RetryAt is not due, and the only inputs
//     that moved since (time, LSNs, member catch-up flags, lag) cannot
//     change that. This node is p's write region in the register and in
//     its replica at the register's epoch, in a steady phase, with no
//     prepared grow, not declared failed itself, with no reassert due and
//     no follower lagging for GrayStall. Then Decide reads neither LSNs
//     nor member flags (only a failover, a switchover, a reopen of a
//     fenced replica or a stall verdict would: excluded or not decided
//     last time), time enters only through RetryAt (failback health,
//     hold-offs: not due yet, so the same), no member is stalled, and
//     non-members' flags are unchanged. evidence's InSync needs a
//     prepared grow, and there is none.
//
// NextDeadline and every timer stay as the evaluation leaves them: the
// caller re-arms the RetryAt as evaluateOne would.
func (m *Manager) quiet(now time.Duration, p *partition) bool {
	if p.changed || !p.have || p.grayErrs() > 0 || p.qidx >= 0 {
		return false
	}
	if p.inflight || p.reading {
		return true
	}
	if p.readWant {
		return false
	}
	if p.stale {
		return true
	}
	s, d := &p.state, &p.last
	if d.Kind != DecideNone || d.Suppressed != "" || (d.RetryAt != 0 && d.RetryAt <= now) ||
		s.Phase != PhaseSteady || !p.soleSelf || !p.hasMine || s.WriteRegion != p.myRegion ||
		!p.hasLocal || !p.local.WriteRegion || p.local.Epoch != s.Epoch || len(p.grow) > 0 ||
		m.failedNodes[m.self.ID] || m.reassertDue(now, p) {
		return false
	}
	return !m.stallMatters(now, p)
}

// verifyQuiet checks a skip (quiet): when the evaluation would have
// reached Decide, Decide must decide what it decided last time.
func (m *Manager) verifyQuiet(now time.Duration, p *partition) {
	if m.violation != nil || p.inflight || p.reading || p.stale {
		return
	}
	ev := m.evidenceInto(now, p, m.evBuf)
	m.evBuf = ev.Replicas[:0]
	d := Decide(m.cfg.Failover, p.state, ev)
	if d.Kind != p.last.Kind || d.Next != nil || d.Suppressed != p.last.Suppressed || d.RetryAt != p.last.RetryAt {
		m.violation = fmt.Errorf("failover: node %d skipped evaluating %s at %v as quiet, but Decide now says %v (suppressed %q, retry at %v; reasons %v), not %v (retry at %v)",
			m.self.ID, p.name, now, d.Kind, d.Suppressed, d.RetryAt, d.Reasons, p.last.Kind, p.last.RetryAt)
	}
}

// Violation returns the first broken invariant the manager found (see
// ManagerConfig.VerifySkips), or nil.
func (m *Manager) Violation() error { return m.violation }

// evaluateOne runs one evaluation of p: the gray check; a wanted read or
// a create, through the window; nothing more while an operation is with
// the driver or the register value is unknown or stale; else Decide on
// the evidence, and what its decision calls for: a reassert, a prepared
// grow, a proposal through the window (failovers within
// MaxConcurrentPerTarget), or, when another region is the preferred
// proposer, a backup proposal after its stagger.
func (m *Manager) evaluateOne(now time.Duration, p *partition) {
	m.checkGray(now, p)
	if p.grayWhy() != "" {
		m.syncGray(now, p) // a candidate may have come or gone
	}
	if p.inflight || p.reading {
		return
	}
	if p.readWant {
		if now < p.readRetryAt {
			m.unqueue(p)
			m.setTimer(p, p.readRetryAt)
		} else if m.gate(p, classRegister) {
			m.startRead(p)
		}
		return
	}
	if !p.have && p.create != nil {
		if m.gate(p, classRegister) {
			next := p.create.Clone()
			m.propose(p, Decision{Kind: DecideNone, Target: next.WriteRegion, Next: &next, Reasons: []string{"create the register"}}, false)
			p.inflightGen = 0 // not a write of a lease run
		}
		return
	}
	if !p.have || p.stale {
		m.unqueue(p)
		return
	}
	if m.pruneGrow(now, p) {
		m.reconcile(p)
	}
	m.stats.Evaluations++
	ev := m.evidenceInto(now, p, m.evBuf)
	m.evBuf = ev.Replicas[:0]
	d := Decide(m.cfg.Failover, p.state, ev)
	d.Guards.FireAll(m.guards)
	p.last = lastDecision{Kind: d.Kind, Suppressed: d.Suppressed, RetryAt: d.RetryAt}
	if d.Suppressed != "" {
		m.stats.Suppressed++
		key := "suppressed:" + d.Suppressed
		if p.pendingKey != key {
			p.pendingKey = key
			m.event(p.name, d.Kind, "suppressed: "+d.Suppressed)
		}
	}
	if d.RetryAt > now {
		m.setTimer(p, d.RetryAt)
	}
	if d.Kind == DecideNone {
		m.reassert(now, p)
		return
	}
	key := fmt.Sprintf("%v>%s@%d", d.Kind, d.Target, p.version)
	if p.pendingKey != key {
		p.pendingKey, p.pendingSince = key, now
	}
	preferred := m.preferredProposer(p, d)
	if preferred != p.myRegion || !p.hasMine {
		// Back up the preferred proposer after a stagger that grows with
		// this region's rank, so that normally exactly one node proposes.
		rank := m.backupRank(p, d)
		if rank < 0 {
			return
		}
		at := p.pendingSince + time.Duration(rank)*m.cfg.Failover.BackupAfter
		if now < at {
			m.setTimer(p, at)
			return
		}
		if d.Kind == DecideFailover && d.Next == nil {
			// Take over the promotion from the silent candidates ranked above.
			d = m.decidePassingOver(now, p, ev)
			if d.Next == nil || d.Target != p.myRegion {
				return
			}
		}
		if d.Next == nil {
			return
		}
		if d.Kind == DecideShrinkQuorum {
			// A backup shrinks a region out only on the quorum's verdict:
			// its own suspicion may just be its own isolation (a flapping
			// link), and the write region, which sees the region's acks,
			// has not asked for the shrink.
			if n, ok := m.nodeOf(p, d.Target); !ok || !m.failedNodes[n] {
				m.guards.Fire(guard.ShrinkNeedsVerdict)
				return
			}
		}
		if !m.gate(p, classOf(d.Kind)) {
			return
		}
		m.stats.Backups++
		m.propose(p, d, true)
		return
	}
	if d.Kind == DecidePrepareGrow {
		m.prepareGrow(p, d.Target)
		return
	}
	if d.Next == nil {
		return
	}
	if d.Kind == DecideFailover && m.inflightTo[d.Target] >= m.cfg.Failover.MaxConcurrentPerTarget {
		m.unqueue(p)
		m.stats.Throttled++
		m.guards.Fire(guard.HoldBlastRadius)
		m.setTimer(p, now+m.cfg.Failover.ProposeStagger/4+1)
		return
	}
	if !m.gate(p, classOf(d.Kind)) {
		return
	}
	m.propose(p, d, false)
}

// reassert revalidates a partition this node is write region of in the
// current lease run: it rewrites the register value it knows, unchanged,
// at a new version. A takeover decided while this node's lease had lapsed
// (it could be declared failed then) and still in flight either committed
// first, and the reassert's conflict shows it, or fails against the new
// version; one decided after the reassert committed needs this node
// declared failed again, which ends the run (Liveness). Only then does the
// replica count the lease (ActValidateLease, on the commit). This costs a
// register write per such partition per lease run, never in steady state.
func (m *Manager) reassert(now time.Duration, p *partition) {
	if !m.reassertDue(now, p) {
		return
	}
	gen := m.live.LeaseGen()
	if !m.gate(p, classOf(DecideReassert)) {
		return
	}
	next := p.state.Clone()
	m.propose(p, Decision{Kind: DecideReassert, Target: p.myRegion, Next: &next,
		Reasons: []string{fmt.Sprintf("lease run %d began %v ago: revalidate epoch %d before serving", gen, now-m.live.LeaseSince(), p.state.Epoch)}}, false)
}

// reassertDue reports whether reassert would propose (or queue) p.
func (m *Manager) reassertDue(now time.Duration, p *partition) bool {
	gen := m.live.LeaseGen()
	return p.have && p.hasMine && p.state.WriteRegion == p.myRegion && gen != 0 && m.live.LeaseValid(now) &&
		(p.validGen != gen || p.validEpoch != p.state.Epoch)
}

// decidePassingOver decides again as if the candidates ranked above this
// region were down: they had their stagger and did not promote themselves.
func (m *Manager) decidePassingOver(now time.Duration, p *partition, ev Evidence) Decision {
	for _, c := range Rank(p.state, ev, p.state.WriteRegion) {
		if c.Region == p.myRegion {
			break
		}
		for i := range ev.Replicas {
			if ev.Replicas[i].Region == c.Region {
				ev.Replicas[i].Live = false
			}
		}
	}
	return Decide(m.cfg.Failover, p.state, ev)
}

// preferredProposer is the region whose node proposes d first: the target
// of a failover or of a switchover's completion, else the write region.
func (m *Manager) preferredProposer(p *partition, d Decision) Region {
	switch d.Kind {
	case DecideFailover, DecideCompleteSwitchover:
		return d.Target
	case DecideStartSwitchover:
		return p.state.WriteRegion
	}
	return p.state.WriteRegion
}

// backupRank is this region's turn as a backup proposer (1 = first), or -1.
func (m *Manager) backupRank(p *partition, d Decision) int {
	if !p.hasMine {
		return -1
	}
	if d.Kind == DecideFailover {
		rank := 0
		for _, c := range d.Candidates {
			if !c.Eligible {
				continue
			}
			if c.Region == p.myRegion {
				return rank
			}
			rank++
		}
		return -1
	}
	if d.Kind == DecideGrowQuorum || d.Kind == DecideSwitchoverFenced || d.Kind == DecidePrepareGrow {
		return -1 // only the write region knows enough
	}
	return 1 + p.state.PriorityOf(p.myRegion)
}

// lastDecision is the part of a Decision a partition keeps.
type lastDecision struct {
	Kind       DecisionKind
	Suppressed string
	RetryAt    time.Duration
}

// LastDecision returns the kind, suppression and retry time of the most
// recent decision for a partition (Explain gives a decision's reasons and
// candidates).
func (m *Manager) LastDecision(name string) (Decision, bool) {
	p := m.parts[name]
	if p == nil {
		return Decision{}, false
	}
	return Decision{Kind: p.last.Kind, Suppressed: p.last.Suppressed, RetryAt: p.last.RetryAt}, true
}
