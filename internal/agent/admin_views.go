package agent

import (
	"fmt"
	"slices"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/clusterspec"
	"github.com/fmnode/fmnode/internal/membership"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/partition"
)

// The JSON bodies of the operator endpoints (admin_ops.go). Times are
// wall-clock instants (the node clock is the wall clock).

// NodeView is one node of the spec as the answering agent sees it:
// gossip's state and the failover core's own liveness verdict.
type NodeView struct {
	ID      uint16 `json:"id"`
	Name    string `json:"name"`
	Region  string `json:"region"`
	Zone    string `json:"zone"`
	APIAddr string `json:"api_addr"`
	// Membership is gossip's view: alive, dead, left or unknown.
	Membership string `json:"membership"`
	// Failover is the failover core's: alive, suspect (this node
	// suspects it), dead (declared failed by a quorum of observers) or
	// self.
	Failover string `json:"failover"`
	Self     bool   `json:"self,omitempty"`
}

// LeaseView is a node's own lease.
type LeaseView struct {
	Valid bool      `json:"valid"`
	Until time.Time `json:"until"`
}

// PartitionBrief is a partition's register value in short.
type PartitionBrief struct {
	ID          uint32    `json:"id"`
	Epoch       uint64    `json:"epoch"`
	WriteRegion string    `json:"write_region"`
	Phase       string    `json:"phase"`
	Target      string    `json:"target,omitempty"`
	Since       time.Time `json:"since,omitzero"`
	Paused      bool      `json:"paused,omitempty"`
	Version     uint64    `json:"version"`
}

// DrainView is the progress of a drain one node runs.
type DrainView struct {
	Region    string `json:"region"`
	Node      string `json:"node"`
	Active    bool   `json:"active"`
	Remaining int    `json:"remaining"`
	Error     string `json:"error,omitempty"`
}

// LocalStatus is GET /v1/admin/status?local=1: what one agent knows.
type LocalStatus struct {
	NodeID            uint16           `json:"node_id"`
	Name              string           `json:"name"`
	Region            string           `json:"region"`
	Boot              uint64           `json:"boot"`
	SpecVersion       uint64           `json:"spec_version"`
	Lease             LeaseView        `json:"lease"`
	GlobalPause       bool             `json:"global_pause,omitempty"`
	GlobalPauseReason string           `json:"global_pause_reason,omitempty"`
	Drains            []DrainView      `json:"drains,omitempty"`
	Nodes             []NodeView       `json:"nodes"`
	Partitions        []PartitionBrief `json:"partitions"`
}

// AgentAnswer is one agent's part of a fanned-out call.
type AgentAnswer struct {
	Node  string `json:"node"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// ClusterNode is a node in the cluster status: the answering agent's
// view of it, and what it said of itself when it answered.
type ClusterNode struct {
	NodeView
	Reached           bool       `json:"reached"`
	Error             string     `json:"error,omitempty"`
	Lease             *LeaseView `json:"lease,omitempty"`
	GlobalPause       bool       `json:"global_pause,omitempty"`
	GlobalPauseReason string     `json:"global_pause_reason,omitempty"`
}

// RegionView is one region in the cluster status.
type RegionView struct {
	Name            string   `json:"name"`
	Preferred       bool     `json:"preferred,omitempty"`
	NeverPromote    bool     `json:"never_promote,omitempty"`
	Nodes           []string `json:"nodes"`
	WritePartitions []uint32 `json:"write_partitions"`
}

// ClusterStatus is GET /v1/admin/status: the answering agent's view,
// completed by every other agent's own status (fanned out, each bounded
// by a timeout; an agent that does not answer is listed as not reached).
// Partitions carry the newest register value any agent reported.
type ClusterStatus struct {
	Answered    string           `json:"answered_by"`
	SpecVersion uint64           `json:"spec_version"`
	Regions     []RegionView     `json:"regions"`
	Nodes       []ClusterNode    `json:"nodes"`
	Partitions  []PartitionBrief `json:"partitions"`
	InProgress  []PartitionBrief `json:"in_progress"`
	Drains      []DrainView      `json:"drains,omitempty"`
}

// MemberView is one row of the membership table.
type MemberView struct {
	NodeID   uint16 `json:"node_id"`
	Name     string `json:"name"`
	Region   string `json:"region"`
	Zone     string `json:"zone"`
	State    string `json:"state"`
	Gossip   string `json:"gossip_addr"`
	NodeAddr string `json:"node_addr"`
	APIAddr  string `json:"api_addr"`
	DNSAddr  string `json:"dns_addr,omitempty"`
	Version  string `json:"version,omitempty"`
	InSpec   bool   `json:"in_spec"`
}

// MembersResponse is GET /v1/admin/members.
type MembersResponse struct {
	Answered string       `json:"answered_by"`
	Members  []MemberView `json:"members"`
}

// EpochView is one row of a partition's progress table.
type EpochView struct {
	Epoch       uint64 `json:"epoch"`
	StartLSN    uint64 `json:"start_lsn"`
	EndLSN      uint64 `json:"end_lsn,omitempty"`
	Open        bool   `json:"open,omitempty"`
	WriteRegion string `json:"write_region"`
}

// ReplicaView is one replica region of a partition as the answering node
// knows it; Lag is the LSNs it is behind the most advanced replica known
// (nil when its position is unknown here: only the write region's node
// hears every follower's).
type ReplicaView struct {
	Region        string  `json:"region"`
	Node          uint16  `json:"node"`
	Live          bool    `json:"live"`
	Reported      bool    `json:"reported"`
	Epoch         uint64  `json:"epoch,omitempty"`
	LastLSN       uint64  `json:"last_lsn,omitempty"`
	Lag           *uint64 `json:"lag,omitempty"`
	InWriteQuorum bool    `json:"in_write_quorum"`
	InSync        bool    `json:"in_sync,omitempty"`
	Fenced        bool    `json:"fenced,omitempty"`
	Stalled       string  `json:"stalled,omitempty"`
}

// PartitionDetail is GET /v1/admin/partition?id=P.
type PartitionDetail struct {
	ID            uint32        `json:"id"`
	Answered      string        `json:"answered_by"`
	Epoch         uint64        `json:"epoch"`
	WriteRegion   string        `json:"write_region"`
	Phase         string        `json:"phase"`
	Target        string        `json:"target,omitempty"`
	Version       uint64        `json:"version"`
	Consistency   string        `json:"consistency"`
	WriteQuorum   []string      `json:"write_quorum"`
	MinDurability int           `json:"min_durability"`
	Priority      []string      `json:"priority"`
	NeverPromote  []string      `json:"never_promote,omitempty"`
	Paused        bool          `json:"paused,omitempty"`
	PauseReason   string        `json:"pause_reason,omitempty"`
	Table         []EpochView   `json:"progress_table"`
	Replicas      []ReplicaView `json:"replicas"`
	// ReplicasFrom names the write region's node when the replicas are
	// its view (only it hears every replica's progress); ReplicasNote
	// says why the lags are missing when it could not be asked.
	ReplicasFrom string `json:"replicas_from,omitempty"`
	ReplicasNote string `json:"replicas_note,omitempty"`
}

// CandidateView is one ranked candidate for the write region.
type CandidateView struct {
	Region   string `json:"region"`
	Eligible bool   `json:"eligible"`
	Why      string `json:"why"`
	Priority int    `json:"priority"`
	Epoch    uint64 `json:"epoch"`
	LastLSN  uint64 `json:"last_lsn"`
	LagOps   uint64 `json:"lag_ops"`
}

// ExplainResponse is GET /v1/admin/explain?id=P: the decision the
// answering node's evidence leads to now, the ranked candidates, each
// replica's lag, the policy that blocks (Suppressed) and the manager's
// last recorded decision. Text is failover.Explain's rendering.
type ExplainResponse struct {
	ID                uint32          `json:"id"`
	Answered          string          `json:"answered_by"`
	Decision          string          `json:"decision"`
	Target            string          `json:"target,omitempty"`
	Reasons           []string        `json:"reasons,omitempty"`
	Suppressed        string          `json:"blocked_by,omitempty"`
	Candidates        []CandidateView `json:"candidates"`
	Replicas          []ReplicaView   `json:"replicas"`
	LastDecision      string          `json:"last_decision"`
	LastSuppressed    string          `json:"last_blocked_by,omitempty"`
	WriteRegionFailed bool            `json:"write_region_failed,omitempty"`
	FailureWhy        string          `json:"failure_why,omitempty"`
	Text              string          `json:"text"`
}

// TransitionView is one transition of a partition's register history.
type TransitionView struct {
	Epoch uint64    `json:"epoch"`
	At    time.Time `json:"at"`
	Kind  string    `json:"kind"`
	From  string    `json:"from,omitempty"`
	To    string    `json:"to,omitempty"`
	// Who proposed it (the proposer's region) and why, with the evidence
	// it acted on.
	Who string `json:"who"`
	Why string `json:"why"`
}

// PartitionHistory is one partition's history and the manager's recent
// events for it (what it decided or refused and why).
type PartitionHistory struct {
	ID          uint32           `json:"id"`
	Epoch       uint64           `json:"epoch"`
	WriteRegion string           `json:"write_region"`
	Transitions []TransitionView `json:"transitions"`
	Events      []string         `json:"events,omitempty"`
}

// HistoryResponse is GET /v1/admin/history[?id=P].
type HistoryResponse struct {
	Answered   string             `json:"answered_by"`
	Partitions []PartitionHistory `json:"partitions"`
}

// SwitchoverRequest is POST /v1/admin/switchover.
type SwitchoverRequest struct {
	Partition uint32 `json:"partition"`
	To        string `json:"to"`
	Reason    string `json:"reason,omitempty"`
}

// SwitchoverResponse: the switchover was proposed by the write region's
// node; its register shows it as phase switchover, then the new write
// region (or an abort-switchover transition saying why).
type SwitchoverResponse struct {
	Partition   uint32    `json:"partition"`
	From        string    `json:"from"`
	To          string    `json:"to"`
	Epoch       uint64    `json:"epoch"`
	Version     uint64    `json:"version"`
	Node        string    `json:"node"`
	RequestedAt time.Time `json:"requested_at"`
}

// PauseRequest is POST /v1/admin/pause: Partition 0 is the global pause,
// recorded in the cluster spec (key "pause") and then applied by every
// agent; Local asks one agent to read the spec and apply it now.
type PauseRequest struct {
	Partition uint32 `json:"partition,omitempty"`
	Paused    bool   `json:"paused"`
	Reason    string `json:"reason,omitempty"`
	Local     bool   `json:"local,omitempty"`
}

// PauseResponse lists who applied it.
type PauseResponse struct {
	Partition uint32 `json:"partition,omitempty"`
	Paused    bool   `json:"paused"`
	// SpecVersion is the cluster spec version that records a global
	// pause (0 for one partition's, which its register records).
	SpecVersion uint64 `json:"spec_version,omitempty"`
	// Version is the register version that holds one partition's pause
	// (committed, or already so: Already).
	Version uint64        `json:"version,omitempty"`
	Already bool          `json:"already,omitempty"`
	Agents  []AgentAnswer `json:"agents"`
}

// DrainRequest is POST /v1/admin/drain: start (or resume) the drain of
// Region, or Stop it, on every node of the region (they propose the
// switchovers of the partitions they host), unless Local.
type DrainRequest struct {
	Region string `json:"region"`
	Reason string `json:"reason,omitempty"`
	Stop   bool   `json:"stop,omitempty"`
	Local  bool   `json:"local,omitempty"`
}

// DrainResponse is the drain's progress on every node of the region
// (also GET /v1/admin/drain?region=R).
type DrainResponse struct {
	Region    string      `json:"region"`
	Remaining int         `json:"remaining"`
	Active    bool        `json:"active"`
	Nodes     []DrainView `json:"nodes"`
}

// RefusedBody is a refused operator action: the error, the reasons and
// the explanation of the partition (failover.Explain) when there is one.
type RefusedBody struct {
	Error   string   `json:"error"`
	Code    string   `json:"code"`
	Reasons []string `json:"reasons"`
	Explain string   `json:"explain,omitempty"`
}

// nodeViews is the agent's view of every spec node (runs in the loop).
func (h *host) nodeViews(now time.Duration, n *node.Node) []NodeView {
	gossip := map[uint16]string{}
	if m := h.a.members; m != nil {
		for _, mem := range m.Members() {
			gossip[mem.NodeID] = mem.State.String()
		}
	}
	live := n.Manager().Liveness()
	out := make([]NodeView, 0, len(h.spec.Nodes))
	for _, sn := range h.spec.Nodes {
		v := NodeView{ID: sn.ID, Name: sn.Name, Region: sn.Region, Zone: sn.Zone, APIAddr: h.apiAddr(node.NodeID(sn.ID)), Membership: "unknown"}
		if g, ok := gossip[sn.ID]; ok {
			v.Membership = g
		}
		id := node.NodeID(sn.ID)
		switch failed, _, _ := live.Failed(id, now); {
		case sn.ID == h.self.ID:
			v.Failover, v.Self = "self", true
		case failed:
			v.Failover = "dead"
		case live.Suspects(id):
			v.Failover = "suspect"
		default:
			v.Failover = "alive"
		}
		out = append(out, v)
	}
	return out
}

func briefOf(id partition.ID, s failover.State, ver uint64) PartitionBrief {
	b := PartitionBrief{ID: uint32(id), Epoch: uint64(s.Epoch), WriteRegion: string(s.WriteRegion), Phase: s.Phase.String(), Paused: s.Paused, Version: ver}
	if s.Phase == failover.PhaseSwitchover {
		b.Target, b.Since = string(s.Target), wall(s.PhaseSince)
	}
	return b
}

// wall is a node-clock instant as wall-clock time (noderun.WallClock is
// nanoseconds since the Unix epoch).
func wall(d time.Duration) time.Time { return time.Unix(0, int64(d)).UTC() }

// partitionEvents are the last maxEventsShown of the manager's events for
// register name, one line each: when, the kind, the reasons.
func partitionEvents(events []failover.Event, name string) []string {
	var out []string
	for _, e := range events {
		if e.Partition == name {
			out = append(out, fmt.Sprintf("%s %v: %s", wall(e.At).Format(time.RFC3339Nano), e.Kind, e.Text))
		}
	}
	if len(out) > maxEventsShown {
		out = out[len(out)-maxEventsShown:]
	}
	return out
}

func regionStrings[R ~string](rs []R) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, string(r))
	}
	return out
}

// replicaViews are the replicas with their lag behind the most advanced
// one known.
func replicaViews(s failover.State, ev failover.Evidence, pl node.Placement) []ReplicaView {
	var best uint64
	for _, r := range ev.Replicas {
		if r.Reported {
			best = max(best, uint64(r.LastLSN))
		}
	}
	out := make([]ReplicaView, 0, len(ev.Replicas))
	for _, r := range ev.Replicas {
		v := ReplicaView{Region: string(r.Region), Live: r.Live, Reported: r.Reported, InWriteQuorum: s.WriteQuorum.IsMember(r.Region),
			InSync: r.InSync, Fenced: r.Fenced, Stalled: r.Stalled}
		for _, rn := range pl.Replicas {
			if rn.Region == r.Region {
				v.Node = uint16(rn.Node)
			}
		}
		if r.Reported {
			lag := best - uint64(r.LastLSN)
			v.Epoch, v.LastLSN, v.Lag = uint64(r.Epoch), uint64(r.LastLSN), &lag
		}
		out = append(out, v)
	}
	return out
}

func candidateViews(cs []failover.Candidate) []CandidateView {
	out := make([]CandidateView, 0, len(cs))
	for _, c := range cs {
		out = append(out, CandidateView{Region: string(c.Region), Eligible: c.Eligible, Why: c.Why, Priority: c.Priority,
			Epoch: uint64(c.Epoch), LastLSN: uint64(c.LastLSN), LagOps: c.LagOps})
	}
	return out
}

func transitionViews(ts []failover.Transition) []TransitionView {
	out := make([]TransitionView, 0, len(ts))
	for _, t := range ts {
		out = append(out, TransitionView{Epoch: uint64(t.Epoch), At: wall(t.At), Kind: t.Kind.String(), From: string(t.From), To: string(t.To),
			Who: string(t.Proposer), Why: t.Reason})
	}
	return out
}

func memberViews(ms []membership.Member, spec *clusterspec.Spec) []MemberView {
	out := make([]MemberView, 0, len(ms))
	for _, m := range ms {
		v := MemberView{NodeID: m.NodeID, Name: m.Name, Region: m.Region, Zone: m.Zone, State: m.State.String(), Gossip: m.Addr,
			NodeAddr: m.NodeAddr, APIAddr: m.APIAddr, DNSAddr: m.DNSAddr, Version: m.Version}
		if spec != nil {
			_, v.InSpec = spec.Node(m.NodeID)
		}
		out = append(out, v)
	}
	return out
}

func sortBriefs(bs []PartitionBrief) {
	slices.SortFunc(bs, func(a, b PartitionBrief) int { return int(a.ID) - int(b.ID) })
}
