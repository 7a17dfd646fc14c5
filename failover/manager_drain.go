// Drains at the manager level: an operator's Drain of a region and the
// loop (tickDrains) that moves its partitions out by switchovers. The pace
// they start at and what a queued partition waits on are in drain.go.

package failover

import (
	"slices"
	"time"
)

// Drain moves every partition whose write region is r elsewhere by
// graceful switchovers, DrainConcurrency at a time, started at most
// DrainBurst at once and DrainRate per second. It is resumable: calling it
// again continues with whatever is still in r, and a node that restarted
// rebuilds the rate limit from the switchover starts in the registers, so
// resuming does not exceed the rate by more than the burst.
func (m *Manager) Drain(now time.Duration, r Region, reason string) {
	m.draining[r] = reason
	m.tickDrains(now)
}

// StopDrain ends a drain.
func (m *Manager) StopDrain(r Region) {
	delete(m.draining, r)
	delete(m.drainPaces, r)
}

// Draining reports the partitions still to move out of r.
func (m *Manager) Draining(r Region) (remaining int, active bool) {
	_, active = m.draining[r]
	for _, name := range m.names {
		if p := m.parts[name]; p.have && p.state.WriteRegion == r {
			remaining++
		}
	}
	return remaining, active
}

// tickDrains starts the switchovers the drains may start now, region by
// region and partition by partition in name order: each to the best
// eligible candidate (Rank), while fewer than DrainConcurrency run and the
// rate allows, with the drained region added to NeverPromote. It starts
// none until every hosted partition's register value is known.
func (m *Manager) tickDrains(now time.Duration) {
	if len(m.draining) == 0 {
		return
	}
	// The cap counts switchovers from the register values: until every
	// hosted partition's value is known (a restarted node reads them
	// back), switchovers started before the restart could be missed.
	for _, name := range m.names {
		if !m.parts[name].have {
			return
		}
	}
	regions := make([]Region, 0, len(m.draining))
	for r := range m.draining {
		regions = append(regions, r)
	}
	slices.Sort(regions)
	for _, r := range regions {
		running := m.drainRunning(r)
		pace, iv := m.drainPaceOf(r, now), m.cfg.drainInterval()
		for _, name := range m.names {
			if running >= m.cfg.DrainConcurrency {
				break
			}
			p := m.parts[name]
			if !p.have || p.inflight || p.state.WriteRegion != r || p.state.Phase != PhaseSteady {
				continue
			}
			if at := pace.allowedAt(iv, m.cfg.DrainBurst); iv > 0 && at > now {
				m.setTimer(p, at) // the next start, at the rate
				break
			}
			ev := m.evidence(now, p)
			var target Region
			for _, c := range Rank(p.state, ev, r) {
				if c.Eligible {
					target = c.Region
					break
				}
			}
			if target == "" {
				m.event(name, DecideStartSwitchover, "drain: no eligible target")
				continue
			}
			d, err := RequestSwitchover(m.cfg.Failover, p.state, ev, target, "drain "+string(r)+": "+m.draining[r])
			if err != nil {
				m.event(name, DecideStartSwitchover, "drain: "+err.Error())
				continue
			}
			if !slices.Contains(d.Next.NeverPromote, r) {
				d.Next.NeverPromote = append(d.Next.NeverPromote, r)
			}
			m.propose(p, d, false)
			pace.take(now, iv)
			running++
		}
	}
}
