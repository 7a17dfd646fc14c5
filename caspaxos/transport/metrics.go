package transport

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fmnode/fmnode/internal/promreg"

	"github.com/fmnode/fmnode/caspaxos"
)

// acceptorMetrics are an acceptor's Prometheus series, labelled with its id.
type acceptorMetrics struct {
	messagesIn  [caspaxos.MsgEraseReply + 1]prometheus.Counter
	itemsIn     prometheus.Counter
	messagesOut prometheus.Counter
	dropped     prometheus.Counter
	batches     prometheus.Counter
	fsync       prometheus.Histogram
	batchMsgs   prometheus.Histogram
	batchPuts   prometheus.Histogram
	groupWait   prometheus.Histogram
	conns       prometheus.Gauge
	connErrors  *prometheus.CounterVec
}

func newAcceptorMetrics(reg prometheus.Registerer, id caspaxos.NodeID) *acceptorMetrics {
	labels := prometheus.Labels{"acceptor": strconv.FormatUint(uint64(id), 10)}
	msgs := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fmnode_acceptor_messages_in_total", Help: "Requests received, by type.", ConstLabels: labels,
	}, []string{"type"}))
	m := &acceptorMetrics{
		itemsIn: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fmnode_acceptor_items_in_total", Help: "Request items received.", ConstLabels: labels})),
		messagesOut: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fmnode_acceptor_messages_out_total", Help: "Replies routed after their batch was durable.", ConstLabels: labels})),
		dropped: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fmnode_acceptor_replies_dropped_total", Help: "Replies dropped because their connection was gone or its queue full.", ConstLabels: labels})),
		batches: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fmnode_acceptor_batches_total", Help: "Ready groups persisted (one Store.Apply each).", ConstLabels: labels})),
		fsync: promreg.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fmnode_acceptor_apply_seconds", Help: "Store.Apply latency (write and fsync) per group.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 14)})),
		batchMsgs: promreg.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fmnode_acceptor_batch_messages", Help: "Requests stepped per group (group commit factor).", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(1, 2, 12)})),
		batchPuts: promreg.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fmnode_acceptor_batch_records", Help: "Records written per group.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(1, 2, 14)})),
		groupWait: promreg.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fmnode_acceptor_group_wait_seconds", Help: "Time a group was held back for more requests to join it.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(10e-6, 2, 14)})),
		conns: promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fmnode_acceptor_connections", Help: "Open proposer connections.", ConstLabels: labels})),
		connErrors: promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fmnode_acceptor_connection_errors_total", Help: "Connections closed on an error, by reason.", ConstLabels: labels,
		}, []string{"reason"})),
	}
	for t := caspaxos.MsgPrepare; t <= caspaxos.MsgEraseReply; t++ {
		m.messagesIn[t] = msgs.WithLabelValues(t.String())
	}
	return m
}

// Proposal outcomes, the label values of fmnode_proposer_results_total.
const (
	outcomeCommitted = iota
	outcomeMismatch
	outcomeUnknown
	outcomeNoQuorum
	outcomeRefused
	outcomeError
	numOutcomes
)

func outcomeNames() [numOutcomes]string {
	return [numOutcomes]string{"committed", "version_mismatch", "unknown", "no_quorum", "refused", "error"}
}

// proposerMetrics are a proposer node's Prometheus series.
type proposerMetrics struct {
	results    [numOutcomes]prometheus.Counter
	latency    prometheus.Histogram
	sendErrors prometheus.Counter
	messages   prometheus.Counter
	items      prometheus.Counter
}

func newProposerMetrics(reg prometheus.Registerer, id caspaxos.NodeID) *proposerMetrics {
	labels := prometheus.Labels{"proposer": strconv.FormatUint(uint64(id), 10)}
	results := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fmnode_proposer_results_total", Help: "Finished proposals by outcome.", ConstLabels: labels,
	}, []string{"outcome"}))
	m := &proposerMetrics{
		latency: promreg.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fmnode_proposer_latency_seconds", Help: "Proposal latency inside the proposer (all attempts).", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(100e-6, 2, 16)})),
		sendErrors: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fmnode_proposer_send_errors_total", Help: "Messages the transport dropped.", ConstLabels: labels})),
		messages: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fmnode_proposer_messages_out_total", Help: "Messages sent to acceptors.", ConstLabels: labels})),
		items: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fmnode_proposer_items_out_total", Help: "Items sent to acceptors (items per message = batching factor).", ConstLabels: labels})),
	}
	for i, name := range outcomeNames() {
		m.results[i] = results.WithLabelValues(name)
	}
	return m
}
