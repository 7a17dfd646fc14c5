package certs

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
)

// ServerTLS is the configuration of a server (the agent's API) with the
// certificate and key in certFile and keyFile, accepting only clients
// whose certificate the CA in caFile signed: TLS 1.3, client certificate
// required and verified. It refuses, naming the file, a pair whose
// certificate cannot serve (a client certificate) or does not verify
// against caFile now (another CA's, expired): such a server would fail
// every handshake, with the reason in the clients' logs instead.
func ServerTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, pool, err := load(certFile, keyFile, caFile, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	return serverConfig(cert, pool), nil
}

// ClientTLS is the configuration of a client of ServerTLS: TLS 1.3, it
// presents the certificate in certFile and verifies the server's against
// the CA in caFile. serverName is the name the server's certificate must
// hold; empty means the host of the address dialled (tls.Dial and
// http.Transport fill it in), so a node reached by IP needs that IP among
// its Hosts. It refuses, naming the file, a certificate without client
// authentication or that does not verify against caFile now.
func ClientTLS(certFile, keyFile, caFile, serverName string) (*tls.Config, error) {
	cert, pool, err := load(certFile, keyFile, caFile, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	return clientConfig(cert, pool, serverName), nil
}

// serverConfig and clientConfig are the settings of nodenet.MutualTLS.
func serverConfig(cert tls.Certificate, pool *x509.CertPool) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}
}

func clientConfig(cert tls.Certificate, pool *x509.CertPool, serverName string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ServerName:   serverName,
	}
}

// load reads a key pair and a CA pool and checks that the pair's
// certificate verifies against the pool for usage.
func load(certFile, keyFile, caFile string, usage x509.ExtKeyUsage) (tls.Certificate, *x509.CertPool, error) {
	certPEM, err := readBounded(certFile)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	keyPEM, err := readBounded(keyFile)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("certs: %s and %s: %w", certFile, keyFile, err)
	}
	caPEM, err := readBounded(caFile)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return tls.Certificate{}, nil, fmt.Errorf("certs: %s: no PEM CA certificate", caFile)
	}
	leaf := cert.Leaf // set by X509KeyPair since Go 1.23
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("certs: %s: %w", certFile, err)
		}
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("certs: %s does not verify for %s against %s: %w", certFile, usageName(usage), caFile, err)
	}
	return cert, pool, nil
}

func usageName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageServerAuth:
		return "server authentication"
	case x509.ExtKeyUsageClientAuth:
		return "client authentication"
	}
	return fmt.Sprintf("usage %d", u)
}
