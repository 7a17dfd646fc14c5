package raftbaseline

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fmnode/fmnode/failover"
)

// ErrVersionMismatch: a put named a version the map no longer holds (a
// decision made from a stale state, or a deposed leader's).
var ErrVersionMismatch = errors.New("raftbaseline: version mismatch")

// MaxSnapshotEntries bounds what a snapshot restore reads.
const MaxSnapshotEntries = 1 << 20

// applyResult is what FSM.Apply returns for a command (raft hands it to
// the ApplyFuture's Response).
type applyResult struct {
	Version uint64
	Err     error
}

type versioned struct {
	state   failover.State
	version uint64
}

type replicaKey struct {
	key    string
	region failover.Region
}

// heard is a replica's last heartbeat record, stamped with this node's
// clock when its state machine applied it.
type heard struct {
	status ReplicaStatus
	at     time.Duration
}

// FSM is the replicated map: every partition's failover state and every
// replica's last heartbeat. Raft calls Apply on one goroutine; readers
// (the controller, the bench) take the read lock.
type FSM struct {
	clock   func() time.Duration
	onState func(key string, s failover.State, version uint64)

	mu         sync.RWMutex
	states     map[string]*versioned
	heartbeats map[replicaKey]heard
	// byRegion is the last time any heartbeat of a region was applied.
	byRegion map[failover.Region]time.Duration

	stats FSMStats
}

// FSMStats counts what the state machine applied.
type FSMStats struct {
	Puts             uint64 // state puts applied
	Mismatches       uint64 // puts refused for their version
	HeartbeatCmds    uint64 // heartbeat commands applied
	HeartbeatRecords uint64 // replica records they wrote
	BadCommands      uint64
}

func newFSM(clock func() time.Duration, onState func(string, failover.State, uint64)) *FSM {
	return &FSM{clock: clock, onState: onState, states: map[string]*versioned{},
		heartbeats: map[replicaKey]heard{}, byRegion: map[failover.Region]time.Duration{}}
}

// Apply applies one committed log entry.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	c, err := decodeCommand(l.Data)
	if err != nil {
		f.mu.Lock()
		f.stats.BadCommands++
		f.mu.Unlock()
		return applyResult{Err: err}
	}
	switch c := c.(type) {
	case *PutState:
		return f.applyPut(c)
	case *Heartbeats:
		f.applyHeartbeats(c)
		return applyResult{}
	}
	return applyResult{Err: ErrBadCommand}
}

func (f *FSM) applyPut(p *PutState) applyResult {
	f.mu.Lock()
	cur := f.states[p.Key]
	var have uint64
	if cur != nil {
		have = cur.version
	}
	if have != p.Expect {
		f.stats.Mismatches++
		f.mu.Unlock()
		return applyResult{Version: have, Err: fmt.Errorf("%w: %s at version %d, put expected %d", ErrVersionMismatch, p.Key, have, p.Expect)}
	}
	v := &versioned{state: p.State, version: have + 1}
	f.states[p.Key] = v
	f.stats.Puts++
	f.mu.Unlock()
	if f.onState != nil {
		f.onState(p.Key, p.State, v.version)
	}
	return applyResult{Version: v.version}
}

func (f *FSM) applyHeartbeats(h *Heartbeats) {
	now := f.clock()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range h.Replicas {
		f.heartbeats[replicaKey{r.Key, h.Region}] = heard{status: r, at: now}
	}
	f.byRegion[h.Region] = now
	f.stats.HeartbeatCmds++
	f.stats.HeartbeatRecords += uint64(len(h.Replicas))
}

// State returns a partition's state and version (0 if absent).
func (f *FSM) State(key string) (failover.State, uint64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	v, ok := f.states[key]
	if !ok {
		return failover.State{}, 0, false
	}
	return v.state, v.version, true
}

// Keys returns the partitions' keys, sorted.
func (f *FSM) Keys() []string {
	f.mu.RLock()
	out := make([]string, 0, len(f.states))
	for k := range f.states {
		out = append(out, k)
	}
	f.mu.RUnlock()
	sort.Strings(out)
	return out
}

// Heard returns a replica's last heartbeat record and when this node
// applied it.
func (f *FSM) Heard(key string, region failover.Region) (ReplicaStatus, time.Duration, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	h, ok := f.heartbeats[replicaKey{key, region}]
	return h.status, h.at, ok
}

// RegionHeard returns when this node last applied a heartbeat of region.
func (f *FSM) RegionHeard(region failover.Region) (time.Duration, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	at, ok := f.byRegion[region]
	return at, ok
}

// Stats returns the counters.
func (f *FSM) Stats() FSMStats {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.stats
}

// Snapshot captures the map. Heartbeat times are this node's clock and
// mean nothing elsewhere: the snapshot carries the reports, and a node
// restoring it counts them as heard when it restores.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	snap := &fsmSnapshot{}
	for k, v := range f.states {
		b, err := encodePut(PutState{Key: k, Expect: v.version, State: v.state})
		if err != nil {
			return nil, err
		}
		snap.states = append(snap.states, b)
	}
	byRegion := map[failover.Region][]ReplicaStatus{}
	for k, h := range f.heartbeats {
		byRegion[k.region] = append(byRegion[k.region], h.status)
	}
	for r, rs := range byRegion {
		for len(rs) > 0 {
			n := min(len(rs), MaxHeartbeatEntries)
			b, err := encodeHeartbeats(Heartbeats{Region: r, Replicas: rs[:n]})
			if err != nil {
				return nil, err
			}
			snap.heartbeats = append(snap.heartbeats, b)
			rs = rs[n:]
		}
	}
	return snap, nil
}

// Restore replaces the map with a snapshot's.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	r := bufio.NewReader(rc)
	states := map[string]*versioned{}
	n, err := readCount(r)
	if err != nil {
		return err
	}
	for range n {
		c, err := readCommand(r)
		if err != nil {
			return err
		}
		p, ok := c.(*PutState)
		if !ok {
			return fmt.Errorf("%w: snapshot: a state entry is not a put", ErrBadCommand)
		}
		states[p.Key] = &versioned{state: p.State, version: p.Expect}
	}
	m, err := readCount(r)
	if err != nil {
		return err
	}
	now := f.clock()
	hb := map[replicaKey]heard{}
	byRegion := map[failover.Region]time.Duration{}
	for range m {
		c, err := readCommand(r)
		if err != nil {
			return err
		}
		h, ok := c.(*Heartbeats)
		if !ok {
			return fmt.Errorf("%w: snapshot: a heartbeat entry is not heartbeats", ErrBadCommand)
		}
		for _, s := range h.Replicas {
			hb[replicaKey{s.Key, h.Region}] = heard{status: s, at: now}
		}
		byRegion[h.Region] = now
	}
	f.mu.Lock()
	f.states, f.heartbeats, f.byRegion = states, hb, byRegion
	f.mu.Unlock()
	return nil
}

func readCount(r *bufio.Reader) (uint64, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, fmt.Errorf("%w: snapshot count: %w", ErrBadCommand, err)
	}
	if n > MaxSnapshotEntries {
		return 0, fmt.Errorf("%w: snapshot count %d above %d", ErrBadCommand, n, MaxSnapshotEntries)
	}
	return n, nil
}

func readCommand(r *bufio.Reader) (any, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot entry length: %w", ErrBadCommand, err)
	}
	if n == 0 || n > MaxCommandBytes {
		return nil, fmt.Errorf("%w: snapshot entry of %d bytes", ErrBadCommand, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("%w: snapshot entry: %w", ErrBadCommand, err)
	}
	return decodeCommand(b)
}

type fsmSnapshot struct {
	states     [][]byte
	heartbeats [][]byte
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriter(sink)
	write := func(entries [][]byte) error {
		var hdr [binary.MaxVarintLen64]byte
		if _, err := w.Write(hdr[:binary.PutUvarint(hdr[:], uint64(len(entries)))]); err != nil {
			return err
		}
		for _, e := range entries {
			if _, err := w.Write(hdr[:binary.PutUvarint(hdr[:], uint64(len(e)))]); err != nil {
				return err
			}
			if _, err := w.Write(e); err != nil {
				return err
			}
		}
		return nil
	}
	err := write(s.states)
	if err == nil {
		err = write(s.heartbeats)
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}
