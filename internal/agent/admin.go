package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/fmnode/fmnode/internal/clusterspec"
	"github.com/fmnode/fmnode/internal/membership"
	"github.com/fmnode/fmnode/internal/sysreg"
)

// InitRequest is the body of POST /v1/admin/init: the cluster-wide
// settings. The agent fills in the cluster label and the nodes (every
// alive member; placement is computed from them and recorded).
type InitRequest struct {
	Spec clusterspec.Spec `json:"spec"`
	// ExpectNodes, when set, makes the agent wait (at most WaitSeconds)
	// until that many members are alive, so a scripted init does not
	// record a half-joined cluster.
	ExpectNodes int `json:"expect_nodes,omitempty"`
	WaitSeconds int `json:"wait_seconds,omitempty"`
}

// SpecResponse is the body of a successful init, GET /v1/admin/spec and a
// successful PUT.
type SpecResponse struct {
	Version uint64           `json:"version"`
	Spec    clusterspec.Spec `json:"spec"`
	Changed []string         `json:"changed,omitempty"`
}

// SetRequest is the body of PUT /v1/admin/spec: one key to change, by
// CAS on Version when it is set (0: on whatever is current).
type SetRequest struct {
	Key     string `json:"key"`
	Value   string `json:"value"`
	Version uint64 `json:"version,omitempty"`
}

// maxInitWait bounds InitRequest.WaitSeconds.
const maxInitWait = 5 * time.Minute

// Codes of the admin errors (the JSON body's code).
const (
	CodeAlreadyInitialized = "already_initialized"
	CodeNotInitialized     = "not_initialized"
	CodeInvalidSpec        = "invalid_spec"
	CodeNoQuorum           = "no_quorum"
	CodeConflict           = "conflict"
)

func (a *Agent) serveInit(w http.ResponseWriter, r *http.Request) {
	if !requireMethod(w, r, http.MethodPost) {
		return
	}
	var req InitRequest
	if !readJSON(w, r, &req) {
		return
	}
	if c := a.spec.Load(); c != nil {
		writeError(w, http.StatusConflict, CodeAlreadyInitialized, fmt.Sprintf("agent: the cluster is already initialised (spec version %d); change it with `fmnode config set`", c.version))
		return
	}
	wait := time.Duration(req.WaitSeconds) * time.Second
	if req.WaitSeconds < 0 || wait > maxInitWait {
		writeError(w, http.StatusBadRequest, CodeInvalidSpec, fmt.Sprintf("agent: wait_seconds: must be in 0..%d", int(maxInitWait.Seconds())))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait+30*time.Second)
	defer cancel()
	members, err := a.awaitMembers(ctx, req.ExpectNodes, wait)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, CodeNoQuorum, err.Error())
		return
	}
	spec := req.Spec
	spec.Cluster = a.cfg.Cluster
	spec.Nodes = nil
	regions := map[string]bool{}
	for _, m := range members {
		spec.Nodes = append(spec.Nodes, clusterspec.Node{ID: m.NodeID, Name: m.Name, Region: m.Region, Zone: m.Zone,
			NodeAddr: m.NodeAddr, APIAddr: m.APIAddr, DNSAddr: m.DNSAddr})
		regions[m.Region] = true
	}
	if len(spec.Regions) == 0 {
		for r := range regions {
			spec.Regions = append(spec.Regions, r)
		}
		slices.Sort(spec.Regions)
	}
	value, err := clusterspec.Encode(spec)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidSpec, err.Error())
		return
	}
	ver, err := a.sysClient().Init(ctx, a.sysPeers(spec), value)
	if err != nil {
		a.writeRegisterError(w, err)
		return
	}
	a.log.Info("cluster initialised", "version", ver, "nodes", len(spec.Nodes), "partitions", spec.Partitions, "regions", spec.Regions)
	// Init committed the spec at ver: this agent runs under it at once,
	// not after reading the register back (under overload that read
	// competed with every other waiting agent's and could fail for
	// minutes, leaving the very agent that initialised waiting).
	if err := a.adoptSpec(committed{spec: spec, version: ver}, "init"); err != nil {
		a.log.Warn("adopt the initial spec", "err", err)
	}
	a.pokeAll(r.Context(), spec)
	writeJSON(w, http.StatusCreated, SpecResponse{Version: ver, Spec: spec})
}

// awaitMembers returns the alive members once there are at least want
// (at once when want is 0), or an error naming how many are alive.
func (a *Agent) awaitMembers(ctx context.Context, want int, wait time.Duration) ([]membership.Member, error) {
	deadline := time.Now().Add(wait)
	for {
		var alive []membership.Member
		for _, m := range a.members.Members() {
			if m.State == membership.StateAlive {
				alive = append(alive, m)
			}
		}
		if len(alive) >= want {
			return alive, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			names := make([]string, 0, len(alive))
			for _, m := range alive {
				names = append(names, m.Name)
			}
			return nil, fmt.Errorf("agent: %d members alive (%v), expected %d within %v", len(alive), names, want, wait)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (a *Agent) serveSpec(w http.ResponseWriter, r *http.Request) {
	if !requireMethod(w, r, http.MethodGet, http.MethodPut) {
		return
	}
	cur := a.spec.Load()
	if cur == nil {
		writeError(w, http.StatusConflict, CodeNotInitialized, "agent: the cluster is not initialised yet (run `fmnode init`)")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	spec, ver, err := a.readSpec(ctx, cur.spec)
	if err != nil {
		a.writeSpecError(w, err)
		return
	}
	if r.Method == http.MethodGet {
		writeJSON(w, http.StatusOK, SpecResponse{Version: ver, Spec: spec})
		return
	}
	var req SetRequest
	if !readJSON(w, r, &req) {
		return
	}
	if why, ok := notLive(req.Key); ok {
		writeError(w, http.StatusBadRequest, CodeInvalidSpec, fmt.Sprintf("agent: %s cannot change on a running cluster: %s", req.Key, why))
		return
	}
	if req.Version != 0 && req.Version != ver {
		writeError(w, http.StatusConflict, CodeConflict, fmt.Sprintf("agent: the spec is at version %d, not %d: read it again", ver, req.Version))
		return
	}
	out, err := a.casSpec(ctx, spec, ver, clusterspec.Change{Key: req.Key, Value: req.Value})
	if err != nil {
		a.writeSpecError(w, err)
		return
	}
	a.log.Info("cluster spec set", "key", req.Key, "value", req.Value, "version", out.Version, "changed", out.Changed)
	writeJSON(w, http.StatusOK, out)
}

// errSpecChange is a change the spec refuses (400, with the key's reason).
var errSpecChange = errors.New("agent: the cluster spec refuses the change")

// casSpec commits spec (at version ver) with the changes made, then tells
// every agent to read it: the one write path of `config set` and the
// global pause.
func (a *Agent) casSpec(ctx context.Context, spec clusterspec.Spec, ver uint64, changes ...clusterspec.Change) (SpecResponse, error) {
	next, err := spec.Apply(changes...)
	if err != nil {
		return SpecResponse{}, fmt.Errorf("%w: %w", errSpecChange, err)
	}
	value, err := clusterspec.Encode(next)
	if err != nil {
		return SpecResponse{}, fmt.Errorf("%w: %w", errSpecChange, err)
	}
	nver, err := a.sysClient().CAS(ctx, a.sysPeers(spec), ver, value)
	if err != nil {
		return SpecResponse{}, err
	}
	a.pokeAll(ctx, next)
	return SpecResponse{Version: nver, Spec: next, Changed: clusterspec.Diff(spec, next)}, nil
}

// readSpec reads the committed spec from the system register.
func (a *Agent) readSpec(ctx context.Context, via clusterspec.Spec) (clusterspec.Spec, uint64, error) {
	v, ver, err := a.sysClient().Read(ctx, a.sysPeers(via))
	if err != nil {
		return clusterspec.Spec{}, 0, err
	}
	spec, err := clusterspec.Decode(v)
	if err != nil {
		return clusterspec.Spec{}, 0, fmt.Errorf("agent: the committed spec does not decode: %w", err)
	}
	return spec, ver, nil
}

// writeSpecError answers a failed casSpec or readSpec.
func (a *Agent) writeSpecError(w http.ResponseWriter, err error) {
	if errors.Is(err, errSpecChange) {
		writeError(w, http.StatusBadRequest, CodeInvalidSpec, err.Error())
		return
	}
	a.writeRegisterError(w, err)
}

func (a *Agent) writeRegisterError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, sysreg.ErrAlreadyInitialized):
		writeError(w, http.StatusConflict, CodeAlreadyInitialized, err.Error())
	case errors.Is(err, sysreg.ErrConflict):
		writeError(w, http.StatusConflict, CodeConflict, err.Error())
	case errors.Is(err, sysreg.ErrNoQuorum), errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, CodeNoQuorum, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}
