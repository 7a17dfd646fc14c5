package sim

import (
	"testing"
	"time"
)

// echo bounces every message back to its sender after a beat, like a
// replica answering a heartbeat.
type echo struct{ n *Network[uint64] }

func (e *echo) Deliver(now time.Duration, from, to int32, m uint64) { e.n.Send(to, from, m+1) }

// BenchmarkNetworkMessage measures one message through the whole hot path:
// fault checks, latency draw, FIFO, scheduling, popping, tracing and
// delivery, against a queue of 4300 messages in flight (one per partition
// of the failover issue's region-outage scenario). No allocation per event.
// Its sim_s/wall_s is for that load, every partition's message always in
// flight (~77k deliveries per simulated second); ns/op is the budget to
// plan a scenario with.
func BenchmarkNetworkMessage(b *testing.B) {
	w, err := NewWorld(WorldConfig{Seed: 1, Topology: DefaultWAN(), NodeRegion: regionsRoundRobin(9, 3)})
	if err != nil {
		b.Fatal(err)
	}
	e := &echo{}
	e.n = NewNetwork[uint64](w, e, 1<<16, func(t *Trace, m *uint64) { t.U64(*m) })
	w.Links.Loss, w.Links.Reorder = 0.001, 0.001
	for p := 0; p < 4300; p++ {
		e.n.Send(int32(p%9), int32((p+1)%9), 0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, node, h, arg, ok := w.Sched.Pop()
		if !ok {
			b.Fatal("queue ran dry")
		}
		_ = node
		h.Fire(w.Now(), arg)
		if e.n.InFlight() < 4000 { // replace the messages loss ate
			e.n.Send(0, 1, 0)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(w.Now())/float64(time.Second)/b.Elapsed().Seconds(), "sim_s/wall_s")
}

// BenchmarkScenario measures whole runs per scenario.
func BenchmarkScenario(b *testing.B) {
	for _, sc := range ScenarioNames() {
		for _, f := range []FaultLevel{FaultsNone, FaultsSwarm} {
			b.Run(sc+"/"+f.String(), func(b *testing.B) {
				var sim float64
				for i := 0; i < b.N; i++ {
					r, err := Run(Config{Scenario: sc, Seed: uint64(i + 1), Faults: f})
					if err != nil {
						b.Fatal(err)
					}
					sim += r.SimSeconds
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Minutes(), "seeds/min")
				b.ReportMetric(sim/b.Elapsed().Seconds(), "sim_s/wall_s")
			})
		}
	}
}
