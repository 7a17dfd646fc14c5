package failover

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestManagerWindowCreates drives one manager that must create many
// registers: it never has more than MaxInFlight operations with the
// driver, and every register gets created, including those whose
// proposal the driver refused (a proposer past its own bound).
func TestManagerWindowCreates(t *testing.T) {
	errRefused := errors.New("proposer: too many proposals in flight")
	tests := []struct {
		name        string
		parts       int
		window      int
		refuseEvery int // refuse every n-th proposal handed over (0: none)
	}{
		{"100k partitions, window 4096", 100000, 4096, 0},
		{"100k partitions, window 1", 2000, 1, 0},
		{"refused proposals are proposed again", 3000, 256, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := []Node{{1, "east"}, {2, "west"}, {3, "north"}}
			// North: it is no partition's write region, so creates are all
			// it proposes here.
			m, err := NewManager(ManagerConfig{Failover: FastConfig(), Self: 3, Nodes: nodes, MaxInFlight: tt.window})
			require.NoError(t, err)
			for i := range tt.parts {
				name := fmt.Sprintf("p-%06d", i)
				require.NoError(t, m.AddPartition(Placement{Partition: name, Replicas: []RegionNode{{"east", 1}, {"west", 2}, {"north", 3}}}))
				s, err := NewState(name, "east", []Region{"east", "west", "north"}, Strong, 1)
				require.NoError(t, err)
				require.NoError(t, m.Create(name, s))
			}
			created, handed, refused := 0, 0, 0
			now := time.Duration(0)
			for round := 0; round < 100000 && created < tt.parts; round++ {
				now += 10 * time.Millisecond
				m.Tick(now)
				rd := m.Ready()
				inFlight, _ := m.InFlight()
				require.LessOrEqual(t, inFlight, tt.window, "round %d", round)
				require.LessOrEqual(t, len(rd.Proposals), tt.window)
				for _, p := range rd.Proposals {
					require.Zero(t, p.Version, "a create is a CAS against version 0")
					handed++
					if tt.refuseEvery > 0 && handed%tt.refuseEvery == 0 {
						refused++
						m.CASDone(now, p.Partition, false, errRefused)
						continue
					}
					m.CASDone(now, p.Partition, true, nil)
					m.ObserveState(now, p.Partition, 1, p.Next)
					created++
				}
			}
			require.Equal(t, tt.parts, created, "every register created")
			for _, name := range m.Partitions() {
				_, v, ok := m.State(name)
				require.True(t, ok, name)
				require.Equal(t, uint64(1), v, name)
			}
			if tt.refuseEvery > 0 {
				assert.Positive(t, refused)
				assert.Equal(t, tt.parts+refused, handed, "a refused proposal is proposed again, nothing else twice")
			} else {
				assert.Equal(t, tt.parts, handed, "each register proposed once")
			}
			inFlight, waiting := m.InFlight()
			assert.Zero(t, inFlight)
			assert.Zero(t, waiting)
		})
	}
}

// TestManagerWindowReads: reads share the window with proposals, a failed
// read is asked again (after ProposeStagger), and none is dropped.
func TestManagerWindowReads(t *testing.T) {
	nodes := []Node{{1, "east"}, {2, "west"}, {3, "north"}}
	m, err := NewManager(ManagerConfig{Failover: FastConfig(), Self: 2, Nodes: nodes, MaxInFlight: 32})
	require.NoError(t, err)
	const parts = 1000
	states := map[string]State{}
	for i := range parts {
		name := fmt.Sprintf("p-%04d", i)
		require.NoError(t, m.AddPartition(Placement{Partition: name, Replicas: []RegionNode{{"east", 1}, {"west", 2}, {"north", 3}}}))
		s, err := NewState(name, "east", []Region{"east", "west", "north"}, Strong, 1)
		require.NoError(t, err)
		states[name] = s
		m.RequestRead(name)
	}
	read, failed := 0, 0
	now := time.Duration(0)
	for round := 0; round < 10000 && read < parts; round++ {
		now += 10 * time.Millisecond
		m.Tick(now)
		rd := m.Ready()
		inFlight, _ := m.InFlight()
		require.LessOrEqual(t, inFlight, 32)
		for k, name := range rd.Reads {
			if k%5 == 4 {
				failed++
				m.ReadDone(now, name, errors.New("no quorum"))
				continue
			}
			m.ObserveState(now, name, 3, states[name])
			m.ReadDone(now, name, nil)
			read++
		}
	}
	require.Equal(t, parts, read)
	assert.Positive(t, failed)
	assert.Equal(t, uint64(parts+failed), m.Stats().Reads)
}

// TestManagerWindowPriority: west is write region of half the partitions
// and the best candidate for the other half. When east goes dark it first
// shrinks east out of its own partitions' write quorums; with the window
// full, most of those shrinks still wait when east is declared failed, and
// then every failover starts before the next shrink. No node ever has
// more than MaxInFlight proposals out, and all complete.
func TestManagerWindowPriority(t *testing.T) {
	const window, parts = 4, 400
	cfg := FastConfig()
	h := newMgrHarnessWith(t, cfg, parts, window, func(i int) Region {
		if i%2 == 0 {
			return "east"
		}
		return "west"
	})
	for i := 0; i < 50; i++ {
		h.step(100 * time.Millisecond)
	}
	h.cut[1] = true // east goes dark
	for i := 0; i < 600; i++ {
		h.step(100 * time.Millisecond)
		perNode := map[NodeID]int{}
		for _, pc := range h.pending {
			perNode[pc.node]++
		}
		for n, k := range perNode {
			require.LessOrEqual(t, k, window, "node %d at step %d", n, i)
		}
	}
	var kinds []DecisionKind // west's proposals, in order
	for k, p := range h.proposed {
		if h.proposedBy[k] == 2 {
			kinds = append(kinds, p.Kind)
		}
	}
	first := slices.Index(kinds, DecideFailover)
	require.Positive(t, first, "west shrank first")
	for _, k := range kinds[first : first+parts/2] {
		require.Equal(t, DecideFailover, k, "a shrink started while failovers waited")
	}
	assert.Contains(t, kinds[first+parts/2:], DecideShrinkQuorum, "shrinks still waited when the failovers came")
	for name, e := range h.reg {
		assert.Equal(t, Region("west"), e.state.WriteRegion, name)
		assert.False(t, e.state.WriteQuorum.IsMember("east"), "%s shrank east out", name)
	}
	assert.Positive(t, h.mgrs[2].Stats().Waited)
}

func TestManagerConfigMaxInFlight(t *testing.T) {
	tests := []struct {
		name    string
		window  int
		wantErr string
	}{
		{"default", 0, ""},
		{"one", 1, ""},
		{"negative", -1, "MaxInFlight"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewManager(ManagerConfig{Failover: FastConfig(), Self: 1, Nodes: []Node{{1, "east"}, {2, "west"}}, MaxInFlight: tt.window})
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Positive(t, m.cfg.MaxInFlight)
		})
	}
}
