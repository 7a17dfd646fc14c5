// Register operations: the proposals, creates and reads handed to the
// driver in Ready, their outcomes (CASDone, ReadDone), the committed values
// fed back (ObserveState), and the local actions a value calls for
// (reconcile; ActValidateLease when a proposal made within the current
// lease run commits).

package failover

import (
	"fmt"
	"time"
)

// Proposal asks the driver to compare-and-set a partition's register from
// Version to Next. The driver reports the outcome with CASDone and feeds
// the register's current value back with ObserveState.
type Proposal struct {
	Partition string
	Version   uint64
	Next      State
	Kind      DecisionKind
	Target    Region
	Backup    bool // proposed by a backup after the preferred proposer was silent
}

// PartitionActions are the local actions for one partition's replica.
type PartitionActions struct {
	Partition string
	Version   uint64
	Actions   []Action
}

// Proposing says where a partition's register work stands on this node,
// for operators and for drivers' diagnostics.
type Proposing struct {
	Version  uint64 // the register version the manager holds (0: none)
	InFlight bool   // a proposal is with the driver
	// Stale: a proposal lost its CAS and nothing newer than the value it
	// was made against has been observed since: nothing is proposed
	// until one is.
	Stale bool
}

// Proposing reports the register work of a partition.
func (m *Manager) Proposing(name string) (Proposing, bool) {
	p := m.parts[name]
	if p == nil {
		return Proposing{}, false
	}
	return Proposing{Version: p.version, InFlight: p.inflight, Stale: p.stale}, true
}

// ObserveState feeds a committed register value (from a watch, a read or a
// CAS). Older versions are ignored.
func (m *Manager) ObserveState(now time.Duration, name string, version uint64, s State) {
	m.now = now
	p := m.parts[name]
	if p == nil || (p.have && version <= p.version) {
		return
	}
	if p.grayErrs() > 0 && s.Epoch != p.gs.epoch {
		m.clearGray(p) // a new write region: the evidence was about the old one
	}
	p.have, p.version, p.state = true, version, s
	p.pendingKey = ""
	p.stale = false
	p.create = nil
	m.syncGray(now, p)
	for i := range p.grow {
		if g := &p.grow[i]; g.proposed && version > g.proposedAt {
			g.proposed = false // the register moved on: that proposal is decided
		}
	}
	m.pruneGrow(now, p)
	m.markDirty(p)
	m.reconcile(p)
}

// CASDone reports a proposal's outcome. On a conflict the driver also
// feeds the fresh value through ObserveState; the partition is decided
// again from it.
func (m *Manager) CASDone(now time.Duration, name string, ok bool, err error) {
	m.now = now
	p := m.parts[name]
	if p == nil || !p.inflight {
		return
	}
	p.inflight = false
	m.ops--
	if p.inflightK == DecideFailover {
		m.inflightTo[p.inflightT]--
	}
	switch {
	case ok:
		if p.inflightGen != 0 && p.inflightGen == m.live.LeaseGen() && p.inflightMine {
			// Committed, proposed within the current lease run: no
			// takeover decided before the run can commit any more.
			p.validGen, p.validEpoch = p.inflightGen, p.inflightEpoch
			m.actions = append(m.actions, PartitionActions{Partition: p.name, Version: p.version,
				Actions: []Action{{Kind: ActValidateLease, Epoch: p.inflightEpoch, WriteRegion: p.myRegion, LeaseGen: p.inflightGen}}})
		}
	case err != nil:
		m.stats.CASFailed++
		m.event(p.name, p.inflightK, fmt.Sprintf("proposal failed: %v", err))
		// Try again after a stagger: the register may be unreachable.
		m.setTimer(p, now+m.cfg.Failover.ProposeStagger)
	default:
		m.stats.CASConflict++
		// Stale until a value newer than the one the proposal was made
		// against is observed, unless one already was: drivers may feed
		// it (a watch, another node's commit) before the outcome, and
		// the conflict's own value then is no newer than it.
		p.stale = !p.have || p.version <= p.inflightV
	}
	m.markDirty(p)
}

// reconcile emits the local actions that align the local replica with the state.
func (m *Manager) reconcile(p *partition) {
	if !p.have || !p.hasMine || !p.hasLocal {
		return
	}
	var pending []Region
	for _, g := range p.grow {
		pending = append(pending, g.region)
	}
	acts, err := Reconcile(p.state, LocalReplica{
		Region: p.myRegion, Epoch: p.local.Epoch, LastLSN: p.local.LastLSN,
		WriteRegion: p.local.WriteRegion, Fenced: p.local.Fenced, WriteQuorum: p.local.WriteQuorum,
		MinDurability: p.local.MinDurability, Pending: pending,
	})
	if err != nil {
		m.event(p.name, DecideNone, "reconcile: "+err.Error())
		return
	}
	if len(acts) > 0 {
		m.actions = append(m.actions, PartitionActions{Partition: p.name, Version: p.version, Actions: acts})
	}
}

// propose hands d to the driver as a Proposal against the register
// version p holds, taking a window slot, and records what is in flight
// (its kind, target and version, and the lease run it is made in).
func (m *Manager) propose(p *partition, d Decision, backup bool) {
	m.unqueue(p)
	m.ops++
	p.inflight, p.inflightK, p.inflightT = true, d.Kind, d.Target
	p.inflightV = p.version
	p.inflightGen = 0
	if m.live.LeaseValid(m.now) {
		p.inflightGen = m.live.LeaseGen()
	}
	p.inflightMine = p.hasMine && d.Next.WriteRegion == p.myRegion
	p.inflightEpoch = d.Next.Epoch
	if d.Kind == DecideFailover {
		m.inflightTo[d.Target]++
	}
	if d.Kind == DecideGrowQuorum {
		for i := range p.grow {
			if p.grow[i].region == d.Target {
				p.grow[i].proposed, p.grow[i].proposedAt = true, p.version
			}
		}
	}
	m.stats.Proposals++
	m.proposals = append(m.proposals, Proposal{Partition: p.name, Version: p.version, Next: *d.Next, Kind: d.Kind, Target: d.Target, Backup: backup})
	m.event(p.name, d.Kind, fmt.Sprintf("propose %v to %s: %s", d.Kind, d.Target, joinReasons(d.Reasons)))
}

func joinReasons(rs []string) string {
	out := ""
	for i, r := range rs {
		if i > 0 {
			out += "; "
		}
		out += r
	}
	return out
}

// Create asks for partition name's register to be written with s if it
// holds no value (a CAS against version 0: a value already there comes
// back as a conflict, which the driver observes). It takes its turn in the
// window like every register operation; once any value of the register is
// observed it is no longer needed.
func (m *Manager) Create(name string, s State) error {
	p := m.parts[name]
	if p == nil {
		return fmt.Errorf("%w: unknown partition %q", ErrRefused, name)
	}
	if p.have {
		return nil
	}
	c := s.Clone()
	p.create = &c
	m.markDirty(p)
	return nil
}

// RequestRead asks for partition name's register value to be read back
// (a restarted node knows none; a replica heard of a newer epoch than the
// value at hand). The read takes its turn in the window; Ready hands it
// over in Reads.
func (m *Manager) RequestRead(name string) {
	if p := m.parts[name]; p != nil && !p.readWant {
		p.readWant = true
		m.markDirty(p)
	}
}

// startRead hands p's read-back to the driver, taking a window slot.
func (m *Manager) startRead(p *partition) {
	m.unqueue(p)
	p.readWant, p.reading = false, true
	m.ops++
	m.stats.Reads++
	m.reads = append(m.reads, p.name)
}

// ReadDone reports that a read handed over in Ready finished; on success
// the driver has fed the value through ObserveState first. A failed read
// is asked again after ProposeStagger.
func (m *Manager) ReadDone(now time.Duration, name string, err error) {
	m.now = now
	p := m.parts[name]
	if p == nil || !p.reading {
		return
	}
	p.reading = false
	m.ops--
	if err != nil {
		m.stats.ReadsFailed++
		m.event(name, DecideNone, "read failed: "+err.Error())
		p.readWant, p.readRetryAt = true, now+m.cfg.Failover.ProposeStagger
	}
	m.markDirty(p)
}
