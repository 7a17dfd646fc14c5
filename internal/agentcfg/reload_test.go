package agentcfg

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReloadable(t *testing.T) {
	tests := []struct {
		name             string
		mod              func(c *Config)
		changed, refused []string
	}{
		{"nothing", func(c *Config) {}, nil, nil},
		{"retry_join nil and empty", func(c *Config) { c.RetryJoin = []string{} }, nil, nil},
		{"log", func(c *Config) { c.Log = Log{Level: "debug", Format: "json"} }, []string{"log.level", "log.format"}, nil},
		{"admin token", func(c *Config) { c.Admin.TokenFile = "/etc/fmnode/admin.token" }, []string{"admin.token_file"}, nil},
		{"cert rotation", func(c *Config) {
			c.TLS = TLS{CertFile: "/etc/fmnode/node2.crt", KeyFile: "/etc/fmnode/node2.key", CAFile: "/etc/fmnode/ca2.crt"}
		}, []string{"tls.cert_file", "tls.key_file", "tls.ca_file"}, nil},
		{"tls off", func(c *Config) { c.TLS = TLS{}; c.Insecure = true },
			nil, []string{"tls.cert_file", "tls.key_file", "tls.ca_file", "insecure"}},
		{"everything else", func(c *Config) {
			c.Name, c.NodeID, c.Region, c.Zone, c.DataDir, c.Cluster = "fm-2", 2, "us1", "us1-a", "/data", "test"
			c.Bind = Addrs{NodeAddr: "0.0.0.0:1", APIAddr: "0.0.0.0:2", DNSAddr: "0.0.0.0:3", GossipAddr: "0.0.0.0:4"}
			c.Advertise = Addrs{NodeAddr: "a:1", APIAddr: "a:2", DNSAddr: "a:3", GossipAddr: "a:4"}
			c.RetryJoin = []string{"b:4"}
			c.GossipKey = "AAAAAAAAAAAAAAAAAAAAAA=="
			c.DNS = DNS{Zone: "fm.", TTL: time.Minute}
			c.ShutdownTimeout = time.Minute
			c.Log.Level = "warn"
		}, []string{"log.level"}, []string{
			"name", "node_id", "region", "zone", "data_dir", "cluster",
			"bind.node_addr", "bind.api_addr", "bind.dns_addr", "bind.gossip_addr",
			"advertise.node_addr", "advertise.api_addr", "advertise.dns_addr", "advertise.gossip_addr",
			"retry_join", "gossip_key", "dns.zone", "dns.ttl", "shutdown_timeout",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur := validConfig()
			next := validConfig()
			tt.mod(&next)
			changed, refused := cur.Reloadable(next)
			assert.Equal(t, tt.changed, changed)
			assert.Equal(t, tt.refused, refused)
		})
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	c := validConfig()
	c.TLS = TLS{
		CertFile: writeFile(t, dir, "node.crt", "cert"),
		KeyFile:  writeFile(t, dir, "node.key", "key"),
		CAFile:   writeFile(t, dir, "ca.crt", "ca"),
	}
	c.DataDir = filepath.Join(dir, "data", "deeper")
	require.NoError(t, c.Check(), "a missing data_dir under a writable directory")
	_, err := os.Stat(c.DataDir)
	require.ErrorIs(t, err, os.ErrNotExist, "Check creates nothing")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 3, "the probe is gone")

	bad := c
	bad.TLS.CertFile = filepath.Join(dir, "missing.crt")
	bad.TLS.CAFile = dir // a directory
	bad.DataDir = filepath.Join(c.TLS.KeyFile, "data")
	err = bad.Check()
	require.Error(t, err)
	assert.ErrorIs(t, err, os.ErrNotExist)
	for _, f := range []string{"agentcfg: tls.cert_file:", "agentcfg: tls.ca_file:", "agentcfg: data_dir:"} {
		assert.Contains(t, err.Error(), f)
	}
	assert.NotContains(t, err.Error(), "tls.key_file")

	empty := c
	empty.TLS.KeyFile = writeFile(t, dir, "empty.key", "")
	assert.ErrorContains(t, empty.Check(), "tls.key_file")
}

// TestCheckAdminToken: admin.token_file must exist and not be empty at
// start (an empty token would let any bearer through).
func TestCheckAdminToken(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		file string
		want string // "" for no error
	}{
		{"unset", "", ""},
		{"present", writeFile(t, dir, "ok.token", "s3cret\n"), ""},
		{"missing", filepath.Join(dir, "missing.token"), "agentcfg: admin.token_file:"},
		{"empty", writeFile(t, dir, "empty.token", ""), "agentcfg: admin.token_file:"},
		{"directory", dir, "agentcfg: admin.token_file:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			c.TLS = TLS{}
			c.Insecure, c.GossipKey = true, ""
			c.DataDir = filepath.Join(dir, "data")
			c.Admin.TokenFile = tt.file
			require.NoError(t, c.Validate())
			err := c.Check()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}
