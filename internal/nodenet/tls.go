package nodenet

import (
	"crypto/tls"
	"crypto/x509"
)

// TLSConfig is the pair of TLS configurations a node uses: Server for the
// connections it accepts, Client for those it dials.
type TLSConfig struct {
	Server, Client *tls.Config
}

// MutualTLS builds the TLS pair for a node from its certificate and key
// and the cluster CA (all PEM): TLS 1.3 only, both sides present a
// certificate and verify the other's against the CA. serverName is the
// name a dialer checks in the peer's certificate; empty means the host of
// the address dialed (so certificates need that host, e.g. an IP SAN).
// The certificate should allow both server and client authentication.
func MutualTLS(certPEM, keyPEM, caPEM []byte, serverName string) (*TLSConfig, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, configErr("TLS", "certificate and key: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, configErr("TLS", "no CA certificate in caPEM")
	}
	return &TLSConfig{
		Server: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{cert},
			ClientCAs:    pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
		},
		Client: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{cert},
			RootCAs:      pool,
			ServerName:   serverName,
		},
	}, nil
}

// clientConfig returns the dialer's config for a peer at host.
func (c *TLSConfig) clientConfig(host string) *tls.Config {
	if c.Client.ServerName != "" {
		return c.Client
	}
	cfg := c.Client.Clone()
	cfg.ServerName = host
	return cfg
}
