package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/certs"
)

func certCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runCert(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// certDirs are a test's certificates directory and CA key, apart as in
// production.
type certDirs struct{ certs, caKey string }

func newCertDirs(t *testing.T) certDirs {
	root := t.TempDir()
	return certDirs{certs: filepath.Join(root, "certs"), caKey: filepath.Join(root, "safe", "ca.key")}
}

// run runs a subcommand with --certs-dir and (but for list) --ca-key.
func (d certDirs) run(t *testing.T, sub string, args ...string) (int, string, string) {
	t.Helper()
	all := append([]string{sub}, args...)
	all = append(all, "--certs-dir", d.certs)
	if sub != "list" {
		all = append(all, "--ca-key", d.caKey)
	}
	return certCmd(t, all...)
}

func (d certDirs) mustRun(t *testing.T, sub string, args ...string) string {
	t.Helper()
	code, stdout, stderr := d.run(t, sub, args...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	return stdout
}

func readCertPEM(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	block, _ := pem.Decode(b)
	require.NotNil(t, block, path)
	c, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return c
}

func fileMode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Mode().Perm()
}

func TestCertCreateCA(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		keyType x509.PublicKeyAlgorithm
		cn      string
		life    time.Duration
	}{
		{"defaults", nil, x509.ECDSA, "fmnode CA", certs.DefaultCAValidFor},
		{"flags", []string{"--ca-name", "prod CA", "--lifetime", "48h", "--key-type", "ed25519"}, x509.Ed25519, "prod CA", 48 * time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newCertDirs(t)
			out := d.mustRun(t, "create-ca", tc.args...)
			caCrt := filepath.Join(d.certs, certs.CACertFile)
			assert.Contains(t, out, caCrt)
			assert.Contains(t, out, d.caKey)
			assert.Equal(t, fs.FileMode(0o600), fileMode(t, d.caKey))
			_, err := os.Stat(filepath.Join(d.certs, certs.CAKeyFile))
			assert.ErrorIs(t, err, fs.ErrNotExist, "the CA key is at --ca-key, not in the certificates directory")

			c := readCertPEM(t, caCrt)
			assert.True(t, c.IsCA)
			assert.Equal(t, tc.cn, c.Subject.CommonName)
			assert.Equal(t, tc.keyType, c.PublicKeyAlgorithm)
			assert.WithinDuration(t, time.Now().Add(tc.life), c.NotAfter, 5*time.Second)
			_, err = certs.LoadCAFiles(caCrt, d.caKey)
			require.NoError(t, err)
		})
	}
}

func TestCertCreateCAKeyInCertsDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	code, _, stderr := certCmd(t, "create-ca", "--certs-dir", dir)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "--ca-key", "a CA key next to the node files is pointed out")
	_, err := certs.LoadCA(dir) // the library's one-directory layout
	require.NoError(t, err)
	code, _, stderr = certCmd(t, "create-node", "n1", "127.0.0.1", "--certs-dir", dir)
	require.Equal(t, 0, code, stderr)
}

func TestCertCreateNode(t *testing.T) {
	d := newCertDirs(t)
	d.mustRun(t, "create-ca")
	// Flags after, before and between the positional arguments.
	code, out, stderr := certCmd(t, "create-node", "--lifetime", "24h", "n1", "127.0.0.1", "--ca-key", d.caKey,
		"n1.fm.example", "::1", "*.east.fm.example", "--certs-dir", d.certs)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `"n1"`)

	c := readCertPEM(t, filepath.Join(d.certs, certs.NodeCertFile))
	assert.Equal(t, "n1", c.Subject.CommonName, "the CommonName is the agent's name")
	var ips []string
	for _, ip := range c.IPAddresses {
		ips = append(ips, ip.String())
	}
	assert.Equal(t, []string{"127.0.0.1", "::1"}, ips)
	assert.Equal(t, []string{"n1.fm.example", "*.east.fm.example"}, c.DNSNames)
	assert.ElementsMatch(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, c.ExtKeyUsage)
	assert.NotZero(t, c.KeyUsage&x509.KeyUsageDigitalSignature)
	assert.False(t, c.IsCA)
	assert.WithinDuration(t, time.Now().Add(24*time.Hour), c.NotAfter, 5*time.Second)
	assert.Equal(t, fs.FileMode(0o600), fileMode(t, filepath.Join(d.certs, certs.NodeKeyFile)))

	roots := x509.NewCertPool()
	roots.AddCert(readCertPEM(t, filepath.Join(d.certs, certs.CACertFile)))
	for _, host := range []string{"127.0.0.1", "::1", "n1.fm.example", "x.east.fm.example"} {
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			_, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{usage}})
			assert.NoError(t, err, "%s for %v", host, usage)
		}
	}
	_, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.9"})
	assert.Error(t, err, "an address not given is not in the certificate")
}

func TestCertCreateClient(t *testing.T) {
	d := newCertDirs(t)
	d.mustRun(t, "create-ca")
	d.mustRun(t, "create-client", "ops")
	d.mustRun(t, "create-client", "monitor", "--key-type", "rsa-2048")

	roots := x509.NewCertPool()
	roots.AddCert(readCertPEM(t, filepath.Join(d.certs, certs.CACertFile)))
	for _, name := range []string{"ops", "monitor"} {
		c := readCertPEM(t, filepath.Join(d.certs, certs.ClientCertFile(name)))
		assert.Equal(t, name, c.Subject.CommonName)
		assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, c.ExtKeyUsage)
		assert.Empty(t, c.IPAddresses)
		assert.Empty(t, c.DNSNames)
		_, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		assert.NoError(t, err)
		_, err = c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		assert.Error(t, err, "a client certificate cannot serve")
		assert.Equal(t, fs.FileMode(0o600), fileMode(t, filepath.Join(d.certs, certs.ClientKeyFile(name))))
	}
}

func TestCertList(t *testing.T) {
	d := newCertDirs(t)
	d.mustRun(t, "create-ca")
	d.mustRun(t, "create-node", "n1", "127.0.0.2", "n1.fm.example")
	d.mustRun(t, "create-client", "ops")
	// A certificate of another CA, and a file that is no certificate.
	other := newCertDirs(t)
	other.mustRun(t, "create-ca", "--ca-name", "other CA")
	other.mustRun(t, "create-client", "stray")
	b, err := os.ReadFile(filepath.Join(other.certs, certs.ClientCertFile("stray")))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(d.certs, certs.ClientCertFile("stray")), b, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d.certs, "junk.crt"), []byte("hello"), 0o644))

	t.Run("json", func(t *testing.T) {
		out := d.mustRun(t, "list", "-o", "json")
		var got []certEntry
		require.NoError(t, json.Unmarshal([]byte(out), &got))
		byFile := map[string]certEntry{}
		for _, e := range got {
			byFile[e.File] = e
		}
		require.Len(t, byFile, 5)
		cases := []struct {
			file, cn, issuer string
			usages, ips, dns []string
			verified         bool
			verifyError      string
		}{
			{file: "ca.crt", cn: "fmnode CA", issuer: "fmnode CA", usages: []string{"ca"}, verified: true},
			{file: "node.crt", cn: "n1", issuer: "fmnode CA", usages: []string{"server", "client"},
				ips: []string{"127.0.0.2"}, dns: []string{"n1.fm.example"}, verified: true},
			{file: "client.ops.crt", cn: "ops", issuer: "fmnode CA", usages: []string{"client"}, verified: true},
			{file: "client.stray.crt", cn: "stray", issuer: "other CA", usages: []string{"client"}, verifyError: "unknown authority"},
			{file: "junk.crt", usages: []string{}, verifyError: "no PEM certificate"},
		}
		for _, tc := range cases {
			t.Run(tc.file, func(t *testing.T) {
				e, ok := byFile[tc.file]
				require.True(t, ok)
				assert.Equal(t, tc.cn, e.CommonName)
				assert.Equal(t, tc.issuer, e.Issuer)
				assert.Equal(t, tc.usages, e.Usages)
				assert.Equal(t, tc.ips, e.IPAddresses)
				assert.Equal(t, tc.dns, e.DNSNames)
				assert.Equal(t, tc.verified, e.Verified)
				if tc.verifyError != "" {
					assert.Contains(t, e.VerifyError, tc.verifyError)
				} else {
					assert.Empty(t, e.VerifyError)
				}
				if tc.cn != "" {
					assert.True(t, e.NotAfter.After(time.Now()))
				}
			})
		}
	})
	t.Run("table", func(t *testing.T) {
		out := d.mustRun(t, "list")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 6)
		assert.Equal(t, []string{"FILE", "CN", "SANS", "USAGES", "NOT", "AFTER", "ISSUER", "VERIFIES"}, strings.Fields(lines[0]))
		rows := map[string][]string{}
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			rows[f[0]] = f
		}
		assert.Equal(t, []string{"node.crt", "n1", "127.0.0.2,n1.fm.example", "server,client"}, rows["node.crt"][:4])
		assert.Equal(t, []string{"fmnode", "CA", "yes"}, rows["node.crt"][5:])
		assert.Equal(t, "yes", rows["ca.crt"][len(rows["ca.crt"])-1])
		assert.Contains(t, strings.Join(rows["client.stray.crt"], " "), "no: x509: certificate signed by unknown authority")
		assert.Contains(t, strings.Join(rows["junk.crt"], " "), "no: ")
	})
}

func TestCertRefusesToOverwrite(t *testing.T) {
	d := newCertDirs(t)
	d.mustRun(t, "create-ca")
	d.mustRun(t, "create-node", "n1", "127.0.0.1")
	d.mustRun(t, "create-client", "ops")
	cases := []struct {
		name string
		args []string
		file string // the file named, unchanged by the refusal
	}{
		{"CA", []string{"create-ca"}, d.caKey},
		{"node", []string{"create-node", "n1", "127.0.0.1"}, filepath.Join(d.certs, certs.NodeKeyFile)},
		{"client", []string{"create-client", "ops"}, filepath.Join(d.certs, certs.ClientKeyFile("ops"))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, err := os.ReadFile(tc.file)
			require.NoError(t, err)
			code, _, stderr := d.run(t, tc.args[0], tc.args[1:]...)
			assert.Equal(t, 1, code)
			assert.Contains(t, stderr, tc.file+" already exists")
			assert.Contains(t, stderr, "--overwrite")
			after, err := os.ReadFile(tc.file)
			require.NoError(t, err)
			assert.Equal(t, before, after)
		})
	}
	t.Run("overwrite", func(t *testing.T) {
		old := readCertPEM(t, filepath.Join(d.certs, certs.NodeCertFile))
		d.mustRun(t, "create-node", "n1", "127.0.0.2", "--overwrite")
		c := readCertPEM(t, filepath.Join(d.certs, certs.NodeCertFile))
		assert.NotEqual(t, old.SerialNumber, c.SerialNumber)
		assert.Equal(t, "127.0.0.2", c.IPAddresses[0].String())
	})
}

func TestCertBadArgs(t *testing.T) {
	d := newCertDirs(t)
	d.mustRun(t, "create-ca", "--lifetime", "2h")
	cases := []struct {
		name    string
		args    []string // --certs-dir and --ca-key appended unless noDirs
		noDirs  bool
		code    int
		message string
	}{
		{"no subcommand", nil, true, 2, "usage: fmnode cert"},
		{"unknown subcommand", []string{"renew"}, true, 2, `unknown subcommand "renew"`},
		{"no certs dir", []string{"create-ca"}, true, 2, "--certs-dir: must be set"},
		{"list without certs dir", []string{"list"}, true, 2, "--certs-dir: must be set"},
		{"node without a name", []string{"create-node"}, false, 2, "NAME: missing"},
		{"node without hosts", []string{"create-node", "n1"}, false, 2, "HOST: at least one"},
		{"node name not an agent's", []string{"create-node", "N1", "127.0.0.1"}, false, 2, `NAME: "N1" is not an agent name`},
		{"bad host", []string{"create-node", "n1", "127.0.0.2:7400", "--lifetime", "1h"}, false, 2, `HOST: "127.0.0.2:7400": a host, not host:port`},
		{"client without a name", []string{"create-client"}, false, 2, "NAME: missing"},
		{"client with two names", []string{"create-client", "a", "b"}, false, 2, `unexpected arguments ["b"]`},
		{"client name with a slash", []string{"create-client", "a/b", "--lifetime", "1h"}, false, 2, "NAME: must be of [A-Za-z0-9._-]"},
		{"unparsable lifetime", []string{"create-node", "n1", "127.0.0.1", "--lifetime", "5 years"}, false, 2, `invalid value "5 years" for flag -lifetime`},
		{"lifetime a unit mistake", []string{"create-client", "ops", "--lifetime", "24ns"}, false, 2, "--lifetime: must be in"},
		{"lifetime past the CA", []string{"create-client", "ops", "--lifetime", "3h"}, false, 2, "--lifetime: 3h0m0s would end at"},
		{"default lifetime past the CA", []string{"create-node", "n1", "127.0.0.1"}, false, 2, "--lifetime: 43800h0m0s would end at"},
		{"unknown key type", []string{"create-client", "ops", "--key-type", "dsa"}, false, 2, `--key-type: "dsa" is not one of ecdsa-p256`},
		{"CA name not printable", []string{"create-ca", "--ca-name", "a\nb", "--overwrite"}, false, 2, "--ca-name: must be printable ASCII"},
		{"CA key elsewhere missing", []string{"create-client", "ops", "--lifetime", "1h", "--ca-key", "/nonexistent/ca.key", "--certs-dir", d.certs}, true, 1, "--certs-dir/--ca-key: the CA"},
		{"certs dir without ca.crt", []string{"create-node", "n1", "127.0.0.1", "--certs-dir", filepath.Join(d.certs, "n2"), "--ca-key", d.caKey}, true, 1,
			"copy the CA's ca.crt into the directory first"},
		{"list bad output", []string{"list", "-o", "yaml"}, false, 2, `-o: "yaml" is not table or json`},
		{"list missing dir", []string{"list", "--certs-dir", "/nonexistent/certs"}, true, 1, "--certs-dir: open /nonexistent/certs"},
		{"ca takes no arguments", []string{"create-ca", "extra"}, false, 2, `unexpected arguments ["extra"]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if !tc.noDirs {
				args = append(append([]string{}, args...), "--certs-dir", d.certs)
				if args[0] != "list" {
					args = append(args, "--ca-key", d.caKey)
				}
			}
			code, stdout, stderr := certCmd(t, args...)
			assert.Equal(t, tc.code, code, "stderr: %s", stderr)
			assert.Contains(t, stderr, tc.message)
			assert.Empty(t, stdout)
		})
	}
	// Nothing was written by the refusals.
	entries, err := os.ReadDir(d.certs)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, certs.CACertFile, entries[0].Name())
}

func TestCertHelp(t *testing.T) {
	code, _, stderr := certCmd(t, "--help")
	assert.Equal(t, 0, code)
	for name := range certSubcommands() {
		assert.Contains(t, stderr, name)
	}
	for _, tc := range []struct {
		sub   string
		flags []string
	}{
		{"create-ca", []string{"-certs-dir", "-ca-key", "-ca-name", "-lifetime", "-key-type", "-overwrite"}},
		{"create-node", []string{"NAME HOST...", "-certs-dir", "-ca-key", "-lifetime", "-key-type", "-overwrite"}},
		{"create-client", []string{"NAME", "-certs-dir", "-ca-key", "-lifetime"}},
		{"list", []string{"-certs-dir", "-o"}},
	} {
		t.Run(tc.sub, func(t *testing.T) {
			code, stdout, stderr := certCmd(t, tc.sub, "--help")
			assert.Equal(t, 0, code)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, "usage: fmnode cert "+tc.sub)
			for _, f := range tc.flags {
				assert.Contains(t, stderr, f)
			}
		})
	}
	var out, errb bytes.Buffer
	assert.Equal(t, 0, dispatch(context.Background(), []string{"help"}, &out, &errb))
	assert.Contains(t, errb.String(), "cert")
}

// TestCertTLSHandshake runs a loopback mutual-TLS handshake with a node
// certificate and a client certificate the CLI made, in the
// configurations of internal/certs the agent and the CLI use.
func TestCertTLSHandshake(t *testing.T) {
	d := newCertDirs(t)
	d.mustRun(t, "create-ca")
	d.mustRun(t, "create-node", "n1", "127.0.0.1", "localhost")
	d.mustRun(t, "create-client", "ops")
	ca := filepath.Join(d.certs, certs.CACertFile)
	server, err := certs.ServerTLS(filepath.Join(d.certs, certs.NodeCertFile), filepath.Join(d.certs, certs.NodeKeyFile), ca)
	require.NoError(t, err)
	client, err := certs.ClientTLS(filepath.Join(d.certs, certs.ClientCertFile("ops")), filepath.Join(d.certs, certs.ClientKeyFile("ops")), ca, "")
	require.NoError(t, err)
	// The node certificate also dials (node to node), the client's cannot serve.
	_, err = certs.ClientTLS(filepath.Join(d.certs, certs.NodeCertFile), filepath.Join(d.certs, certs.NodeKeyFile), ca, "")
	require.NoError(t, err)
	_, err = certs.ServerTLS(filepath.Join(d.certs, certs.ClientCertFile("ops")), filepath.Join(d.certs, certs.ClientKeyFile("ops")), ca)
	require.Error(t, err)

	ln, err := tls.Listen("tcp", "127.0.0.1:0", server)
	require.NoError(t, err)
	defer ln.Close()
	type seen struct {
		peerCN string
		err    error
	}
	done := make(chan seen, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- seen{err: err}
			return
		}
		defer conn.Close()
		tc := conn.(*tls.Conn)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			done <- seen{err: err}
			return
		}
		_, err = tc.Write([]byte("ok"))
		done <- seen{peerCN: tc.ConnectionState().PeerCertificates[0].Subject.CommonName, err: err}
	}()
	dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: client}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := dialer.DialContext(ctx, "tcp", ln.Addr().String()) // ServerName 127.0.0.1: an IP SAN
	require.NoError(t, err)
	defer conn.Close()
	buf := make([]byte, 2)
	_, err = conn.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "ok", string(buf))
	tc := conn.(*tls.Conn)
	assert.Equal(t, "n1", tc.ConnectionState().PeerCertificates[0].Subject.CommonName)
	s := <-done
	require.NoError(t, s.err)
	assert.Equal(t, "ops", s.peerCN)
}
