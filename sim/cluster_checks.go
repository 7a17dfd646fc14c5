package sim

import (
	"fmt"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
)

// checkSessionRead checks a session client's read against what the
// client itself wrote and read before (strong partitions: nothing
// committed is ever truncated, so positions compare by LSN): it returns
// the client's own latest acknowledged write or something newer
// (read-your-writes), and never a version older than one it already
// read (monotonic reads).
func (fw *foWorld) checkSessionRead(c *foClient, r partition.Reply) {
	switch c.level {
	case partition.Session:
		if rs := fw.clusterLayer; rs != nil {
			rs.sessionReads++
		}
	case partition.Eventual:
		if rs := fw.clusterLayer; rs != nil {
			rs.eventReads++
		}
		return
	default:
		return
	}
	name := fw.parts[c.part].name
	if c.ownWrite.LSN > 0 && (!r.Found || r.Version.LSN < c.ownWrite.LSN) {
		fw.e.viol.add(fw.now(), ViolationInvariant, "partition %s session client %d: read-your-writes: read returned version %v (found %v) after its own write at %v",
			name, c.idx, r.Version, r.Found, c.ownWrite)
	}
	if c.seen.LSN > 0 && (!r.Found || r.Version.LSN < c.seen.LSN) {
		fw.e.viol.add(fw.now(), ViolationInvariant, "partition %s session client %d: monotonic reads: read returned version %v (found %v) after version %v",
			name, c.idx, r.Version, r.Found, c.seen)
	}
	if r.Found {
		c.seen = c.seen.Max(r.Version)
	}
}

// clusterStale is the stale-epoch checker's scratch: the appends of a
// batch older than their partition's register epoch, and each receiving
// replica's position before the batch.
type clusterStale struct {
	before []staleBefore
}

type staleBefore struct {
	part  partition.ID
	msg   partition.Epoch
	epoch partition.Epoch
	last  partition.LSN
	lastE partition.Epoch
	// fresh: the batch also carries a message of this partition at the
	// replica's epoch or newer (which may move its log legitimately).
	fresh bool
}

// staleBeforeStep notes, for every append in b of an epoch older than its
// partition's newest register epoch, where the receiving replica stands.
func (n *foNode) staleBeforeStep(b *nodewire.Batch) {
	fw := n.fw
	fw.stale.before = fw.stale.before[:0]
	for i := range b.Data {
		m := &b.Data[i]
		if m.Type != partition.MsgAppend || len(m.Entries) == 0 {
			continue
		}
		p := int(m.Partition) - 1
		if p < 0 || p >= len(fw.reg) || failover.Epoch(m.Epoch) >= fw.reg[p].state.Epoch {
			continue
		}
		pr, err := n.host.ProgressWithoutHistory(m.Partition, nil)
		if err != nil || m.Epoch >= pr.Epoch {
			continue
		}
		fw.stale.before = append(fw.stale.before, staleBefore{part: m.Partition, msg: m.Epoch, epoch: pr.Epoch, last: pr.LastLSN, lastE: pr.LastEpoch})
	}
	if len(fw.stale.before) == 0 {
		return
	}
	for i := range b.Data {
		m := &b.Data[i]
		for k := range fw.stale.before {
			if sb := &fw.stale.before[k]; sb.part == m.Partition && m.Epoch >= sb.epoch {
				sb.fresh = true
			}
		}
	}
}

// staleAfterStep: a replica that got only stale appends for a partition
// must not have moved its log nor gone back in epoch.
func (n *foNode) staleAfterStep() {
	fw := n.fw
	for _, sb := range fw.stale.before {
		if n.host == nil {
			return
		}
		pr, err := n.host.ProgressWithoutHistory(sb.part, nil)
		if err != nil {
			continue
		}
		fw.clusterLayer.staleChecked++
		moved := !sb.fresh && (pr.LastLSN != sb.last || pr.LastEpoch != sb.lastE)
		if pr.Epoch < sb.epoch || moved {
			fw.e.viol.add(fw.now(), ViolationInvariant, "partition %s replica in %s applied an append of stale epoch %d: it was at epoch %d last %d:%d, now epoch %d last %d:%d",
				fw.parts[sb.part-1].name, n.region, sb.msg, sb.epoch, sb.lastE, sb.last, pr.Epoch, pr.LastEpoch, pr.LastLSN)
		}
	}
	fw.stale.before = fw.stale.before[:0]
}

// foDurKey is one op made durable on one node.
type foDurKey struct {
	node int32
	part partition.ID
	lsn  partition.LSN
}

// noteDurable records the ops a node's fsync made durable. Every op is
// unique per (node, partition, LSN, epoch); a second epoch at the same
// LSN replaces the first only after a truncation (which put the first
// into the conflict record), so the latest is kept and the earlier ones
// are checked as they are replaced.
func (n *foNode) noteDurable(ws []partition.Write) {
	fw := n.fw
	for i := range ws {
		w := &ws[i]
		for _, op := range w.Append {
			k := foDurKey{node: n.idx, part: w.Partition, lsn: op.LSN}
			if e, ok := fw.durable[k]; ok && e != op.Epoch {
				fw.clusterLayer.checkConflict(n, w.Partition, op.LSN, e, "overwritten")
			}
			fw.durable[k] = op.Epoch
		}
	}
}

// checkConflict: op (lsn, e) left node n's log, so it must be in n's
// conflict record for the partition (false progress is never dropped
// silently).
func (cs *clusterState) checkConflict(n *foNode, p partition.ID, lsn partition.LSN, e partition.Epoch, how string) {
	recs, err := n.store.Conflicts(p, partition.Token{Epoch: e, LSN: lsn - 1}, 4)
	found := false
	for _, c := range recs {
		if c.Op.LSN == lsn && c.Op.Epoch == e {
			found = true
		}
	}
	if err != nil || !found {
		cs.r.violation(ViolationInvariant, "partition %s node %d: op %d:%d %s but not in the conflict record (false progress dropped)",
			cs.fw.parts[p-1].name, n.idx, e, lsn, how)
		return
	}
	cs.falseChecked++
}

// checkFalseProgress runs after convergence: every durable op of every
// node that is not in its partition's final lineage must be in that
// node's conflict record.
func (cs *clusterState) checkFalseProgress() {
	fw := cs.fw
	lineage := make([]partition.Progress, len(fw.parts))
	for i := range fw.parts {
		if n := fw.partNode(i, fw.reg[i].state.WriteRegion); n != nil && n.host != nil {
			lineage[i], _ = n.host.Progress(fw.parts[i].id)
		}
	}
	for k, e := range fw.durable {
		l := &lineage[k.part-1]
		if l.Partition == 0 {
			continue
		}
		le, known := partition.EpochAt(l.History, k.lsn)
		if k.lsn <= l.LastLSN && (!known || le == e) {
			continue // in the lineage (or below what its history covers)
		}
		cs.checkConflict(fw.nodes[k.node], k.part, k.lsn, e, "is not in the final lineage")
	}
}

// check runs the cluster's own checks after the standard ones.
func (cs *clusterState) check() {
	fw, f := cs.fw, cs.fig
	cs.checkFalseProgress()
	cs.checkMinDurRules()
	for k := range cs.actions {
		a := &cs.actions[k]
		if a.ended {
			continue
		}
		what := map[int]string{caSwitchover: "switchover to " + string(a.target), caPause: "pause", caResume: "resume",
			caMinDurability: fmt.Sprintf("minimum durability %d", a.min)}[a.kind]
		if a.part < 0 {
			cs.r.violation(ViolationLiveness, "operator action %d (%s at %v) never ended (%s)", k, what, a.at, a.state)
			continue
		}
		d, _ := fw.explainPart(a.part)
		cs.r.violation(ViolationLiveness, "partition %s: operator action %d (%s at %v) never ended (%s): %s",
			fw.parts[a.part].name, k, what, a.at, a.state, d)
	}
	for i := range fw.parts {
		if !fw.partConverged(i) {
			f.StuckPartitions++
		}
	}
	var rounds, naks uint64
	for _, n := range fw.nodes {
		st := n.propPast
		if n.node != nil {
			s := n.node.Proposer().Stats()
			st.Rounds += s.Rounds
			st.NAKs += s.NAKs
			f.StaleRejected += n.host.Stats().StaleRejected
		}
		rounds += st.Rounds
		naks += st.NAKs
	}
	f.StaleRejected += cs.staleRejectedPast
	f.RegisterRounds, f.RegisterNAKs = rounds, naks
	if rounds > 0 {
		f.RegisterConflictRate = float64(naks) / float64(rounds)
	}
	f.StaleChecked, f.FalseProgressChecked = cs.staleChecked, cs.falseChecked
	f.SessionReads, f.EventualReads = cs.sessionReads, cs.eventReads
}

// explainPart is the register value and the manager's last decision of
// partition i at its write region's node, for a report.
func (fw *foWorld) explainPart(i int) (string, bool) {
	r := &fw.reg[i]
	s := fmt.Sprintf("register v%d epoch %d write %s phase %v paused %v", r.version, r.state.Epoch, r.state.WriteRegion, r.state.Phase, r.state.Paused)
	if n := fw.partNode(i, r.state.WriteRegion); n != nil && n.mgr != nil {
		if d, ok := n.mgr.LastDecision(fw.parts[i].name); ok {
			s += fmt.Sprintf("; last decision %v %s", d.Kind, d.Suppressed)
		}
	}
	return s, true
}

// finishFailure adds what a failing seed needs to be understood: the
// porcupine HTML of the failing key (the run's verdict is over every
// key; each is checked alone here to find the one) and the compact trace
// of the partition the first violation names.
func (cs *clusterState) finishFailure(res *Result) {
	if !res.Failed() {
		return
	}
	fw := cs.fw
	part := -1
	if res.Linearizable != LinOK {
		part = cs.porcupineFailure(res)
	}
	for _, v := range res.Violations {
		if part >= 0 {
			break
		}
		part = fw.partOfViolation(v)
	}
	if part < 0 {
		return
	}
	cs.fig.Trace = fw.ct.render(fw.parts[part].name, part)
}

// porcupineFailure checks each key's operations alone, writes the HTML of
// the first that fails and returns its partition.
func (cs *clusterState) porcupineFailure(res *Result) int {
	fw := cs.fw
	byKey := map[string][]porcupine.Operation{}
	for _, op := range fw.e.hist.Operations() {
		k := op.Input.(regInput).Key
		byKey[k] = append(byKey[k], op)
	}
	for i := range fw.parts {
		key := fmt.Sprintf("p%d", fw.parts[i].id)
		ops := byKey[key]
		if len(ops) == 0 {
			continue
		}
		name := fmt.Sprintf("fmnode-sim-cluster-%d-%s", fw.e.cfg.Seed, strings.ReplaceAll(fw.parts[i].name, "/", ""))
		verdict, viz, err := checkLinearizableModel(foKVModel(), ops, fw.e.cfg.CheckTimeout, fw.e.cfg.OutDir, name)
		if err != nil {
			res.Violations = append(res.Violations, err.Error())
		}
		if verdict != LinOK {
			res.Visualization = viz
			res.Violations = append(res.Violations, fmt.Sprintf("porcupine: partition %s (key %s) is %s", fw.parts[i].name, key, verdict))
			return i
		}
	}
	return -1
}
