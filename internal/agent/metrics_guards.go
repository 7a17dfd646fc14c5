package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fmnode/fmnode/guard"
)

// guardCounters export the cores' guard counts (package guard) as
// fmnode_guard_fired_total{guard}: how often each guard and reject path of
// the node fired (stale epochs fenced, lease gates, candidates filtered,
// holds). Every guard's series exists from the start at 0, so a rate
// over a guard that never fired is 0, not absent. The node's loop fires
// them; a Prometheus counter is safe for the scrape to read meanwhile.
type guardCounters struct {
	vec *prometheus.CounterVec
	by  [guard.NumNames]prometheus.Counter
}

func newGuardCounters() *guardCounters {
	g := &guardCounters{vec: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fmnode_guard_fired_total",
		Help: "Times each guard or reject path of the node's cores fired (see package guard for what each means)."}, []string{"guard"})}
	for n := guard.Name(1); n < guard.NumNames; n++ {
		g.by[n] = g.vec.WithLabelValues(n.String())
	}
	return g
}

// Fire counts n (guard.Counter).
func (g *guardCounters) Fire(n guard.Name) {
	if n > 0 && n < guard.NumNames {
		g.by[n].Inc()
	}
}

// Describe and Collect make the counters one prometheus.Collector.
func (g *guardCounters) Describe(ch chan<- *prometheus.Desc) { g.vec.Describe(ch) }
func (g *guardCounters) Collect(ch chan<- prometheus.Metric) { g.vec.Collect(ch) }
