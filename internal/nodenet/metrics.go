package nodenet

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fmnode/fmnode/internal/promreg"
)

// metrics are a transport's Prometheus series, labelled with the node id
// (a constant label) and the peer id (bounded by MaxPeers).
type metrics struct {
	sent, received, dropped, reconnects, decodeErrors *prometheus.CounterVec
	connected                                         *prometheus.GaugeVec
}

// peerMetrics are one peer's children of metrics.
type peerMetrics struct {
	sent, received, dropped, reconnects, decodeErrors prometheus.Counter
	connected                                         prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, id NodeID) *metrics {
	labels := prometheus.Labels{"node": strconv.FormatUint(uint64(id), 10)}
	counter := func(name, help string) *prometheus.CounterVec {
		return promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: name, Help: help, ConstLabels: labels,
		}, []string{"peer"}))
	}
	return &metrics{
		sent:         counter("fmnode_nodenet_batches_sent_total", "Batches written to a peer connection."),
		received:     counter("fmnode_nodenet_batches_received_total", "Batches received from a peer and handed on."),
		dropped:      counter("fmnode_nodenet_batches_dropped_total", "Batches dropped because the peer's send queue was full."),
		reconnects:   counter("fmnode_nodenet_reconnects_total", "Connections to a peer established after the first."),
		decodeErrors: counter("fmnode_nodenet_decode_errors_total", "Connections closed on a frame the codec refused."),
		connected: promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fmnode_nodenet_connected", Help: "1 while a connection to the peer is up.", ConstLabels: labels,
		}, []string{"peer"})),
	}
}

func (m *metrics) peer(id NodeID) *peerMetrics {
	l := strconv.FormatUint(uint64(id), 10)
	return &peerMetrics{
		sent:         m.sent.WithLabelValues(l),
		received:     m.received.WithLabelValues(l),
		dropped:      m.dropped.WithLabelValues(l),
		reconnects:   m.reconnects.WithLabelValues(l),
		decodeErrors: m.decodeErrors.WithLabelValues(l),
		connected:    m.connected.WithLabelValues(l),
	}
}
