// Operator requests for single partitions and for all: a switchover, a
// pause or a never-promote change of one partition (refused while the partition has a proposal
// in flight or the admission window is full), and the global pause.

package failover

import (
	"fmt"
	"time"

	"github.com/fmnode/fmnode/guard"
)

// Switchover asks for a graceful move of a partition's write region.
func (m *Manager) Switchover(now time.Duration, name string, target Region, reason string) error {
	return m.request(now, name, func(s State, ev Evidence) (Decision, error) {
		return RequestSwitchover(m.cfg.Failover, s, ev, target, reason)
	})
}

// SetPaused pauses or resumes automatic failover of one partition.
func (m *Manager) SetPaused(now time.Duration, name string, paused bool, reason string) error {
	return m.request(now, name, func(s State, ev Evidence) (Decision, error) {
		return RequestPause(m.cfg.Failover, s, ev, paused, reason)
	})
}

// request runs an operator's request on partition name and proposes its
// decision: refused for an unknown partition, one with a proposal in
// flight, or a full window; nothing when the decision changes nothing.
func (m *Manager) request(now time.Duration, name string, decide func(State, Evidence) (Decision, error)) error {
	p := m.parts[name]
	if p == nil || !p.have {
		return fmt.Errorf("%w: unknown partition %q", ErrRefused, name)
	}
	if p.inflight {
		return fmt.Errorf("%w: %w: partition %q has a proposal in flight", ErrRefused, ErrBusy, name)
	}
	if err := m.windowFull(); err != nil {
		return err
	}
	d, err := decide(p.state, m.evidence(now, p))
	if err != nil {
		m.guards.Fire(guard.RequestRefused)
		return err
	}
	if d.Next == nil {
		return nil
	}
	m.propose(p, d, false)
	return nil
}

// SetNeverPromote proposes the partition's new never-promote regions
// (RequestNeverPromote); nothing when they are already so.
func (m *Manager) SetNeverPromote(now time.Duration, name string, regions []Region, reason string) error {
	return m.request(now, name, func(s State, ev Evidence) (Decision, error) {
		return RequestNeverPromote(m.cfg.Failover, s, ev, regions, reason)
	})
}

// SetMinDurability proposes the partition's new minimum durability
// (RequestMinDurability, with its guard); nothing when it is already so.
func (m *Manager) SetMinDurability(now time.Duration, name string, min int, reason string) error {
	return m.request(now, name, func(s State, ev Evidence) (Decision, error) {
		return RequestMinDurability(m.cfg.Failover, s, ev, min, reason)
	})
}

// SetMaxConcurrentPerTarget changes the blast-radius cap at run time (the
// cluster spec's blast_radius). Failovers it held back are evaluated
// again; those in flight are not touched.
func (m *Manager) SetMaxConcurrentPerTarget(n int) error {
	if n < 1 {
		return fmt.Errorf("%w: Failover.MaxConcurrentPerTarget: must be at least 1, got %d", ErrInvalidConfig, n)
	}
	if n == m.cfg.Failover.MaxConcurrentPerTarget {
		return nil
	}
	m.cfg.Failover.MaxConcurrentPerTarget = n
	for _, p := range m.sorted {
		m.markDirty(p)
	}
	return nil
}

// SetGlobalPause suppresses (or resumes) automatic failover everywhere.
// Setting what is already set changes nothing (the agent applies its
// cluster spec at every read of it).
func (m *Manager) SetGlobalPause(paused bool, reason string) {
	if !paused {
		reason = ""
	}
	if m.paused == paused && m.pauseWhy == reason {
		return
	}
	m.paused, m.pauseWhy = paused, reason
	for _, p := range m.sorted {
		m.markDirty(p)
	}
}
