// The write region's bookkeeping of its followers: since when each one's
// match LSN has stood still below the write region's last LSN (lag, for
// the stall verdicts that shrink a stalled member out of the write quorum
// or hold a grow back), and the prepared grows: regions counted in the
// commit rule before the register lists them in the write quorum.

package failover

import (
	"fmt"
	"slices"
	"time"
)

// followerLag is a follower whose match LSN has stood at match, below the
// write region's last LSN, since since.
type followerLag struct {
	region Region
	match  LSN
	since  time.Duration
}

// trackLag keeps, on the write region, since when each follower's match
// LSN has stood still below the write region's last LSN. A follower that
// stays so for GrayStall while its node heartbeats (a stalled disk, a
// data path that drops appends) holds every strong commit back; the
// evidence then calls it stalled and Decide shrinks it out of the write
// quorum like a failed region.
func (m *Manager) trackLag(now time.Duration, p *partition, st ReplicaStatus) {
	if !st.WriteRegion {
		p.lag = p.lag[:0]
		return
	}
	// Built in the manager's scratch and copied back into p.lag's own
	// array: this runs on every status report of a write region.
	next := m.lagBuf[:0]
	for _, f := range st.Followers {
		if f.MatchLSN >= st.LastLSN {
			continue
		}
		l := followerLag{region: f.Region, match: f.MatchLSN, since: now}
		for _, old := range p.lag {
			if old.region == f.Region && old.match == f.MatchLSN {
				l.since = old.since
			}
		}
		m.setTimer(p, l.since+m.cfg.Failover.GrayStall)
		next = append(next, l)
	}
	m.lagBuf = next[:0]
	p.lag = append(p.lag[:0], next...)
}

// stalled reports whether follower r has lagged without progress for
// GrayStall while another follower keeps up (caught up, or its match LSN
// moved within GrayStall). If every follower stands still the write
// region's own data path is the likelier culprit (a stalled disk delays
// what it sends): shrinking them would leave a gray write region alone in
// the write quorum, where no other region could take over. With a single
// follower a stall is never told apart: liveness alone shrinks it.
func (m *Manager) stalled(now time.Duration, p *partition, r Region) (time.Duration, bool) {
	stall := m.cfg.Failover.GrayStall
	lagging := func(reg Region) (time.Duration, bool) {
		for _, l := range p.lag {
			if l.region == reg && now-l.since >= stall {
				return now - l.since, true
			}
		}
		return 0, false
	}
	d, ok := lagging(r)
	if !ok {
		return 0, false
	}
	for _, f := range p.local.Followers {
		if _, stuck := lagging(f.Region); f.Region != r && !stuck {
			return d, true
		}
	}
	return 0, false
}

// stallMatters reports whether a stall verdict (stalled) may count in
// Decide now: some follower has lagged for GrayStall and is a member of
// the write quorum (shrunk out when stalled) or a non-member reported
// caught up (grown only when not stalled; a driver reporting its match
// LSN never shows both). Other followers' stall verdicts are not read:
// a non-member that is not caught up is neither grown nor held off.
func (m *Manager) stallMatters(now time.Duration, p *partition) bool {
	for _, l := range p.lag {
		if now-l.since < m.cfg.Failover.GrayStall {
			continue
		}
		if slices.Contains(p.state.WriteQuorum.Members, l.region) {
			return true
		}
		for _, f := range p.local.Followers {
			if f.Region == l.region && f.CaughtUp {
				return true
			}
		}
	}
	return false
}

// pendingGrow is a region the write region counts in its commit rule
// before the register lists it (see Decide's prepare-grow).
type pendingGrow struct {
	region Region
	// seq is the status count when it was prepared: only a status reported
	// after it (after the driver applied the new commit rule) can show the
	// region in sync. Drivers apply a partition's actions before they
	// report its status again.
	seq uint64
	// proposed: a Grow for it was proposed against register version
	// proposedAt and no newer value has been observed: the proposal may
	// still commit, so the region stays in the commit rule.
	proposed   bool
	proposedAt uint64
}

// pruneGrow drops prepared grows that no longer apply: the region is a
// member now, this node is no longer the write region, or the region
// failed or stalled before its Grow was proposed. A region whose Grow
// may still commit stays in the commit rule: dropping it would let
// writes commit without a region the register may list as a member.
// It reports whether the pending set changed.
func (m *Manager) pruneGrow(now time.Duration, p *partition) bool {
	if len(p.grow) == 0 {
		return false
	}
	n := len(p.grow)
	writer := p.have && p.hasLocal && p.local.WriteRegion && p.myRegion == p.state.WriteRegion && p.local.Epoch == p.state.Epoch
	p.grow = slices.DeleteFunc(p.grow, func(g pendingGrow) bool {
		if !writer || p.state.WriteQuorum.IsMember(g.region) {
			return true
		}
		if g.proposed {
			return false
		}
		node, ok := m.nodeOf(p, g.region)
		_, up := m.healthySince[node]
		_, stalled := m.stalled(now, p, g.region)
		return !ok || !up || stalled
	})
	return len(p.grow) != n
}

// prepareGrow counts region r in the write region's commit rule.
func (m *Manager) prepareGrow(p *partition, r Region) {
	for _, g := range p.grow {
		if g.region == r {
			return
		}
	}
	p.grow = append(p.grow, pendingGrow{region: r, seq: p.statusSeq})
	slices.SortFunc(p.grow, func(a, b pendingGrow) int { return cmpRegion(a.region, b.region) })
	m.event(p.name, DecidePrepareGrow, fmt.Sprintf("count %s in the commit rule before growing the write quorum", r))
	m.reconcile(p)
}

// growReady reports whether region r is a prepared grow and the status
// at hand was reported after it joined the commit rule.
func (p *partition) growReady(r Region) bool {
	for _, g := range p.grow {
		if g.region == r {
			return p.statusSeq > g.seq
		}
	}
	return false
}

// cmpRegion orders regions by name.
func cmpRegion(a, b Region) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
