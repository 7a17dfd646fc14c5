// Evidence assembly: what this node knows of a partition's replicas
// (liveness and health, its own replica's report, the followers the write
// region sees, stall verdicts) and of its write region's failure, gathered
// for Decide and Explain.

package failover

import (
	"fmt"
	"strconv"
	"time"
)

// Evidence assembles what this node knows about a partition.
func (m *Manager) Evidence(now time.Duration, name string) (Evidence, bool) {
	p := m.parts[name]
	if p == nil || !p.have {
		return Evidence{}, false
	}
	ev := m.evidence(now, p)
	ev.Drain = m.drainWait(now, p)
	return ev, true
}

// evidence is evidenceInto on a slice of its own, for evidence kept beyond
// the call.
func (m *Manager) evidence(now time.Duration, p *partition) Evidence {
	return m.evidenceInto(now, p, make([]ReplicaEvidence, 0, len(p.placement))) // one allocation per evaluation, not one per growth
}

// evidenceInto is evidence with its replicas appended to buf[:0].
func (m *Manager) evidenceInto(now time.Duration, p *partition, buf []ReplicaEvidence) Evidence {
	s := p.state
	ev := Evidence{Now: now, Proposer: p.myRegion, GlobalPause: m.paused, GlobalPauseReason: m.pauseWhy}
	if !p.hasMine {
		ev.Proposer = m.self.Region
	}
	ev.Replicas = buf[:0]
	for _, rn := range p.placement {
		x := ReplicaEvidence{Region: rn.Region}
		if since, up := m.healthySince[rn.Node]; up {
			x.Live, x.HealthySince = true, since
			if rn.Node == m.self.ID {
				// Its own health counts from its lease, not from its boot.
				x.HealthySince = now
				if m.selfLeased {
					x.HealthySince = max(since, m.selfLeasedSince)
				}
			}
		}
		if rn.Node == m.self.ID && p.hasLocal {
			x.Reported, x.Epoch, x.LastLSN, x.Fenced = true, p.local.Epoch, p.local.Durable(), p.local.Fenced
		}
		if p.hasLocal && p.local.WriteRegion && p.myRegion == s.WriteRegion {
			for _, f := range p.local.Followers {
				if f.Region == rn.Region {
					// In sync only as a prepared grow reported after it
					// joined the commit rule (never from a status older
					// than this node's own decision to add it).
					x.InSync = f.InSync && p.growReady(f.Region)
					x.CaughtUp = f.CaughtUp
					if !x.Reported {
						x.Reported, x.Epoch, x.LastLSN = true, p.local.Epoch, f.MatchLSN
					}
				}
			}
			if d, ok := m.stalled(now, p, rn.Region); ok {
				// As fmt's "match LSN %d still for %v below %d", without
				// its per-call cost (this runs on every evaluation).
				x.Stalled = "match LSN " + strconv.FormatUint(uint64(x.LastLSN), 10) + " still for " + d.String() +
					" below " + strconv.FormatUint(uint64(p.local.LastLSN), 10)
			}
		}
		ev.Replicas = append(ev.Replicas, x)
	}
	if n, ok := m.nodeOf(p, s.WriteRegion); ok {
		// A gray verdict alone never fails the write region over: its
		// node still heartbeats and holds a lease (it could serve strong
		// reads after a takeover). The verdict withholds lease acks; once
		// a quorum of observers has withheld them for the takeover delay,
		// the node is declared failed like a silent one.
		failed, votes, needed := m.live.Failed(n, now)
		switch {
		case failed && m.live.GrayFailed(n, now):
			ev.WriteRegionFailed = true
			why := "reported by another observer"
			if w := p.grayWhy(); w != "" {
				why = w
			}
			ev.FailureWhy = fmt.Sprintf("gray failure of node %d (%s): observers in %d of %d other regions withheld its lease for %v (need %d)",
				n, why, votes, len(m.live.Regions())-1, m.cfg.Failover.TakeoverDelay(), needed)
		case failed:
			ev.WriteRegionFailed = true
			ev.FailureWhy = fmt.Sprintf("node %d silent for over %v: a majority of observer nodes in %d of %d other regions agree (need %d)",
				n, m.cfg.Failover.TakeoverDelay(), votes, len(m.live.Regions())-1, needed)
		case p.grayWhy() != "":
			ev.FailureWhy = "gray failure suspected (" + p.grayWhy() + "): waiting for a quorum of observers to withhold its lease"
		}
	}
	return ev
}
