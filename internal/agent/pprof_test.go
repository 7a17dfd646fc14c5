package agent

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/agentcfg"
	certgen "github.com/fmnode/fmnode/internal/certs"
	"github.com/fmnode/fmnode/internal/proctest"
)

// TestPprofEndpoint: a TLS agent with admin.enable_pprof serves a CPU
// profile (gzipped protobuf) and a goroutine dump to a caller with a
// client certificate of the cluster CA, refuses one without (401), and an
// agent without the setting answers 404 on the same paths.
func TestPprofEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("real agents with TLS")
	}
	dir := t.TempDir()
	ca, err := certgen.CreateCA(filepath.Join(dir, "ca"), certgen.CAOptions{CommonName: "test CA"})
	require.NoError(t, err)
	is, err := certgen.CreateNode(ca, filepath.Join(dir, "node"), certgen.NodeOptions{Name: "n1", Hosts: []string{"127.0.0.1"}})
	require.NoError(t, err)
	cl, err := certgen.CreateClient(ca, filepath.Join(dir, "client"), certgen.ClientOptions{Name: "ops"})
	require.NoError(t, err)
	caPEM, err := os.ReadFile(is.CAFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	pair, err := tls.LoadX509KeyPair(cl.CertFile, cl.KeyFile)
	require.NoError(t, err)
	client := func(withCert bool) *http.Client {
		cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
		if withCert {
			cfg.Certificates = []tls.Certificate{pair}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 20 * time.Second}
	}

	run := func(t *testing.T, enable bool) string {
		ports := proctest.FreePorts(t, 3)
		cfg := agentcfg.Default()
		cfg.Name, cfg.NodeID, cfg.Region, cfg.Zone, cfg.Cluster = "n1", 1, "east", "east-a", "test"
		cfg.DataDir = t.TempDir()
		cfg.TLS = agentcfg.TLS{CertFile: is.CertFile, KeyFile: is.KeyFile, CAFile: is.CAFile}
		cfg.GossipKey = "AAAAAAAAAAAAAAAAAAAAAA=="
		cfg.Bind.NodeAddr = fmt.Sprintf("127.0.0.1:%d", ports[0])
		cfg.Bind.APIAddr = fmt.Sprintf("127.0.0.1:%d", ports[1])
		cfg.Bind.GossipAddr = fmt.Sprintf("127.0.0.1:%d", ports[2])
		cfg.ShutdownTimeout = 5 * time.Second
		cfg.Admin.EnablePprof = enable
		require.NoError(t, cfg.Validate())
		a, err := New(cfg, Options{Version: "test", Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- a.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			require.NoError(t, <-errc)
		})
		url := "https://" + cfg.Bind.APIAddr
		wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer wcancel()
		require.NoError(t, proctest.WaitHTTP(wctx, url+PathHealthz, client(false)))
		return url
	}
	get := func(c *http.Client, url string) (int, []byte) {
		resp, err := c.Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, b
	}

	t.Run("enabled", func(t *testing.T) {
		url := run(t, true)
		code, body := get(client(true), url+PathPprof+"profile?seconds=1")
		require.Equal(t, http.StatusOK, code, string(body))
		zr, err := gzip.NewReader(bytes.NewReader(body))
		require.NoError(t, err, "a CPU profile is gzipped protobuf")
		raw, err := io.ReadAll(zr)
		require.NoError(t, err)
		require.NotEmpty(t, raw)
		code, body = get(client(true), url+PathPprof+"goroutine?debug=1")
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, string(body), "goroutine profile:")
		code, body = get(client(true), url+PathPprof+"mutex?debug=1")
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, string(body), "sampling period=")
		for _, p := range []string{"", "profile?seconds=1", "goroutine?debug=1", "heap", "trace?seconds=1", "cmdline"} {
			code, _ := get(client(false), url+PathPprof+p)
			require.Equal(t, http.StatusUnauthorized, code, "%s without a client certificate", p)
		}
	})
	t.Run("disabled", func(t *testing.T) {
		url := run(t, false)
		for _, p := range []string{"", "profile?seconds=1", "goroutine?debug=1", "heap", "cmdline"} {
			code, _ := get(client(true), url+PathPprof+p)
			require.Equal(t, http.StatusNotFound, code, "%s with pprof off", p)
		}
	})
}
