package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fmnode/fmnode/internal/agentcfg"
	"github.com/fmnode/fmnode/internal/certs"
)

// The layout `fmnode cert` writes, that of `cockroach cert`: one
// certificates directory (--certs-dir) holds ca.crt, node.crt/node.key and
// client.<name>.crt/.key, and is what a node or a client is given; the CA
// key is at --ca-key, which defaults to <certs-dir>/ca.key for a test
// cluster but belongs elsewhere (off the nodes) in production.

// certSubcommand is one `fmnode cert` subcommand.
type certSubcommand struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

func certSubcommands() map[string]certSubcommand {
	return map[string]certSubcommand{
		"create-ca":     {summary: "create the cluster's CA: <certs-dir>/ca.crt and the key at --ca-key", run: runCertCreateCA},
		"create-node":   {summary: "create node.crt/node.key for the agent NAME, serving at HOST...", run: runCertCreateNode},
		"create-client": {summary: "create client.NAME.crt/.key for an application or the CLI", run: runCertCreateClient},
		"list":          {summary: "list the certificates in --certs-dir and whether they verify against its ca.crt", run: runCertList},
	}
}

// runCert is `fmnode cert <subcommand>`.
func runCert(_ context.Context, args []string, stdout, stderr io.Writer) int {
	subs := certSubcommands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		certUsage(stderr, subs)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, ok := subs[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "fmnode cert: unknown subcommand %q\n\n", args[0])
		certUsage(stderr, subs)
		return 2
	}
	return sub.run(args[1:], stdout, stderr)
}

func certUsage(w io.Writer, subs map[string]certSubcommand) {
	fmt.Fprintln(w, "usage: fmnode cert <subcommand> [args] --certs-dir DIR [flags]")
	fmt.Fprintln(w)
	names := make([]string, 0, len(subs))
	for n := range subs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-14s %s\n", n, subs[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Each takes --help. The certificates directory holds ca.crt, node.crt/.key and client.<name>.crt/.key;")
	fmt.Fprintln(w, "keep the CA key (--ca-key) off the nodes.")
}

// certFlags are the flags the subcommands share; each registers those it
// takes.
type certFlags struct {
	certsDir  string
	caKey     string
	lifetime  time.Duration
	keyType   string
	overwrite bool
}

func (f *certFlags) registerDir(fs *flag.FlagSet) {
	fs.StringVar(&f.certsDir, "certs-dir", "", "certificates directory (required)")
}

func (f *certFlags) registerCreate(fs *flag.FlagSet, lifetime time.Duration) {
	f.registerDir(fs)
	fs.StringVar(&f.caKey, "ca-key", "", "the CA key file (default <certs-dir>/ca.key; keep it off the nodes)")
	fs.DurationVar(&f.lifetime, "lifetime", lifetime, fmt.Sprintf("validity of the certificate, %v..%v", certs.MinValidFor, certs.MaxValidFor))
	fs.StringVar(&f.keyType, "key-type", string(certs.KeyECDSAP256), "key type: "+strings.Join(keyTypeNames(), ", "))
	fs.BoolVar(&f.overwrite, "overwrite", false, "replace existing files instead of refusing")
}

func keyTypeNames() []string {
	return []string{string(certs.KeyECDSAP256), string(certs.KeyECDSAP384), string(certs.KeyEd25519), string(certs.KeyRSA2048)}
}

// check validates the shared flags; the error names the flag.
func (f *certFlags) check(create bool) error {
	if f.certsDir == "" {
		return errors.New("--certs-dir: must be set")
	}
	if !create {
		return nil
	}
	if f.lifetime < certs.MinValidFor || f.lifetime > certs.MaxValidFor {
		return fmt.Errorf("--lifetime: must be in %v..%v, got %v", certs.MinValidFor, certs.MaxValidFor, f.lifetime)
	}
	if !slices.Contains(keyTypeNames(), f.keyType) {
		return fmt.Errorf("--key-type: %q is not one of %s", f.keyType, strings.Join(keyTypeNames(), ", "))
	}
	if f.caKey == "" {
		f.caKey = filepath.Join(f.certsDir, certs.CAKeyFile)
	}
	return nil
}

func (f *certFlags) caCertFile() string { return filepath.Join(f.certsDir, certs.CACertFile) }

// loadCA reads the CA that signs: <certs-dir>/ca.crt and --ca-key.
func (f *certFlags) loadCA() (certs.CA, error) {
	if _, err := os.Stat(f.caCertFile()); errors.Is(err, fs.ErrNotExist) {
		// A new node's directory: the CA certificate goes in first.
		return certs.CA{}, fmt.Errorf("--certs-dir: %s does not exist (copy the CA's ca.crt into the directory first)", f.caCertFile())
	}
	ca, err := certs.LoadCAFiles(f.caCertFile(), f.caKey)
	if err != nil {
		return certs.CA{}, fmt.Errorf("--certs-dir/--ca-key: the CA (%s, %s): %w", f.caCertFile(), f.caKey, err)
	}
	return ca, nil
}

// signer checks the create flags, loads the CA that signs and checks it
// outlives the certificate asked for; when !ok, code is the exit code and
// the reason is printed.
func (f *certFlags) signer(stderr io.Writer, name string) (ca certs.CA, code int, ok bool) {
	if err := f.check(true); err != nil {
		return certs.CA{}, usageFail(stderr, name, err), false
	}
	ca, err := f.loadCA()
	if err != nil {
		return certs.CA{}, certFail(stderr, name, err, nil), false
	}
	if err := f.checkOutlives(ca); err != nil {
		return certs.CA{}, usageFail(stderr, name, err), false
	}
	return ca, 0, true
}

// checkOutlives refuses a --lifetime past the CA's expiry, naming the
// flag (the library would name its ValidFor field).
func (f *certFlags) checkOutlives(ca certs.CA) error {
	if end := time.Now().Add(f.lifetime); end.After(ca.Cert.NotAfter) {
		return fmt.Errorf("--lifetime: %v would end at %s, after the CA's expiry (%s); use a shorter --lifetime or a new CA",
			f.lifetime, end.UTC().Format(time.RFC3339), ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// newCertFlagSet is a flag set whose --help prints the usage line and
// the description before the flags.
func newCertFlagSet(name, usage, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("fmnode cert "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: fmnode cert %s %s\n\n%s\n\nflags:\n", name, usage, about)
		fs.PrintDefaults()
	}
	return fs
}

// parseCertArgs parses flags placed before, between or after the
// positional arguments. ok false means return code (0 for --help, 2 for a
// bad flag, which the flag package has reported).
func parseCertArgs(fs *flag.FlagSet, args []string) (pos []string, ok bool, code int) {
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil, false, 0
	}
	if err != nil {
		return nil, false, 2
	}
	return pos, true, 0
}

// certFail reports err of subcommand name and returns its exit code: 2
// for a bad argument (ErrInvalid, with the library's field renamed to the
// flag or argument in fields), 1 otherwise (a refusal to overwrite, which
// names the file, a file that cannot be read or written).
func certFail(stderr io.Writer, name string, err error, fields map[string]string) int {
	msg := err.Error()
	code := 1
	if errors.Is(err, certs.ErrInvalid) {
		code = 2
		if rest, ok := strings.CutPrefix(msg, certs.ErrInvalid.Error()+": "); ok {
			field, detail, _ := strings.Cut(rest, ": ")
			base, _, _ := strings.Cut(field, "[")
			if flagName, ok := fields[base]; ok {
				msg = flagName + ": " + detail
			}
		}
	}
	// The library's refusal names the file and its option; here the
	// option is a flag.
	msg = strings.ReplaceAll(msg, "set Overwrite to replace it", "--overwrite replaces it")
	fmt.Fprintf(stderr, "fmnode cert %s: %s\n", name, msg)
	return code
}

// usageFail reports a bad argument: exit code 2.
func usageFail(stderr io.Writer, name string, err error) int {
	fmt.Fprintf(stderr, "fmnode cert %s: %v\n", name, err)
	return 2
}

func runCertCreateCA(args []string, stdout, stderr io.Writer) int {
	const name = "create-ca"
	fs := newCertFlagSet(name, "--certs-dir DIR [--ca-key FILE] [flags]",
		"Creates the cluster's certificate authority: DIR/ca.crt, which every node and client trusts, and its key at\n"+
			"--ca-key, which signs their certificates.", stderr)
	var f certFlags
	f.registerCreate(fs, certs.DefaultCAValidFor)
	caName := fs.String("ca-name", "fmnode CA", "the CA's CommonName")
	pos, ok, code := parseCertArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageFail(stderr, name, fmt.Errorf("unexpected arguments %q (create-ca takes flags only)", pos))
	}
	if err := f.check(true); err != nil {
		return usageFail(stderr, name, err)
	}
	ca, err := certs.CreateCAFiles(f.caCertFile(), f.caKey, certs.CAOptions{
		CommonName: *caName, ValidFor: f.lifetime, KeyType: certs.KeyType(f.keyType), Overwrite: f.overwrite,
	})
	if err != nil {
		return certFail(stderr, name, err, map[string]string{
			"CAOptions.CommonName": "--ca-name", "CAOptions.ValidFor": "--lifetime", "CAOptions.KeyType": "--key-type",
			"keyFile": "--ca-key", "certFile": "--certs-dir",
		})
	}
	fmt.Fprintf(stdout, "created CA %q, valid until %s:\n  %s\n  %s\n",
		ca.Cert.Subject.CommonName, ca.Cert.NotAfter.UTC().Format(time.RFC3339), ca.CertFile, ca.KeyFile)
	if filepath.Clean(filepath.Dir(ca.KeyFile)) == filepath.Clean(f.certsDir) {
		fmt.Fprintf(stderr, "note: the CA key is in %s; give nodes and clients only their own files and ca.crt, or use --ca-key\n", f.certsDir)
	}
	return 0
}

func runCertCreateNode(args []string, stdout, stderr io.Writer) int {
	const name = "create-node"
	fs := newCertFlagSet(name, "NAME HOST... --certs-dir DIR [--ca-key FILE] [flags]",
		"Creates DIR/node.crt and DIR/node.key, signed by the CA of DIR/ca.crt and --ca-key, for both serving and\n"+
			"dialling. NAME is the CommonName and must be the agent's `name`: peers check it against the cluster spec's name\n"+
			"for the node's id. Each HOST, an IP address or a DNS name (\"*.\" allowed), becomes a SAN: list every\n"+
			"address peers and clients dial the node by.", stderr)
	var f certFlags
	f.registerCreate(fs, certs.DefaultCertValidFor)
	pos, ok, code := parseCertArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		return usageFail(stderr, name, errors.New("NAME: missing (the agent's name), then at least one HOST"))
	}
	nodeName, hosts := pos[0], pos[1:]
	if err := checkNodeName(nodeName); err != nil {
		return usageFail(stderr, name, err)
	}
	if len(hosts) == 0 {
		return usageFail(stderr, name, errors.New("HOST: at least one is needed (the IP addresses and DNS names the node is dialled by)"))
	}
	ca, code, ok := f.signer(stderr, name)
	if !ok {
		return code
	}
	out, err := certs.CreateNode(ca, f.certsDir, certs.NodeOptions{
		Name: nodeName, Hosts: hosts, ValidFor: f.lifetime, KeyType: certs.KeyType(f.keyType), Overwrite: f.overwrite,
	})
	if err != nil {
		return certFail(stderr, name, err, map[string]string{
			"NodeOptions.Name": "NAME", "NodeOptions.Hosts": "HOST", "NodeOptions.ValidFor": "--lifetime",
			"NodeOptions.KeyType": "--key-type", "dir": "--certs-dir",
		})
	}
	fmt.Fprintf(stdout, "created node certificate %q for %s, valid until %s:\n  %s\n  %s\n",
		nodeName, strings.Join(sans(out.Cert), ", "), out.Cert.NotAfter.UTC().Format(time.RFC3339), out.CertFile, out.KeyFile)
	return 0
}

// checkNodeName holds NAME to the agent's rule for its `name` (agentcfg:
// 1..63 of [a-z0-9-], no '-' at either end), stricter than what a
// certificate may hold: a certificate named otherwise could never match
// the name the cluster spec records, and every peer would refuse it.
func checkNodeName(s string) error {
	if err := agentcfg.CheckLabel("name", s); err != nil {
		return fmt.Errorf("NAME: %q is not an agent name (%v); it must equal the agent's `name`", s, err)
	}
	return nil
}

func runCertCreateClient(args []string, stdout, stderr io.Writer) int {
	const name = "create-client"
	fs := newCertFlagSet(name, "NAME --certs-dir DIR [--ca-key FILE] [flags]",
		"Creates DIR/client.NAME.crt and DIR/client.NAME.key, signed by the CA of DIR/ca.crt and --ca-key, for dialling\n"+
			"only (an application, fmnode init/config): it cannot serve, so a leaked client key cannot impersonate a node.", stderr)
	var f certFlags
	f.registerCreate(fs, certs.DefaultCertValidFor)
	pos, ok, code := parseCertArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		if len(pos) == 0 {
			return usageFail(stderr, name, errors.New("NAME: missing (the client's name, its CommonName)"))
		}
		return usageFail(stderr, name, fmt.Errorf("unexpected arguments %q after NAME", pos[1:]))
	}
	ca, code, ok := f.signer(stderr, name)
	if !ok {
		return code
	}
	out, err := certs.CreateClient(ca, f.certsDir, certs.ClientOptions{
		Name: pos[0], ValidFor: f.lifetime, KeyType: certs.KeyType(f.keyType), Overwrite: f.overwrite,
	})
	if err != nil {
		return certFail(stderr, name, err, map[string]string{
			"ClientOptions.Name": "NAME", "ClientOptions.ValidFor": "--lifetime", "ClientOptions.KeyType": "--key-type",
			"dir": "--certs-dir",
		})
	}
	fmt.Fprintf(stdout, "created client certificate %q, valid until %s:\n  %s\n  %s\n",
		pos[0], out.Cert.NotAfter.UTC().Format(time.RFC3339), out.CertFile, out.KeyFile)
	return 0
}

// certEntry is one row of `fmnode cert list`.
type certEntry struct {
	File        string    `json:"file"`
	CommonName  string    `json:"common_name"`
	IPAddresses []string  `json:"ip_addresses,omitempty"`
	DNSNames    []string  `json:"dns_names,omitempty"`
	Usages      []string  `json:"usages"`
	NotAfter    time.Time `json:"not_after"`
	Issuer      string    `json:"issuer"`
	// Verified is whether the certificate verifies against the
	// directory's ca.crt now, for its usages; VerifyError says why not.
	Verified    bool   `json:"verified"`
	VerifyError string `json:"verify_error,omitempty"`
}

func runCertList(args []string, stdout, stderr io.Writer) int {
	const name = "list"
	fs := newCertFlagSet(name, "--certs-dir DIR [-o table|json]",
		"Lists the certificates (*.crt) in DIR: subject CommonName, SANs, usages, expiry, issuer, and whether each\n"+
			"verifies now against DIR/ca.crt.", stderr)
	var f certFlags
	f.registerDir(fs)
	output := fs.String("o", "table", "output: table or json")
	pos, ok, code := parseCertArgs(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageFail(stderr, name, fmt.Errorf("unexpected arguments %q (list takes flags only)", pos))
	}
	if err := f.check(false); err != nil {
		return usageFail(stderr, name, err)
	}
	if *output != "table" && *output != "json" {
		return usageFail(stderr, name, fmt.Errorf("-o: %q is not table or json", *output))
	}
	entries, err := listCerts(f.certsDir)
	if err != nil {
		fmt.Fprintf(stderr, "fmnode cert %s: --certs-dir: %v\n", name, err)
		return 1
	}
	if *output == "json" {
		printJSON(stdout, entries)
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tCN\tSANS\tUSAGES\tNOT AFTER\tISSUER\tVERIFIES")
	for _, e := range entries {
		s := strings.Join(append(slices.Clone(e.IPAddresses), e.DNSNames...), ",")
		if s == "" {
			s = "-"
		}
		verifies := "yes"
		if !e.Verified {
			verifies = "no: " + e.VerifyError
		}
		notAfter := "-"
		if !e.NotAfter.IsZero() {
			notAfter = e.NotAfter.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.File, orDash(e.CommonName), s, orDash(strings.Join(e.Usages, ",")),
			notAfter, orDash(e.Issuer), verifies)
	}
	_ = tw.Flush()
	return 0
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// listCerts reads every *.crt in dir, sorted by name. A file that is not
// a certificate is a row whose VerifyError says so.
func listCerts(dir string) ([]certEntry, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	roots, rootsErr := readPool(filepath.Join(dir, certs.CACertFile))
	entries := []certEntry{}
	for _, de := range des {
		if de.IsDir() || !strings.HasSuffix(de.Name(), ".crt") {
			continue
		}
		e := certEntry{File: de.Name(), Usages: []string{}}
		cert, err := readFirstCert(filepath.Join(dir, de.Name()))
		if err != nil {
			e.VerifyError = err.Error()
			entries = append(entries, e)
			continue
		}
		e.CommonName, e.Issuer, e.NotAfter = cert.Subject.CommonName, cert.Issuer.CommonName, cert.NotAfter
		e.DNSNames = cert.DNSNames
		for _, ip := range cert.IPAddresses {
			e.IPAddresses = append(e.IPAddresses, ip.String())
		}
		e.Usages = usages(cert)
		switch {
		case rootsErr != nil:
			e.VerifyError = rootsErr.Error()
		default:
			_, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
			e.Verified = err == nil
			if err != nil {
				e.VerifyError = err.Error()
			}
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// readPool is the pool of the CA certificates in path.
func readPool(path string) (*x509.CertPool, error) {
	b, err := readCertFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate", path)
	}
	return pool, nil
}

// readFirstCert parses the first CERTIFICATE block of path.
func readFirstCert(path string) (*x509.Certificate, error) {
	b, err := readCertFile(path)
	if err != nil {
		return nil, err
	}
	for rest := b; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return nil, fmt.Errorf("%s: no PEM certificate", path)
		}
		if block.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return c, nil
		}
	}
}

// readCertFile reads at most certs.MaxPEMBytes of path: a file named
// *.crt that is something else must not be read whole.
func readCertFile(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, certs.MaxPEMBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > certs.MaxPEMBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes, not a certificate", path, certs.MaxPEMBytes)
	}
	return b, nil
}

// usages names what a certificate is for: "ca" (it signs certificates),
// "server", "client".
func usages(c *x509.Certificate) []string {
	out := []string{}
	if c.IsCA && c.KeyUsage&x509.KeyUsageCertSign != 0 {
		out = append(out, "ca")
	}
	for _, u := range c.ExtKeyUsage {
		switch u {
		case x509.ExtKeyUsageServerAuth:
			out = append(out, "server")
		case x509.ExtKeyUsageClientAuth:
			out = append(out, "client")
		case x509.ExtKeyUsageAny:
			out = append(out, "any")
		default:
			out = append(out, fmt.Sprintf("eku-%d", u))
		}
	}
	return out
}

// sans are a certificate's IP and DNS SANs, IPs first.
func sans(c *x509.Certificate) []string {
	var out []string
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	return append(out, c.DNSNames...)
}
