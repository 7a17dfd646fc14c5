package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/clusterspec"
	"github.com/fmnode/fmnode/internal/dataapi"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/internal/sysreg"
	"github.com/fmnode/fmnode/partition"
)

// Paths of the operator endpoints (fmnode status, members, partition,
// explain, history, switchover, drain, pause, resume).
const (
	PathStatus     = "/v1/admin/status"
	PathMembers    = "/v1/admin/members"
	PathPartition  = "/v1/admin/partition"
	PathExplain    = "/v1/admin/explain"
	PathHistory    = "/v1/admin/history"
	PathSwitchover = "/v1/admin/switchover"
	PathDrain      = "/v1/admin/drain"
	PathPause      = "/v1/admin/pause"
)

// Codes of the operator endpoints' errors.
const (
	CodeRefused    = "refused"
	CodeNotReady   = "not_ready"
	CodeBadRequest = "bad_request"
	CodeForwarding = "forward_failed"
	// CodeNotApplied: the request was accepted but its register write
	// was lost (node.ErrNotApplied); the register is as it was.
	CodeNotApplied = "not_applied"
	// CodeUnknownOutcome: the agent stopped waiting before the request's
	// register write ended; it may still take effect.
	CodeUnknownOutcome = "outcome_unknown"
)

const (
	// headerAdminHops counts the agents a partition request was passed
	// through; at maxAdminHops it is served or refused where it is.
	headerAdminHops = "Fm-Admin-Hops"
	maxAdminHops    = 2
	// fanOutTimeout bounds each agent's answer to a fanned-out call, and
	// fanOutParallel how many are asked at once.
	fanOutTimeout  = 3 * time.Second
	fanOutParallel = 16
	// opTimeout bounds an operator call on this node's loop.
	opTimeout = 10 * time.Second
)

// adminRoutes registers the operator endpoints, each behind the admin
// authentication.
func (a *Agent) adminRoutes(mux *http.ServeMux) {
	mux.HandleFunc(PathStatus, a.authed(a.serveStatus))
	mux.HandleFunc(PathMembers, a.authed(a.serveMembers))
	mux.HandleFunc(PathPartition, a.authed(a.servePartition))
	mux.HandleFunc(PathExplain, a.authed(a.serveExplain))
	mux.HandleFunc(PathHistory, a.authed(a.serveHistory))
	mux.HandleFunc(PathSwitchover, a.authed(a.serveSwitchover))
	mux.HandleFunc(PathDrain, a.authed(a.serveDrain))
	mux.HandleFunc(PathPause, a.authed(a.servePause))
	mux.HandleFunc(PathDashboard, a.authed(a.serveDashboard))
	mux.Handle(PathUI, uiHandler())
}

// readyHost is the host, or nil after answering 503 with the reason.
func (a *Agent) readyHost(w http.ResponseWriter) *host {
	h := a.host.Load()
	if h == nil {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, CodeNotReady, a.notReadyReason())
	}
	return h
}

func partitionID(w http.ResponseWriter, s string, h *host) (partition.ID, bool) {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil || v == 0 || int(v) > h.spec.Partitions {
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("agent: partition %q: not a partition of this cluster (1..%d)", s, h.spec.Partitions))
		return 0, false
	}
	return partition.ID(v), true
}

// errNotHosted: this node hosts no replica of the partition.
var errNotHosted = errors.New("agent: partition not hosted here")

// do runs fn on the node's loop, bounded.
func (h *host) do(ctx context.Context, fn func(now time.Duration, n *node.Node) error) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return h.drv.Do(ctx, fn)
}

func (a *Agent) writeLoopError(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "unavailable", "agent: the node did not answer: "+err.Error())
}

// failoverConfig is the failover configuration the node runs under (the
// spec's, with its current blast radius), for Explain and Decide.
func (a *Agent) failoverConfig(h *host) failover.Config {
	spec := h.spec
	if c := a.spec.Load(); c != nil {
		spec = c.spec
	}
	cfg, err := spec.FailoverConfig()
	if err != nil {
		cfg, _ = h.spec.FailoverConfig()
	}
	if br, err := blastRadius(spec); err == nil {
		cfg.MaxConcurrentPerTarget = br
	}
	return cfg
}

// hostsLocally reports whether this node hosts a replica of p.
func (h *host) hostsLocally(p partition.ID) bool {
	for _, rn := range h.spec.Placement(p).Replicas {
		if uint16(rn.Node) == h.self.ID {
			return true
		}
	}
	return false
}

// forwardTarget is where a read of p goes when this node does not host
// it: the node of this region that does.
func (h *host) forwardTarget(p partition.ID) (string, bool) {
	if int(p) < len(h.owner) {
		if own := h.owner[p]; own != 0 && uint16(own) != h.self.ID {
			if addr := h.apiAddr(own); addr != "" {
				return addr, true
			}
		}
	}
	return "", false
}

// nodeOfRegion is the node hosting p's replica in region r.
func (h *host) nodeOfRegion(p partition.ID, r string) (node.NodeID, bool) {
	for _, rn := range h.spec.Placement(p).Replicas {
		if string(rn.Region) == r {
			return rn.Node, true
		}
	}
	return 0, false
}

// forward passes r (with body) to the agent at addr and copies its answer
// back, the caller's bearer token included. Used once per hop, at most
// maxAdminHops.
func (a *Agent) forward(w http.ResponseWriter, r *http.Request, addr string, body []byte) {
	hops, _ := strconv.Atoi(r.Header.Get(headerAdminHops))
	if hops >= maxAdminHops {
		writeError(w, http.StatusConflict, CodeForwarding, fmt.Sprintf("agent: %s was passed through %d agents already and %s is not the one to serve it (placement or register views differ); retry", r.URL.Path, hops, a.cfg.Name))
		return
	}
	u := url.URL{Scheme: a.apiScheme(), Host: addr, Path: r.URL.Path, RawQuery: r.URL.RawQuery}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerAdminHops, strconv.Itoa(hops+1))
	if auth := r.Header.Get("Authorization"); auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := a.adminClient().Do(req)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusBadGateway, CodeForwarding, fmt.Sprintf("agent: %s passed the request to %s, which did not answer: %v", a.cfg.Name, addr, err))
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.Header().Set("Fm-Served-By", resp.Header.Get("Fm-Served-By"))
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, io.LimitReader(resp.Body, 8<<20))
}

// fanAnswer is one agent's answer to a fanned-out call.
type fanAnswer struct {
	node   clusterspec.Node
	status int
	body   []byte
	err    error
}

// fanOut sends the same call to every node in nodes, fanOutParallel at a
// time, each bounded by fanOutTimeout; the caller's bearer token is
// passed on.
func (a *Agent) fanOut(ctx context.Context, r *http.Request, nodes []clusterspec.Node, method, pathQuery string, body []byte) []fanAnswer {
	out := make([]fanAnswer, len(nodes))
	sem := make(chan struct{}, fanOutParallel)
	var wg sync.WaitGroup
	h := a.host.Load()
	for i, n := range nodes {
		out[i].node = n
		addr := n.APIAddr
		if h != nil {
			if live := h.apiAddr(node.NodeID(n.ID)); live != "" {
				addr = live
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			cctx, cancel := context.WithTimeout(ctx, fanOutTimeout)
			defer cancel()
			req, err := http.NewRequestWithContext(cctx, method, a.apiScheme()+"://"+addr+pathQuery, bytes.NewReader(body))
			if err != nil {
				out[i].err = err
				return
			}
			req.Header.Set("Content-Type", "application/json")
			if auth := r.Header.Get("Authorization"); auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := a.adminClient().Do(req)
			if err != nil {
				out[i].err = err
				return
			}
			defer resp.Body.Close()
			out[i].status = resp.StatusCode
			out[i].body, out[i].err = io.ReadAll(io.LimitReader(resp.Body, 8<<20))
		}()
	}
	wg.Wait()
	return out
}

// answerErr is a fanned-out answer's failure as text ("" when it
// succeeded).
func (f fanAnswer) answerErr() string {
	if f.err != nil {
		return f.err.Error()
	}
	if f.status >= 300 {
		var eb RefusedBody
		if json.Unmarshal(f.body, &eb) == nil && eb.Error != "" {
			return fmt.Sprintf("HTTP %d: %s", f.status, eb.Error)
		}
		return fmt.Sprintf("HTTP %d: %s", f.status, bytes.TrimSpace(f.body))
	}
	return ""
}

// --- status and members ---

func (a *Agent) localStatus(ctx context.Context, h *host) (LocalStatus, error) {
	st := LocalStatus{NodeID: h.self.ID, Name: h.self.Name, Region: a.cfg.Region, Boot: a.dir.Boot()}
	if c := a.spec.Load(); c != nil {
		st.SpecVersion = c.version
	}
	err := h.do(ctx, func(now time.Duration, n *node.Node) error {
		mgr := n.Manager()
		live := mgr.Liveness()
		st.Lease = LeaseView{Valid: live.LeaseValid(now), Until: wall(live.LeaseUntil())}
		st.Nodes = h.nodeViews(now, n)
		for _, r := range h.spec.Regions {
			if remaining, active := mgr.Draining(partition.Region(r)); active {
				st.Drains = append(st.Drains, DrainView{Region: r, Node: h.self.Name, Active: true, Remaining: remaining})
			}
		}
		for _, id := range n.Host().Partitions() {
			name := partition.RegisterKey(id)
			if s, ver, ok := mgr.State(name); ok {
				st.Partitions = append(st.Partitions, briefOf(id, s, ver))
				if !st.GlobalPause {
					if ev, ok := mgr.Evidence(now, name); ok && ev.GlobalPause {
						st.GlobalPause, st.GlobalPauseReason = true, ev.GlobalPauseReason
					}
				}
			}
		}
		return nil
	})
	sortBriefs(st.Partitions)
	return st, err
}

func (a *Agent) serveStatus(w http.ResponseWriter, r *http.Request) {
	if !requireMethod(w, r, http.MethodGet) {
		return
	}
	h := a.readyHost(w)
	if h == nil {
		return
	}
	self, err := a.localStatus(r.Context(), h)
	if err != nil {
		a.writeLoopError(w, err)
		return
	}
	if r.URL.Query().Get("local") != "" {
		writeJSON(w, http.StatusOK, self)
		return
	}
	var others []clusterspec.Node
	for _, n := range h.spec.Nodes {
		if n.ID != h.self.ID {
			others = append(others, n)
		}
	}
	answers := a.fanOut(r.Context(), r, others, http.MethodGet, PathStatus+"?local=1", nil)
	cs := ClusterStatus{Answered: h.self.Name, SpecVersion: self.SpecVersion}
	reported := map[uint16]*LocalStatus{h.self.ID: &self}
	errs := map[uint16]string{}
	for _, ans := range answers {
		var ls LocalStatus
		msg := ans.answerErr()
		if msg == "" {
			if err := json.Unmarshal(ans.body, &ls); err != nil {
				msg = "decode: " + err.Error()
			}
		}
		if msg != "" {
			errs[ans.node.ID] = msg
			continue
		}
		reported[ans.node.ID] = &ls
	}
	newest := map[uint32]PartitionBrief{}
	for _, ls := range reported {
		for _, p := range ls.Partitions {
			if cur, ok := newest[p.ID]; !ok || p.Version > cur.Version {
				newest[p.ID] = p
			}
		}
		cs.Drains = append(cs.Drains, ls.Drains...)
	}
	for _, v := range self.Nodes {
		cn := ClusterNode{NodeView: v}
		if ls, ok := reported[v.ID]; ok {
			lease := ls.Lease
			cn.Reached, cn.Lease, cn.GlobalPause, cn.GlobalPauseReason = true, &lease, ls.GlobalPause, ls.GlobalPauseReason
		} else {
			cn.Error = errs[v.ID]
		}
		cs.Nodes = append(cs.Nodes, cn)
	}
	for _, p := range newest {
		cs.Partitions = append(cs.Partitions, p)
		if p.Phase == failover.PhaseSwitchover.String() {
			cs.InProgress = append(cs.InProgress, p)
		}
	}
	sortBriefs(cs.Partitions)
	sortBriefs(cs.InProgress)
	for _, reg := range h.spec.Regions {
		rv := RegionView{Name: reg, Preferred: reg == h.spec.Preferred(), NeverPromote: slices.Contains(h.spec.NeverPromote, reg), WritePartitions: []uint32{}}
		for _, n := range h.spec.RegionNodes(reg) {
			rv.Nodes = append(rv.Nodes, n.Name)
		}
		for _, p := range cs.Partitions {
			if p.WriteRegion == reg {
				rv.WritePartitions = append(rv.WritePartitions, p.ID)
			}
		}
		cs.Regions = append(cs.Regions, rv)
	}
	writeJSON(w, http.StatusOK, cs)
}

func (a *Agent) serveMembers(w http.ResponseWriter, r *http.Request) {
	if !requireMethod(w, r, http.MethodGet) {
		return
	}
	var spec *clusterspec.Spec
	if c := a.spec.Load(); c != nil {
		spec = &c.spec
	}
	writeJSON(w, http.StatusOK, MembersResponse{Answered: a.cfg.Name, Members: memberViews(a.members.Members(), spec)})
}

// --- one partition: show, explain, history ---

// partitionRead serves a read of partition ?id=P: here when this node
// hosts it, else passed to the node of this region that does.
func (a *Agent) partitionRead(w http.ResponseWriter, r *http.Request, fn func(h *host, id partition.ID)) {
	if !requireMethod(w, r, http.MethodGet) {
		return
	}
	h := a.readyHost(w)
	if h == nil {
		return
	}
	id, ok := partitionID(w, r.URL.Query().Get("id"), h)
	if !ok {
		return
	}
	if !h.hostsLocally(id) {
		if addr, ok := h.forwardTarget(id); ok {
			a.forward(w, r, addr, nil)
			return
		}
		writeError(w, http.StatusNotFound, CodeRefused, fmt.Sprintf("agent: %s hosts no replica of partition %d and knows no node of its region that does", a.cfg.Name, id))
		return
	}
	fn(h, id)
}

func (a *Agent) servePartition(w http.ResponseWriter, r *http.Request) {
	a.partitionRead(w, r, func(h *host, id partition.ID) {
		var d PartitionDetail
		err := h.do(r.Context(), func(now time.Duration, n *node.Node) error {
			name := partition.RegisterKey(id)
			s, ver, ok := n.Manager().State(name)
			if !ok {
				return errNotHosted
			}
			d = PartitionDetail{ID: uint32(id), Answered: h.self.Name, Epoch: uint64(s.Epoch), WriteRegion: string(s.WriteRegion), Phase: s.Phase.String(),
				Version: ver, Consistency: s.Consistency.String(), WriteQuorum: regionStrings(s.WriteQuorum.Members), MinDurability: s.WriteQuorum.MinDurability,
				Priority: regionStrings(s.Priority), NeverPromote: regionStrings(s.NeverPromote), Paused: s.Paused, PauseReason: s.PauseReason}
			if s.Phase == failover.PhaseSwitchover {
				d.Target = string(s.Target)
			}
			for _, e := range s.Table.Epochs {
				d.Table = append(d.Table, EpochView{Epoch: uint64(e.Epoch), StartLSN: uint64(e.StartLSN), EndLSN: uint64(e.EndLSN), Open: e.Open, WriteRegion: e.WriteRegion})
			}
			if ev, ok := n.Manager().Evidence(now, name); ok {
				d.Replicas = replicaViews(s, ev, h.spec.Placement(id))
			}
			return nil
		})
		if a.writeDoError(w, h, id, err) {
			return
		}
		writeJSON(w, http.StatusOK, a.withWriteRegionLag(r, h, d))
	})
}

// withWriteRegionLag returns d with the replicas as the write region's
// node sees them when this node is not it: only the write region hears
// every replica's progress, so elsewhere most lags are unknown. The
// request goes once (the hop counter), and if the write region's node
// does not answer (it may be the failed one) d is returned as it is, with
// a note saying why the lags are missing.
func (a *Agent) withWriteRegionLag(r *http.Request, h *host, d PartitionDetail) PartitionDetail {
	if d.WriteRegion == a.cfg.Region || r.Header.Get(headerAdminHops) != "" || allReported(d.Replicas) {
		return d
	}
	id := node.NodeID(0)
	if n, ok := h.nodeOfRegion(partition.ID(d.ID), d.WriteRegion); ok {
		id = n
	}
	addr := h.apiAddr(id)
	if addr == "" {
		d.ReplicasNote = fmt.Sprintf("lag is known at the write region's node; %s has no address for node %d", a.cfg.Name, id)
		return d
	}
	ctx, cancel := context.WithTimeout(r.Context(), fanOutTimeout)
	defer cancel()
	var wr PartitionDetail
	if err := a.adminGet(ctx, r, addr, PathPartition+"?id="+strconv.FormatUint(uint64(d.ID), 10), &wr); err != nil {
		d.ReplicasNote = fmt.Sprintf("lag is known at the write region's node (node %d), which did not answer: %v", id, err)
		return d
	}
	if wr.Epoch < d.Epoch || wr.WriteRegion != d.WriteRegion {
		d.ReplicasNote = fmt.Sprintf("the write region's node answered for epoch %d (%s), older than this node's view", wr.Epoch, wr.WriteRegion)
		return d
	}
	d.Replicas, d.ReplicasFrom = wr.Replicas, wr.Answered
	return d
}

func allReported(rs []ReplicaView) bool {
	for _, r := range rs {
		if !r.Reported {
			return false
		}
	}
	return true
}

// adminGet is one admin GET to another agent, passing the caller's bearer
// token and counting the hop, decoded into out.
func (a *Agent) adminGet(ctx context.Context, r *http.Request, addr, pathQuery string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.apiScheme()+"://"+addr+pathQuery, nil)
	if err != nil {
		return err
	}
	hops, _ := strconv.Atoi(r.Header.Get(headerAdminHops))
	req.Header.Set(headerAdminHops, strconv.Itoa(hops+1))
	if auth := r.Header.Get("Authorization"); auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := a.adminClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return json.Unmarshal(body, out)
}

// explainOf is the explanation of partition id on this node (in the loop).
func (a *Agent) explainOf(h *host, now time.Duration, n *node.Node, id partition.ID) (ExplainResponse, bool) {
	name := partition.RegisterKey(id)
	s, _, ok := n.Manager().State(name)
	if !ok {
		return ExplainResponse{}, false
	}
	ev, ok := n.Manager().Evidence(now, name)
	if !ok {
		return ExplainResponse{}, false
	}
	cfg := a.failoverConfig(h)
	d := failover.Decide(cfg, s, ev)
	cands := d.Candidates
	if len(cands) == 0 {
		cands = failover.Rank(s, ev, s.WriteRegion)
	}
	out := ExplainResponse{ID: uint32(id), Answered: h.self.Name, Decision: d.Kind.String(), Target: string(d.Target), Reasons: d.Reasons,
		Suppressed: d.Suppressed, Candidates: candidateViews(cands), Replicas: replicaViews(s, ev, h.spec.Placement(id)),
		WriteRegionFailed: ev.WriteRegionFailed, FailureWhy: ev.FailureWhy, Text: failover.Explain(cfg, s, ev)}
	if last, ok := n.Manager().LastDecision(name); ok {
		out.LastDecision, out.LastSuppressed = last.Kind.String(), last.Suppressed
	}
	return out, true
}

func (a *Agent) serveExplain(w http.ResponseWriter, r *http.Request) {
	a.partitionRead(w, r, func(h *host, id partition.ID) {
		var out ExplainResponse
		err := h.do(r.Context(), func(now time.Duration, n *node.Node) error {
			var ok bool
			if out, ok = a.explainOf(h, now, n, id); !ok {
				return errNotHosted
			}
			return nil
		})
		if a.writeDoError(w, h, id, err) {
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
}

func (a *Agent) serveHistory(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("id") != "" {
		a.partitionRead(w, r, func(h *host, id partition.ID) { a.writeHistory(w, r, h, id) })
		return
	}
	if !requireMethod(w, r, http.MethodGet) {
		return
	}
	if h := a.readyHost(w); h != nil {
		a.writeHistory(w, r, h, 0)
	}
}

// writeHistory answers the history of partition only (0: every
// partition this node hosts).
func (a *Agent) writeHistory(w http.ResponseWriter, r *http.Request, h *host, only partition.ID) {
	out := HistoryResponse{Answered: h.self.Name, Partitions: []PartitionHistory{}}
	err := h.do(r.Context(), func(now time.Duration, n *node.Node) error {
		events := n.Manager().Events()
		for _, id := range n.Host().Partitions() {
			if only != 0 && id != only {
				continue
			}
			name := partition.RegisterKey(id)
			s, _, ok := n.Manager().State(name)
			if !ok {
				continue
			}
			ph := PartitionHistory{ID: uint32(id), Epoch: uint64(s.Epoch), WriteRegion: string(s.WriteRegion), Transitions: transitionViews(s.History)}
			ph.Events = partitionEvents(events, name)
			out.Partitions = append(out.Partitions, ph)
		}
		return nil
	})
	if err != nil {
		a.writeLoopError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// --- actions on one partition: switchover, pause ---

// partitionAction runs act on the node of p's current write region: here
// when that is this node, else the request is passed there (by the
// placement recorded in the spec). A refusal (failover.ErrRefused)
// answers 409 with the reason and the partition's explanation.
func (a *Agent) partitionAction(w http.ResponseWriter, r *http.Request, body []byte, p uint32,
	act func(h *host, now time.Duration, n *node.Node, s failover.State, ver uint64) (any, error)) {
	h := a.readyHost(w)
	if h == nil {
		return
	}
	id, ok := partitionID(w, strconv.FormatUint(uint64(p), 10), h)
	if !ok {
		return
	}
	if !h.hostsLocally(id) {
		if addr, ok := h.forwardTarget(id); ok {
			a.forward(w, r, addr, body)
			return
		}
		writeError(w, http.StatusNotFound, CodeRefused, fmt.Sprintf("agent: %s hosts no replica of partition %d and knows no node of its region that does", a.cfg.Name, id))
		return
	}
	var (
		res     any
		refused error
		explain string
		fwd     string
	)
	err := h.do(r.Context(), func(now time.Duration, n *node.Node) error {
		s, ver, ok := n.Manager().State(partition.RegisterKey(id))
		if !ok {
			return errNotHosted
		}
		if wr := string(s.WriteRegion); wr != a.cfg.Region {
			if nid, ok := h.nodeOfRegion(id, wr); ok {
				fwd = h.apiAddr(nid)
			}
			if fwd == "" {
				refused = fmt.Errorf("%w: partition %d's write region is %s and %s knows no API address of its node", failover.ErrRefused, id, wr, a.cfg.Name)
			}
			return nil
		}
		var err error
		res, err = act(h, now, n, s, ver)
		if errors.Is(err, failover.ErrRefused) {
			refused = err
			if ex, ok := a.explainOf(h, now, n, id); ok {
				explain = ex.Text
			}
			return nil
		}
		return err
	})
	switch {
	case a.writeDoError(w, h, id, err):
	case fwd != "":
		a.forward(w, r, fwd, body)
	case refused != nil:
		a.log.Info("operator request refused", "path", r.URL.Path, "partition", id, "why", refused)
		writeJSON(w, http.StatusConflict, RefusedBody{Error: refused.Error(), Code: CodeRefused, Reasons: []string{refused.Error()}, Explain: explain})
	default:
		w.Header().Set("Fm-Served-By", h.self.Name)
		if pr, ok := res.(*pendingRequest); ok {
			a.finishRequest(w, r, id, pr)
			return
		}
		writeJSON(w, http.StatusAccepted, res)
	}
}

// pendingRequest is an operator request whose register write the node
// follows (node.RequestDone): the answer waits for its end.
type pendingRequest struct {
	ended chan node.RequestOutcome
	// answer builds the response body from the outcome.
	answer func(node.RequestOutcome) any
}

func newPendingRequest(answer func(node.RequestOutcome) any) *pendingRequest {
	return &pendingRequest{ended: make(chan node.RequestOutcome, 1), answer: answer}
}

// done is the node's RequestDone; it runs on the node's loop and never
// blocks it (the channel holds the one outcome).
func (pr *pendingRequest) done(o node.RequestOutcome) {
	select {
	case pr.ended <- o:
	default:
	}
}

// finishRequest answers once the request's register write ended: 200
// with the version that holds it, 409 not_applied with the reason, or
// 504 outcome_unknown when the wait (opTimeout, or the caller's context)
// ends first.
func (a *Agent) finishRequest(w http.ResponseWriter, r *http.Request, id partition.ID, pr *pendingRequest) {
	ctx, cancel := context.WithTimeout(r.Context(), opTimeout)
	defer cancel()
	select {
	case o := <-pr.ended:
		if o.Err != nil {
			a.log.Warn("operator request not applied", "path", r.URL.Path, "partition", id, "tries", o.Tries, "why", o.Err)
			writeJSON(w, http.StatusConflict, RefusedBody{Error: o.Err.Error(), Code: CodeNotApplied, Reasons: []string{o.Err.Error()}})
			return
		}
		writeJSON(w, http.StatusOK, pr.answer(o))
	case <-ctx.Done():
		writeError(w, http.StatusGatewayTimeout, CodeUnknownOutcome, fmt.Sprintf(
			"agent: partition %d's register write did not end within %v (%v): it may still take effect; check the partition", id, opTimeout, ctx.Err()))
	}
}

func (a *Agent) serveSwitchover(w http.ResponseWriter, r *http.Request) {
	if !requireMethod(w, r, http.MethodPost) {
		return
	}
	body, req, ok := readBody[SwitchoverRequest](w, r)
	if !ok {
		return
	}
	reason := req.Reason
	if reason == "" {
		reason = "fmnode switchover"
	}
	a.partitionAction(w, r, body, req.Partition, func(h *host, now time.Duration, n *node.Node, s failover.State, ver uint64) (any, error) {
		to := partition.Region(req.To)
		switch {
		case !slices.Contains(h.spec.Regions, req.To):
			return nil, fmt.Errorf("%w: %q is not a region of this cluster (%v)", failover.ErrRefused, req.To, h.spec.Regions)
		case slices.Contains(s.NeverPromote, to):
			return nil, fmt.Errorf("%w: %s is a never-promote region of partition %d (%v; the cluster spec's never_promote or a drain): it is never made write region",
				failover.ErrRefused, req.To, req.Partition, s.NeverPromote)
		}
		if err := n.Switchover(now, partition.ID(req.Partition), to, reason); err != nil {
			return nil, err
		}
		a.log.Info("operator switchover proposed", "partition", req.Partition, "from", s.WriteRegion, "to", req.To, "reason", reason)
		return SwitchoverResponse{Partition: req.Partition, From: string(s.WriteRegion), To: req.To, Epoch: uint64(s.Epoch), Version: ver,
			Node: h.self.Name, RequestedAt: wall(now)}, nil
	})
}

func (a *Agent) servePause(w http.ResponseWriter, r *http.Request) {
	if !requireMethod(w, r, http.MethodPost) {
		return
	}
	body, req, ok := readBody[PauseRequest](w, r)
	if !ok {
		return
	}
	reason := req.Reason
	if reason == "" {
		reason = map[bool]string{true: "fmnode pause", false: "fmnode resume"}[req.Paused]
	}
	if req.Partition != 0 {
		a.partitionAction(w, r, body, req.Partition, func(h *host, now time.Duration, n *node.Node, _ failover.State, _ uint64) (any, error) {
			pr := newPendingRequest(func(o node.RequestOutcome) any {
				return PauseResponse{Partition: req.Partition, Paused: req.Paused, Version: o.Version, Already: o.Already,
					Agents: []AgentAnswer{{Node: h.self.Name, OK: true}}}
			})
			if err := n.SetPaused(now, partition.ID(req.Partition), req.Paused, reason, pr.done); err != nil {
				return nil, err
			}
			a.log.Info("operator pause", "partition", req.Partition, "paused", req.Paused, "reason", reason)
			return pr, nil
		})
		return
	}
	h := a.readyHost(w)
	if h == nil {
		return
	}
	if req.Local {
		a.serveLocalPause(w, r, h, req.Paused)
		return
	}
	a.serveGlobalPause(w, r, h, req.Paused, reason)
}

// serveGlobalPause commits the pause to the cluster spec, so that it
// survives restarts and reaches agents that are down now, then asks every
// agent to read the spec and answer whether it applied it. An agent that
// does not answer is not a failure of the pause: it applies it at its
// next read of the spec (at start, or within the spec poll interval).
func (a *Agent) serveGlobalPause(w http.ResponseWriter, r *http.Request, h *host, paused bool, reason string) {
	value := ""
	if paused {
		value = reason
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	var ver uint64
	for attempt := 0; ; attempt++ {
		spec, cur, err := a.readSpec(ctx, h.spec)
		if err == nil && spec.Pause == value {
			ver = cur // already so: nothing to commit
			break
		}
		var out SpecResponse
		if err == nil {
			out, err = a.casSpec(ctx, spec, cur, clusterspec.Change{Key: "pause", Value: value})
		}
		if err == nil {
			ver = out.Version
			break
		}
		// A concurrent change of another key: read again and retry.
		if errors.Is(err, sysreg.ErrConflict) && attempt < 3 {
			continue
		}
		a.writeSpecError(w, err)
		return
	}
	a.log.Info("operator global pause", "paused", paused, "reason", reason, "spec_version", ver)
	local, _ := json.Marshal(PauseRequest{Paused: paused, Local: true})
	out := PauseResponse{Paused: paused, SpecVersion: ver}
	for _, ans := range a.fanOut(r.Context(), r, h.spec.Nodes, http.MethodPost, PathPause, local) {
		msg := ans.answerErr()
		if msg != "" {
			msg += "; it applies the pause at its next read of the cluster spec"
		}
		out.Agents = append(out.Agents, AgentAnswer{Node: ans.node.Name, OK: msg == "", Error: msg})
	}
	writeJSON(w, http.StatusOK, out)
}

// serveLocalPause reads the cluster spec now and applies its pause; it
// answers whether this agent's failover manager is now as asked.
func (a *Agent) serveLocalPause(w http.ResponseWriter, r *http.Request, h *host, paused bool) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := a.refreshSpec(ctx); err != nil {
		a.writeSpecError(w, err)
		return
	}
	c := a.spec.Load()
	if err := h.applyPause(ctx, *c); err != nil {
		a.writeLoopError(w, err)
		return
	}
	if got := c.spec.Pause != ""; got != paused {
		writeError(w, http.StatusConflict, CodeConflict, fmt.Sprintf("agent: the cluster spec (version %d) says paused=%v: changed again since", c.version, got))
		return
	}
	writeJSON(w, http.StatusOK, PauseResponse{Paused: paused, SpecVersion: c.version, Agents: []AgentAnswer{{Node: h.self.Name, OK: true}}})
}

// --- drains ---

func (a *Agent) serveDrain(w http.ResponseWriter, r *http.Request) {
	if !requireMethod(w, r, http.MethodGet, http.MethodPost) {
		return
	}
	h := a.readyHost(w)
	if h == nil {
		return
	}
	var req DrainRequest
	if r.Method == http.MethodGet {
		req.Region, req.Local = r.URL.Query().Get("region"), r.URL.Query().Get("local") != ""
	} else {
		var ok bool
		if _, req, ok = readBody[DrainRequest](w, r); !ok {
			return
		}
	}
	a.drain(w, r, h, req)
}

func (a *Agent) drain(w http.ResponseWriter, r *http.Request, h *host, req DrainRequest) {
	if !slices.Contains(h.spec.Regions, req.Region) {
		writeJSON(w, http.StatusConflict, RefusedBody{Error: fmt.Sprintf("agent: %q is not a region of this cluster (%v)", req.Region, h.spec.Regions), Code: CodeRefused,
			Reasons: []string{fmt.Sprintf("%q is not a region of this cluster (%v)", req.Region, h.spec.Regions)}})
		return
	}
	reason := req.Reason
	if reason == "" {
		reason = "fmnode drain"
	}
	if req.Local {
		if a.cfg.Region != req.Region {
			writeError(w, http.StatusConflict, CodeRefused, fmt.Sprintf("agent: %s is in %s, not %s: the nodes of the drained region propose its switchovers", a.cfg.Name, a.cfg.Region, req.Region))
			return
		}
		dv := DrainView{Region: req.Region, Node: h.self.Name}
		err := h.do(r.Context(), func(now time.Duration, n *node.Node) error {
			switch {
			case r.Method == http.MethodGet:
			case req.Stop:
				n.StopDrain(partition.Region(req.Region))
			default:
				n.Drain(now, partition.Region(req.Region), reason)
			}
			dv.Remaining, dv.Active = n.Manager().Draining(partition.Region(req.Region))
			return nil
		})
		if err != nil {
			a.writeLoopError(w, err)
			return
		}
		if r.Method == http.MethodPost {
			a.log.Info("operator drain", "region", req.Region, "stop", req.Stop, "reason", reason, "remaining", dv.Remaining)
		}
		writeJSON(w, http.StatusOK, dv)
		return
	}
	// The nodes of the region drive the switchovers of the partitions
	// they host (each partition has one replica there): each is told, and
	// the progress is their sum.
	nodes := h.spec.RegionNodes(req.Region)
	var body []byte
	pathQuery := PathDrain + "?local=1&region=" + url.QueryEscape(req.Region)
	method := r.Method
	if method == http.MethodPost {
		body, _ = json.Marshal(DrainRequest{Region: req.Region, Reason: reason, Stop: req.Stop, Local: true})
		pathQuery = PathDrain
	}
	// Each node's outcome is in the body (Error: not applied there).
	out := DrainResponse{Region: req.Region}
	for _, ans := range a.fanOut(r.Context(), r, nodes, method, pathQuery, body) {
		dv := DrainView{Region: req.Region, Node: ans.node.Name}
		if msg := ans.answerErr(); msg != "" {
			dv.Error = msg
		} else if err := json.Unmarshal(ans.body, &dv); err != nil {
			dv.Error = "decode: " + err.Error()
		}
		out.Remaining += dv.Remaining
		out.Active = out.Active || dv.Active
		out.Nodes = append(out.Nodes, dv)
	}
	writeJSON(w, http.StatusOK, out)
}

// readBody reads a bounded JSON body into a T and returns the raw body
// too (to pass it on).
func readBody[T any](w http.ResponseWriter, r *http.Request) ([]byte, T, bool) {
	var v T
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, dataapi.CodeTooLarge, fmt.Sprintf("agent: body over %d bytes or unreadable: %v", maxAdminBody, err))
		return nil, v, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		writeError(w, http.StatusBadRequest, "bad_body", "agent: "+err.Error())
		return nil, v, false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "bad_body", "agent: trailing data after the JSON object")
		return nil, v, false
	}
	return body, v, true
}

// writeDoError answers a failed call into partition id's node: 503 while
// the node knows no register value for it, the loop's error otherwise. It
// reports whether it wrote a response.
func (a *Agent) writeDoError(w http.ResponseWriter, h *host, id partition.ID, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, errNotHosted):
		writeError(w, http.StatusServiceUnavailable, CodeNotReady, fmt.Sprintf("agent: %s does not know partition %d's register value yet", h.self.Name, id))
	default:
		a.writeLoopError(w, err)
	}
	return true
}
