package membership

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// Profiles name memberlist's stock timing sets.
const (
	// ProfileLAN is memberlist.DefaultLANConfig (the default).
	ProfileLAN = "lan"
	// ProfileWAN is memberlist.DefaultWANConfig.
	ProfileWAN = "wan"
	// ProfileLocal is memberlist.DefaultLocalConfig (loopback, tests).
	ProfileLocal = "local"
)

// Defaults and bounds for Config fields.
const (
	DefaultEventBuffer  = 256
	MaxEventBuffer      = 1 << 16
	DefaultMaxMembers   = 1024
	MaxMaxMembers       = 1 << 16
	MaxRetryJoin        = 64
	DefaultRetryJoinMin = time.Second
	DefaultRetryJoinMax = 30 * time.Second
	// DefaultLeaveTimeout is what Leave waits for the leave broadcast
	// when given no timeout.
	DefaultLeaveTimeout = 5 * time.Second
)

// ErrInvalidConfig: a Config field is invalid; the message names it.
var ErrInvalidConfig = errors.New("membership: invalid config")

// Config configures Start. Zero timing fields keep the profile's value.
type Config struct {
	// Name is the memberlist node name (1..MaxNameBytes bytes).
	Name string
	// NodeID is the failover core's node id (not zero).
	NodeID uint16
	// Region (required) and Zone place the node; they travel in the meta.
	Region, Zone string
	// Cluster names the cluster (1..MaxClusterBytes bytes). It is
	// memberlist's Label, so the gossip of two clusters never merges,
	// and it travels in the meta, where a mismatch is refused too.
	Cluster string

	// BindAddr is the IP address gossip listens on (TCP and UDP, one
	// port); required. BindPort 0 picks a free port (see Addr).
	BindAddr string
	BindPort int
	// AdvertiseAddr and AdvertisePort are what the others are told to
	// reach; empty and 0 mean the bound address and port.
	AdvertiseAddr string
	AdvertisePort int
	// SourceIP, when set, is the address gossip streams (TCP) are dialed
	// from; empty leaves it to the kernel, memberlist's own transport
	// unchanged. Packets (UDP) always leave from BindAddr, so SourceIP
	// equal to BindAddr gives every gossip byte this node sends one
	// source address, which a per-pair proxy can tell apart (the agent's
	// source_ip; see sourceBoundTransport).
	SourceIP string

	// RetryJoin lists host:port gossip addresses to join (at most
	// MaxRetryJoin); see Start for the retry policy. Empty means this
	// node waits for others to join it.
	RetryJoin []string
	// RetryJoinMin and RetryJoinMax bound the join backoff (defaults
	// DefaultRetryJoinMin and DefaultRetryJoinMax).
	RetryJoinMin, RetryJoinMax time.Duration

	// GossipKey is the AES key for gossip (16, 24 or 32 bytes); nil only
	// with Insecure, which sends gossip in the clear.
	GossipKey []byte
	Insecure  bool

	// NodeAddr (required), APIAddr, DNSAddr and Version travel in the meta.
	NodeAddr, APIAddr, DNSAddr, Version string

	// Profile picks memberlist's timing set: ProfileLAN (default),
	// ProfileWAN or ProfileLocal. Whatever the profile, Start sets the
	// name, the addresses, the label, the key and the delegates, and
	// takes every non-zero timing override below.
	Profile string
	// Timing overrides (zero keeps the profile's value); the memberlist
	// fields of the same names.
	ProbeInterval, ProbeTimeout      time.Duration
	GossipInterval, PushPullInterval time.Duration
	TCPTimeout                       time.Duration
	SuspicionMult                    int
	SuspicionMaxTimeoutMult          int
	// DeadRetention is how long Members keeps a dead or left member
	// (default: the profile's GossipToTheDeadTime, after which memberlist
	// forgets it too).
	DeadRetention time.Duration

	// EventBuffer bounds the Events channel (default DefaultEventBuffer).
	EventBuffer int
	// MaxMembers bounds the member table; a node beyond it is refused
	// (default DefaultMaxMembers).
	MaxMembers int

	// Logger receives this package's logs and, at debug level, memberlist's;
	// nil discards them.
	Logger *slog.Logger
	// Now is the clock for DeadRetention and log limiting; nil is
	// time.Now.
	Now func() time.Time
	// Rand returns uniform values in [0, 1) for the join jitter; nil uses
	// math/rand/v2. Only the join goroutine calls it.
	Rand func() float64
}

func configErr(field, format string, args ...any) error {
	return fmt.Errorf("membership: Config.%s: %s: %w", field, fmt.Sprintf(format, args...), ErrInvalidConfig)
}

func checkPort(field string, p int) error {
	if p < 0 || p > 65535 {
		return configErr(field, "%d is not a port (0..65535)", p)
	}
	return nil
}

// withDefaults validates c and fills its zero fields.
func (c Config) withDefaults() (Config, error) {
	if c.Profile == "" {
		c.Profile = ProfileLAN
	}
	if c.EventBuffer == 0 {
		c.EventBuffer = DefaultEventBuffer
	}
	if c.MaxMembers == 0 {
		c.MaxMembers = DefaultMaxMembers
	}
	if c.RetryJoinMin == 0 {
		c.RetryJoinMin = DefaultRetryJoinMin
	}
	if c.RetryJoinMax == 0 {
		c.RetryJoinMax = max(DefaultRetryJoinMax, c.RetryJoinMin)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	m := c.localMeta()
	if err := m.Validate(); err != nil {
		var field string
		switch {
		case m.NodeID == 0:
			field = "NodeID"
		default:
			field = "meta"
			for _, f := range m.fields() {
				if checkMetaString(f) != nil {
					field = f.name
					break
				}
			}
		}
		return c, configErr(field, "%v", err)
	}
	if base := profileConfig(c.Profile); base == nil {
		return c, configErr("Profile", "unknown profile %q (lan, wan, local)", c.Profile)
	}
	if net.ParseIP(c.BindAddr) == nil {
		return c, configErr("BindAddr", "%q is not an IP address", c.BindAddr)
	}
	if c.AdvertiseAddr != "" && net.ParseIP(c.AdvertiseAddr) == nil {
		return c, configErr("AdvertiseAddr", "%q is not an IP address", c.AdvertiseAddr)
	}
	if c.SourceIP != "" && net.ParseIP(c.SourceIP) == nil {
		return c, configErr("SourceIP", "%q is not an IP address", c.SourceIP)
	}
	if err := checkPort("BindPort", c.BindPort); err != nil {
		return c, err
	}
	if err := checkPort("AdvertisePort", c.AdvertisePort); err != nil {
		return c, err
	}
	if len(c.RetryJoin) > MaxRetryJoin {
		return c, configErr("RetryJoin", "%d addresses exceed %d", len(c.RetryJoin), MaxRetryJoin)
	}
	for i, a := range c.RetryJoin {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return c, configErr(fmt.Sprintf("RetryJoin[%d]", i), "%q: %v", a, err)
		}
		if p, err := strconv.Atoi(port); host == "" || err != nil || p < 1 || p > 65535 {
			return c, configErr(fmt.Sprintf("RetryJoin[%d]", i), "%q needs a host and a port in 1..65535", a)
		}
	}
	if c.RetryJoinMin < 0 || c.RetryJoinMax < c.RetryJoinMin {
		return c, configErr("RetryJoinMin", "need 0 < RetryJoinMin <= RetryJoinMax, got %v and %v", c.RetryJoinMin, c.RetryJoinMax)
	}
	switch {
	case c.Insecure && c.GossipKey != nil:
		return c, configErr("GossipKey", "set together with Insecure")
	case !c.Insecure && c.GossipKey == nil:
		return c, configErr("GossipKey", "required unless Insecure")
	case c.GossipKey != nil && len(c.GossipKey) != 16 && len(c.GossipKey) != 24 && len(c.GossipKey) != 32:
		return c, configErr("GossipKey", "need 16, 24 or 32 bytes, got %d", len(c.GossipKey))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"ProbeInterval", c.ProbeInterval}, {"ProbeTimeout", c.ProbeTimeout},
		{"GossipInterval", c.GossipInterval}, {"PushPullInterval", c.PushPullInterval},
		{"TCPTimeout", c.TCPTimeout}, {"DeadRetention", c.DeadRetention},
	} {
		if d.v < 0 {
			return c, configErr(d.name, "must not be negative, got %v", d.v)
		}
	}
	if c.SuspicionMult < 0 {
		return c, configErr("SuspicionMult", "must not be negative, got %d", c.SuspicionMult)
	}
	if c.SuspicionMaxTimeoutMult < 0 {
		return c, configErr("SuspicionMaxTimeoutMult", "must not be negative, got %d", c.SuspicionMaxTimeoutMult)
	}
	mc := c.memberlistTiming()
	if mc.ProbeTimeout >= mc.ProbeInterval {
		return c, configErr("ProbeTimeout", "%v must be below ProbeInterval %v", mc.ProbeTimeout, mc.ProbeInterval)
	}
	if c.DeadRetention == 0 {
		c.DeadRetention = mc.GossipToTheDeadTime
	}
	if c.EventBuffer < 1 || c.EventBuffer > MaxEventBuffer {
		return c, configErr("EventBuffer", "%d out of range [1, %d]", c.EventBuffer, MaxEventBuffer)
	}
	if c.MaxMembers < 1 || c.MaxMembers > MaxMaxMembers {
		return c, configErr("MaxMembers", "%d out of range [1, %d]", c.MaxMembers, MaxMaxMembers)
	}
	return c, nil
}

func (c *Config) localMeta() Meta {
	return Meta{
		Cluster: c.Cluster, Name: c.Name, NodeID: c.NodeID,
		Region: c.Region, Zone: c.Zone,
		NodeAddr: c.NodeAddr, APIAddr: c.APIAddr, DNSAddr: c.DNSAddr, Version: c.Version,
	}
}

func profileConfig(p string) *memberlist.Config {
	switch p {
	case ProfileLAN:
		return memberlist.DefaultLANConfig()
	case ProfileWAN:
		return memberlist.DefaultWANConfig()
	case ProfileLocal:
		return memberlist.DefaultLocalConfig()
	}
	return nil
}

// memberlistTiming is the profile with the timing overrides applied.
func (c *Config) memberlistTiming() *memberlist.Config {
	mc := profileConfig(c.Profile)
	setD := func(dst *time.Duration, v time.Duration) {
		if v != 0 {
			*dst = v
		}
	}
	setI := func(dst *int, v int) {
		if v != 0 {
			*dst = v
		}
	}
	setD(&mc.ProbeInterval, c.ProbeInterval)
	setD(&mc.ProbeTimeout, c.ProbeTimeout)
	setD(&mc.GossipInterval, c.GossipInterval)
	setD(&mc.PushPullInterval, c.PushPullInterval)
	setD(&mc.TCPTimeout, c.TCPTimeout)
	setI(&mc.SuspicionMult, c.SuspicionMult)
	setI(&mc.SuspicionMaxTimeoutMult, c.SuspicionMaxTimeoutMult)
	return mc
}

// DeadBound is how long, at most, memberlist takes to declare a silent
// member of an n-node cluster dead everywhere, from these timings: until
// someone probes it (n probe intervals, the probe order being a shuffled
// round robin), the probe and its indirect probes, the longest suspicion
// timeout (no confirmations), and some gossip rounds to spread the verdict.
// It is not a lease: the failover core never waits on it (see the package
// doc); the agent and the tests use it to size waits.
func (c Config) DeadBound(n int) time.Duration {
	if profileConfig(c.Profile) == nil {
		c.Profile = ProfileLAN
	}
	mc := c.memberlistTiming()
	n = max(n, 1)
	scale := max(1.0, math.Log10(float64(n)))
	suspicion := time.Duration(float64(mc.SuspicionMult*mc.SuspicionMaxTimeoutMult) * scale * float64(mc.ProbeInterval))
	return time.Duration(n+1)*mc.ProbeInterval + 2*mc.ProbeTimeout + suspicion + 10*mc.GossipInterval
}
