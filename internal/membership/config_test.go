package membership

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func validConfig() Config {
	return Config{
		Name: "n1", NodeID: 1, Region: "eu", Zone: "eu-a", Cluster: "test",
		BindAddr: "127.0.0.1", BindPort: 0,
		GossipKey: bytes.Repeat([]byte{7}, 16),
		NodeAddr:  "127.0.0.1:7000", APIAddr: "127.0.0.1:8000", Version: "dev",
		Profile: ProfileLocal,
	}
}

func TestConfigValidation(t *testing.T) {
	tooMany := make([]string, MaxRetryJoin+1)
	for i := range tooMany {
		tooMany[i] = "127.0.0.1:7946"
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string // empty: valid
	}{
		{"valid", func(c *Config) {}, ""},
		{"valid lan default", func(c *Config) { c.Profile = "" }, ""},
		{"valid wan", func(c *Config) { c.Profile = ProfileWAN }, ""},
		{"valid insecure", func(c *Config) { c.GossipKey, c.Insecure = nil, true }, ""},
		{"valid 24-byte key", func(c *Config) { c.GossipKey = make([]byte, 24) }, ""},
		{"valid 32-byte key", func(c *Config) { c.GossipKey = make([]byte, 32) }, ""},
		{"valid join", func(c *Config) { c.RetryJoin = []string{"127.0.0.1:7946", "seed.example:7946", "[::1]:1"} }, ""},
		{"no name", func(c *Config) { c.Name = "" }, "Config.Name"},
		{"long name", func(c *Config) { c.Name = strings.Repeat("n", MaxNameBytes+1) }, "Config.Name"},
		{"zero id", func(c *Config) { c.NodeID = 0 }, "Config.NodeID"},
		{"no region", func(c *Config) { c.Region = "" }, "Config.Region"},
		{"long zone", func(c *Config) { c.Zone = strings.Repeat("z", MaxRegionBytes+1) }, "Config.Zone"},
		{"no cluster", func(c *Config) { c.Cluster = "" }, "Config.Cluster"},
		{"long cluster", func(c *Config) { c.Cluster = strings.Repeat("c", MaxClusterBytes+1) }, "Config.Cluster"},
		{"no node addr", func(c *Config) { c.NodeAddr = "" }, "Config.NodeAddr"},
		{"long api addr", func(c *Config) { c.APIAddr = strings.Repeat("a", MaxAddrBytes+1) }, "Config.APIAddr"},
		{"long version", func(c *Config) { c.Version = strings.Repeat("v", MaxVersionBytes+1) }, "Config.Version"},
		{"bad profile", func(c *Config) { c.Profile = "lab" }, "Config.Profile"},
		{"no bind addr", func(c *Config) { c.BindAddr = "" }, "Config.BindAddr"},
		{"bind hostname", func(c *Config) { c.BindAddr = "localhost" }, "Config.BindAddr"},
		{"bad advertise", func(c *Config) { c.AdvertiseAddr = "host" }, "Config.AdvertiseAddr"},
		{"bind port", func(c *Config) { c.BindPort = 65536 }, "Config.BindPort"},
		{"advertise port", func(c *Config) { c.AdvertisePort = -1 }, "Config.AdvertisePort"},
		{"too many joins", func(c *Config) { c.RetryJoin = tooMany }, "Config.RetryJoin"},
		{"join no port", func(c *Config) { c.RetryJoin = []string{"127.0.0.1"} }, "Config.RetryJoin[0]"},
		{"join port zero", func(c *Config) { c.RetryJoin = []string{"127.0.0.1:1", "127.0.0.1:0"} }, "Config.RetryJoin[1]"},
		{"join no host", func(c *Config) { c.RetryJoin = []string{":7946"} }, "Config.RetryJoin[0]"},
		{"join backoff", func(c *Config) { c.RetryJoinMin, c.RetryJoinMax = time.Second, time.Millisecond }, "Config.RetryJoinMin"},
		{"no key", func(c *Config) { c.GossipKey = nil }, "Config.GossipKey"},
		{"key and insecure", func(c *Config) { c.Insecure = true }, "Config.GossipKey"},
		{"short key", func(c *Config) { c.GossipKey = make([]byte, 15) }, "Config.GossipKey"},
		{"negative probe", func(c *Config) { c.ProbeInterval = -1 }, "Config.ProbeInterval"},
		{"probe timeout", func(c *Config) { c.ProbeTimeout = 2 * time.Second }, "Config.ProbeTimeout"},
		{"negative tcp", func(c *Config) { c.TCPTimeout = -1 }, "Config.TCPTimeout"},
		{"negative retention", func(c *Config) { c.DeadRetention = -1 }, "Config.DeadRetention"},
		{"suspicion mult", func(c *Config) { c.SuspicionMult = -1 }, "Config.SuspicionMult"},
		{"suspicion max", func(c *Config) { c.SuspicionMaxTimeoutMult = -1 }, "Config.SuspicionMaxTimeoutMult"},
		{"event buffer", func(c *Config) { c.EventBuffer = MaxEventBuffer + 1 }, "Config.EventBuffer"},
		{"max members", func(c *Config) { c.MaxMembers = -1 }, "Config.MaxMembers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.edit(&c)
			got, err := c.withDefaults()
			if tc.field == "" {
				require.NoError(t, err)
				require.NotEmpty(t, got.Profile)
				require.Positive(t, got.DeadRetention)
				require.Positive(t, got.EventBuffer)
				return
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.Contains(t, err.Error(), tc.field+":")
		})
	}
}

func TestConfigTimingOverrides(t *testing.T) {
	c := validConfig()
	c.ProbeInterval, c.ProbeTimeout = 300*time.Millisecond, 100*time.Millisecond
	c.SuspicionMult, c.SuspicionMaxTimeoutMult = 2, 3
	c.GossipInterval, c.PushPullInterval, c.TCPTimeout = 20*time.Millisecond, time.Second, 400*time.Millisecond
	mc := c.memberlistTiming()
	require.Equal(t, 300*time.Millisecond, mc.ProbeInterval)
	require.Equal(t, 100*time.Millisecond, mc.ProbeTimeout)
	require.Equal(t, 2, mc.SuspicionMult)
	require.Equal(t, 3, mc.SuspicionMaxTimeoutMult)
	require.Equal(t, 20*time.Millisecond, mc.GossipInterval)
	require.Equal(t, time.Second, mc.PushPullInterval)
	require.Equal(t, 400*time.Millisecond, mc.TCPTimeout)
	// Zero keeps the profile's value.
	c = validConfig()
	require.Equal(t, time.Second, c.memberlistTiming().ProbeInterval)
	// 4 probe intervals + 2 probe timeouts + 3*6*1 intervals + 10 gossip rounds.
	require.Equal(t, 4*time.Second+400*time.Millisecond+18*time.Second+time.Second, c.DeadBound(3))
	require.Greater(t, c.DeadBound(100), c.DeadBound(3))
}
