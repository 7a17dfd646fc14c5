package failover

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestManagerHandle: a status fed through a partition's handle acts as one
// fed by name, and the zero handle (like an unknown name) is ignored.
func TestManagerHandle(t *testing.T) {
	h := newMgrHarness(t, FastConfig(), 3)
	m := h.mgrs[1]
	hd, ok := m.Handle("p-001")
	require.True(t, ok)
	_, ok = m.Handle("nope")
	assert.False(t, ok)
	lastOf := func(m *Manager) LSN {
		ev, ok := m.Evidence(h.now, "p-001")
		require.True(t, ok)
		for _, x := range ev.Replicas {
			if x.Region == "east" {
				return x.LastLSN
			}
		}
		return 0
	}
	st := *h.replicas[1]["p-001"]
	st.LastLSN = 99
	m.UpdateReplicaAt(h.now, hd, st)
	assert.Equal(t, LSN(99), lastOf(m))
	st.LastLSN = 100
	m.UpdateReplicaAt(h.now, PartitionHandle{}, st)
	assert.Equal(t, LSN(99), lastOf(m), "the zero handle names no partition")
	m.UpdateReplica(h.now, "p-001", st)
	assert.Equal(t, LSN(100), lastOf(m))
}

// BenchmarkManagerUpdateReplica feeds a steady write region's status (the
// followers' match LSNs move, nothing decision-relevant changes) for many
// partitions, by handle as the simulator does, and by name.
func BenchmarkManagerUpdateReplica(b *testing.B) {
	b.Run("handle", func(b *testing.B) { benchUpdateReplica(b, false) })
	b.Run("name", func(b *testing.B) { benchUpdateReplica(b, true) })
}

func benchUpdateReplica(b *testing.B, byName bool) {
	const parts = 4096
	nodes := []Node{{1, "east"}, {2, "west"}, {3, "north"}}
	m, err := NewManager(ManagerConfig{Failover: FastConfig(), Self: 1, Nodes: nodes})
	require.NoError(b, err)
	hs := make([]PartitionHandle, parts)
	names := make([]string, parts)
	sts := make([]ReplicaStatus, parts)
	for i := range hs {
		name := fmt.Sprintf("p-%05d", i)
		s, err := NewState(name, "east", []Region{"east", "west", "north"}, Strong, 1)
		require.NoError(b, err)
		require.NoError(b, m.AddPartition(Placement{Partition: name,
			Replicas: []RegionNode{{"east", 1}, {"west", 2}, {"north", 3}}}))
		m.ObserveState(0, name, 1, s)
		hs[i], _ = m.Handle(name)
		names[i] = name
		sts[i] = ReplicaStatus{Epoch: 1, LastLSN: 10, CommitLSN: 10, WriteRegion: true, WriteQuorum: s.WriteQuorum.Members,
			Followers: []FollowerStatus{{Region: "north", MatchLSN: 10, InRule: true, CaughtUp: true, InSync: true},
				{Region: "west", MatchLSN: 10, InRule: true, CaughtUp: true, InSync: true}}}
		m.UpdateReplicaAt(0, hs[i], sts[i])
	}
	m.Tick(time.Millisecond)
	m.Ready()
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		i := n % parts
		st := &sts[i]
		st.LastLSN++
		st.CommitLSN = st.LastLSN - 1
		st.Followers[0].MatchLSN = st.LastLSN
		st.Followers[1].MatchLSN = st.LastLSN - 1
		st.Followers[1].CaughtUp = false
		if byName {
			m.UpdateReplica(time.Millisecond, names[i], *st)
		} else {
			m.UpdateReplicaAt(time.Millisecond, hs[i], *st)
		}
		st.Followers[1].CaughtUp = true
	}
}
