package agentcfg

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testKey = "8m7yqyvPJ6wZ7TJ0Y1tQmZm9mU4YQ2Ht6x8Tn0dQjlE=" // 32 bytes

// validConfig is a complete, valid config with no file behind it.
func validConfig() Config {
	c := Default()
	c.Name = "fm-1"
	c.NodeID = 1
	c.Region = "eu1"
	c.Zone = "eu1-a"
	c.Cluster = "prod"
	c.DataDir = "/var/lib/fmnode"
	c.GossipKey = testKey
	c.TLS = TLS{CertFile: "/etc/fmnode/node.crt", KeyFile: "/etc/fmnode/node.key", CAFile: "/etc/fmnode/ca.crt"}
	return c
}

// problemFields are the fields an error from Validate names, one per
// joined error ("agentcfg: <field>: ...").
func problemFields(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var out []string
	for _, e := range errs {
		require.ErrorIs(t, e, ErrInvalid)
		rest, ok := strings.CutPrefix(e.Error(), "agentcfg: ")
		require.True(t, ok, "%q lacks the package prefix", e)
		f, _, ok := strings.Cut(rest, ": ")
		require.True(t, ok, "%q names no field", e)
		out = append(out, f)
	}
	return out
}

func TestValidate(t *testing.T) {
	wild := func(c *Config) {
		c.Bind.NodeAddr = "0.0.0.0:7400"
		c.Advertise.NodeAddr = "127.0.2.1:7400"
	}
	tests := []struct {
		name   string
		mod    func(c *Config)
		fields []string // the fields named, in order; none: valid
	}{
		{"valid", func(c *Config) {}, nil},
		{"insecure without TLS or key", func(c *Config) { c.Insecure = true; c.TLS = TLS{}; c.GossipKey = "" }, nil},
		{"insecure with TLS only", func(c *Config) { c.Insecure = true; c.GossipKey = "" }, nil},
		{"insecure with key only", func(c *Config) { c.Insecure = true; c.TLS = TLS{} }, nil},
		{"insecure with both", func(c *Config) { c.Insecure = true }, []string{"insecure"}},
		{"enable_pprof with TLS", func(c *Config) { c.Admin.EnablePprof = true }, nil},
		{"enable_pprof insecure with a token", func(c *Config) {
			c.Insecure, c.TLS, c.GossipKey, c.Admin.EnablePprof, c.Admin.TokenFile = true, TLS{}, "", true, "/etc/fmnode/admin.token"
		}, nil},
		{"enable_pprof insecure open", func(c *Config) { c.Insecure, c.TLS, c.GossipKey, c.Admin.EnablePprof = true, TLS{}, "", true }, []string{"admin.enable_pprof"}},

		{"name empty", func(c *Config) { c.Name = "" }, []string{"name"}},
		{"name upper", func(c *Config) { c.Name = "Fm-1" }, []string{"name"}},
		{"name dot", func(c *Config) { c.Name = "fm.1" }, []string{"name"}},
		{"name leading hyphen", func(c *Config) { c.Name = "-fm" }, []string{"name"}},
		{"name trailing hyphen", func(c *Config) { c.Name = "fm-" }, []string{"name"}},
		{"name 63", func(c *Config) { c.Name = strings.Repeat("a", 63) }, nil},
		{"name 64", func(c *Config) { c.Name = strings.Repeat("a", 64) }, []string{"name"}},
		{"node_id zero", func(c *Config) { c.NodeID = 0 }, []string{"node_id"}},
		{"node_id max", func(c *Config) { c.NodeID = 65535 }, nil},
		{"region empty", func(c *Config) { c.Region = "" }, []string{"region"}},
		{"zone bad", func(c *Config) { c.Zone = "eu_1" }, []string{"zone"}},
		{"cluster empty", func(c *Config) { c.Cluster = "" }, []string{"cluster"}},
		{"data_dir empty", func(c *Config) { c.DataDir = "" }, []string{"data_dir"}},
		{"data_dir relative", func(c *Config) { c.DataDir = "data" }, nil},
		{"data_dir control", func(c *Config) { c.DataDir = "/var/\nlib" }, []string{"data_dir"}},
		{"data_dir long", func(c *Config) { c.DataDir = "/" + strings.Repeat("a", MaxPathLen) }, []string{"data_dir"}},
		{"data_dir not utf8", func(c *Config) { c.DataDir = "/var/\xff" }, []string{"data_dir"}},

		{"bind.node_addr empty", func(c *Config) { c.Bind.NodeAddr = "" }, []string{"bind.node_addr"}},
		{"bind.api_addr empty", func(c *Config) { c.Bind.APIAddr = "" }, []string{"bind.api_addr"}},
		{"bind.gossip_addr empty", func(c *Config) { c.Bind.GossipAddr = "" }, []string{"bind.gossip_addr"}},
		{"bind no port", func(c *Config) { c.Bind.NodeAddr = "127.0.0.1" }, []string{"bind.node_addr"}},
		{"bind empty port", func(c *Config) { c.Bind.NodeAddr = "127.0.0.1:" }, []string{"bind.node_addr"}},
		{"bind named port", func(c *Config) { c.Bind.APIAddr = "127.0.0.1:http" }, []string{"bind.api_addr"}},
		{"bind signed port", func(c *Config) { c.Bind.APIAddr = "127.0.0.1:+80" }, []string{"bind.api_addr"}},
		{"bind port 65536", func(c *Config) { c.Bind.GossipAddr = "127.0.0.1:65536" }, []string{"bind.gossip_addr"}},
		{"bind port 65535", func(c *Config) { c.Bind.GossipAddr = "127.0.0.1:65535" }, nil},
		{"bind bad host", func(c *Config) { c.Bind.NodeAddr = "no_de:7400" }, []string{"bind.node_addr"}},
		{"bind hostname", func(c *Config) { c.Bind.NodeAddr = "localhost:7400" }, nil},
		{"bind all-digit name", func(c *Config) { c.Bind.NodeAddr = "127.0.2.300:7400" }, []string{"bind.node_addr"}},
		{"bind ipv6 unbracketed", func(c *Config) { c.Bind.NodeAddr = "::1:7400" }, []string{"bind.node_addr"}},
		{"bind ipv6", func(c *Config) { c.Bind.NodeAddr = "[::1]:7400" }, nil},
		{"bind bracketed ipv4", func(c *Config) { c.Bind.NodeAddr = "[127.0.0.1]:7400" }, []string{"bind.node_addr"}},
		{"bind twice", func(c *Config) { c.Bind.APIAddr = c.Bind.NodeAddr }, []string{"bind.api_addr"}},
		{"bind twice spelt apart", func(c *Config) { c.Bind.NodeAddr = "[::ffff:127.0.0.1]:7402" }, []string{"bind.gossip_addr"}},
		{"bind same port other host", func(c *Config) { c.Bind.APIAddr = "127.0.0.2:7400" }, nil},
		{"bind same port under wildcard", func(c *Config) { wild(c); c.Bind.APIAddr = "127.0.0.1:7400" }, []string{"bind.api_addr"}},
		{"bind port 0 twice", func(c *Config) { c.Bind.NodeAddr = "127.0.0.1:0"; c.Bind.APIAddr = "127.0.0.1:0" }, nil},

		{"wildcard advertised", wild, nil},
		{"wildcard v4 unadvertised", func(c *Config) { c.Bind.GossipAddr = "0.0.0.0:7402" }, []string{"advertise.gossip_addr"}},
		{"wildcard v6 unadvertised", func(c *Config) { c.Bind.GossipAddr = "[::]:7402" }, []string{"advertise.gossip_addr"}},
		{"empty host unadvertised", func(c *Config) { c.Bind.APIAddr = ":7401" }, []string{"advertise.api_addr"}},
		{"advertise port 0", func(c *Config) { c.Advertise.NodeAddr = "127.0.2.1:0" }, []string{"advertise.node_addr"}},
		{"advertise wildcard", func(c *Config) { c.Advertise.NodeAddr = "0.0.0.0:7400" }, []string{"advertise.node_addr"}},
		{"advertise no host", func(c *Config) { c.Advertise.NodeAddr = ":7400" }, []string{"advertise.node_addr"}},
		{"advertise bad", func(c *Config) { c.Advertise.APIAddr = "x" }, []string{"advertise.api_addr"}},
		{"advertise dns without bind", func(c *Config) { c.Advertise.DNSAddr = "127.0.2.1:53" }, []string{"advertise.dns_addr"}},

		{"dns", func(c *Config) { c.Bind.DNSAddr = "127.0.0.1:7453"; c.DNS.Zone = "fm.example.com" }, nil},
		{"dns without zone", func(c *Config) { c.Bind.DNSAddr = "127.0.0.1:7453" }, []string{"dns.zone"}},
		{"zone without dns", func(c *Config) { c.DNS.Zone = "fm.example.com." }, []string{"dns.zone"}},
		{"zone bad", func(c *Config) { c.Bind.DNSAddr = "127.0.0.1:7453"; c.DNS.Zone = "fm_x.example." }, []string{"dns.zone"}},
		{"zone root", func(c *Config) { c.Bind.DNSAddr = "127.0.0.1:7453"; c.DNS.Zone = "." }, []string{"dns.zone"}},
		{"zone empty label", func(c *Config) { c.Bind.DNSAddr = "127.0.0.1:7453"; c.DNS.Zone = "fm..example." }, []string{"dns.zone"}},
		{"zone long label", func(c *Config) { c.Bind.DNSAddr = "127.0.0.1:7453"; c.DNS.Zone = strings.Repeat("a", 64) + ".com." }, []string{"dns.zone"}},
		{"dns bound twice", func(c *Config) { c.Bind.DNSAddr = c.Bind.APIAddr; c.DNS.Zone = "fm." }, []string{"bind.dns_addr"}},
		{"dns.ttl zero", func(c *Config) { c.DNS.TTL = 0 }, []string{"dns.ttl"}},
		{"dns.ttl 1s", func(c *Config) { c.DNS.TTL = time.Second }, nil},
		{"dns.ttl 1h", func(c *Config) { c.DNS.TTL = time.Hour }, nil},
		{"dns.ttl over", func(c *Config) { c.DNS.TTL = time.Hour + 1 }, []string{"dns.ttl"}},

		{"retry_join", func(c *Config) { c.RetryJoin = []string{"127.0.2.2:7402", "fm-2.internal:7402", "[fd00::3]:7402"} }, nil},
		{"retry_join bad", func(c *Config) { c.RetryJoin = []string{"127.0.2.2:7402", "127.0.2.3"} }, []string{"retry_join[1]"}},
		{"retry_join port 0", func(c *Config) { c.RetryJoin = []string{"127.0.2.2:0"} }, []string{"retry_join[0]"}},
		{"retry_join wildcard", func(c *Config) { c.RetryJoin = []string{"0.0.0.0:7402"} }, []string{"retry_join[0]"}},
		{"retry_join repeat", func(c *Config) { c.RetryJoin = []string{"FM-2:7402", "fm-2:7402"} }, []string{"retry_join[1]"}},
		{"retry_join 64", func(c *Config) { c.RetryJoin = joinList(64) }, nil},
		{"retry_join 65", func(c *Config) { c.RetryJoin = joinList(65) }, []string{"retry_join"}},

		{"gossip_key missing", func(c *Config) { c.GossipKey = "" }, []string{"gossip_key"}},
		{"gossip_key not base64", func(c *Config) { c.GossipKey = "not base64!" }, []string{"gossip_key"}},
		{"gossip_key 20 bytes", func(c *Config) { c.GossipKey = "AAAAAAAAAAAAAAAAAAAAAAAAAAA=" }, []string{"gossip_key"}},
		{"gossip_key 16 bytes", func(c *Config) { c.GossipKey = "AAAAAAAAAAAAAAAAAAAAAA==" }, nil},
		{"gossip_key 24 bytes", func(c *Config) { c.GossipKey = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" }, nil},
		{"tls missing", func(c *Config) { c.TLS = TLS{} }, []string{"tls"}},
		{"tls cert only", func(c *Config) { c.TLS.KeyFile, c.TLS.CAFile = "", "" }, []string{"tls.key_file", "tls.ca_file"}},
		{"tls no ca", func(c *Config) { c.TLS.CAFile = "" }, []string{"tls.ca_file"}},
		{"tls bad path", func(c *Config) { c.TLS.CertFile = "a\x00b" }, []string{"tls.cert_file"}},

		{"log.level", func(c *Config) { c.Log.Level = "trace" }, []string{"log.level"}},
		{"log.level debug", func(c *Config) { c.Log.Level = "debug" }, nil},
		{"log.format", func(c *Config) { c.Log.Format = "xml" }, []string{"log.format"}},
		{"log.format json", func(c *Config) { c.Log.Format = "json" }, nil},
		{"shutdown_timeout zero", func(c *Config) { c.ShutdownTimeout = 0 }, []string{"shutdown_timeout"}},
		{"shutdown_timeout 10m", func(c *Config) { c.ShutdownTimeout = 10 * time.Minute }, nil},
		{"shutdown_timeout over", func(c *Config) { c.ShutdownTimeout = 11 * time.Minute }, []string{"shutdown_timeout"}},
		{"source_ip loopback", func(c *Config) { c.SourceIP = "127.0.1.3" }, nil},
		{"source_ip host name", func(c *Config) { c.SourceIP = "localhost" }, []string{"source_ip"}},
		{"source_ip unspecified", func(c *Config) { c.SourceIP = "0.0.0.0" }, []string{"source_ip"}},
		{"clock_offset negative in bound", func(c *Config) { c.ClockOffset = -time.Hour }, nil},
		{"clock_offset over", func(c *Config) { c.ClockOffset = time.Hour + time.Nanosecond }, []string{"clock_offset"}},
		{"clock_rate slow in bound", func(c *Config) { c.ClockRate = 0.1 }, nil},
		{"clock_rate under", func(c *Config) { c.ClockRate = 0.05 }, []string{"clock_rate"}},
		{"clock_rate over", func(c *Config) { c.ClockRate = 11 }, []string{"clock_rate"}},
		{"clock_rate negative", func(c *Config) { c.ClockRate = -1 }, []string{"clock_rate"}},

		{"all at once", func(c *Config) {
			c.Name = ""
			c.NodeID = 0
			c.Log.Level = "loud"
			c.TLS.CAFile = ""
		}, []string{"name", "node_id", "tls.ca_file", "log.level"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mod(&c)
			err := c.Validate()
			if tt.fields == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.ErrorIs(t, err, ErrInvalid)
			assert.Equal(t, tt.fields, problemFields(t, err), "%v", err)
		})
	}
}

func joinList(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "fm-" + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + string(rune('a'+i/26)) + ":7402"
	}
	return out
}

// The gossip key is a secret: no error echoes it.
func TestValidateHidesGossipKey(t *testing.T) {
	for _, key := range []string{"secret-not-base64", "c2VjcmV0LXNob3J0"} {
		c := validConfig()
		c.GossipKey = key
		err := c.Validate()
		require.Error(t, err)
		assert.NotContains(t, err.Error(), key)
	}
}

func TestDefault(t *testing.T) {
	d := Default()
	assert.Equal(t, "info", d.Log.Level)
	assert.Equal(t, "text", d.Log.Format)
	assert.Equal(t, 30*time.Second, d.ShutdownTimeout)
	assert.Equal(t, 5*time.Second, d.DNS.TTL)
	assert.Equal(t, Addrs{NodeAddr: DefaultNodeAddr, APIAddr: DefaultAPIAddr, GossipAddr: DefaultGossipAddr}, d.Bind)
	// Default and the required fields validate: the defaults agree with
	// each other.
	require.NoError(t, validConfig().Validate())
}

func TestAdvertised(t *testing.T) {
	c := validConfig()
	c.Bind.NodeAddr = "0.0.0.0:7400"
	c.Advertise.NodeAddr = "127.0.2.1:7400"
	assert.Equal(t, Addrs{NodeAddr: "127.0.2.1:7400", APIAddr: DefaultAPIAddr, GossipAddr: DefaultGossipAddr}, c.Advertised())
}

func TestErrorsWrap(t *testing.T) {
	c := validConfig()
	c.Name = ""
	err := c.Validate()
	require.True(t, errors.Is(err, ErrInvalid))
	assert.Contains(t, err.Error(), "agentcfg: name: must be set")
}

func TestCheckLabel(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"n1", ""}, {"east-a", ""}, {"", "must be set"}, {"N1", "[a-z0-9-]"}, {"-a", "start or end"},
		{strings.Repeat("a", MaxLabelLen+1), "longer than"},
	} {
		err := CheckLabel("name", tc.in)
		if tc.want == "" {
			require.NoError(t, err, tc.in)
			continue
		}
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, "name: ")
		require.ErrorContains(t, err, tc.want)
	}
}
