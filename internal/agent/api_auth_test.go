package agent

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/agentcfg"
	certgen "github.com/fmnode/fmnode/internal/certs"
)

// TestClientCertRequiredExceptOpenPaths: under TLS the API answers 401 to
// a caller without a client certificate, except the probes, and /metrics
// only when admin.metrics_without_client_cert says so. A certificate from
// the cluster CA passes everywhere.
func TestClientCertRequiredExceptOpenPaths(t *testing.T) {
	dir := t.TempDir()
	ca, err := certgen.CreateCA(filepath.Join(dir, "ca"), certgen.CAOptions{CommonName: "test CA"})
	require.NoError(t, err)
	nd, err := certgen.CreateNode(ca, filepath.Join(dir, "node"), certgen.NodeOptions{Name: "n1", Hosts: []string{"127.0.0.1"}})
	require.NoError(t, err)
	cl, err := certgen.CreateClient(ca, filepath.Join(dir, "client"), certgen.ClientOptions{Name: "ops"})
	require.NoError(t, err)
	files := agentcfg.TLS{CertFile: nd.CertFile, KeyFile: nd.KeyFile, CAFile: nd.CAFile}
	caPEM, err := os.ReadFile(nd.CAFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	pair, err := tls.LoadX509KeyPair(cl.CertFile, cl.KeyFile)
	require.NoError(t, err)

	for _, open := range []bool{false, true} {
		a := &Agent{}
		a.cfg.Admin.MetricsWithoutClientCert = open
		a.certs, err = loadCerts(files)
		require.NoError(t, err)
		// A server of its own, not httptest's: StartTLS would add its own
		// certificate in front of the agent's.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		srv := &http.Server{TLSConfig: a.certs.apiServer(), Handler: a.requireClientCert(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTeapot) // reached the handler
		}))}
		go func() { _ = srv.ServeTLS(ln, "", "") }()
		url := "https://" + ln.Addr().String()
		get := func(path string, withCert bool) int {
			cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
			if withCert {
				cfg.Certificates = []tls.Certificate{pair}
			}
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
			resp, err := c.Get(url + path)
			require.NoError(t, err)
			resp.Body.Close()
			return resp.StatusCode
		}
		metricsNoCert := http.StatusUnauthorized
		if open {
			metricsNoCert = http.StatusTeapot
		}
		for _, tc := range []struct {
			path     string
			withCert bool
			want     int
		}{
			{PathHealthz, false, http.StatusTeapot},
			{PathReadyz, false, http.StatusTeapot},
			{PathMetrics, false, metricsNoCert},
			{PathStatus, false, http.StatusUnauthorized},
			{PathPause, false, http.StatusUnauthorized},
			{PathMetrics, true, http.StatusTeapot},
			{PathStatus, true, http.StatusTeapot},
		} {
			assert.Equal(t, tc.want, get(tc.path, tc.withCert), "open=%v %s cert=%v", open, tc.path, tc.withCert)
		}
		srv.Close()
	}
}
