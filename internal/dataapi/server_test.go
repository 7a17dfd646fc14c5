package dataapi

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewServer(t *testing.T) {
	_, err := NewServer(ServerConfig{})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "ServerConfig.Handler")
	_, err = NewServer(ServerConfig{Handler: http.NotFoundHandler(), ReadHeaderTimeout: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "ServerConfig.ReadHeaderTimeout")

	srv, err := NewServer(ServerConfig{Handler: http.NotFoundHandler(), WriteTimeout: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, DefaultReadHeaderTimeout, srv.ReadHeaderTimeout)
	assert.Equal(t, DefaultReadTimeout, srv.ReadTimeout)
	assert.Equal(t, time.Minute, srv.WriteTimeout)
	assert.Equal(t, DefaultIdleTimeout, srv.IdleTimeout)
	assert.Equal(t, DefaultMaxHeaderBytes, srv.MaxHeaderBytes)
	assert.True(t, srv.Protocols.HTTP1())
	assert.False(t, srv.Protocols.HTTP2(), "no TLS: no HTTP/2 (no h2c)")
}

// The handler behind TLS, on the server NewServer configures (127.0.0.1,
// httptest's certificate).
func TestServeTLS(t *testing.T) {
	m, err := NewMemBackend(MemConfig{Region: "eu"})
	require.NoError(t, err)
	h, err := New(Config{Backend: m, Region: "eu", Partitions: 4})
	require.NoError(t, err)
	hs, err := NewServer(ServerConfig{Handler: h, TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}})
	require.NoError(t, err)
	assert.Equal(t, []string{"h2", "http/1.1"}, hs.TLSConfig.NextProtos)
	ts := httptest.NewUnstartedServer(h)
	ts.Config, ts.TLS = hs, hs.TLSConfig // httptest adds its certificate
	ts.StartTLS()
	t.Cleanup(ts.Close)
	tr := ts.Client().Transport.(*http.Transport).Clone()
	tr.ForceAttemptHTTP2 = true // the client offers h2 and gets it
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}

	req, err := http.NewRequest(http.MethodPut, ts.URL+KeyPath([]byte("k")), strings.NewReader("v"))
	require.NoError(t, err)
	req.Header.Set(HeaderEpoch, "1")
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.NotNil(t, resp.TLS)
	assert.Equal(t, "HTTP/2.0", resp.Proto)

	req, err = http.NewRequest(http.MethodPut, ts.URL+KeyPath([]byte("k")), strings.NewReader("v"))
	require.NoError(t, err)
	resp, err = client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode, "a 421 reaches the client as is")
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, _ := memServe(t, MemConfig{Epoch: 2}, Config{Registerer: reg})
	do(t, srv, http.MethodPut, "/v1/kv/k", strings.NewReader("v"), map[string]string{HeaderEpoch: "2"})
	do(t, srv, http.MethodPut, "/v1/kv/k", strings.NewReader("v"), map[string]string{HeaderEpoch: "3"}) // ahead: 421
	do(t, srv, http.MethodGet, "/v1/kv/k", nil, nil)
	do(t, srv, http.MethodGet, "/v1/kv/none", nil, nil)

	mfs, err := reg.Gather()
	require.NoError(t, err)
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems)
	assert.Len(t, mfs, 5)
	for _, mf := range mfs {
		assert.True(t, strings.HasPrefix(mf.GetName(), "fmnode_dataapi_"), mf.GetName())
	}
	assert.Equal(t, 1.0, metricValue(t, reg, "fmnode_dataapi_redirects_total", nil))
	for _, tc := range []struct {
		method, class string
		want          float64
	}{{"PUT", "2xx", 1}, {"PUT", "4xx", 1}, {"GET", "2xx", 1}, {"GET", "4xx", 1}, {"DELETE", "2xx", 0}} {
		assert.Equal(t, tc.want, metricValue(t, reg, "fmnode_dataapi_requests_total", map[string]string{"method": tc.method, "class": tc.class}),
			"%s %s", tc.method, tc.class)
	}
	assert.Equal(t, 1.0, metricValue(t, reg, "fmnode_dataapi_errors_total", map[string]string{"code": CodeRedirect}))
	assert.Equal(t, 1.0, metricValue(t, reg, "fmnode_dataapi_errors_total", map[string]string{"code": CodeNotFound}))
	assert.Equal(t, 0.0, metricValue(t, reg, "fmnode_dataapi_in_flight_requests", nil))
	assert.Equal(t, 2.0, metricValue(t, reg, "fmnode_dataapi_request_duration_seconds", map[string]string{"method": "GET"}))
	assert.Equal(t, 2.0, metricValue(t, reg, "fmnode_dataapi_request_duration_seconds", map[string]string{"method": "PUT"}))
}

// metricValue is the value of the series of name with labels (a
// histogram's sample count), or -1 if there is none.
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return -1
}
