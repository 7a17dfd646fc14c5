package certs

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// File names inside a certificate directory.
const (
	CACertFile   = "ca.crt"
	CAKeyFile    = "ca.key"
	NodeCertFile = "node.crt"
	NodeKeyFile  = "node.key"
)

// ClientCertFile and ClientKeyFile name a client's files: one directory
// may hold the certificates of several clients (an operator's, a
// monitoring job's), so the name is in the file name.
func ClientCertFile(name string) string { return "client." + name + ".crt" }

// ClientKeyFile is the key that goes with ClientCertFile(name).
func ClientKeyFile(name string) string { return "client." + name + ".key" }

// Validity bounds and defaults (those of cockroach cert).
const (
	// MinValidFor refuses durations that are surely a unit mistake (a bare
	// 24 is 24ns) while leaving room for rotation tests.
	MinValidFor = time.Minute
	// MaxValidFor bounds every certificate, the CA's included.
	MaxValidFor         = 20 * 365 * 24 * time.Hour
	DefaultCAValidFor   = 10 * 365 * 24 * time.Hour
	DefaultCertValidFor = 5 * 365 * 24 * time.Hour
	// Backdate is how long before its issue a certificate becomes valid,
	// for peers whose clock is behind the issuer's.
	Backdate = time.Hour
	// MaxNameLen bounds a CommonName (RFC 5280's ub-common-name).
	MaxNameLen = 64
	// MaxHosts bounds the SANs of one node certificate.
	MaxHosts = 100
	// maxDNSNameLen is the longest DNS name (without its final dot).
	maxDNSNameLen = 253
)

// ErrInvalid is wrapped by every error about the options or arguments; the
// message names the field.
var ErrInvalid = errors.New("certs: invalid argument")

// CAOptions describe a new certificate authority.
type CAOptions struct {
	// CommonName is the CA's subject; required, 1..MaxNameLen printable
	// characters.
	CommonName string
	// ValidFor is the CA's lifetime; zero means DefaultCAValidFor.
	ValidFor time.Duration
	// KeyType is the CA's key; empty means KeyECDSAP256.
	KeyType KeyType
	// IssuedAt is when the certificate counts as issued; zero means now.
	// Tests set it in the past to get an expired certificate.
	IssuedAt time.Time
	// Overwrite replaces existing files instead of refusing.
	Overwrite bool
}

// NodeOptions describe a node certificate.
type NodeOptions struct {
	// Name is the subject's CommonName (the node's name); required, see
	// validName.
	Name string
	// Hosts are the names and addresses peers and clients dial the node
	// by: each an IP address (an IP SAN) or a DNS name, "*." wildcard
	// allowed (a DNS SAN). At least one; duplicates are dropped.
	Hosts []string
	// ValidFor is the certificate's lifetime; zero means
	// DefaultCertValidFor.
	ValidFor time.Duration
	// KeyType is the certificate's key; empty means KeyECDSAP256.
	KeyType KeyType
	// IssuedAt is when the certificate counts as issued; zero means now.
	IssuedAt time.Time
	// Overwrite replaces existing files instead of refusing.
	Overwrite bool
}

// ClientOptions describe a client certificate.
type ClientOptions struct {
	// Name is the client's CommonName and part of its file names;
	// required, see validName.
	Name string
	// ValidFor is the certificate's lifetime; zero means
	// DefaultCertValidFor.
	ValidFor time.Duration
	// KeyType is the certificate's key; empty means KeyECDSAP256.
	KeyType KeyType
	// IssuedAt is when the certificate counts as issued; zero means now.
	IssuedAt time.Time
	// Overwrite replaces existing files instead of refusing.
	Overwrite bool
}

// CA is a certificate authority able to sign: its certificate and key.
type CA struct {
	Cert *x509.Certificate
	// CertPEM is Cert as written to CertFile, copied into the
	// directories of the certificates it signs.
	CertPEM []byte
	Key     crypto.Signer
	// CertFile and KeyFile are where the CA was written or loaded from.
	CertFile, KeyFile string
}

// Issued is a certificate written by CreateNode or CreateClient.
type Issued struct {
	Cert *x509.Certificate
	// CertFile, KeyFile and CAFile are the paths of the certificate, its
	// key and the CA certificate next to them.
	CertFile, KeyFile, CAFile string
}

// CreateCA creates a certificate authority in dir (created 0700 if
// missing): ca.crt and ca.key.
func CreateCA(dir string, opts CAOptions) (CA, error) {
	if err := checkDir(dir); err != nil {
		return CA{}, err
	}
	return CreateCAFiles(filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile), opts)
}

// CreateCAFiles is CreateCA with the certificate and the key at paths of
// their own (their directories created 0700 if missing): the layout of
// `cockroach cert`, where the CA key is kept away from the certificates
// directory that nodes and clients are given a copy of.
func CreateCAFiles(certFile, keyFile string, opts CAOptions) (CA, error) {
	if err := checkPaths(certFile, keyFile); err != nil {
		return CA{}, err
	}
	if err := checkName("CAOptions.CommonName", opts.CommonName, false); err != nil {
		return CA{}, err
	}
	validFor, err := checkValidFor("CAOptions.ValidFor", opts.ValidFor, DefaultCAValidFor)
	if err != nil {
		return CA{}, err
	}
	if err := opts.KeyType.check("CAOptions.KeyType"); err != nil {
		return CA{}, err
	}
	key, err := opts.KeyType.generate()
	if err != nil {
		return CA{}, err
	}
	notBefore, notAfter := validity(opts.IssuedAt, validFor)
	serial, err := serialNumber()
	if err != nil {
		return CA{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: opts.CommonName},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		// The CA signs leaf certificates only, never another CA.
		MaxPathLenZero: true,
	}
	cert, certPEM, err := sign(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return CA{}, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return CA{}, err
	}
	ca := CA{Cert: cert, CertPEM: certPEM, Key: key, CertFile: certFile, KeyFile: keyFile}
	err = writeFiles([]file{
		{ca.KeyFile, keyPEM, keyMode},
		{ca.CertFile, certPEM, certMode},
	}, opts.Overwrite)
	if err != nil {
		return CA{}, err
	}
	return ca, nil
}

// LoadCA reads the certificate authority CreateCA wrote in dir, checking
// that the certificate is a CA's and that the key is its key.
func LoadCA(dir string) (CA, error) {
	if err := checkDir(dir); err != nil {
		return CA{}, err
	}
	return LoadCAFiles(filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile))
}

// LoadCAFiles is LoadCA for a certificate and a key at paths of their own
// (as CreateCAFiles writes them).
func LoadCAFiles(certFile, keyFile string) (CA, error) {
	if err := checkPaths(certFile, keyFile); err != nil {
		return CA{}, err
	}
	ca := CA{CertFile: certFile, KeyFile: keyFile}
	cert, certPEM, err := readCert(ca.CertFile)
	if err != nil {
		return CA{}, err
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return CA{}, fmt.Errorf("certs: %s: not a CA certificate", ca.CertFile)
	}
	key, err := readKey(ca.KeyFile)
	if err != nil {
		return CA{}, err
	}
	if err := matchKey(cert, key); err != nil {
		return CA{}, fmt.Errorf("certs: %s: %w (of %s)", ca.KeyFile, err, ca.CertFile)
	}
	ca.Cert, ca.CertPEM, ca.Key = cert, certPEM, key
	return ca, nil
}

// CreateNode issues a node certificate signed by ca into dir: node.crt,
// node.key and (unless there) ca.crt. The certificate serves and dials.
func CreateNode(ca CA, dir string, opts NodeOptions) (Issued, error) {
	if err := checkName("NodeOptions.Name", opts.Name, true); err != nil {
		return Issued{}, err
	}
	ips, dnsNames, err := checkHosts(opts.Hosts)
	if err != nil {
		return Issued{}, err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: opts.Name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: ips,
		DNSNames:    dnsNames,
	}
	return issue(ca, dir, tmpl, leafParams{
		prefix: "NodeOptions", validFor: opts.ValidFor, keyType: opts.KeyType, issuedAt: opts.IssuedAt,
		overwrite: opts.Overwrite, certFile: NodeCertFile, keyFile: NodeKeyFile,
	})
}

// CreateClient issues a client certificate signed by ca into dir:
// client.<name>.crt, client.<name>.key and (unless there) ca.crt. The
// certificate only dials: without ServerAuth, a client checking a server
// refuses it, so a leaked client key cannot impersonate a node.
func CreateClient(ca CA, dir string, opts ClientOptions) (Issued, error) {
	if err := checkName("ClientOptions.Name", opts.Name, true); err != nil {
		return Issued{}, err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: opts.Name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return issue(ca, dir, tmpl, leafParams{
		prefix: "ClientOptions", validFor: opts.ValidFor, keyType: opts.KeyType, issuedAt: opts.IssuedAt,
		overwrite: opts.Overwrite, certFile: ClientCertFile(opts.Name), keyFile: ClientKeyFile(opts.Name),
	})
}

// leafParams are what node and client certificates share.
type leafParams struct {
	prefix            string // the options type, for error messages
	validFor          time.Duration
	keyType           KeyType
	issuedAt          time.Time
	overwrite         bool
	certFile, keyFile string // base names in dir
}

func issue(ca CA, dir string, tmpl *x509.Certificate, p leafParams) (Issued, error) {
	validFor, err := checkValidFor(p.prefix+".ValidFor", p.validFor, DefaultCertValidFor)
	if err != nil {
		return Issued{}, err
	}
	if err := p.keyType.check(p.prefix + ".KeyType"); err != nil {
		return Issued{}, err
	}
	if err := checkCA(ca); err != nil {
		return Issued{}, err
	}
	if err := checkDir(dir); err != nil {
		return Issued{}, err
	}
	notBefore, notAfter := validity(p.issuedAt, validFor)
	if notAfter.After(ca.Cert.NotAfter) {
		return Issued{}, fmt.Errorf("%w: %s.ValidFor: the certificate would expire at %s, after its CA (%s); use a shorter ValidFor or a new CA",
			ErrInvalid, p.prefix, notAfter.UTC().Format(time.RFC3339), ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	key, err := p.keyType.generate()
	if err != nil {
		return Issued{}, err
	}
	serial, err := serialNumber()
	if err != nil {
		return Issued{}, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = notBefore, notAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	if p.keyType.norm() == KeyRSA2048 {
		// RSA key exchange is gone from TLS 1.3, but older verifiers
		// still expect the bit on RSA certificates.
		tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	cert, certPEM, err := sign(tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return Issued{}, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return Issued{}, err
	}
	out := Issued{
		Cert:     cert,
		CertFile: filepath.Join(dir, p.certFile),
		KeyFile:  filepath.Join(dir, p.keyFile),
		CAFile:   filepath.Join(dir, CACertFile),
	}
	files := []file{{out.KeyFile, keyPEM, keyMode}, {out.CertFile, certPEM, certMode}}
	// The CA certificate goes along unless this very one is there already
	// (the CA's own directory, or a second certificate in one directory).
	exists, same, err := sameCert(out.CAFile, ca.CertPEM)
	if err != nil {
		return Issued{}, err
	}
	if exists && !same && !p.overwrite {
		// A directory trusting another CA would fail at the first
		// handshake, far from here.
		return Issued{}, fmt.Errorf("certs: %s holds another CA's certificate (set Overwrite to replace it): %w", out.CAFile, fs.ErrExist)
	}
	if !same {
		files = append(files, file{out.CAFile, ca.CertPEM, certMode})
	}
	if err := writeFiles(files, p.overwrite); err != nil {
		return Issued{}, err
	}
	return out, nil
}

// checkCA checks a CA value before it signs: loaded or created, not
// hand-assembled with a key of another certificate.
func checkCA(ca CA) error {
	if ca.Cert == nil || ca.Key == nil || len(ca.CertPEM) == 0 {
		return fmt.Errorf("%w: CA: needs Cert, CertPEM and Key (use CreateCA or LoadCA)", ErrInvalid)
	}
	if !ca.Cert.IsCA {
		return fmt.Errorf("%w: CA: the certificate %q is not a CA's", ErrInvalid, ca.Cert.Subject.CommonName)
	}
	if err := matchKey(ca.Cert, ca.Key); err != nil {
		return fmt.Errorf("%w: CA.Key: %v", ErrInvalid, err)
	}
	return nil
}

func checkDir(dir string) error {
	if dir == "" {
		return fmt.Errorf("%w: dir: must be set", ErrInvalid)
	}
	return nil
}

// checkPaths checks the two paths of a CA: set, and not one file.
func checkPaths(certFile, keyFile string) error {
	if certFile == "" {
		return fmt.Errorf("%w: certFile: must be set", ErrInvalid)
	}
	if keyFile == "" {
		return fmt.Errorf("%w: keyFile: must be set", ErrInvalid)
	}
	if filepath.Clean(certFile) == filepath.Clean(keyFile) {
		return fmt.Errorf("%w: keyFile: %s is also the certFile", ErrInvalid, keyFile)
	}
	return nil
}

// validity is a certificate's [NotBefore, NotAfter] issued at issuedAt
// (zero: now), backdated by Backdate. Times are truncated to the second,
// which is what the certificate encodes.
func validity(issuedAt time.Time, validFor time.Duration) (notBefore, notAfter time.Time) {
	if issuedAt.IsZero() {
		issuedAt = time.Now()
	}
	issuedAt = issuedAt.Truncate(time.Second)
	return issuedAt.Add(-Backdate), issuedAt.Add(validFor)
}

func checkValidFor(field string, d, def time.Duration) (time.Duration, error) {
	if d == 0 {
		return def, nil
	}
	if d < MinValidFor || d > MaxValidFor {
		return 0, fmt.Errorf("%w: %s: must be in %v..%v (or zero for %v), got %v", ErrInvalid, field, MinValidFor, MaxValidFor, def, d)
	}
	return d, nil
}

// checkName checks a CommonName: 1..MaxNameLen bytes. A name that is also
// part of file names (strict) is limited to letters, digits, '.', '_' and
// '-', and must not start with '.' or '-' (no hidden files, no flags, no
// path separators); a CA's name may be any printable ASCII.
func checkName(field, s string, strict bool) error {
	if s == "" {
		return fmt.Errorf("%w: %s: must be set", ErrInvalid, field)
	}
	if len(s) > MaxNameLen {
		return fmt.Errorf("%w: %s: longer than %d bytes", ErrInvalid, field, MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		ok := 'a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || ch == '.' || ch == '_' || ch == '-'
		if !strict {
			ok = ' ' <= ch && ch <= '~'
		}
		if !ok {
			if strict {
				return fmt.Errorf("%w: %s: must be of [A-Za-z0-9._-], got %q", ErrInvalid, field, s)
			}
			return fmt.Errorf("%w: %s: must be printable ASCII, got %q", ErrInvalid, field, s)
		}
	}
	if strict && (s[0] == '.' || s[0] == '-') {
		return fmt.Errorf("%w: %s: must not start with '.' or '-', got %q", ErrInvalid, field, s)
	}
	return nil
}

// checkHosts splits hosts into IP and DNS SANs, in the given order with
// duplicates dropped.
func checkHosts(hosts []string) ([]net.IP, []string, error) {
	if len(hosts) == 0 {
		return nil, nil, fmt.Errorf("%w: NodeOptions.Hosts: at least one host is needed (peers verify the name or address they dial)", ErrInvalid)
	}
	if len(hosts) > MaxHosts {
		return nil, nil, fmt.Errorf("%w: NodeOptions.Hosts: more than %d hosts", ErrInvalid, MaxHosts)
	}
	var ips []net.IP
	var names []string
	for i, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(ips, ip.Equal) {
				ips = append(ips, ip)
			}
			continue
		}
		if err := checkDNSName(h); err != nil {
			return nil, nil, fmt.Errorf("%w: NodeOptions.Hosts[%d]: %v", ErrInvalid, i, err)
		}
		if !slices.Contains(names, h) {
			names = append(names, h)
		}
	}
	return ips, names, nil
}

// checkDNSName accepts what a DNS SAN may hold: labels of 1..63 letters,
// digits and '-' (not at either end), a "*." wildcard first label, a last
// label not all digits (a mistyped IPv4 address is not a name).
func checkDNSName(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if _, _, err := net.SplitHostPort(s); err == nil {
		return fmt.Errorf("%q: a host, not host:port", s)
	}
	if len(s) > maxDNSNameLen {
		return fmt.Errorf("%q: longer than %d characters", s[:16]+"...", maxDNSNameLen)
	}
	name := s
	if len(name) > 2 && name[:2] == "*." {
		name = name[2:]
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if len(l) == 0 || len(l) > 63 {
			return fmt.Errorf("%q: not an IP address, and DNS labels must be 1..63 characters", s)
		}
		for _, ch := range []byte(l) {
			if !('a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || ch == '-') {
				return fmt.Errorf("%q: not an IP address, and DNS labels are letters, digits and '-'", s)
			}
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("%q: a DNS label must not start or end with '-'", s)
		}
	}
	if strings.TrimLeft(labels[len(labels)-1], "0123456789") == "" {
		return fmt.Errorf("%q: not an IP address, and not a DNS name (the last label is all digits)", s)
	}
	return nil
}

// serialNumber is a random 128-bit serial: unique without a counter
// shared by everyone who issues certificates.
func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certs: serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil // never zero
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, []byte, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: sign %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: parse %q: %w", tmpl.Subject.CommonName, err)
	}
	return cert, encodeCert(der), nil
}
