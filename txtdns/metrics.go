package txtdns

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fmnode/fmnode/internal/promreg"
)

type publisherMetrics struct {
	routes     [numRouteOutcomes]prometheus.Counter
	regions    [numRouteOutcomes]prometheus.Counter
	partitions prometheus.Gauge
	runs       prometheus.Gauge
	serial     prometheus.Gauge
	lag        prometheus.Histogram
}

func newPublisherMetrics(reg prometheus.Registerer) *publisherMetrics {
	routes := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fmnode_txtdns_routes_total",
		Help: "Partition routes handed to the publisher, by outcome.",
	}, []string{"outcome"}))
	regions := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fmnode_txtdns_region_records_total",
		Help: "Region records handed to the publisher, by outcome.",
	}, []string{"outcome"}))
	m := &publisherMetrics{
		partitions: promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fmnode_txtdns_partitions",
			Help: "Partitions published.",
		})),
		runs: promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fmnode_txtdns_runs",
			Help: "Runs (records of consecutive partitions sharing a route) published.",
		})),
		serial: promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fmnode_txtdns_serial",
			Help: "Zone serial; it changes with every published change.",
		})),
		lag: promreg.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fmnode_txtdns_publish_lag_seconds",
			Help:    "From a route's commit to its visibility in DNS answers.",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 18), // 25 us .. 3.3 s
		})),
	}
	for i := range numRouteOutcomes {
		m.routes[i] = routes.WithLabelValues(routeOutcomeName(i))
		m.regions[i] = regions.WithLabelValues(routeOutcomeName(i))
	}
	return m
}

// Server metric indexes.
const (
	transportUDP = iota
	transportTCP
	numTransports
)

// rcodes counted by the server; others fall into rcOther.
const (
	rcNoError = iota
	rcNXDomain
	rcRefused
	rcFormErr
	rcNotImp
	rcOther
	numRcodes
)

type serverMetrics struct {
	queries  [numTransports][numRcodes]prometheus.Counter
	trunc    prometheus.Counter
	dropped  prometheus.Counter
	tcpConns prometheus.Gauge
}

func newServerMetrics(reg prometheus.Registerer) *serverMetrics {
	q := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fmnode_txtdns_queries_total",
		Help: "DNS queries answered, by transport and response code.",
	}, []string{"transport", "rcode"}))
	m := &serverMetrics{
		trunc: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fmnode_txtdns_truncated_total",
			Help: "Responses truncated (TC set) to fit the transport.",
		})),
		dropped: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fmnode_txtdns_dropped_total",
			Help: "Queries dropped unanswered because MaxInFlight were being answered.",
		})),
		tcpConns: promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fmnode_txtdns_tcp_connections",
			Help: "Open DNS TCP connections.",
		})),
	}
	transports := [numTransports]string{"udp", "tcp"}
	rcodes := [numRcodes]string{"NOERROR", "NXDOMAIN", "REFUSED", "FORMERR", "NOTIMP", "other"}
	for t := range numTransports {
		for r := range numRcodes {
			m.queries[t][r] = q.WithLabelValues(transports[t], rcodes[r])
		}
	}
	return m
}
