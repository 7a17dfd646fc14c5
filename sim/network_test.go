package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type delivery struct {
	at       time.Duration
	from, to int32
	msg      int
}

type inbox struct{ got []delivery }

func (b *inbox) Deliver(now time.Duration, from, to int32, m int) {
	b.got = append(b.got, delivery{now, from, to, m})
}

func testWorld(t *testing.T, nodes int) *World {
	t.Helper()
	w, err := NewWorld(WorldConfig{Seed: 1, Topology: DefaultWAN(), NodeRegion: regionsRoundRobin(nodes, 3), DriftBound: 0.05})
	require.NoError(t, err)
	return w
}

func sendN(w *World, n *Network[int], from, to int32, count int) {
	for i := 0; i < count; i++ {
		n.Send(from, to, i)
	}
}

func TestNetworkFaults(t *testing.T) {
	tests := []struct {
		name  string
		setup func(w *World)
		check func(t *testing.T, w *World, n *Network[int], got []delivery)
	}{
		{"fifo per link without faults", nil, func(t *testing.T, w *World, n *Network[int], got []delivery) {
			require.Len(t, got, 100)
			for i, d := range got {
				assert.Equal(t, i, d.msg)
			}
			// west <-> central is 20 ms round trip: at least 10 ms one way.
			assert.GreaterOrEqual(t, got[0].at, 10*time.Millisecond)
		}},
		{"loss", func(w *World) { w.Links.Loss = 0.5 }, func(t *testing.T, w *World, n *Network[int], got []delivery) {
			assert.InDelta(t, 50, len(got), 20)
			assert.Equal(t, uint64(100-len(got)), w.Faults[FaultLoss])
		}},
		{"duplication", func(w *World) { w.Links.Duplicate = 0.5 }, func(t *testing.T, w *World, n *Network[int], got []delivery) {
			assert.Equal(t, 100+int(w.Faults[FaultDuplicate]), len(got))
			assert.Positive(t, w.Faults[FaultDuplicate])
		}},
		{"reordering", func(w *World) { w.Links.Reorder = 0.3 }, func(t *testing.T, w *World, n *Network[int], got []delivery) {
			require.Len(t, got, 100)
			inversions := 0
			for i := 1; i < len(got); i++ {
				if got[i].msg < got[i-1].msg {
					inversions++
				}
			}
			assert.Positive(t, inversions)
			assert.Positive(t, w.Faults[FaultReorder])
		}},
		{"cut link", func(w *World) { w.Links.Apply(cutBetween(3, []int32{0}, []int32{1}, false), +1) }, func(t *testing.T, w *World, n *Network[int], got []delivery) {
			assert.Empty(t, got)
			assert.Equal(t, uint64(100), n.Stats.DroppedCut)
		}},
		{"delay spike", func(w *World) { w.Links.SetSpike(1, 10) }, func(t *testing.T, w *World, n *Network[int], got []delivery) {
			require.Len(t, got, 100)
			assert.GreaterOrEqual(t, got[0].at, 100*time.Millisecond)
		}},
		{"crashed receiver", func(w *World) { w.Crash(1) }, func(t *testing.T, w *World, n *Network[int], got []delivery) {
			assert.Empty(t, got)
			assert.Equal(t, uint64(100), n.Stats.DroppedDown)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := testWorld(t, 3)
			b := &inbox{}
			n := NewNetwork[int](w, b, 1000, func(t *Trace, m *int) { t.U64(uint64(*m)) })
			if tt.setup != nil {
				tt.setup(w)
			}
			sendN(w, n, 0, 1, 100)
			require.NoError(t, w.Run(time.Minute))
			tt.check(t, w, n, b.got)
			assert.Zero(t, n.InFlight(), "every slot released")
		})
	}
}

func TestNetworkInFlightBound(t *testing.T) {
	w := testWorld(t, 2)
	n := NewNetwork[int](w, &inbox{}, 10, nil)
	sendN(w, n, 0, 1, 15)
	assert.Equal(t, 10, n.InFlight())
	assert.Equal(t, uint64(5), n.Stats.DroppedFull)
}

// procLog records crash, restart and resume notices.
type procLog struct{ events []string }

func (p *procLog) Crash(time.Duration)   { p.events = append(p.events, "crash") }
func (p *procLog) Restart(time.Duration) { p.events = append(p.events, "restart") }
func (p *procLog) Resume(time.Duration)  { p.events = append(p.events, "resume") }

func TestWorldPauseHoldsEvents(t *testing.T) {
	w := testWorld(t, 3)
	b := &inbox{}
	n := NewNetwork[int](w, b, 1000, nil)
	p := &procLog{}
	w.Attach(1, p)
	w.Pause(1)
	sendN(w, n, 0, 1, 5)
	require.NoError(t, w.Run(time.Second))
	assert.Empty(t, b.got, "a paused node receives nothing")
	w.Resume(1)
	require.NoError(t, w.Run(2*time.Second))
	require.Len(t, b.got, 5, "it gets everything on resume")
	for i, d := range b.got {
		assert.Equal(t, i, d.msg, "in order")
		assert.Equal(t, time.Second, d.at)
	}
	assert.Equal(t, []string{"resume"}, p.events)
}

func TestWorldCrashRestart(t *testing.T) {
	w := testWorld(t, 2)
	p := &procLog{}
	w.Attach(0, p)
	inc := w.Nodes[0].Incarnation()
	w.Crash(0)
	w.Crash(0) // twice is once
	assert.False(t, w.Up(0))
	w.Restart(0)
	assert.True(t, w.Up(0))
	assert.Equal(t, inc+1, w.Nodes[0].Incarnation())
	assert.Equal(t, []string{"crash", "restart"}, p.events)
}

func TestWorldDriftBound(t *testing.T) {
	w := testWorld(t, 1)
	w.SetDrift(0, 0.5)
	assert.InDelta(t, 0.05, w.Drift(0), 1e-9, "clamped to the bound")
	_, err := NewWorld(WorldConfig{Topology: DefaultWAN(), NodeRegion: []int{0}, DriftBound: 0.7})
	assert.ErrorIs(t, err, ErrTopology)
}

func TestTopologyValidate(t *testing.T) {
	bad := DefaultWAN()
	bad.RTT[0][1] = 5 * time.Millisecond // no longer symmetric
	tests := []struct {
		name string
		topo Topology
		ok   bool
	}{
		{"default", DefaultWAN(), true},
		{"asymmetric", bad, false},
		{"no regions", Topology{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.topo.Validate()
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrTopology)
			}
		})
	}
}
