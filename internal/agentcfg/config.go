package agentcfg

import (
	"errors"
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// ErrInvalid: the configuration is malformed or fails validation. Every
// error from Parse, Load and Validate that is about the configuration
// itself (not the filesystem) matches it with errors.Is.
var ErrInvalid = errors.New("invalid agent config")

// Bounds and defaults.
const (
	// MaxFileBytes bounds the config file.
	MaxFileBytes = 1 << 20
	// MaxLabelLen bounds name, region, zone and cluster (a DNS label).
	MaxLabelLen = 63
	// MaxPathLen bounds data_dir and the TLS file paths.
	MaxPathLen = 4096
	// MaxRetryJoin bounds retry_join.
	MaxRetryJoin = 64
	// MaxDNSNameLen bounds dns.zone and the host of an address.
	MaxDNSNameLen = 253

	MinShutdownTimeout     = time.Second
	MaxShutdownTimeout     = 10 * time.Minute
	DefaultShutdownTimeout = 30 * time.Second

	MinDNSTTL     = time.Second
	MaxDNSTTL     = time.Hour
	DefaultDNSTTL = 5 * time.Second

	DefaultNodeAddr   = "127.0.0.1:7400"
	DefaultAPIAddr    = "127.0.0.1:7401"
	DefaultGossipAddr = "127.0.0.1:7402"

	// MaxClockOffset bounds clock_offset.
	MaxClockOffset = time.Hour
	// MinClockRate and MaxClockRate bound a non-zero clock_rate.
	MinClockRate = 0.1
	MaxClockRate = 10.0

	DefaultLogLevel  = "info"
	DefaultLogFormat = "text"

	// EnvPrefix starts every environment variable Load reads.
	EnvPrefix = "FMNODE_"
	// EnvConfig is the environment's spelling of the config file path. Load
	// takes the path as an argument and skips this variable, so that the
	// command may read it without Load refusing it as unknown.
	EnvConfig = EnvPrefix + "CONFIG"

	// redacted replaces the gossip key in YAML().
	redacted = "<redacted>"
)

// Config is one node's local configuration: what differs from node to
// node. What the cluster agrees on (partitions, regions, timing profile,
// durability, consistency) is the cluster spec in the register, not here.
//
// The zero Config is not valid; start from Default, or use Parse or Load.
type Config struct {
	// Name is the node's name: [a-z0-9-], at most 63, no '-' at either end.
	Name string `yaml:"name"`
	// NodeID is the node's id in the cluster, 1..65535.
	NodeID NodeID `yaml:"node_id"`
	// Region and Zone place the node (same charset as Name).
	Region string `yaml:"region"`
	Zone   string `yaml:"zone"`
	// DataDir holds the node's stores. In a file, a relative path is
	// relative to the file's directory; from a flag or the environment, to
	// the working directory.
	DataDir string `yaml:"data_dir"`
	// Cluster labels the cluster: nodes of two clusters never merge.
	Cluster string `yaml:"cluster"`

	// Bind are the addresses the node listens on.
	Bind Addrs `yaml:"bind"`
	// Advertise are the addresses other nodes reach it at; an empty one
	// defaults to its Bind address (see Advertised), and must be set when
	// that one listens on every interface.
	Advertise Addrs `yaml:"advertise"`

	// RetryJoin are gossip addresses (host:port) of nodes to join through,
	// tried until one answers. At most MaxRetryJoin.
	RetryJoin []string `yaml:"retry_join"`
	// GossipKey encrypts gossip: base64 of 16, 24 or 32 bytes. Required
	// unless Insecure.
	GossipKey string `yaml:"gossip_key"`

	// TLS secures the node transport and the API. Required unless Insecure.
	TLS TLS `yaml:"tls"`
	// Insecure allows running without TLS and without a gossip key: an
	// explicit choice, refused when both are set anyway.
	Insecure bool `yaml:"insecure"`

	// Admin secures the admin API beyond TLS.
	Admin Admin `yaml:"admin"`

	Log Log `yaml:"log"`
	DNS DNS `yaml:"dns"`

	// ShutdownTimeout bounds a graceful shutdown, 1s..10m.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`

	// SourceIP, when set, is the local IP the agent dials its peers from
	// (node transport and the agent-to-agent API calls): on a host with
	// several addresses, peers and firewalls then see one address per
	// node. Empty: the kernel's choice. An IP literal.
	SourceIP string `yaml:"source_ip"`
	// ClockOffset shifts the node's clock (leases, deadlines, the
	// published routes' times) by this much, within ±MaxClockOffset. It
	// exists to test clock skew: an offset between two nodes larger than
	// the profile's max_clock_drift breaks the lease's safety assumption,
	// which is what the fault-injection harness shows. Zero in production.
	ClockOffset time.Duration `yaml:"clock_offset"`
	// ClockRate makes the node's clock run at this rate from the agent's
	// start (0 or 1: real time; MinClockRate..MaxClockRate). It exists to
	// test clock drift, which an offset cannot: the node measures its
	// lease and every timeout as local durations, so a constant offset
	// changes none of them, while a clock at 0.2 keeps a lease five
	// times longer than the observers that grant it allow. Zero in
	// production.
	ClockRate float64 `yaml:"clock_rate"`
}

// Addrs are a node's addresses, each host:port with a numeric port.
type Addrs struct {
	// NodeAddr is the node transport (required when binding).
	NodeAddr string `yaml:"node_addr"`
	// APIAddr is the HTTP data and admin API (required when binding).
	APIAddr string `yaml:"api_addr"`
	// DNSAddr is the DNS server; empty: no DNS server.
	DNSAddr string `yaml:"dns_addr"`
	// GossipAddr is memberlist (required when binding).
	GossipAddr string `yaml:"gossip_addr"`
}

// TLS names the PEM files of the node's certificate, its key and the CA
// that signs the cluster's certificates: all three or none.
type TLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	CAFile   string `yaml:"ca_file"`
}

// Admin configures the admin API's authentication.
type Admin struct {
	// TokenFile, when set, holds a bearer token every admin call must
	// present (Authorization: Bearer <token>), on top of the client
	// certificate TLS requires. The file must exist and not be empty at
	// start; it is read again on SIGHUP.
	TokenFile string `yaml:"token_file"`
	// MetricsWithoutClientCert lets a scraper read /metrics over TLS
	// without a client certificate (Prometheus can present one, through
	// its scrape config's tls_config, but not every setup gives it one).
	// The metrics carry counts, states and partition ids, no data; every
	// other path still needs the certificate.
	MetricsWithoutClientCert bool `yaml:"metrics_without_client_cert"`
	// EnablePprof serves Go's runtime profiles (net/http/pprof: CPU,
	// heap, goroutines, mutex and block contention, execution traces)
	// under /debug/pprof/ on the API address, behind the same client
	// certificate and bearer token as every admin path. Off by default:
	// a profile shows the process's code paths and a goroutine dump its
	// stacks, and a CPU profile or trace costs the process a few percent
	// while it runs. With insecure it needs admin.token_file (nothing
	// else would stand between any caller and the profiles).
	EnablePprof bool `yaml:"enable_pprof"`
}

// Log configures logging.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is text or json.
	Format string `yaml:"format"`
}

// DNS configures the DNS server (used when Bind.DNSAddr is set).
type DNS struct {
	// Zone is the zone served, a DNS name; Parse and Load add the final
	// dot and lower-case it. Required with Bind.DNSAddr.
	Zone string `yaml:"zone"`
	// TTL of the answers, 1s..1h.
	TTL time.Duration `yaml:"ttl"`
}

// NodeID is a node's id in the cluster. It decodes from a YAML integer
// only: the YAML library would truncate 1.5 to 1 into a plain uint16.
type NodeID uint16

// UnmarshalYAML refuses anything but an integer.
func (id *NodeID) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		return fmt.Errorf("line %d: node_id: must be an integer in 1..65535, got %s", n.Line, show(n.Value))
	}
	var u uint16
	if err := n.Decode(&u); err != nil {
		return fmt.Errorf("node_id: %w", err)
	}
	*id = NodeID(u)
	return nil
}

// Default is the configuration before the file, the environment and the
// flags: every optional field at its default, the required ones empty.
// The default addresses are on the loopback interface: listening on the
// network is a choice.
func Default() Config {
	return Config{
		Bind: Addrs{
			NodeAddr:   DefaultNodeAddr,
			APIAddr:    DefaultAPIAddr,
			GossipAddr: DefaultGossipAddr,
		},
		Log:             Log{Level: DefaultLogLevel, Format: DefaultLogFormat},
		DNS:             DNS{TTL: DefaultDNSTTL},
		ShutdownTimeout: DefaultShutdownTimeout,
	}
}

// Advertised are the addresses to advertise: Advertise, each empty one
// replaced by its Bind address.
func (c Config) Advertised() Addrs {
	a := c.Advertise
	or := func(s *string, def string) {
		if *s == "" {
			*s = def
		}
	}
	or(&a.NodeAddr, c.Bind.NodeAddr)
	or(&a.APIAddr, c.Bind.APIAddr)
	or(&a.DNSAddr, c.Bind.DNSAddr)
	or(&a.GossipAddr, c.Bind.GossipAddr)
	return a
}

// TLSEnabled reports whether any TLS file is set (Validate requires all
// three then).
func (c Config) TLSEnabled() bool {
	return c.TLS.CertFile != "" || c.TLS.KeyFile != "" || c.TLS.CAFile != ""
}

// field describes one configuration value: its YAML path, from which the
// flag (--kebab-case) and the environment variable (FMNODE_UPPER_SNAKE)
// are derived, and where it lives in a Config.
type field struct {
	path  string
	usage string
	ptr   func(c *Config) any
}

// fields lists every value of a Config, in YAML order (a test checks that
// none is missing).
func fields() []field {
	return []field{
		{"name", "node name ([a-z0-9-], at most 63)", func(c *Config) any { return &c.Name }},
		{"node_id", "node id in the cluster (1..65535)", func(c *Config) any { return &c.NodeID }},
		{"region", "region of the node", func(c *Config) any { return &c.Region }},
		{"zone", "zone of the node", func(c *Config) any { return &c.Zone }},
		{"data_dir", "data directory", func(c *Config) any { return &c.DataDir }},
		{"cluster", "cluster label", func(c *Config) any { return &c.Cluster }},
		{"bind.node_addr", "node transport listen address (host:port)", func(c *Config) any { return &c.Bind.NodeAddr }},
		{"bind.api_addr", "HTTP API listen address (host:port)", func(c *Config) any { return &c.Bind.APIAddr }},
		{"bind.dns_addr", "DNS listen address (host:port; empty: no DNS server)", func(c *Config) any { return &c.Bind.DNSAddr }},
		{"bind.gossip_addr", "gossip listen address (host:port)", func(c *Config) any { return &c.Bind.GossipAddr }},
		{"advertise.node_addr", "advertised node transport address", func(c *Config) any { return &c.Advertise.NodeAddr }},
		{"advertise.api_addr", "advertised HTTP API address", func(c *Config) any { return &c.Advertise.APIAddr }},
		{"advertise.dns_addr", "advertised DNS address", func(c *Config) any { return &c.Advertise.DNSAddr }},
		{"advertise.gossip_addr", "advertised gossip address", func(c *Config) any { return &c.Advertise.GossipAddr }},
		{"retry_join", "gossip address to join through (repeatable; comma-separated in the environment)", func(c *Config) any { return &c.RetryJoin }},
		{"gossip_key", "gossip encryption key (base64 of 16, 24 or 32 bytes)", func(c *Config) any { return &c.GossipKey }},
		{"tls.cert_file", "PEM certificate of the node", func(c *Config) any { return &c.TLS.CertFile }},
		{"tls.key_file", "PEM key of the node", func(c *Config) any { return &c.TLS.KeyFile }},
		{"tls.ca_file", "PEM certificate of the cluster CA", func(c *Config) any { return &c.TLS.CAFile }},
		{"insecure", "run without TLS and gossip encryption", func(c *Config) any { return &c.Insecure }},
		{"admin.token_file", "file holding the bearer token admin calls must present (empty: none)", func(c *Config) any { return &c.Admin.TokenFile }},
		{"admin.metrics_without_client_cert", "serve /metrics over TLS to scrapers without a client certificate", func(c *Config) any { return &c.Admin.MetricsWithoutClientCert }},
		{"admin.enable_pprof", "serve Go runtime profiles under /debug/pprof/ (admin rules; insecure needs admin.token_file)", func(c *Config) any { return &c.Admin.EnablePprof }},
		{"log.level", "log level (debug|info|warn|error)", func(c *Config) any { return &c.Log.Level }},
		{"log.format", "log format (text|json)", func(c *Config) any { return &c.Log.Format }},
		{"dns.zone", "DNS zone served", func(c *Config) any { return &c.DNS.Zone }},
		{"dns.ttl", "TTL of DNS answers (1s..1h)", func(c *Config) any { return &c.DNS.TTL }},
		{"shutdown_timeout", "graceful shutdown bound (1s..10m)", func(c *Config) any { return &c.ShutdownTimeout }},
		{"source_ip", "local IP to dial peers from (empty: the kernel's choice)", func(c *Config) any { return &c.SourceIP }},
		{"clock_offset", "offset added to the node's clock, for clock-skew tests (0 in production)", func(c *Config) any { return &c.ClockOffset }},
		{"clock_rate", "rate of the node's clock, for clock-drift tests (0: real time; 0.1..10)", func(c *Config) any { return &c.ClockRate }},
	}
}

// pathFields are the fields holding filesystem paths, resolved by Load.
func pathFields(c *Config) []*string {
	return []*string{&c.DataDir, &c.TLS.CertFile, &c.TLS.KeyFile, &c.TLS.CAFile, &c.Admin.TokenFile}
}

// normalize puts the config in its canonical form: the DNS zone
// lower-cased with its final dot, an empty retry_join nil.
func (c *Config) normalize() {
	if c.DNS.Zone != "" && c.DNS.Zone != "." && validDNSName(c.DNS.Zone, true) == nil {
		c.DNS.Zone = toLowerASCII(c.DNS.Zone)
		if c.DNS.Zone[len(c.DNS.Zone)-1] != '.' {
			c.DNS.Zone += "."
		}
	}
	if len(c.RetryJoin) == 0 {
		c.RetryJoin = nil
	}
}

func toLowerASCII(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			b[i] = ch + 'a' - 'A'
		}
	}
	return string(b)
}
