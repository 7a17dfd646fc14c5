package nodenet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
)

// testCA is a certificate authority generated in memory.
type testCA struct {
	cert  *x509.Certificate
	key   *ecdsa.PrivateKey
	pem   []byte
	count int64
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), count: 1}
}

// issue returns a node's certificate and key (PEM) for 127.0.0.1, usable
// as server and client.
func (ca *testCA) issue(t *testing.T, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ca.count++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.count),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// nodeTLS is a node's TLS pair: its certificate from issuer, trusting trust.
func nodeTLS(t *testing.T, issuer, trust *testCA, name string) *TLSConfig {
	t.Helper()
	certPEM, keyPEM := issuer.issue(t, name)
	c, err := MutualTLS(certPEM, keyPEM, trust.pem, "")
	require.NoError(t, err)
	return c
}

func TestMutualTLS(t *testing.T) {
	cluster, rogue := newTestCA(t, "cluster CA"), newTestCA(t, "rogue CA")
	good := func(name string) *TLSConfig { return nodeTLS(t, cluster, cluster, name) }
	// bad's certificate is signed by another CA; it trusts the cluster CA,
	// so only the other side's check can refuse it.
	bad := func(name string) *TLSConfig { return nodeTLS(t, rogue, cluster, name) }
	cases := []struct {
		name       string
		tls1, tls2 *TLSConfig
		talk       bool
		log1, log2 string // expected in node 1's / node 2's log
	}{
		{"both from the cluster CA talk", good("n1"), good("n2"), true, "", ""},
		{"acceptor with a foreign certificate is refused by the dialer", good("n1"), bad("n2"), false, "certificate", "tls"},
		{"dialer with a foreign certificate is refused by the acceptor", bad("n1"), good("n2"), false, "", "certificate"},
		{"plaintext dialer is refused by a TLS listener", nil, good("n2"), false, "", "tls handshake"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			a := startNode(t, 1, func(c *Config) { c.TLS = tc.tls1 })
			b := startNode(t, 2, func(c *Config) { c.TLS = tc.tls2 })
			mesh(t, a, b)
			if tc.talk {
				require.NoError(t, a.Send(2, learn(1, 2, 1)))
				require.NoError(t, b.Send(1, learn(2, 1, 1)))
				require.Eventually(t, func() bool { return b.in.count(1) == 1 && a.in.count(2) == 1 }, waitFor, tick)
				return
			}
			require.NoError(t, a.Send(2, learn(1, 2, 1)))
			require.Eventually(t, func() bool {
				return stringsContains(a.log.String(), "cannot reach peer") &&
					stringsContains(a.log.String(), tc.log1) && stringsContains(b.log.String(), tc.log2)
			}, waitFor, tick, "node 1:\n%s\nnode 2:\n%s", a.log.String(), b.log.String())
			time.Sleep(100 * time.Millisecond) // a few redials
			assert.False(t, a.Stats()[2].Connected)
			assert.False(t, b.Stats()[1].Connected)
			assert.Zero(t, b.in.count(1))
		})
	}
}

// TestVerifyPeerBindsTheIDToTheCertificate: a peer with a certificate of
// the cluster CA that claims another node's id is refused on both sides
// of the handshake.
func TestVerifyPeerBindsTheIDToTheCertificate(t *testing.T) {
	cluster := newTestCA(t, "cluster CA")
	names := map[NodeID]string{1: "n1", 2: "n2"}
	verify := func(id NodeID, cert *x509.Certificate) error {
		if cert.Subject.CommonName != names[id] {
			return fmt.Errorf("certificate of %q presented as node %d (%s)", cert.Subject.CommonName, id, names[id])
		}
		return nil
	}
	for _, tc := range []struct {
		name         string
		cert1, cert2 string
		talk         bool
		log          string
	}{
		{"names match", "n1", "n2", true, ""},
		{"dialer impersonates node 1", "n3", "n2", false, "presented as node 1"},
		{"acceptor impersonates node 2", "n1", "n3", false, "presented as node 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			a := startNode(t, 1, func(c *Config) { c.TLS = nodeTLS(t, cluster, cluster, tc.cert1); c.VerifyPeer = verify })
			b := startNode(t, 2, func(c *Config) { c.TLS = nodeTLS(t, cluster, cluster, tc.cert2); c.VerifyPeer = verify })
			mesh(t, a, b)
			require.NoError(t, a.Send(2, learn(1, 2, 1)))
			if tc.talk {
				require.Eventually(t, func() bool { return b.in.count(1) == 1 }, waitFor, tick)
				return
			}
			require.Eventually(t, func() bool {
				return stringsContains(a.log.String()+b.log.String(), tc.log)
			}, waitFor, tick, "node 1:\n%s\nnode 2:\n%s", a.log.String(), b.log.String())
			time.Sleep(100 * time.Millisecond)
			assert.Zero(t, b.in.count(1))
		})
	}
}

func TestMutualTLSConfig(t *testing.T) {
	ca := newTestCA(t, "ca")
	certPEM, keyPEM := ca.issue(t, "n")
	c, err := MutualTLS(certPEM, keyPEM, ca.pem, "node.example")
	require.NoError(t, err)
	assert.EqualValues(t, 0x0304, c.Server.MinVersion)
	assert.EqualValues(t, 0x0304, c.Client.MinVersion)
	assert.Equal(t, "RequireAndVerifyClientCert", c.Server.ClientAuth.String())
	assert.Equal(t, "node.example", c.clientConfig("127.0.0.1").ServerName)

	_, err = MutualTLS(certPEM, keyPEM, []byte("no pem"), "")
	require.ErrorIs(t, err, caspaxos.ErrInvalidConfig)
	_, err = MutualTLS(keyPEM, certPEM, ca.pem, "")
	require.ErrorIs(t, err, caspaxos.ErrInvalidConfig)
}
