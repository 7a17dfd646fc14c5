// Gray-failure bookkeeping: client errors reported against a partition's
// write region while this node's replica sees its commit LSN stand
// still (ReportClientError), the verdict they lead to (or SetGray's), and
// the node-level claim the verdicts add up to (Manager.grayBy), which
// withholds that node's lease acks in the liveness views. A verdict alone
// fails nothing over: the node is declared failed only once a quorum of
// observers has withheld its lease for the takeover delay.

package failover

import (
	"fmt"
	"time"
)

// grayState is a partition's gray-failure bookkeeping.
type grayState struct {
	why string // the gray verdict ("" none)
	// op: SetGray set the verdict (an operator or an outside detector);
	// the manager's own detector never clears it.
	op bool
	// node: the node the verdict counts against in Manager.grayBy
	// (counted).
	node    NodeID
	counted bool
	// Gray detection (see ReportClientError): client errors against the
	// write region at epoch since from, the last at last, while the local
	// commit LSN stayed at commit (and the last LSN at lastOp).
	errs   int
	from   time.Duration
	last   time.Duration
	epoch  Epoch
	commit LSN
	lastOp LSN
}

// grayErrs is the client errors counted against p's write region.
func (p *partition) grayErrs() int {
	if p.gs == nil {
		return 0
	}
	return p.gs.errs
}

// grayWhy is p's gray verdict ("" none).
func (p *partition) grayWhy() string {
	if p.gs == nil {
		return ""
	}
	return p.gs.why
}

// gray returns p's gray bookkeeping, creating it.
func (p *partition) gray() *grayState {
	if p.gs == nil {
		p.gs = &grayState{}
	}
	return p.gs
}

// dropIdleGray frees p's gray bookkeeping once it holds nothing.
func (p *partition) dropIdleGray() {
	if g := p.gs; g != nil && g.errs == 0 && g.why == "" && !g.counted {
		p.gs = nil
	}
}

// SetGray marks (why != "") or clears a gray failure of a partition's
// write region: alive, but its commit LSN stalled while clients see errors.
// The manager detects this itself from ReportClientError and the local
// replica's commit LSN; SetGray is for an outside detector or an operator.
func (m *Manager) SetGray(now time.Duration, name, why string) {
	if p := m.parts[name]; p != nil && p.grayWhy() != why {
		g := p.gray()
		g.why, g.op = why, why != ""
		m.syncGray(now, p)
		m.markDirty(p)
	}
}

// ReportClientError records that a client of a partition got no answer
// (a timeout, an unknown outcome) from region r at epoch e. Clients hand
// it to the next replica they reach. When such errors keep coming for
// GrayStall (at least GrayMinErrors of them, the last within GrayStall)
// while the write region is alive (heard from: its lease holds) but this
// node's replica sees the commit LSN stand still, the write region is
// gray-failed: failure evidence like a failed node. Errors naming another
// region or an older epoch, and errors reported to the write region
// itself, are ignored.
func (m *Manager) ReportClientError(now time.Duration, name string, r Region, e Epoch) {
	m.now = now
	p := m.parts[name]
	if p == nil || !p.have || !p.hasMine || !p.hasLocal || r != p.state.WriteRegion || e < p.state.Epoch ||
		p.myRegion == p.state.WriteRegion || p.local.WriteRegion {
		return
	}
	if p.grayErrs() > 0 && (p.gs.epoch != p.state.Epoch || now-p.gs.last > m.cfg.Failover.GrayStall) {
		m.clearGray(p) // errors from another epoch, or they had stopped
	}
	g := p.gray()
	if g.errs == 0 {
		g.from, g.epoch, g.commit, g.lastOp = now, p.state.Epoch, p.local.CommitLSN, p.local.LastLSN
	}
	g.errs++
	g.last = now
	m.checkGray(now, p)
}

// checkGray sets the partition gray when the evidence suffices, or arms a
// timer for when it may.
func (m *Manager) checkGray(now time.Duration, p *partition) {
	cfg := m.cfg.Failover
	g := p.gs
	if g == nil || g.errs == 0 || g.why != "" {
		return
	}
	if now-g.last > cfg.GrayStall || g.epoch != p.state.Epoch {
		m.clearGray(p)
		return
	}
	due := g.from + cfg.GrayStall
	if now < due || g.errs < cfg.GrayMinErrors {
		m.setTimer(p, max(due, now+cfg.HeartbeatInterval))
		return
	}
	g.why = fmt.Sprintf("commit LSN stalled at %d for %v while clients reported %d errors", g.commit, now-g.from, g.errs)
	m.event(p.name, DecideFailover, "gray failure of "+string(p.state.WriteRegion)+": "+g.why+
		"; withholding its lease until a quorum of observers agrees")
	m.syncGray(now, p)
	m.markDirty(p)
}

// grayTakeoverPossible reports whether, on the current evidence, a
// takeover of p's write region would be decided once it is declared
// failed: the same rule the takeover applies (a candidate that qualifies,
// the minimum-durability floor, pauses and hold-offs), not only an
// eligible candidate. A candidate the floor rejects left the verdict
// withholding the write region's lease for good: it could commit
// nothing, its commit LSN stood still, and the verdict never cleared
// (found by the cluster scenario at minimum durability 2).
func (m *Manager) grayTakeoverPossible(now time.Duration, p *partition) bool {
	ev := m.evidence(now, p)
	ev.WriteRegionFailed = true
	return decideFailover(m.cfg.Failover, p.state, ev).Kind == DecideFailover
}

// clearGray drops the client errors counted against p's write region and
// the manager's own verdict (SetGray's stands), and brings the node-level
// claim in step.
func (m *Manager) clearGray(p *partition) {
	if g := p.gs; g != nil {
		g.errs = 0
		if g.why != "" && !g.op {
			g.why = ""
			m.markDirty(p)
		}
	}
	m.syncGray(m.now, p)
}

// syncGray keeps the node-level gray claim in step with the partition's
// gray verdict: a node judged gray for any hosted partition is claimed gray
// in the liveness views, so that its lease lapses before a takeover. A
// verdict counts only while some other region could take the partition
// over: withholding a lease is the prelude to a takeover, and without a
// candidate it only made the write region unable to acknowledge anything,
// so its commit LSN stayed still and the verdict never cleared (every
// write stalled for good; found by the background-fault sweep).
func (m *Manager) syncGray(now time.Duration, p *partition) {
	g := p.gs
	if g == nil {
		return
	}
	node, ok := NodeID(0), false
	if g.why != "" && p.have {
		node, ok = m.nodeOf(p, p.state.WriteRegion)
		ok = ok && node != m.self.ID && m.grayTakeoverPossible(now, p)
	}
	if g.counted && (!ok || node != g.node) {
		g.counted = false
		if m.grayBy[g.node]--; m.grayBy[g.node] <= 0 {
			delete(m.grayBy, g.node)
			m.live.SetGray(now, g.node, false)
		}
	}
	if ok && !g.counted {
		g.counted, g.node = true, node
		if m.grayBy[node]++; m.grayBy[node] == 1 {
			m.live.SetGray(now, node, true)
		}
	}
	p.dropIdleGray()
}
