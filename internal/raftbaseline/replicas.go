package raftbaseline

import (
	"sort"
	"sync"
)

// ReplicaSource reports the partition replicas a region's node hosts:
// the edge between the baseline and a data plane.
type ReplicaSource interface {
	// Replicas appends the current status of every hosted replica to dst.
	Replicas(dst []ReplicaStatus) []ReplicaStatus
}

// MemReplicas is the in-memory ReplicaSource: statuses set by hand.
type MemReplicas struct {
	mu sync.Mutex
	m  map[string]ReplicaStatus
}

// NewMemReplicas returns an empty MemReplicas.
func NewMemReplicas() *MemReplicas { return &MemReplicas{m: map[string]ReplicaStatus{}} }

// Set records a replica's status (its Key names the partition).
func (m *MemReplicas) Set(s ReplicaStatus) {
	m.mu.Lock()
	m.m[s.Key] = s
	m.mu.Unlock()
}

// Replicas returns every status, by key.
func (m *MemReplicas) Replicas(dst []ReplicaStatus) []ReplicaStatus {
	m.mu.Lock()
	start := len(dst)
	for _, s := range m.m {
		dst = append(dst, s)
	}
	m.mu.Unlock()
	tail := dst[start:]
	sort.Slice(tail, func(i, j int) bool { return tail[i].Key < tail[j].Key })
	return dst
}

// FSMReplicas reports a replica of every partition in a voter's map at
// the epoch the map holds and LSN 0: a data plane that follows the
// register and takes no writes (the bench's load on the baseline is the
// coordination's own).
type FSMReplicas struct{ FSM *FSM }

// Replicas appends one status per partition of the map.
func (r FSMReplicas) Replicas(dst []ReplicaStatus) []ReplicaStatus {
	for _, k := range r.FSM.Keys() {
		if s, _, ok := r.FSM.State(k); ok {
			dst = append(dst, ReplicaStatus{Key: k, Epoch: s.Epoch})
		}
	}
	return dst
}
