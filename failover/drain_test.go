package failover

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// restart replaces node id's manager by a new one built from mc (a driver
// restart: nothing in memory survives), and feeds it what a restarted node
// reads back: its replicas' status and every register value.
func (h *mgrHarness) restart(id NodeID, mc ManagerConfig) *Manager {
	h.t.Helper()
	mc.Self, mc.Nodes = id, h.nodes
	if mc.Failover == (Config{}) {
		mc.Failover = h.mgrs[id].cfg.Failover
	}
	m, err := NewManager(mc)
	require.NoError(h.t, err)
	h.mgrs[id] = m
	names := make([]string, 0, len(h.reg))
	for name := range h.reg {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		require.NoError(h.t, m.AddPartition(Placement{Partition: name,
			Replicas: []RegionNode{{"east", 1}, {"west", 2}, {"north", 3}}}))
		m.UpdateReplica(h.now, name, *h.replicas[id][name])
		e := h.reg[name]
		m.ObserveState(h.now, name, e.version, e.state)
	}
	return m
}

// drainStarts returns the times of the switchovers out of r recorded in
// the registers, in order.
func (h *mgrHarness) drainStarts(r Region) []time.Duration {
	var out []time.Duration
	for _, e := range h.reg {
		for _, t := range e.state.History {
			if t.Kind == DecideStartSwitchover && t.From == r {
				out = append(out, t.At)
			}
		}
	}
	slices.Sort(out)
	return out
}

// overRate returns the first window of starts that holds more than
// burst + rate x its length, or "" if every window conforms.
func overRate(starts []time.Duration, rate float64, burst int) string {
	for i := range starts {
		for j := i + 1; j < len(starts); j++ {
			span := (starts[j] - starts[i]).Seconds()
			if n := j - i + 1; float64(n) > float64(burst)+rate*span+1e-9 {
				return fmt.Sprintf("%d starts in %.3f s from %v (burst %d, rate %.1f/s allow %.2f)",
					n, span, starts[i], burst, rate, float64(burst)+rate*span)
			}
		}
	}
	return ""
}

func driveDrain(h *mgrHarness, m *Manager, parts int, step time.Duration, maxSteps int) {
	for i := 0; i < maxSteps; i++ {
		h.step(step)
		if remaining, _ := m.Draining("east"); remaining == 0 && len(h.drainStarts("east")) == parts {
			return
		}
	}
}

// A drain starts at most DrainBurst switchovers at once and DrainRate per
// second after that, on the injected clock, over a long drain.
func TestManagerDrainRate(t *testing.T) {
	const parts = 60
	tests := []struct {
		name        string
		rate        float64
		burst       int
		concurrency int
	}{
		{"slow", 2, 1, 16},
		{"default burst", 10, 0, 16},
		{"burst equals concurrency", 25, 8, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newSteadyHarness(t, FastConfig(), parts)
			m := h.restart(2, ManagerConfig{DrainRate: tt.rate, DrainBurst: tt.burst, DrainConcurrency: tt.concurrency})
			h.step(100 * time.Millisecond)
			burst := tt.burst
			if burst == 0 {
				burst = min(DefaultDrainBurst, tt.concurrency)
			}
			from := h.now
			m.Drain(h.now, "east", "rate test")
			driveDrain(h, m, parts, 10*time.Millisecond, int(2*float64(parts)/tt.rate/0.01)+500)
			starts := h.drainStarts("east")
			require.Len(t, starts, parts, "every partition started a switchover")
			assert.Empty(t, overRate(starts, tt.rate, burst))
			// And the rate is what paces it: the drain takes about
			// (parts - burst) / rate, not much longer.
			want := float64(parts-burst) / tt.rate
			took := (starts[len(starts)-1] - from).Seconds()
			assert.InDelta(t, want, took, 0.1*want+0.2, "last start %.2f s after the drain began", took)
			remaining, _ := m.Draining("east")
			assert.Zero(t, remaining)
		})
	}
}

// A driver restarted mid-drain and asked again rebuilds the rate limit
// from the switchover starts in the registers: it does not start a fresh
// burst on top of the one it just spent.
func TestManagerDrainRateResumes(t *testing.T) {
	const parts = 40
	const rate, burst = 10.0, 4
	mc := ManagerConfig{DrainRate: rate, DrainBurst: burst}
	h := newSteadyHarness(t, FastConfig(), parts)
	m := h.restart(2, mc)
	h.step(100 * time.Millisecond)
	m.Drain(h.now, "east", "resume test")
	// Run until a dozen switchovers started, and restart the driver the
	// moment the next one is proposed.
	for len(h.drainStarts("east")) < 12 {
		h.step(10 * time.Millisecond)
	}
	for n := len(h.pending); n == len(h.pending); {
		h.step(time.Millisecond)
	}
	m = h.restart(2, mc)
	m.Drain(h.now, "east", "resume test, again")
	driveDrain(h, m, parts, 10*time.Millisecond, 2000)
	starts := h.drainStarts("east")
	require.Len(t, starts, parts)
	assert.Empty(t, overRate(starts, rate, burst), "across the restart")
	remaining, _ := m.Draining("east")
	assert.Zero(t, remaining)
}

func TestManagerDrainConfig(t *testing.T) {
	nodes := []Node{{1, "east"}, {2, "west"}}
	tests := []struct {
		name  string
		mc    ManagerConfig
		field string // "" valid
	}{
		{"defaults", ManagerConfig{}, ""},
		{"no rate limit", ManagerConfig{DrainRate: NoDrainRateLimit}, ""},
		{"negative rate", ManagerConfig{DrainRate: -1}, "DrainRate"},
		{"NaN rate", ManagerConfig{DrainRate: math.NaN()}, "DrainRate"},
		{"rate beyond the clock's resolution", ManagerConfig{DrainRate: 2e9}, "DrainRate"},
		{"negative burst", ManagerConfig{DrainBurst: -1}, "DrainBurst"},
		{"burst beyond the concurrency", ManagerConfig{DrainBurst: 5, DrainConcurrency: 4}, "DrainBurst"},
		{"default burst fits a small concurrency", ManagerConfig{DrainConcurrency: 2}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.mc.Failover, tt.mc.Self, tt.mc.Nodes = FastConfig(), 1, nodes
			m, err := NewManager(tt.mc)
			if tt.field == "" {
				require.NoError(t, err)
				require.LessOrEqual(t, m.cfg.DrainBurst, m.cfg.DrainConcurrency)
				return
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.ErrorContains(t, err, tt.field)
		})
	}
}

// Explain answers "why hasn't this partition moved yet?" for a partition
// queued for a drain: how many go first, and whether the concurrency cap
// or the rate holds the drain.
func TestExplainDrainWait(t *testing.T) {
	tests := []struct {
		name  string
		mc    ManagerConfig
		drain bool
		want  []string
		not   []string
	}{
		{"held by the rate", ManagerConfig{DrainRate: 2, DrainBurst: 1}, true,
			[]string{"queued for the drain of east (explain test): 28 partitions ahead; 1 of 16 switchovers running\n",
				"rate 2/s, burst 1: next start allowed in 500ms (DrainRate); this partition's not before 14.5s from now"},
			[]string{"DrainConcurrency"}},
		{"held by the concurrency cap", ManagerConfig{DrainRate: NoDrainRateLimit, DrainConcurrency: 1}, true,
			[]string{"28 partitions ahead; 1 of 1 switchovers running (waiting for one to finish: DrainConcurrency)", "no rate limit"},
			nil},
		{"no drain", ManagerConfig{}, false, nil, []string{"drain"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newSteadyHarness(t, FastConfig(), 30)
			m := h.restart(2, tt.mc)
			h.step(100 * time.Millisecond)
			if tt.drain {
				m.Drain(h.now, "east", "explain test")
			}
			ev, ok := m.Evidence(h.now, "p-029")
			require.True(t, ok)
			s, _, _ := m.State("p-029")
			text := Explain(m.cfg.Failover, s, ev)
			for _, w := range tt.want {
				assert.Contains(t, text, w)
			}
			for _, w := range tt.not {
				assert.NotContains(t, text, w)
			}
			t.Log(text)
		})
	}
}
