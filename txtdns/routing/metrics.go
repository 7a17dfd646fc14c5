package routing

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fmnode/fmnode/internal/promreg"
)

// cache lookup results other than hits (counted apart, see stripedCounter)
const (
	lookupMiss = iota
	lookupExpired
	lookupStaleServed
	numLookupResults
)

// resolution kinds and results
const (
	kindPartition = iota
	kindRegion
	kindMeta
	kindBlock
	numKinds
)

const (
	resolveOK = iota
	resolveNXDomain
	resolveError
	resolveBadRecord
	numResolveResults
)

type clientMetrics struct {
	hits        *stripedCounter
	lookups     [numLookupResults]prometheus.Counter
	resolves    [numKinds][numResolveResults]prometheus.Counter
	answers     [numOutcomes]prometheus.Counter
	redirects   [numOutcomes]prometheus.Counter
	attempts    [numAttemptClasses]prometheus.Counter
	retries     prometheus.Counter
	exhausted   prometheus.Counter
	pollsShared prometheus.Counter
	transitions [numBreakerStates]prometheus.Counter
	breakers    [numBreakerStates]prometheus.Gauge
}

// Lookup implements RouterObserver.
func (m *clientMetrics) Lookup(p uint32, r LookupResult) {
	switch r {
	case LookupHit:
		m.hits.inc(p)
	case LookupMiss:
		m.lookups[lookupMiss].Inc()
	case LookupExpired:
		m.lookups[lookupExpired].Inc()
	case LookupStaleServed:
		m.lookups[lookupStaleServed].Inc()
	}
}

// Answer implements RouterObserver.
func (m *clientMetrics) Answer(o Outcome) { m.answers[min(o, numOutcomes-1)].Inc() }

// Redirect implements RouterObserver.
func (m *clientMetrics) Redirect(o Outcome) { m.redirects[min(o, numOutcomes-1)].Inc() }

// Attempt implements RouterObserver.
func (m *clientMetrics) Attempt(c AttemptClass) { m.attempts[min(c, numAttemptClasses-1)].Inc() }

// Retry implements RouterObserver.
func (m *clientMetrics) Retry() { m.retries.Inc() }

// Exhausted implements RouterObserver.
func (m *clientMetrics) Exhausted() { m.exhausted.Inc() }

func newClientMetrics(reg prometheus.Registerer) *clientMetrics {
	lookups := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fmnode_routing_cache_lookups_total",
		Help: "Route cache lookups that were not plain hits, by result (miss, expired, stale_served).",
	}, []string{"result"}))
	hits := &stripedCounter{}
	sc := &sumCollector{desc: prometheus.NewDesc("fmnode_routing_cache_hits_total",
		"Route cache lookups answered from a fresh cached route.", nil, nil), parts: []*stripedCounter{hits}}
	if reg != nil {
		if err := reg.Register(sc); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				if existing, ok := are.ExistingCollector.(*sumCollector); ok {
					existing.add(hits) // another client on this registry: sum both
				}
			}
		}
	}
	resolves := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fmnode_routing_resolves_total",
		Help: "DNS resolutions, by record kind and result.",
	}, []string{"kind", "result"}))
	answers := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fmnode_routing_answers_total",
		Help: "Partition routes from DNS offered to the cache, by outcome (rejected_older: a stale answer was refused).",
	}, []string{"outcome"}))
	redirects := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fmnode_routing_redirects_total",
		Help: "Redirects from the data plane, by cache outcome.",
	}, []string{"outcome"}))
	attempts := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fmnode_routing_attempts_total",
		Help: "Operation attempts, by outcome.",
	}, []string{"outcome"}))
	transitions := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fmnode_routing_breaker_transitions_total",
		Help: "Circuit breaker state changes, by new state.",
	}, []string{"to"}))
	breakers := promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fmnode_routing_breakers",
		Help: "Partition-region circuit breakers not closed, by state.",
	}, []string{"state"}))
	m := &clientMetrics{
		hits: hits,
		retries: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fmnode_routing_retries_total",
			Help: "Retries after a failed attempt (each waits a backoff).",
		})),
		exhausted: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fmnode_routing_exhausted_total",
			Help: "Operations that ran out of attempts or redirects.",
		})),
		pollsShared: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fmnode_routing_polls_shared_total",
			Help: "Polls of a pending failover not sent: another operation's poll of the partition answered them.",
		})),
	}
	for i, n := range [numLookupResults]string{"miss", "expired", "stale_served"} {
		m.lookups[i] = lookups.WithLabelValues(n)
	}
	kinds := [numKinds]string{"partition", "region", "meta", "block"}
	results := [numResolveResults]string{"ok", "nxdomain", "error", "bad_record"}
	for k := range numKinds {
		for r := range numResolveResults {
			m.resolves[k][r] = resolves.WithLabelValues(kinds[k], results[r])
		}
	}
	for o := range numOutcomes {
		m.answers[o] = answers.WithLabelValues(o.String())
		m.redirects[o] = redirects.WithLabelValues(o.String())
	}
	for i, n := range [numAttemptClasses]string{"ok", "redirect", "stale_read", "failure", "permanent", "canceled"} {
		m.attempts[i] = attempts.WithLabelValues(n)
	}
	for s := range numBreakerStates {
		m.transitions[s] = transitions.WithLabelValues(s.String())
		m.breakers[s] = breakers.WithLabelValues(s.String())
	}
	return m
}

// stripedCounter is a counter spread over cache lines, so lookups of
// different partitions on different cores do not contend on one atomic
// (a shared counter costs more than the lookup it counts).
type stripedCounter struct {
	cells [64]struct {
		n atomic.Uint64
		_ [56]byte
	}
}

func (s *stripedCounter) inc(p uint32) { s.cells[p%64].n.Add(1) }

func (s *stripedCounter) sum() uint64 {
	var t uint64
	for i := range s.cells {
		t += s.cells[i].n.Load()
	}
	return t
}

// sumCollector exports the sum of striped counters as one counter.
type sumCollector struct {
	desc  *prometheus.Desc
	mu    sync.Mutex
	parts []*stripedCounter
}

func (c *sumCollector) add(s *stripedCounter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.parts = append(c.parts, s)
}

// Describe implements prometheus.Collector.
func (c *sumCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *sumCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	var t uint64
	for _, s := range c.parts {
		t += s.sum()
	}
	c.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(t))
}
