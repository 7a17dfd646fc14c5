package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/nodenet"
)

// handshakeTimeout bounds each side of a test handshake.
const handshakeTimeout = 10 * time.Second

// result is what each side of a handshake saw.
type result struct {
	serverErr, clientErr error
	// peerCN is the client certificate's CommonName the server saw.
	peerCN string
}

// handshake runs one TLS connection over 127.0.0.1: the server writes
// "ok" after its handshake, the client reads it. Under TLS 1.3 a client's
// handshake completes before the server has checked the client's
// certificate, so the server's refusal shows in the client's read.
func handshake(t *testing.T, server, client *tls.Config) result {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()

	type srv struct {
		err error
		cn  string
	}
	done := make(chan srv, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			done <- srv{err: err}
			return
		}
		defer raw.Close()
		_ = raw.SetDeadline(time.Now().Add(handshakeTimeout))
		c := tls.Server(raw, server)
		if err := c.HandshakeContext(ctx); err != nil {
			done <- srv{err: err}
			return
		}
		var cn string
		if pc := c.ConnectionState().PeerCertificates; len(pc) > 0 {
			cn = pc[0].Subject.CommonName
		}
		_, err = c.Write([]byte("ok"))
		if err == nil {
			err = c.Close()
		}
		done <- srv{err: err, cn: cn}
	}()

	var res result
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: handshakeTimeout}, Config: client}
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
		var b []byte
		b, err = io.ReadAll(c)
		if err == nil && string(b) != "ok" {
			err = io.ErrUnexpectedEOF
		}
		c.Close()
	}
	res.clientErr = err
	select {
	case s := <-done:
		res.serverErr, res.peerCN = s.err, s.cn
	case <-ctx.Done():
		t.Fatal("server side of the handshake did not finish")
	}
	return res
}

// unchecked builds configs from files without load's self-check, to see
// what a peer does with a certificate ServerTLS or ClientTLS would refuse.
func unchecked(t *testing.T, certFile, keyFile, caFile string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	caPEM, err := os.ReadFile(caFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	return cert, pool
}

// pki is a cluster CA with a node and a client, a foreign CA with the
// same, and certificates that expired.
type pki struct {
	ca, foreign                   CA
	node, client                  Issued
	foreignNode, foreignClient    Issued
	expiredNode, expiredClient    Issued
	serverNamedOther, ed25519Node Issued
	// clientWithSAN is a client certificate (ClientAuth only) that holds
	// 127.0.0.1 too, so that only its key usage keeps it from serving.
	clientWithSAN Issued
}

func newPKI(t *testing.T) pki {
	t.Helper()
	var p pki
	p.ca, p.foreign = newCA(t, "cluster CA"), newCA(t, "foreign CA")
	node := func(ca CA, opts NodeOptions) Issued {
		if opts.Name == "" {
			opts.Name = "n1"
		}
		if opts.Hosts == nil {
			opts.Hosts = []string{"127.0.0.1", "localhost"}
		}
		n, err := CreateNode(ca, t.TempDir(), opts)
		require.NoError(t, err)
		return n
	}
	client := func(ca CA, opts ClientOptions) Issued {
		opts.Name = "root"
		c, err := CreateClient(ca, t.TempDir(), opts)
		require.NoError(t, err)
		return c
	}
	past := time.Now().Add(-48 * time.Hour)
	p.node, p.client = node(p.ca, NodeOptions{}), client(p.ca, ClientOptions{})
	p.foreignNode, p.foreignClient = node(p.foreign, NodeOptions{}), client(p.foreign, ClientOptions{})
	p.expiredNode = node(p.ca, NodeOptions{IssuedAt: past, ValidFor: 24 * time.Hour})
	p.expiredClient = client(p.ca, ClientOptions{IssuedAt: past, ValidFor: 24 * time.Hour})
	p.serverNamedOther = node(p.ca, NodeOptions{Hosts: []string{"other.fm.example", "127.0.0.2"}})
	p.ed25519Node = node(p.ca, NodeOptions{Name: "n2", KeyType: KeyEd25519})
	var err error
	p.clientWithSAN, err = issue(p.ca, t.TempDir(), &x509.Certificate{
		Subject:     pkix.Name{CommonName: "sneaky"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}, leafParams{prefix: "test", certFile: "c.crt", keyFile: "c.key"})
	require.NoError(t, err)
	return p
}

func TestHandshake(t *testing.T) {
	p := newPKI(t)
	caFile := p.ca.CertFile
	// server and client build configs; a cert from files of issued, the
	// pool trusting caFile.
	server := func(i Issued) *tls.Config { return serverConfig(unchecked(t, i.CertFile, i.KeyFile, caFile)) }
	client := func(i Issued, name string) *tls.Config {
		cert, pool := unchecked(t, i.CertFile, i.KeyFile, caFile)
		return clientConfig(cert, pool, name)
	}
	cases := []struct {
		name           string
		server, client *tls.Config
		// wantServer and wantClient are in the side's error; both empty:
		// the connection works.
		wantServer, wantClient string
		peerCN                 string
	}{
		{"client to node", server(p.node), client(p.client, ""), "", "", "root"},
		{"node to node (a node certificate dials too)", server(p.node), client(p.node, "localhost"), "", "", "n1"},
		{"ed25519 node to ECDSA node", server(p.node), client(p.ed25519Node, "127.0.0.1"), "", "", "n2"},
		{"client to ed25519 node", server(p.ed25519Node), client(p.client, ""), "", "", "root"},
		// A Go client offers only a certificate of a CA the server asks
		// for: the foreign one stays home.
		{"client of a foreign CA has no certificate to offer", server(p.node), client(p.foreignClient, ""), "didn't provide a certificate", "certificate required", ""},
		{"client of a foreign CA is refused", server(p.node), func() *tls.Config {
			c := client(p.foreignClient, "")
			cert := c.Certificates[0]
			c.Certificates = nil
			c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
			return c
		}(), "unknown authority", "unknown certificate authority", ""},
		{"node of a foreign CA is refused", server(p.foreignNode), client(p.client, ""), "bad certificate", "unknown authority", ""},
		{"a client certificate cannot serve", server(p.client), client(p.node, "127.0.0.1"), "bad certificate", "doesn't contain any IP SANs", ""},
		{"a client certificate cannot serve, even with the right SAN", server(p.clientWithSAN), client(p.node, "127.0.0.1"), "bad certificate", "incompatible key usage", ""},
		{"expired server certificate is refused", server(p.expiredNode), client(p.client, ""), "bad certificate", "expired", ""},
		{"expired client certificate is refused", server(p.node), client(p.expiredClient, ""), "expired", "expired certificate", ""},
		{"server certificate for another name is refused", server(p.serverNamedOther), client(p.client, ""), "bad certificate", "127.0.0.1", ""},
		{"server certificate for another name, that name asked", server(p.serverNamedOther), client(p.client, "other.fm.example"), "", "", "root"},
		{"a client without a certificate is refused", server(p.node), &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: client(p.client, "").RootCAs}, "certificate", "certificate required", ""},
		{"TLS 1.2 is refused", server(p.node), func() *tls.Config {
			c := client(p.client, "")
			c.MinVersion, c.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
			return c
		}(), "unsupported versions", "protocol version", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := handshake(t, tc.server, tc.client)
			if tc.wantServer == "" && tc.wantClient == "" {
				require.NoError(t, res.serverErr)
				require.NoError(t, res.clientErr)
				assert.Equal(t, tc.peerCN, res.peerCN)
				return
			}
			require.Error(t, res.serverErr, "server side")
			require.Error(t, res.clientErr, "client side")
			assert.Contains(t, res.serverErr.Error(), tc.wantServer)
			assert.Contains(t, res.clientErr.Error(), tc.wantClient)
		})
	}
}

func TestServerClientTLS(t *testing.T) {
	p := newPKI(t)
	ca := p.ca.CertFile
	cases := []struct {
		name    string
		build   func() (*tls.Config, error)
		wantErr string
	}{
		{"server with a node certificate", func() (*tls.Config, error) { return ServerTLS(p.node.CertFile, p.node.KeyFile, ca) }, ""},
		{"client with a client certificate", func() (*tls.Config, error) { return ClientTLS(p.client.CertFile, p.client.KeyFile, ca, "") }, ""},
		{"client with a node certificate", func() (*tls.Config, error) { return ClientTLS(p.node.CertFile, p.node.KeyFile, ca, "n1") }, ""},
		{"server with a client certificate", func() (*tls.Config, error) { return ServerTLS(p.client.CertFile, p.client.KeyFile, ca) },
			p.client.CertFile + " does not verify for server authentication against " + ca},
		{"server with a foreign certificate", func() (*tls.Config, error) { return ServerTLS(p.foreignNode.CertFile, p.foreignNode.KeyFile, ca) },
			"unknown authority"},
		{"server with an expired certificate", func() (*tls.Config, error) { return ServerTLS(p.expiredNode.CertFile, p.expiredNode.KeyFile, ca) },
			"expired"},
		{"client with an expired certificate", func() (*tls.Config, error) {
			return ClientTLS(p.expiredClient.CertFile, p.expiredClient.KeyFile, ca, "")
		}, p.expiredClient.CertFile + " does not verify for client authentication"},
		{"key of another certificate", func() (*tls.Config, error) { return ServerTLS(p.node.CertFile, p.client.KeyFile, ca) },
			p.node.CertFile + " and " + p.client.KeyFile},
		{"missing CA file", func() (*tls.Config, error) { return ServerTLS(p.node.CertFile, p.node.KeyFile, ca+".missing") },
			ca + ".missing"},
		{"CA file without a certificate", func() (*tls.Config, error) { return ServerTLS(p.node.CertFile, p.node.KeyFile, p.node.KeyFile) },
			p.node.KeyFile + ": no PEM CA certificate"},
		{"missing key", func() (*tls.Config, error) { return ClientTLS(p.client.CertFile, "", ca, "") }, "open"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.build()
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.EqualValues(t, tls.VersionTLS13, cfg.MinVersion)
			assert.Len(t, cfg.Certificates, 1)
		})
	}

	srv, err := ServerTLS(p.node.CertFile, p.node.KeyFile, ca)
	require.NoError(t, err)
	assert.Equal(t, tls.RequireAndVerifyClientCert, srv.ClientAuth)
	cl, err := ClientTLS(p.client.CertFile, p.client.KeyFile, ca, "")
	require.NoError(t, err)
	res := handshake(t, srv, cl)
	require.NoError(t, res.serverErr)
	require.NoError(t, res.clientErr)
	assert.Equal(t, "root", res.peerCN)
}

// TestNodenetMutualTLS checks that the node directories made here are what
// nodenet.MutualTLS takes: a node serves and dials another with them.
func TestNodenetMutualTLS(t *testing.T) {
	ca := newCA(t, "cluster CA")
	root := t.TempDir()
	pair := func(name string) *nodenet.TLSConfig {
		dir := filepath.Join(root, name)
		n, err := CreateNode(ca, dir, NodeOptions{Name: name, Hosts: []string{"127.0.0.1"}})
		require.NoError(t, err)
		read := func(p string) []byte {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			return b
		}
		c, err := nodenet.MutualTLS(read(n.CertFile), read(n.KeyFile), read(n.CAFile), "127.0.0.1")
		require.NoError(t, err)
		return c
	}
	n1, n2 := pair("n1"), pair("n2")
	for _, tc := range []struct {
		name     string
		from, to *nodenet.TLSConfig
		peer     string
	}{
		{"n1 dials n2", n1, n2, "n1"},
		{"n2 dials n1", n2, n1, "n2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := handshake(t, tc.to.Server, tc.from.Client)
			require.NoError(t, res.serverErr)
			require.NoError(t, res.clientErr)
			assert.Equal(t, tc.peer, res.peerCN)
		})
	}
}
