package agent

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/fmnode/fmnode/internal/agentcfg"
	"github.com/fmnode/fmnode/internal/nodenet"
)

// certs holds the node's certificate so that SIGHUP can swap it without
// restarting: every TLS config the agent builds reads it through a
// callback at each handshake. The CA is fixed for the process's life: a
// new CA changes who may join, which is a restart (reload says so).
type certs struct {
	files  agentcfg.TLS
	cert   atomic.Pointer[tls.Certificate]
	pool   *x509.CertPool
	caPEM  []byte
	loaded atomic.Uint64 // reloads, for the log
}

// loadCerts reads the three PEM files; an error names the file.
func loadCerts(files agentcfg.TLS) (*certs, error) {
	caPEM, err := os.ReadFile(files.CAFile)
	if err != nil {
		return nil, fmt.Errorf("tls.ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("tls.ca_file: %s holds no PEM certificate", files.CAFile)
	}
	c := &certs{files: files, pool: pool, caPEM: caPEM}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// reload reads the certificate and key again. On an error the old pair
// stays in use.
func (c *certs) reload() error {
	pair, err := tls.LoadX509KeyPair(c.files.CertFile, c.files.KeyFile)
	if err != nil {
		return fmt.Errorf("tls.cert_file/tls.key_file: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("tls.cert_file: %w", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: c.pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("tls.cert_file: %s is not signed by the cluster CA in %s: %w", c.files.CertFile, c.files.CAFile, err)
	}
	pair.Leaf = leaf
	c.cert.Store(&pair)
	c.loaded.Add(1)
	return nil
}

// caChanged reports whether the CA file now differs from the one loaded.
func (c *certs) caChanged(files agentcfg.TLS) bool {
	if files.CAFile != c.files.CAFile {
		return true
	}
	b, err := os.ReadFile(files.CAFile)
	return err != nil || string(b) != string(c.caPEM)
}

func (c *certs) get() *tls.Certificate { return c.cert.Load() }

// server is the config for the node transport: TLS 1.3, a client
// certificate signed by the cluster CA required.
func (c *certs) server() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.get(), nil },
		ClientCAs:      c.pool,
		ClientAuth:     tls.RequireAndVerifyClientCert,
	}
}

// apiServer is the config for the API: a client certificate, when given,
// must be signed by the cluster CA (a foreign one fails the handshake),
// but one may be absent so that probes (Kubernetes' kubelet presents
// none) reach /healthz and /readyz; requireClientCert refuses every other
// path without one.
func (c *certs) apiServer() *tls.Config {
	cfg := c.server()
	cfg.ClientAuth = tls.VerifyClientCertIfGiven
	return cfg
}

// client is the config the agent dials peers with; the server name is
// the host dialled (nodenet and net/http fill it in).
func (c *certs) client() *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return c.get(), nil },
		RootCAs:              c.pool,
	}
}

func (c *certs) nodenet() *nodenet.TLSConfig {
	return &nodenet.TLSConfig{Server: c.server(), Client: c.client()}
}
