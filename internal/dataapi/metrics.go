package dataapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fmnode/fmnode/internal/promreg"
)

// methods the metrics label (anything else is "other"), and status classes.
const (
	mGet = iota
	mPut
	mDelete
	mOther
	numMethods
	numClasses = 5 // 1xx..5xx
)

type metrics struct {
	requests  [numMethods][numClasses]prometheus.Counter
	latency   [numMethods]prometheus.Observer
	errors    *prometheus.CounterVec
	redirects prometheus.Counter
	inFlight  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	requests := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fmnode_dataapi_requests_total",
		Help: "Data API requests answered, by method and status class.",
	}, []string{"method", "class"}))
	latency := promreg.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fmnode_dataapi_request_duration_seconds",
		Help:    "Data API request latency, by method.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5ms..16s
	}, []string{"method"}))
	m := &metrics{
		errors: promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fmnode_dataapi_errors_total",
			Help: "Data API error responses, by error code.",
		}, []string{"code"})),
		redirects: promreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fmnode_dataapi_redirects_total",
			Help: "Data API requests answered 421 with the current write region.",
		})),
		inFlight: promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fmnode_dataapi_in_flight_requests",
			Help: "Data API requests being served.",
		})),
	}
	methods := [numMethods]string{"GET", "PUT", "DELETE", "other"}
	classes := [numClasses]string{"1xx", "2xx", "3xx", "4xx", "5xx"}
	for i, method := range methods {
		m.latency[i] = latency.WithLabelValues(method)
		for j, class := range classes {
			m.requests[i][j] = requests.WithLabelValues(method, class)
		}
	}
	return m
}

func methodIndex(method string) int {
	switch method {
	case "GET":
		return mGet
	case "PUT":
		return mPut
	case "DELETE":
		return mDelete
	}
	return mOther
}

func (m *metrics) done(method string, status int, seconds float64) {
	i := methodIndex(method)
	class := min(max(status/100, 1), numClasses) - 1
	m.requests[i][class].Inc()
	m.latency[i].Observe(seconds)
}
