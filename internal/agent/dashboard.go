package agent

import (
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/clusterspec"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/partition"
)

// PathDashboard is the status page's one JSON endpoint (GET; ?local=1
// for what this agent alone knows): everything the page shows, in one
// answer of bounded size, whatever the partition count.
const PathDashboard = "/v1/admin/dashboard"

const (
	// maxDashTransitions bounds the transitions the dashboard lists
	// (newest first), per agent and merged.
	maxDashTransitions = 40
	// maxDashInProgress bounds the operations in progress it lists; the
	// total is counted, and every partition's flags show them all.
	maxDashInProgress = 100
	// dashFresh is how long an aggregated dashboard is reused, from the
	// moment its fan-out started: any number of open pages (each polling
	// at most once a second) cost the cluster at most two fan-outs a
	// second, and one page polling alone always gets a fresh answer.
	dashFresh = 500 * time.Millisecond
)

// Flags of a partition on the dashboard (DashboardLocal.Flags,
// Dashboard.Flags), bit by bit.
const (
	// FlagSwitchover: a switchover is under way (phase switchover).
	FlagSwitchover = 1 << iota
	// FlagPaused: automatic failover is paused for the partition.
	FlagPaused
	// FlagProposing: a node has a register proposal for it in flight.
	FlagProposing
	// FlagWriteRegionDown: the node of the write region's replica is
	// dead or suspect in the answering agent's failover view: a
	// failover is due or under way.
	FlagWriteRegionDown
)

// DashboardLocal is GET /v1/admin/dashboard?local=1: what one agent
// knows, with its hosted partitions as parallel arrays (IDs[i],
// Versions[i], Epochs[i], Write[i], Flags[i]); Write is an index into
// Regions, -1 when the register names another region.
type DashboardLocal struct {
	NodeID            uint16                `json:"node_id"`
	Name              string                `json:"name"`
	Region            string                `json:"region"`
	Lease             LeaseView             `json:"lease"`
	GlobalPause       bool                  `json:"global_pause,omitempty"`
	GlobalPauseReason string                `json:"global_pause_reason,omitempty"`
	Drains            []DrainView           `json:"drains,omitempty"`
	Nodes             []NodeView            `json:"nodes"`
	Regions           []string              `json:"regions"`
	IDs               []uint32              `json:"ids"`
	Versions          []uint64              `json:"versions"`
	Epochs            []uint64              `json:"epochs"`
	Write             []int                 `json:"write"`
	Flags             []int                 `json:"flags"`
	Switchovers       []PartitionBrief      `json:"switchovers,omitempty"`
	Transitions       []PartitionTransition `json:"transitions"`
}

// PartitionTransition is one transition of one partition's register
// history, with the reason `fmnode history` and `fmnode explain` give.
type PartitionTransition struct {
	Partition uint32 `json:"partition"`
	TransitionView
}

// DashRegion is one region on the dashboard: its index in Regions is
// the value of Dashboard.Write for the partitions it is write region of.
type DashRegion struct {
	Name         string   `json:"name"`
	Preferred    bool     `json:"preferred,omitempty"`
	NeverPromote bool     `json:"never_promote,omitempty"`
	Nodes        []string `json:"nodes"`
	Writes       int      `json:"writes"`
}

// DashOp is a failover or switchover in progress.
type DashOp struct {
	Partition uint32    `json:"partition"`
	Kind      string    `json:"kind"`
	From      string    `json:"from"`
	To        string    `json:"to,omitempty"`
	Since     time.Time `json:"since,omitzero"`
	Why       string    `json:"why"`
}

// Dashboard is GET /v1/admin/dashboard: the answering agent's view,
// completed by every other agent's (fanned out as in /v1/admin/status).
// Partition p is at index p-1 of Write (an index into Regions, -1 while
// no agent reported its register), Epoch and Flags.
type Dashboard struct {
	Answered          string                `json:"answered_by"`
	Cluster           string                `json:"cluster"`
	SpecVersion       uint64                `json:"spec_version"`
	At                time.Time             `json:"at"`
	Partitions        int                   `json:"partitions"`
	Regions           []DashRegion          `json:"regions"`
	Nodes             []ClusterNode         `json:"nodes"`
	Write             []int                 `json:"write"`
	Epoch             []uint64              `json:"epoch"`
	Flags             []int                 `json:"flags"`
	InProgress        []DashOp              `json:"in_progress"`
	InProgressTotal   int                   `json:"in_progress_total"`
	Transitions       []PartitionTransition `json:"transitions"`
	Drains            []DrainView           `json:"drains,omitempty"`
	GlobalPause       bool                  `json:"global_pause,omitempty"`
	GlobalPauseReason string                `json:"global_pause_reason,omitempty"`
}

// dashCache holds the last aggregated dashboard; its mutex also makes
// concurrent viewers wait for one fan-out instead of starting their own.
type dashCache struct {
	mu   sync.Mutex
	at   time.Time
	body []byte
}

func (a *Agent) serveDashboard(w http.ResponseWriter, r *http.Request) {
	if !requireMethod(w, r, http.MethodGet) {
		return
	}
	h := a.readyHost(w)
	if h == nil {
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	if r.URL.Query().Get("local") != "" {
		ld, err := a.dashboardLocal(r.Context(), h)
		if err != nil {
			a.writeLoopError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, ld)
		return
	}
	c := &a.dash
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.body == nil || time.Since(c.at) >= dashFresh {
		started := time.Now()
		d, err := a.dashboard(r, h)
		if err != nil {
			a.writeLoopError(w, err)
			return
		}
		b, err := json.Marshal(d)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		c.body, c.at = b, started
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(c.body)
}

// dashboardLocal is this agent's part (runs one pass over its hosted
// partitions in the node's loop).
func (a *Agent) dashboardLocal(ctx context.Context, h *host) (DashboardLocal, error) {
	d := DashboardLocal{NodeID: h.self.ID, Name: h.self.Name, Region: a.cfg.Region, Regions: slices.Clone(h.spec.Regions)}
	regionIdx := map[partition.Region]int{}
	for i, r := range h.spec.Regions {
		regionIdx[partition.Region(r)] = i
	}
	err := h.do(ctx, func(now time.Duration, n *node.Node) error {
		mgr := n.Manager()
		live := mgr.Liveness()
		d.Lease = LeaseView{Valid: live.LeaseValid(now), Until: wall(live.LeaseUntil())}
		d.Nodes = h.nodeViews(now, n)
		for _, r := range h.spec.Regions {
			if remaining, active := mgr.Draining(partition.Region(r)); active {
				d.Drains = append(d.Drains, DrainView{Region: r, Node: h.self.Name, Active: true, Remaining: remaining})
			}
		}
		ids := n.Host().Partitions()
		d.IDs, d.Versions, d.Epochs = make([]uint32, 0, len(ids)), make([]uint64, 0, len(ids)), make([]uint64, 0, len(ids))
		d.Write, d.Flags = make([]int, 0, len(ids)), make([]int, 0, len(ids))
		var recent transitionHeap
		for _, id := range ids {
			name := partition.RegisterKey(id)
			s, ver, ok := mgr.State(name)
			if !ok {
				continue
			}
			wi, ok := regionIdx[s.WriteRegion]
			if !ok {
				wi = -1
			}
			flags := 0
			if s.Phase == failover.PhaseSwitchover {
				flags |= FlagSwitchover
				if len(d.Switchovers) < maxDashInProgress {
					d.Switchovers = append(d.Switchovers, briefOf(id, s, ver))
				}
			}
			if s.Paused {
				flags |= FlagPaused
			}
			if pr, ok := mgr.Proposing(name); ok && pr.InFlight {
				flags |= FlagProposing
			}
			d.IDs, d.Versions, d.Epochs = append(d.IDs, uint32(id)), append(d.Versions, ver), append(d.Epochs, uint64(s.Epoch))
			d.Write, d.Flags = append(d.Write, wi), append(d.Flags, flags)
			recent.offer(uint32(id), s.History)
		}
		d.Transitions = recent.newestFirst()
		// The global pause is the manager's, not a partition's: any
		// hosted partition's evidence carries it.
		if len(ids) > 0 {
			if ev, ok := mgr.Evidence(now, partition.RegisterKey(ids[0])); ok {
				d.GlobalPause, d.GlobalPauseReason = ev.GlobalPause, ev.GlobalPauseReason
			}
		}
		return nil
	})
	return d, err
}

// dashboard merges this agent's part with every other agent's: each
// partition as the newest register version any agent reported.
func (a *Agent) dashboard(r *http.Request, h *host) (Dashboard, error) {
	self, err := a.dashboardLocal(r.Context(), h)
	if err != nil {
		return Dashboard{}, err
	}
	var others []clusterspec.Node
	for _, n := range h.spec.Nodes {
		if n.ID != h.self.ID {
			others = append(others, n)
		}
	}
	reported := map[uint16]*DashboardLocal{h.self.ID: &self}
	errs := map[uint16]string{}
	for _, ans := range a.fanOut(r.Context(), r, others, http.MethodGet, PathDashboard+"?local=1", nil) {
		var ld DashboardLocal
		msg := ans.answerErr()
		if msg == "" {
			if err := json.Unmarshal(ans.body, &ld); err != nil {
				msg = "decode: " + err.Error()
			}
		}
		if msg != "" {
			errs[ans.node.ID] = msg
			continue
		}
		reported[ans.node.ID] = &ld
	}
	d := Dashboard{Answered: h.self.Name, Cluster: h.spec.Cluster, At: time.Now().UTC(), Partitions: h.spec.Partitions,
		Transitions: []PartitionTransition{}, InProgress: []DashOp{}, Nodes: []ClusterNode{}}
	if c := a.spec.Load(); c != nil {
		d.SpecVersion = c.version
	}
	regionIdx := map[string]int{}
	for i, reg := range h.spec.Regions {
		regionIdx[reg] = i
		dr := DashRegion{Name: reg, Preferred: reg == h.spec.Preferred(), NeverPromote: slices.Contains(h.spec.NeverPromote, reg), Nodes: []string{}}
		for _, n := range h.spec.RegionNodes(reg) {
			dr.Nodes = append(dr.Nodes, n.Name)
		}
		d.Regions = append(d.Regions, dr)
	}
	d.mergePartitions(reported, regionIdx)
	for _, v := range self.Nodes {
		cn := ClusterNode{NodeView: v}
		if ld, ok := reported[v.ID]; ok {
			lease := ld.Lease
			cn.Reached, cn.Lease, cn.GlobalPause, cn.GlobalPauseReason = true, &lease, ld.GlobalPause, ld.GlobalPauseReason
			if ld.GlobalPause && !d.GlobalPause {
				d.GlobalPause, d.GlobalPauseReason = true, ld.GlobalPauseReason
			}
		} else {
			cn.Error = errs[v.ID]
		}
		d.Nodes = append(d.Nodes, cn)
	}
	d.markWriteRegionDown(h, self.Nodes)
	d.collectInProgress(h, reported)
	d.mergeTransitions(reported)
	for _, ld := range reported {
		d.Drains = append(d.Drains, ld.Drains...)
	}
	slices.SortFunc(d.Drains, func(x, y DrainView) int { return cmpStrings(x.Node, y.Node) })
	return d, nil
}

// mergePartitions fills Write, Epoch and Flags from the newest version
// each partition was reported at; a proposal in flight anywhere counts.
func (d *Dashboard) mergePartitions(reported map[uint16]*DashboardLocal, regionIdx map[string]int) {
	n := d.Partitions
	d.Write, d.Epoch, d.Flags = make([]int, n), make([]uint64, n), make([]int, n)
	version := make([]uint64, n)
	for i := range d.Write {
		d.Write[i] = -1
	}
	for _, ld := range reported {
		if len(ld.Versions) != len(ld.IDs) || len(ld.Epochs) != len(ld.IDs) || len(ld.Write) != len(ld.IDs) || len(ld.Flags) != len(ld.IDs) {
			continue // a malformed answer is not evidence
		}
		for i, id := range ld.IDs {
			p := int(id) - 1
			if p < 0 || p >= n {
				continue
			}
			prop := (d.Flags[p] | ld.Flags[i]) & FlagProposing
			if ld.Versions[i] > version[p] {
				version[p], d.Epoch[p] = ld.Versions[i], ld.Epochs[i]
				d.Write[p] = -1
				if w := ld.Write[i]; w >= 0 && w < len(ld.Regions) {
					if gi, ok := regionIdx[ld.Regions[w]]; ok {
						d.Write[p] = gi
					}
				}
				d.Flags[p] = ld.Flags[i] &^ FlagWriteRegionDown
			}
			d.Flags[p] |= prop
		}
	}
	for _, w := range d.Write {
		if w >= 0 {
			d.Regions[w].Writes++
		}
	}
}

// markWriteRegionDown flags every partition whose write region's replica
// is on a node the answering agent's failover core holds dead or
// suspect.
func (d *Dashboard) markWriteRegionDown(h *host, views []NodeView) {
	down := map[uint16]string{}
	for _, v := range views {
		if v.Failover == "dead" || v.Failover == "suspect" {
			down[v.ID] = v.Failover
		}
	}
	if len(down) == 0 {
		return
	}
	for p := range d.Partitions {
		w := d.Write[p]
		if w < 0 {
			continue
		}
		if nid, ok := h.nodeOfRegion(partition.ID(p+1), d.Regions[w].Name); ok {
			if _, isDown := down[uint16(nid)]; isDown {
				d.Flags[p] |= FlagWriteRegionDown
			}
		}
	}
}

// collectInProgress lists the switchovers (as the agents reported them)
// and the partitions whose write region is down, at most
// maxDashInProgress, counting them all.
func (d *Dashboard) collectInProgress(h *host, reported map[uint16]*DashboardLocal) {
	sw := map[uint32]PartitionBrief{}
	for _, ld := range reported {
		for _, b := range ld.Switchovers {
			if cur, ok := sw[b.ID]; !ok || b.Version > cur.Version {
				sw[b.ID] = b
			}
		}
	}
	nodes := map[uint16]ClusterNode{}
	for _, n := range d.Nodes {
		nodes[n.ID] = n
	}
	for p, f := range d.Flags {
		id := uint32(p + 1)
		switch {
		case f&FlagSwitchover != 0:
			d.InProgressTotal++
			if len(d.InProgress) >= maxDashInProgress {
				continue
			}
			op := DashOp{Partition: id, Kind: "switchover", Why: "the write region is fenced until the target holds every committed LSN"}
			if d.Write[p] >= 0 {
				op.From = d.Regions[d.Write[p]].Name
			}
			if b, ok := sw[id]; ok {
				op.To, op.Since = b.Target, b.Since
			}
			d.InProgress = append(d.InProgress, op)
		case f&FlagWriteRegionDown != 0:
			d.InProgressTotal++
			if len(d.InProgress) >= maxDashInProgress {
				continue
			}
			from := d.Regions[d.Write[p]].Name
			nid, _ := h.nodeOfRegion(partition.ID(id), from)
			n := nodes[uint16(nid)]
			d.InProgress = append(d.InProgress, DashOp{Partition: id, Kind: "failover", From: from,
				Why: fmt.Sprintf("%s, the write region's node, is %s in %s's failover view (membership: %s)", n.Name, n.Failover, d.Answered, n.Membership)})
		}
	}
}

// mergeTransitions keeps the newest maxDashTransitions transitions any
// agent reported, each once.
func (d *Dashboard) mergeTransitions(reported map[uint16]*DashboardLocal) {
	type key struct {
		p     uint32
		epoch uint64
		at    time.Time
		kind  string
	}
	seen := map[key]bool{}
	var all []PartitionTransition
	for _, ld := range reported {
		for _, t := range ld.Transitions {
			k := key{t.Partition, t.Epoch, t.At, t.Kind}
			if !seen[k] {
				seen[k] = true
				all = append(all, t)
			}
		}
	}
	slices.SortFunc(all, func(x, y PartitionTransition) int {
		if c := y.At.Compare(x.At); c != 0 {
			return c
		}
		return int(x.Partition) - int(y.Partition)
	})
	if len(all) > maxDashTransitions {
		all = all[:maxDashTransitions]
	}
	d.Transitions = append(d.Transitions, all...)
}

func cmpStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// transitionHeap keeps the newest maxDashTransitions transitions offered
// (a min-heap on the instant: its root is the oldest kept).
type transitionHeap []heldTransition

type heldTransition struct {
	p uint32
	t failover.Transition
}

func (th transitionHeap) Len() int           { return len(th) }
func (th transitionHeap) Less(i, j int) bool { return th[i].t.At < th[j].t.At }
func (th transitionHeap) Swap(i, j int)      { th[i], th[j] = th[j], th[i] }
func (th *transitionHeap) Push(x any)        { *th = append(*th, x.(heldTransition)) }
func (th *transitionHeap) Pop() any {
	old := *th
	x := old[len(old)-1]
	*th = old[:len(old)-1]
	return x
}

// offer considers a partition's history, newest last: it stops at the
// first transition older than every one kept once the heap is full, so
// a pass over thousands of steady partitions costs one comparison each.
func (th *transitionHeap) offer(p uint32, hist []failover.Transition) {
	for i := len(hist) - 1; i >= 0; i-- {
		t := hist[i]
		if th.Len() < maxDashTransitions {
			heap.Push(th, heldTransition{p, t})
			continue
		}
		if t.At <= (*th)[0].t.At {
			return
		}
		(*th)[0] = heldTransition{p, t}
		heap.Fix(th, 0)
	}
}

// newestFirst empties the heap into a list, newest first.
func (th *transitionHeap) newestFirst() []PartitionTransition {
	out := make([]PartitionTransition, th.Len())
	for i := len(out) - 1; i >= 0; i-- {
		ht := heap.Pop(th).(heldTransition)
		out[i] = PartitionTransition{Partition: ht.p, TransitionView: transitionViews([]failover.Transition{ht.t})[0]}
	}
	return out
}
