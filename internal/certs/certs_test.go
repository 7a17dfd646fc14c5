package certs

import (
	"crypto/x509"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newCA creates a CA in a fresh directory.
func newCA(t *testing.T, name string) CA {
	t.Helper()
	ca, err := CreateCA(filepath.Join(t.TempDir(), "ca"), CAOptions{CommonName: name})
	require.NoError(t, err)
	return ca
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Mode().Perm()
}

func TestCreateCA(t *testing.T) {
	for _, kt := range []KeyType{"", KeyECDSAP256, KeyECDSAP384, KeyEd25519, KeyRSA2048} {
		name := string(kt)
		if kt == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "nested", "ca")
			before := time.Now().Truncate(time.Second)
			ca, err := CreateCA(dir, CAOptions{CommonName: "fmnode test CA", ValidFor: 48 * time.Hour, KeyType: kt})
			require.NoError(t, err)
			assert.Equal(t, filepath.Join(dir, CACertFile), ca.CertFile)
			assert.Equal(t, filepath.Join(dir, CAKeyFile), ca.KeyFile)
			assert.Equal(t, fs.FileMode(0o600), mode(t, ca.KeyFile))
			assert.Equal(t, fs.FileMode(0o644), mode(t, ca.CertFile))
			assert.Equal(t, fs.FileMode(0o700), mode(t, dir))
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Len(t, entries, 2, "no temporary file is left behind")

			c := ca.Cert
			assert.True(t, c.IsCA)
			assert.True(t, c.MaxPathLenZero)
			assert.Equal(t, "fmnode test CA", c.Subject.CommonName)
			assert.NotZero(t, c.KeyUsage&x509.KeyUsageCertSign)
			assert.WithinDuration(t, before.Add(-Backdate), c.NotBefore, 2*time.Second)
			assert.WithinDuration(t, before.Add(48*time.Hour), c.NotAfter, 2*time.Second)

			loaded, err := LoadCA(dir)
			require.NoError(t, err)
			assert.Equal(t, ca.Cert.Raw, loaded.Cert.Raw)
			assert.Equal(t, ca.CertPEM, loaded.CertPEM)
			require.NoError(t, matchKey(loaded.Cert, loaded.Key))

			// The loaded CA signs a node of the same key type, whose files
			// make a server configuration.
			n, err := CreateNode(loaded, filepath.Join(t.TempDir(), "n"), NodeOptions{
				Name: "n1", Hosts: []string{"127.0.0.1"}, ValidFor: time.Hour, KeyType: kt,
			})
			require.NoError(t, err)
			require.NoError(t, n.Cert.CheckSignatureFrom(ca.Cert))
			_, err = ServerTLS(n.CertFile, n.KeyFile, n.CAFile)
			require.NoError(t, err)
		})
	}
}

func TestCreateCADefaults(t *testing.T) {
	ca := newCA(t, "ca")
	assert.WithinDuration(t, time.Now().Add(DefaultCAValidFor), ca.Cert.NotAfter, 5*time.Second)
	assert.Equal(t, x509.ECDSA, ca.Cert.PublicKeyAlgorithm)
}

func TestLoadCARefuses(t *testing.T) {
	ca, other := newCA(t, "ca"), newCA(t, "other")
	node, err := CreateNode(ca, t.TempDir(), NodeOptions{Name: "n1", Hosts: []string{"127.0.0.1"}})
	require.NoError(t, err)
	copyFile := func(t *testing.T, from, to string) {
		b, err := os.ReadFile(from)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(to, b, 0o600))
	}
	cases := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		want    string
	}{
		{"missing directory", func(t *testing.T, dir string) { require.NoError(t, os.Remove(dir)) }, "no such file"},
		{"no key", func(t *testing.T, dir string) { copyFile(t, ca.CertFile, filepath.Join(dir, CACertFile)) }, CAKeyFile},
		{"key of another CA", func(t *testing.T, dir string) {
			copyFile(t, ca.CertFile, filepath.Join(dir, CACertFile))
			copyFile(t, other.KeyFile, filepath.Join(dir, CAKeyFile))
		}, "does not match"},
		{"a node certificate", func(t *testing.T, dir string) {
			copyFile(t, node.CertFile, filepath.Join(dir, CACertFile))
			copyFile(t, node.KeyFile, filepath.Join(dir, CAKeyFile))
		}, "not a CA certificate"},
		{"not PEM", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, CACertFile), []byte("hello"), 0o600))
		}, "no PEM CERTIFICATE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.prepare(t, dir)
			_, err := LoadCA(dir)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestCreateNode(t *testing.T) {
	ca := newCA(t, "ca")
	dir := filepath.Join(t.TempDir(), "n1")
	n, err := CreateNode(ca, dir, NodeOptions{
		Name:  "fm-eu1-a-01",
		Hosts: []string{"127.0.0.1", "localhost", "::1", "127.0.0.1", "*.fm.example", "localhost", "127.0.0.2"},
	})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, NodeCertFile), n.CertFile)
	assert.Equal(t, filepath.Join(dir, NodeKeyFile), n.KeyFile)
	assert.Equal(t, filepath.Join(dir, CACertFile), n.CAFile)
	assert.Equal(t, fs.FileMode(0o600), mode(t, n.KeyFile))
	assert.Equal(t, fs.FileMode(0o644), mode(t, n.CertFile))

	c := n.Cert
	assert.Equal(t, "fm-eu1-a-01", c.Subject.CommonName)
	assert.False(t, c.IsCA)
	assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, c.ExtKeyUsage)
	assert.Equal(t, []string{"localhost", "*.fm.example"}, c.DNSNames, "in order, duplicates dropped")
	require.Len(t, c.IPAddresses, 3)
	for i, want := range []string{"127.0.0.1", "::1", "127.0.0.2"} {
		assert.True(t, c.IPAddresses[i].Equal(net.ParseIP(want)), "IP %d: %v", i, c.IPAddresses[i])
	}
	assert.WithinDuration(t, time.Now().Add(DefaultCertValidFor), c.NotAfter, 5*time.Second)
	require.NoError(t, c.CheckSignatureFrom(ca.Cert))
	for _, h := range []string{"127.0.0.1", "localhost", "x.fm.example"} {
		assert.NoError(t, c.VerifyHostname(h), h)
	}
	assert.Error(t, c.VerifyHostname("127.0.0.3"))

	caCopy, err := os.ReadFile(n.CAFile)
	require.NoError(t, err)
	assert.Equal(t, ca.CertPEM, caCopy, "the CA certificate is copied next to the node's")
}

func TestCreateClient(t *testing.T) {
	ca := newCA(t, "ca")
	// A client's files in the CA's own directory: ca.crt is already the
	// right one and is left alone.
	caDir := filepath.Dir(ca.CertFile)
	st, err := os.Stat(ca.CertFile)
	require.NoError(t, err)
	cl, err := CreateClient(ca, caDir, ClientOptions{Name: "root", ValidFor: 24 * time.Hour})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(caDir, "client.root.crt"), cl.CertFile)
	assert.Equal(t, filepath.Join(caDir, "client.root.key"), cl.KeyFile)
	assert.Equal(t, ca.CertFile, cl.CAFile)
	assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, cl.Cert.ExtKeyUsage)
	assert.Empty(t, cl.Cert.DNSNames)
	assert.Empty(t, cl.Cert.IPAddresses)
	st2, err := os.Stat(ca.CertFile)
	require.NoError(t, err)
	assert.True(t, os.SameFile(st, st2), "ca.crt not rewritten")

	// A second client in the same directory.
	_, err = CreateClient(ca, caDir, ClientOptions{Name: "monitor"})
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(caDir, "client.monitor.crt"))
}

func TestValidation(t *testing.T) {
	ca := newCA(t, "ca")
	shortCA, err := CreateCA(t.TempDir(), CAOptions{CommonName: "short", ValidFor: 2 * time.Hour})
	require.NoError(t, err)
	hosts := []string{"127.0.0.1"}
	cases := []struct {
		name string
		run  func(dir string) error
		want string // the field named
	}{
		{"CA without a name", func(dir string) error { _, err := CreateCA(dir, CAOptions{}); return err }, "CAOptions.CommonName: must be set"},
		{"CA name not printable", func(dir string) error { _, err := CreateCA(dir, CAOptions{CommonName: "a\nb"}); return err }, "CAOptions.CommonName"},
		{"CA name too long", func(dir string) error {
			_, err := CreateCA(dir, CAOptions{CommonName: string(make([]byte, 65))})
			return err
		}, "CAOptions.CommonName: longer than 64"},
		{"CA valid for 24ns", func(dir string) error {
			_, err := CreateCA(dir, CAOptions{CommonName: "ca", ValidFor: 24})
			return err
		}, "CAOptions.ValidFor"},
		{"CA valid for a century", func(dir string) error {
			_, err := CreateCA(dir, CAOptions{CommonName: "ca", ValidFor: 100 * 365 * 24 * time.Hour})
			return err
		}, "CAOptions.ValidFor"},
		{"CA negative validity", func(dir string) error {
			_, err := CreateCA(dir, CAOptions{CommonName: "ca", ValidFor: -time.Hour})
			return err
		}, "CAOptions.ValidFor"},
		{"CA unknown key type", func(dir string) error {
			_, err := CreateCA(dir, CAOptions{CommonName: "ca", KeyType: "dsa"})
			return err
		}, `CAOptions.KeyType: "dsa"`},
		{"CA without a directory", func(string) error { _, err := CreateCA("", CAOptions{CommonName: "ca"}); return err }, "dir: must be set"},
		{"node without a name", func(dir string) error {
			_, err := CreateNode(ca, dir, NodeOptions{Hosts: hosts})
			return err
		}, "NodeOptions.Name: must be set"},
		{"node name with a slash", func(dir string) error {
			_, err := CreateNode(ca, dir, NodeOptions{Name: "../n1", Hosts: hosts})
			return err
		}, "NodeOptions.Name: must be of"},
		{"node name like a flag", func(dir string) error {
			_, err := CreateNode(ca, dir, NodeOptions{Name: "-n1", Hosts: hosts})
			return err
		}, "NodeOptions.Name: must not start"},
		{"node without hosts", func(dir string) error {
			_, err := CreateNode(ca, dir, NodeOptions{Name: "n1"})
			return err
		}, "NodeOptions.Hosts: at least one"},
		{"host with a port", func(dir string) error {
			_, err := CreateNode(ca, dir, NodeOptions{Name: "n1", Hosts: []string{"127.0.0.1", "127.0.0.1:7400"}})
			return err
		}, "NodeOptions.Hosts[1]: \"127.0.0.1:7400\": a host, not host:port"},
		{"host with an underscore", func(dir string) error {
			_, err := CreateNode(ca, dir, NodeOptions{Name: "n1", Hosts: []string{"bad_host"}})
			return err
		}, "NodeOptions.Hosts[0]"},
		{"mistyped IP", func(dir string) error {
			_, err := CreateNode(ca, dir, NodeOptions{Name: "n1", Hosts: []string{"127.0.1"}})
			return err
		}, "NodeOptions.Hosts[0]: \"127.0.1\": not an IP address, and not a DNS name"},
		{"empty host", func(dir string) error {
			_, err := CreateNode(ca, dir, NodeOptions{Name: "n1", Hosts: []string{""}})
			return err
		}, "NodeOptions.Hosts[0]: empty"},
		{"too many hosts", func(dir string) error {
			_, err := CreateNode(ca, dir, NodeOptions{Name: "n1", Hosts: make([]string, MaxHosts+1)})
			return err
		}, "NodeOptions.Hosts: more than"},
		{"node valid for 30s", func(dir string) error {
			_, err := CreateNode(ca, dir, NodeOptions{Name: "n1", Hosts: hosts, ValidFor: 30 * time.Second})
			return err
		}, "NodeOptions.ValidFor: must be in"},
		{"node outliving its CA", func(dir string) error {
			_, err := CreateNode(shortCA, dir, NodeOptions{Name: "n1", Hosts: hosts})
			return err
		}, "NodeOptions.ValidFor: the certificate would expire"},
		{"node with an unknown key type", func(dir string) error {
			_, err := CreateNode(ca, dir, NodeOptions{Name: "n1", Hosts: hosts, KeyType: "rsa-1024"})
			return err
		}, "NodeOptions.KeyType"},
		{"node with a zero CA", func(dir string) error {
			_, err := CreateNode(CA{}, dir, NodeOptions{Name: "n1", Hosts: hosts})
			return err
		}, "CA: needs Cert"},
		{"node with a CA of mismatched key", func(dir string) error {
			bad := ca
			bad.Key = shortCA.Key
			_, err := CreateNode(bad, dir, NodeOptions{Name: "n1", Hosts: hosts})
			return err
		}, "CA.Key: the key does not match"},
		{"client without a name", func(dir string) error {
			_, err := CreateClient(ca, dir, ClientOptions{})
			return err
		}, "ClientOptions.Name: must be set"},
		{"client name with a space", func(dir string) error {
			_, err := CreateClient(ca, dir, ClientOptions{Name: "a b"})
			return err
		}, "ClientOptions.Name"},
		{"client valid for a century", func(dir string) error {
			_, err := CreateClient(ca, dir, ClientOptions{Name: "root", ValidFor: 100 * 365 * 24 * time.Hour})
			return err
		}, "ClientOptions.ValidFor"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			err := tc.run(dir)
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
			assert.NoDirExists(t, dir, "nothing written on a refusal")
		})
	}
}

func TestOverwrite(t *testing.T) {
	ca := newCA(t, "ca")
	other := newCA(t, "other")
	hosts := []string{"127.0.0.1"}
	cases := []struct {
		name string
		// first and again write the same files; again refuses unless
		// overwrite.
		first     func(t *testing.T, dir string)
		again     func(dir string, overwrite bool) error
		refused   string // the file named
		unchanged []string
	}{
		{
			name: "CA",
			first: func(t *testing.T, dir string) {
				_, err := CreateCA(dir, CAOptions{CommonName: "ca"})
				require.NoError(t, err)
			},
			again: func(dir string, ow bool) error {
				_, err := CreateCA(dir, CAOptions{CommonName: "ca", Overwrite: ow})
				return err
			},
			refused:   CAKeyFile,
			unchanged: []string{CACertFile, CAKeyFile},
		},
		{
			name: "CA with only its certificate there",
			first: func(t *testing.T, dir string) {
				require.NoError(t, os.MkdirAll(dir, 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(dir, CACertFile), []byte("old"), 0o644))
			},
			again: func(dir string, ow bool) error {
				_, err := CreateCA(dir, CAOptions{CommonName: "ca", Overwrite: ow})
				return err
			},
			refused:   CACertFile,
			unchanged: []string{CACertFile},
		},
		{
			name: "node",
			first: func(t *testing.T, dir string) {
				_, err := CreateNode(ca, dir, NodeOptions{Name: "n1", Hosts: hosts})
				require.NoError(t, err)
			},
			again: func(dir string, ow bool) error {
				_, err := CreateNode(ca, dir, NodeOptions{Name: "n1", Hosts: hosts, Overwrite: ow})
				return err
			},
			refused:   NodeKeyFile,
			unchanged: []string{NodeCertFile, NodeKeyFile},
		},
		{
			name: "node directory trusting another CA",
			first: func(t *testing.T, dir string) {
				_, err := CreateClient(other, dir, ClientOptions{Name: "root"})
				require.NoError(t, err)
			},
			again: func(dir string, ow bool) error {
				_, err := CreateNode(ca, dir, NodeOptions{Name: "n1", Hosts: hosts, Overwrite: ow})
				return err
			},
			refused:   CACertFile,
			unchanged: []string{CACertFile},
		},
		{
			name: "client",
			first: func(t *testing.T, dir string) {
				_, err := CreateClient(ca, dir, ClientOptions{Name: "root"})
				require.NoError(t, err)
			},
			again: func(dir string, ow bool) error {
				_, err := CreateClient(ca, dir, ClientOptions{Name: "root", Overwrite: ow})
				return err
			},
			refused:   "client.root.key",
			unchanged: []string{"client.root.crt", "client.root.key"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			tc.first(t, dir)
			read := func() map[string]string {
				m := map[string]string{}
				for _, f := range tc.unchanged {
					b, err := os.ReadFile(filepath.Join(dir, f))
					require.NoError(t, err)
					m[f] = string(b)
				}
				return m
			}
			before := read()

			err := tc.again(dir, false)
			require.ErrorIs(t, err, fs.ErrExist)
			assert.Contains(t, err.Error(), filepath.Join(dir, tc.refused))
			assert.Contains(t, err.Error(), "Overwrite")
			assert.Equal(t, before, read(), "nothing replaced on a refusal")
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			for _, e := range entries {
				assert.NotContains(t, e.Name(), ".tmp-", "no temporary file left")
			}

			require.NoError(t, tc.again(dir, true))
			after := read()
			for _, f := range tc.unchanged {
				assert.NotEqual(t, before[f], after[f], "%s replaced with Overwrite", f)
			}
		})
	}
}

// TestCreateCAFiles keeps the CA key in a directory of its own, apart
// from ca.crt (the layout of `fmnode cert --ca-key`), and reads it back.
func TestCreateCAFiles(t *testing.T) {
	root := t.TempDir()
	certFile := filepath.Join(root, "certs", CACertFile)
	keyFile := filepath.Join(root, "safe", "my-ca.key")
	ca, err := CreateCAFiles(certFile, keyFile, CAOptions{CommonName: "split"})
	require.NoError(t, err)
	assert.Equal(t, certFile, ca.CertFile)
	assert.Equal(t, keyFile, ca.KeyFile)
	assert.Equal(t, fs.FileMode(0o600), mode(t, keyFile))
	assert.Equal(t, fs.FileMode(0o644), mode(t, certFile))
	for _, d := range []string{"certs", "safe"} {
		entries, err := os.ReadDir(filepath.Join(root, d))
		require.NoError(t, err)
		assert.Len(t, entries, 1, "%s holds its one file and no temporary one", d)
	}

	loaded, err := LoadCAFiles(certFile, keyFile)
	require.NoError(t, err)
	assert.Equal(t, ca.Cert.Raw, loaded.Cert.Raw)
	// The certificates directory receives a node without the CA key.
	n, err := CreateNode(loaded, filepath.Join(root, "certs"), NodeOptions{Name: "n1", Hosts: []string{"127.0.0.1"}})
	require.NoError(t, err)
	_, err = ServerTLS(n.CertFile, n.KeyFile, n.CAFile)
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "certs", CAKeyFile))
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func TestCreateCAFilesRefuses(t *testing.T) {
	cases := []struct {
		name              string
		certFile, keyFile func(root string) string
		prepare           func(t *testing.T, root string)
		want              string
	}{
		{
			name:     "no certFile",
			certFile: func(string) string { return "" }, keyFile: func(r string) string { return filepath.Join(r, "k") },
			want: "certFile: must be set",
		},
		{
			name:     "no keyFile",
			certFile: func(r string) string { return filepath.Join(r, "c") }, keyFile: func(string) string { return "" },
			want: "keyFile: must be set",
		},
		{
			name:     "one file for both",
			certFile: func(r string) string { return filepath.Join(r, "x") }, keyFile: func(r string) string { return filepath.Join(r, ".", "x") },
			want: "is also the certFile",
		},
		{
			// All or none across directories: the key elsewhere refuses
			// before the certificate is written.
			name:     "the key exists in its directory",
			certFile: func(r string) string { return filepath.Join(r, "certs", CACertFile) },
			keyFile:  func(r string) string { return filepath.Join(r, "safe", CAKeyFile) },
			prepare: func(t *testing.T, r string) {
				require.NoError(t, os.MkdirAll(filepath.Join(r, "safe"), 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(r, "safe", CAKeyFile), []byte("old"), 0o600))
			},
			want: filepath.Join("safe", CAKeyFile) + " already exists",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.prepare != nil {
				tc.prepare(t, root)
			}
			_, err := CreateCAFiles(tc.certFile(root), tc.keyFile(root), CAOptions{CommonName: "ca"})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			if tc.prepare != nil {
				_, err := os.Stat(tc.certFile(root))
				assert.ErrorIs(t, err, fs.ErrNotExist, "nothing written after a refusal")
			}
			_, err = LoadCAFiles(tc.certFile(root), tc.keyFile(root))
			require.Error(t, err)
		})
	}
}

func TestLoadCAFilesRefusesAnotherKey(t *testing.T) {
	ca, other := newCA(t, "ca"), newCA(t, "other")
	_, err := LoadCAFiles(ca.CertFile, other.KeyFile)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not match")
	assert.Contains(t, err.Error(), other.KeyFile)
	_, err = LoadCA("")
	assert.ErrorIs(t, err, ErrInvalid)
}
