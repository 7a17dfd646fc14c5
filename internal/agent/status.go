package agent

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/partition"
)

// PathPartitions lists what this agent hosts (GET; ?id=P for one).
const PathPartitions = "/v1/admin/partitions"

// maxConflictsShown bounds the conflict records counted per partition.
const maxConflictsShown = 1000

// maxEventsShown bounds the manager events shown per partition.
const maxEventsShown = 16

// PartitionStatus is one hosted replica as its agent sees it: the data
// plane's progress, the register value the node knows, and how many of
// its operations ended in the conflict record (false progress).
type PartitionStatus struct {
	ID          uint32   `json:"id"`
	Role        string   `json:"role"`
	Epoch       uint64   `json:"epoch"`
	WriteRegion string   `json:"write_region"`
	LastLSN     uint64   `json:"last_lsn"`
	LastEpoch   uint64   `json:"last_epoch"`
	CommitLSN   uint64   `json:"commit_lsn"`
	AppliedLSN  uint64   `json:"applied_lsn"`
	Quorum      []string `json:"write_quorum"`
	History     []Range  `json:"history"`
	Followers   []Follow `json:"followers,omitempty"`
	// Register is the failover register's value as this node knows it.
	RegisterEpoch       uint64   `json:"register_epoch"`
	RegisterWriteRegion string   `json:"register_write_region"`
	RegisterVersion     uint64   `json:"register_version"`
	NeverPromote        []string `json:"never_promote,omitempty"`
	// RegisterQuorum is the write quorum the register records (the data
	// plane's commit rule may already count a region ahead of it).
	RegisterQuorum []string `json:"register_write_quorum,omitempty"`
	// Conflicts counts the conflict records, at most maxConflictsShown.
	Conflicts int `json:"conflicts"`
	// Events are the failover manager's last events for the partition:
	// what it decided and why.
	Events []string `json:"events,omitempty"`
	// EpochSeenAt is when this node first saw epoch SeenEpoch (its newest)
	// committed, on its wall clock; FailoverProposedAt when it first
	// proposed a failover into FailoverEpoch (zero: it never did). A
	// drill measures detection (the earliest proposal over the nodes)
	// and failover completion (the earliest sight of the new epoch: the
	// proposer's own commit) from them.
	SeenEpoch          uint64    `json:"seen_epoch,omitempty"`
	EpochSeenAt        time.Time `json:"epoch_seen_at,omitzero"`
	FailoverEpoch      uint64    `json:"failover_epoch,omitempty"`
	FailoverProposedAt time.Time `json:"failover_proposed_at,omitzero"`
	// PromotedAt is when this node's replica became write region of
	// PromotedEpoch (zero: never since the start): from the commit to
	// it is the promotion, the part of a client's reroute on the nodes.
	PromotedEpoch uint64    `json:"promoted_epoch,omitempty"`
	PromotedAt    time.Time `json:"promoted_at,omitzero"`
}

// Range is one epoch of a replica's history: it starts after LSN After.
type Range struct {
	Epoch uint64 `json:"epoch"`
	After uint64 `json:"after"`
}

// Follow is the write region's view of one follower.
type Follow struct {
	Region string `json:"region"`
	Match  uint64 `json:"match"`
}

// DriverStats are the runtime driver's counters.
type DriverStats struct {
	Readys, Commits, Dropped, StepErrors, SendErrors uint64
	// DataBytesReceived: keys and values of the replicated ops and
	// snapshot pairs this node received since it started (what a
	// returning node's re-sync cost, against a full copy).
	DataBytesReceived uint64
}

// PeerStats is the node transport's view of one peer.
type PeerStats struct {
	Connected                          bool
	Sent, Received, Dropped, Reconnect uint64
}

// NodeStatus is GET /v1/admin/partitions's body.
type NodeStatus struct {
	Node       uint16                `json:"node_id"`
	Region     string                `json:"region"`
	Boot       uint64                `json:"boot"`
	Snapshots  uint64                `json:"snapshots_started"`
	Manager    failover.ManagerStats `json:"manager"`
	Driver     DriverStats           `json:"driver"`
	Peers      map[string]PeerStats  `json:"peers"`
	Partitions []PartitionStatus     `json:"partitions"`
}

func (a *Agent) servePartitions(w http.ResponseWriter, r *http.Request) {
	if !requireMethod(w, r, http.MethodGet) {
		return
	}
	h := a.host.Load()
	if h == nil {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "not_ready", a.notReadyReason())
		return
	}
	var only partition.ID
	if s := r.URL.Query().Get("id"); s != "" {
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil || v == 0 {
			writeError(w, http.StatusBadRequest, "bad_request", "agent: id: not a partition id: "+s)
			return
		}
		only = partition.ID(v)
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	st := NodeStatus{Node: h.self.ID, Region: a.cfg.Region, Boot: a.dir.Boot()}
	err := h.drv.Do(ctx, func(_ time.Duration, n *node.Node) error {
		st.Snapshots = n.Host().Stats().SnapshotsStarted
		st.Manager = n.Manager().Stats()
		events := n.Manager().Events()
		for _, id := range n.Host().Partitions() {
			if only != 0 && id != only {
				continue
			}
			pr, err := n.Host().ProgressWithoutHistory(id, nil)
			if err != nil {
				continue
			}
			full, err := n.Host().Progress(id)
			if err == nil {
				pr = full
			}
			ps := PartitionStatus{ID: uint32(id), Role: pr.Role.String(), Epoch: uint64(pr.Epoch), WriteRegion: string(pr.WriteRegion),
				LastLSN: uint64(pr.LastLSN), LastEpoch: uint64(pr.LastEpoch), CommitLSN: uint64(pr.CommitLSN), AppliedLSN: uint64(pr.AppliedLSN)}
			ps.Quorum = regionStrings(pr.Quorum.Members)
			for _, e := range pr.History {
				ps.History = append(ps.History, Range{Epoch: uint64(e.Epoch), After: uint64(e.After)})
			}
			for _, f := range pr.Followers {
				ps.Followers = append(ps.Followers, Follow{Region: string(f.Region), Match: uint64(f.Match)})
			}
			if s, ver, ok := n.Manager().State(partition.RegisterKey(id)); ok {
				ps.RegisterEpoch, ps.RegisterWriteRegion, ps.RegisterVersion = uint64(s.Epoch), string(s.WriteRegion), ver
				ps.NeverPromote, ps.RegisterQuorum = regionStrings(s.NeverPromote), regionStrings(s.WriteQuorum.Members)
			}
			ps.Events = partitionEvents(events, partition.RegisterKey(id))
			mk := a.metrics.obs.mark(id)
			ps.SeenEpoch, ps.EpochSeenAt = uint64(mk.Epoch), mk.SeenAt
			ps.FailoverEpoch, ps.FailoverProposedAt = uint64(mk.FailoverEpoch), mk.FailoverAt
			ps.PromotedEpoch, ps.PromotedAt = uint64(mk.PromotedEpoch), mk.PromotedAt
			st.Partitions = append(st.Partitions, ps)
		}
		return nil
	})
	if err != nil {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "agent: the node did not answer: "+err.Error())
		return
	}
	ds := h.drv.Stats()
	st.Driver = DriverStats{Readys: ds.Readys.Load(), Commits: ds.Commits.Load(), Dropped: ds.Dropped.Load(),
		StepErrors: ds.StepErrors.Load(), SendErrors: ds.SendErrors.Load(), DataBytesReceived: ds.DataBytesReceived.Load()}
	st.Peers = map[string]PeerStats{}
	for id, ps := range h.tr.Stats() {
		st.Peers[strconv.Itoa(int(id))] = PeerStats{Connected: ps.Connected, Sent: ps.Sent, Received: ps.Received, Dropped: ps.Dropped, Reconnect: ps.Reconnects}
	}
	// The store is safe to read beside the loop (pebble reads a
	// consistent view); conflict records are never rewritten.
	for i := range st.Partitions {
		cs, err := a.partst.Conflicts(partition.ID(st.Partitions[i].ID), partition.Token{}, maxConflictsShown)
		if err == nil {
			st.Partitions[i].Conflicts = len(cs)
		}
	}
	writeJSON(w, http.StatusOK, st)
}

// behind counts the hosted replicas whose register value the node does
// not know yet, or whose epoch is older than the register's (readiness).
func (h *host) behind(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	n := 0
	err := h.drv.Do(ctx, func(_ time.Duration, nd *node.Node) error {
		for _, id := range nd.Host().Partitions() {
			s, _, ok := nd.Manager().State(partition.RegisterKey(id))
			pr, err := nd.Host().ProgressWithoutHistory(id, nil)
			if !ok || err != nil || uint64(pr.Epoch) < uint64(s.Epoch) {
				n++
			}
		}
		return nil
	})
	return n, err
}
