package raftbaseline

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"

	"github.com/fmnode/fmnode/failover"
)

// Errors callers act on.
var (
	// ErrNoLeader: no leader is known (an election is under way).
	ErrNoLeader = errors.New("raftbaseline: no leader")
	// ErrClosed: the voter was stopped.
	ErrClosed = errors.New("raftbaseline: voter stopped")
)

// Peer names one voter of the cluster: its raft ID and address, its
// region and its forwarding address.
type Peer struct {
	ID      string
	Region  failover.Region
	Raft    string
	Forward string
}

// Voter is one region's node: a raft voter with the replicated map, the
// heartbeater of the replicas it hosts and, while it leads, the failover
// controller.
type Voter struct {
	cfg   Config
	fsm   *FSM
	wal   *wal.WAL
	snaps raft.SnapshotStore
	trans *raft.NetworkTransport
	fwdLn net.Listener
	fwd   *http.Server
	hc    *http.Client

	mu     sync.Mutex
	raft   *raft.Raft
	peers  map[string]Peer
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed bool

	stop chan struct{} // closed by Close

	ctrl controllerStats
	hbs  heartbeatStats
}

// New opens a voter's stores and listeners on loopback; Start joins it
// to its peers.
func New(cfg Config) (*Voter, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	v := &Voter{cfg: c, fsm: newFSM(c.Clock, c.OnState), peers: map[string]Peer{}, stop: make(chan struct{})}
	if v.cfg.Replicas == nil {
		v.cfg.Replicas = FSMReplicas{FSM: v.fsm}
	}
	ok := false
	defer func() {
		if !ok {
			v.closeResources()
		}
	}()
	walDir := filepath.Join(c.Dir, "wal")
	if err := os.MkdirAll(walDir, 0o700); err != nil {
		return nil, fmt.Errorf("raftbaseline: %w", err)
	}
	if v.wal, err = wal.Open(walDir); err != nil {
		return nil, fmt.Errorf("raftbaseline: open raft-wal: %w", err)
	}
	if v.snaps, err = raft.NewFileSnapshotStore(c.Dir, 2, c.LogOutput); err != nil {
		return nil, fmt.Errorf("raftbaseline: snapshot store: %w", err)
	}
	if v.trans, err = raft.NewTCPTransport("127.0.0.1:0", nil, 3, 10*time.Second, c.LogOutput); err != nil {
		return nil, fmt.Errorf("raftbaseline: raft transport: %w", err)
	}
	if v.fwdLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("raftbaseline: forward listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apply", v.serveApply)
	v.fwd = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = v.fwd.Serve(v.fwdLn) }()
	v.hc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: c.ApplyTimeout}
	ok = true
	return v, nil
}

// Peer is this voter's entry in the cluster's configuration.
func (v *Voter) Peer() Peer {
	return Peer{ID: v.cfg.ID, Region: v.cfg.Region, Raft: string(v.trans.LocalAddr()), Forward: v.fwdLn.Addr().String()}
}

// FSM is this voter's copy of the replicated map.
func (v *Voter) FSM() *FSM { return v.fsm }

// Region is the region this voter serves.
func (v *Voter) Region() failover.Region { return v.cfg.Region }

// Start bootstraps the cluster of peers (on a new store) and runs raft,
// the heartbeater and the controller until Close.
func (v *Voter) Start(peers []Peer) error {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(v.cfg.ID)
	rc.HeartbeatTimeout = v.cfg.RaftHeartbeatTimeout
	rc.ElectionTimeout = v.cfg.RaftElectionTimeout
	rc.LeaderLeaseTimeout = v.cfg.RaftLeaderLease
	rc.BatchApplyCh = true
	rc.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft-" + v.cfg.ID, Level: hclog.Warn, Output: v.cfg.LogOutput})
	if err := raft.ValidateConfig(rc); err != nil {
		return fmt.Errorf("%w: raft: %w", ErrInvalidConfig, err)
	}
	var conf raft.Configuration
	v.mu.Lock()
	for _, p := range peers {
		v.peers[p.ID] = p
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Raft)})
	}
	v.mu.Unlock()
	has, err := raft.HasExistingState(v.wal, v.wal, v.snaps)
	if err != nil {
		return fmt.Errorf("raftbaseline: %w", err)
	}
	if !has {
		if err := raft.BootstrapCluster(rc, v.wal, v.wal, v.snaps, v.trans, conf); err != nil {
			return fmt.Errorf("raftbaseline: bootstrap: %w", err)
		}
	}
	r, err := raft.NewRaft(rc, v.fsm, v.wal, v.wal, v.snaps, v.trans)
	if err != nil {
		return fmt.Errorf("raftbaseline: start raft: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	v.mu.Lock()
	v.raft, v.cancel = r, cancel
	v.mu.Unlock()
	v.wg.Add(2)
	go func() { defer v.wg.Done(); v.runHeartbeats(ctx) }()
	go func() { defer v.wg.Done(); v.runController(ctx) }()
	return nil
}

// IsLeader reports whether this voter leads.
func (v *Voter) IsLeader() bool {
	r := v.raftNode()
	return r != nil && r.State() == raft.Leader
}

func (v *Voter) raftNode() *raft.Raft {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil
	}
	return v.raft
}

// Submit applies a command through the leader: locally when this voter
// leads, else forwarded to the leader over loopback HTTP. It returns the
// put's new version (0 for heartbeats).
func (v *Voter) Submit(ctx context.Context, cmd []byte) (uint64, error) {
	r := v.raftNode()
	if r == nil {
		return 0, ErrClosed
	}
	if r.State() == raft.Leader {
		return v.applyLocal(r, cmd)
	}
	_, id := r.LeaderWithID()
	v.mu.Lock()
	p, ok := v.peers[string(id)]
	v.mu.Unlock()
	if !ok || id == "" {
		return 0, ErrNoLeader
	}
	return v.forward(ctx, p, cmd)
}

// PutState submits a put of a partition's state against version expect.
func (v *Voter) PutState(ctx context.Context, p PutState) (uint64, error) {
	b, err := encodePut(p)
	if err != nil {
		return 0, err
	}
	return v.Submit(ctx, b)
}

func (v *Voter) applyLocal(r *raft.Raft, cmd []byte) (uint64, error) {
	f := r.Apply(cmd, v.cfg.ApplyTimeout)
	// A future queued in raft's batch apply channel when the leader loop
	// ends is never answered, so do not wait on it past the bound or
	// the voter's stop (the waiting goroutine is left to the process).
	answered := make(chan error, 1)
	go func() { answered <- f.Error() }()
	var err error
	select {
	case err = <-answered:
	case <-v.stop:
		return 0, ErrClosed
	case <-time.After(v.cfg.ApplyTimeout):
		return 0, fmt.Errorf("%w: apply not answered within %v", ErrNoLeader, v.cfg.ApplyTimeout)
	}
	if err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return 0, fmt.Errorf("%w: %w", ErrNoLeader, err)
		}
		return 0, fmt.Errorf("raftbaseline: apply: %w", err)
	}
	res, _ := f.Response().(applyResult)
	return res.Version, res.Err
}

// forward sends cmd to the leader p.
func (v *Voter) forward(ctx context.Context, p Peer, cmd []byte) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.Forward+"/apply", bytes.NewReader(cmd))
	if err != nil {
		return 0, fmt.Errorf("raftbaseline: forward: %w", err)
	}
	resp, err := v.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w: forward to %s: %w", ErrNoLeader, p.ID, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return 0, fmt.Errorf("raftbaseline: forward reply: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		ver, n := binary.Uvarint(body)
		if n <= 0 {
			return 0, fmt.Errorf("raftbaseline: forward reply: bad version")
		}
		return ver, nil
	case http.StatusConflict:
		ver, n := binary.Uvarint(body)
		if n <= 0 {
			n = len(body)
		}
		return ver, fmt.Errorf("%w: %s", ErrVersionMismatch, body[n:])
	case http.StatusServiceUnavailable:
		return 0, fmt.Errorf("%w: %s says %s", ErrNoLeader, p.ID, body)
	}
	return 0, fmt.Errorf("raftbaseline: forward to %s: %s: %s", p.ID, resp.Status, body)
}

// serveApply applies a forwarded command if this voter leads.
func (v *Voter) serveApply(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, MaxCommandBytes))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	r := v.raftNode()
	if r == nil || r.State() != raft.Leader {
		http.Error(w, "not the leader", http.StatusServiceUnavailable)
		return
	}
	ver, err := v.applyLocal(r, body)
	out := binary.AppendUvarint(nil, ver)
	switch {
	case err == nil:
		_, _ = w.Write(out)
	case errors.Is(err, ErrVersionMismatch):
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write(append(out, err.Error()...))
	case errors.Is(err, ErrNoLeader):
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case errors.Is(err, ErrBadCommand):
		http.Error(w, err.Error(), http.StatusBadRequest)
	default:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// WaitLeader waits until some voter of the cluster is known as leader by
// this one, and returns its ID.
func (v *Voter) WaitLeader(ctx context.Context) (string, error) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		r := v.raftNode()
		if r == nil {
			return "", ErrClosed
		}
		if _, id := r.LeaderWithID(); id != "" {
			return string(id), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
		case <-t.C:
		}
	}
}

// Close stops the voter as a killed process would: its loops end, raft
// stops without handing leadership over, and its listeners close, so
// nothing more leaves it. The stores are closed after.
func (v *Voter) Close() error {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return nil
	}
	v.closed = true
	r, cancel := v.raft, v.cancel
	v.mu.Unlock()
	close(v.stop)
	if cancel != nil {
		cancel()
	}
	var errs []error
	if v.fwd != nil {
		errs = append(errs, v.fwd.Close())
	}
	if r != nil {
		errs = append(errs, r.Shutdown().Error())
	}
	v.wg.Wait()
	errs = append(errs, v.closeResources())
	return errors.Join(errs...)
}

func (v *Voter) closeResources() error {
	var errs []error
	if v.fwdLn != nil && v.fwd == nil {
		errs = append(errs, v.fwdLn.Close())
	}
	if v.trans != nil {
		errs = append(errs, v.trans.Close())
	}
	if v.wal != nil {
		errs = append(errs, v.wal.Close())
	}
	if v.hc != nil {
		v.hc.CloseIdleConnections()
	}
	return errors.Join(errs...)
}
