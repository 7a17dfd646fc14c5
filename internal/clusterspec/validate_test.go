package clusterspec

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/txtdns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	bounded := func(s *Spec) { s.Consistency = ConsistencyBounded; s.MaxStaleness = Duration(time.Second) }
	tests := []struct {
		name   string
		mod    func(s *Spec)
		fields []string // the fields named, in order; none: valid
	}{
		{"valid", func(s *Spec) {}, nil},
		{"format 0", func(s *Spec) { s.Format = 0 }, []string{"format"}},
		{"format 2", func(s *Spec) { s.Format = 2 }, []string{"format"}},
		{"cluster empty", func(s *Spec) { s.Cluster = "" }, []string{"cluster"}},
		{"cluster upper", func(s *Spec) { s.Cluster = "Prod" }, []string{"cluster"}},
		{"cluster 63", func(s *Spec) { s.Cluster = strings.Repeat("c", 63) }, nil},
		{"cluster 64", func(s *Spec) { s.Cluster = strings.Repeat("c", 64) }, []string{"cluster"}},

		{"one region", func(s *Spec) { s.Regions = s.Regions[:1]; s.MinDurability = 1 }, []string{"regions"}},
		{"17 regions", func(s *Spec) {
			for i := range 14 {
				s.Regions = append(s.Regions, "x"+strings.Repeat("y", i))
			}
		}, []string{"regions"}},
		{"region repeated", func(s *Spec) { s.Regions[2] = "eu1" }, []string{"regions[2]"}}, // node regions are checked once regions are right
		{"region bad charset", func(s *Spec) { s.Regions[1] = "us_1" }, []string{"regions[1]"}},
		{"region too long for DNS", func(s *Spec) { s.Regions[1] = strings.Repeat("u", MaxRegionLen+1) }, []string{"regions[1]"}},
		{"region without nodes", func(s *Spec) { s.Regions = append(s.Regions, "sa1") }, []string{"regions[3]"}},

		{"never promote one", func(s *Spec) { s.NeverPromote = []string{"ap1"} }, nil},
		{"never promote the first", func(s *Spec) { s.NeverPromote = []string{"eu1"} }, nil},
		{"never promote all", func(s *Spec) { s.NeverPromote = []string{"ap1", "us1", "eu1"} }, []string{"never_promote"}},
		{"never promote unknown", func(s *Spec) { s.NeverPromote = []string{"sa1"} }, []string{"never_promote[0]"}},
		{"never promote twice", func(s *Spec) { s.NeverPromote = []string{"ap1", "ap1"} }, []string{"never_promote[1]"}},

		{"pause", func(s *Spec) { s.Pause = "maintenance" }, nil},
		{"pause at the bound", func(s *Spec) { s.Pause = strings.Repeat("p", MaxPauseReasonLen) }, nil},
		{"pause too long", func(s *Spec) { s.Pause = strings.Repeat("p", MaxPauseReasonLen+1) }, []string{"pause"}},
		{"pause control character", func(s *Spec) { s.Pause = "a\x00b" }, []string{"pause"}},

		{"partitions 0", func(s *Spec) { s.Partitions = 0 }, []string{"partitions"}},
		{"partitions max", func(s *Spec) { s.Partitions = MaxPartitions }, nil},
		{"partitions max+1", func(s *Spec) { s.Partitions = MaxPartitions + 1 }, []string{"partitions"}},

		{"consistency empty", func(s *Spec) { s.Consistency = "" }, []string{"consistency"}},
		{"consistency alias refused", func(s *Spec) { s.Consistency = "bounded-staleness" }, []string{"consistency"}},
		{"session", func(s *Spec) { s.Consistency = ConsistencySession }, nil},
		{"eventual", func(s *Spec) { s.Consistency = ConsistencyEventual }, nil},
		{"bounded", bounded, nil},
		{"bounded all set", func(s *Spec) {
			bounded(s)
			s.MaxStalenessOps, s.StalenessHold = 10, Duration(time.Minute)
		}, nil},
		{"bounded without max_staleness", func(s *Spec) { bounded(s); s.MaxStaleness = 0 }, []string{"max_staleness"}},
		{"bounded max_staleness too small", func(s *Spec) { bounded(s); s.MaxStaleness = Duration(MinMaxStaleness - 1) }, []string{"max_staleness"}},
		{"bounded max_staleness too large", func(s *Spec) { bounded(s); s.MaxStaleness = Duration(MaxMaxStaleness + 1) }, []string{"max_staleness"}},
		{"bounded ops too large", func(s *Spec) { bounded(s); s.MaxStalenessOps = MaxStalenessOpsLimit + 1 }, []string{"max_staleness_ops"}},
		{"bounded hold negative", func(s *Spec) { bounded(s); s.StalenessHold = -1 }, []string{"staleness_hold"}},
		{"bounded hold too long", func(s *Spec) { bounded(s); s.StalenessHold = Duration(MaxStalenessHold + 1) }, []string{"staleness_hold"}},
		{"staleness without bounded", func(s *Spec) {
			s.MaxStaleness, s.MaxStalenessOps, s.StalenessHold = Duration(time.Second), 1, 1
		}, []string{"max_staleness", "max_staleness_ops", "staleness_hold"}},

		{"min durability 0", func(s *Spec) { s.MinDurability = 0 }, []string{"min_durability"}},
		{"min durability all", func(s *Spec) { s.MinDurability = 3 }, nil},
		{"min durability above regions", func(s *Spec) { s.MinDurability = 4 }, []string{"min_durability"}},

		{"blast radius", func(s *Spec) { s.BlastRadius = 7 }, nil},
		{"blast radius negative", func(s *Spec) { s.BlastRadius = -1 }, []string{"blast_radius"}},
		{"blast radius too large", func(s *Spec) { s.BlastRadius = MaxBlastRadius + 1 }, []string{"blast_radius"}},

		{"profile fast", func(s *Spec) { s.Profile.Name = ProfileFast }, nil},
		{"profile empty", func(s *Spec) { s.Profile.Name = "" }, []string{"profile.name"}},
		{"profile unknown", func(s *Spec) { s.Profile.Name = "default" }, []string{"profile.name"}},
		{"profile paper with override", func(s *Spec) { s.Profile.LeaseDuration = dur(time.Minute) }, []string{"profile.lease_duration"}},
		{"profile paper with base", func(s *Spec) { s.Profile.Base = ProfileFast }, []string{"profile.base"}},
		{"profile custom", func(s *Spec) { s.Profile = Profile{Name: ProfileCustom} }, nil},
		{"profile custom bad base", func(s *Spec) { s.Profile = Profile{Name: ProfileCustom, Base: "custom"} }, []string{"profile.base"}},
		{"profile custom overrides", func(s *Spec) {
			s.Profile = Profile{Name: ProfileCustom, Base: ProfileFast, LeaseDuration: dur(5 * time.Second), MaxClockDrift: dur(0), GrayStall: dur(10 * time.Second), AutoFailback: ptr(false)}
		}, nil},
		{"profile override negative", func(s *Spec) { s.Profile = Profile{Name: ProfileCustom, HoldOffBase: dur(-time.Second)} }, []string{"profile.hold_off_base"}},
		{"profile override too long", func(s *Spec) { s.Profile = Profile{Name: ProfileCustom, FlapWindow: dur(MaxOverride + 1)} }, []string{"profile.flap_window"}},
		{"profile override count too large", func(s *Spec) { s.Profile = Profile{Name: ProfileCustom, GrayMinErrors: ptr(maxGrayMinErrors + 1)} }, []string{"profile.gray_min_errors"}},
		{"profile relation: lease below heartbeat", func(s *Spec) {
			s.Profile = Profile{Name: ProfileCustom, LeaseDuration: dur(30 * time.Second)}
		}, []string{"profile.lease_duration"}},
		{"profile relation: history", func(s *Spec) { s.Profile = Profile{Name: ProfileCustom, HistoryLen: ptr(0)} }, []string{"profile.history_len"}},

		{"no nodes", func(s *Spec) { s.Nodes = nil }, []string{"nodes", "regions[0]", "regions[1]", "regions[2]"}},
		{"too many nodes", func(s *Spec) {
			for i := range MaxNodes {
				s.Nodes = append(s.Nodes, testNode(uint16(100+i), "eu1"))
			}
		}, []string{"nodes"}},
		{"node id 0", func(s *Spec) { s.Nodes[3].ID = 0 }, []string{"nodes[3].id"}},
		{"node id repeated", func(s *Spec) { s.Nodes[3].ID = 1 }, []string{"nodes[3].id"}},
		{"node name repeated", func(s *Spec) { s.Nodes[4].Name = "eu1-a" }, []string{"nodes[4].name"}},
		{"node name bad", func(s *Spec) { s.Nodes[4].Name = "-x" }, []string{"nodes[4].name"}},
		{"node region unknown", func(s *Spec) { s.Nodes[0].Region = "sa1" }, []string{"nodes[0].region"}},
		{"node zone empty", func(s *Spec) { s.Nodes[0].Zone = "" }, []string{"nodes[0].zone"}},
		{"node addr empty", func(s *Spec) { s.Nodes[0].NodeAddr = "" }, []string{"nodes[0].node_addr"}},
		{"api addr empty", func(s *Spec) { s.Nodes[0].APIAddr = "" }, []string{"nodes[0].api_addr"}},
		{"addr no port", func(s *Spec) { s.Nodes[0].NodeAddr = "127.0.0.1" }, []string{"nodes[0].node_addr"}},
		{"addr port 0", func(s *Spec) { s.Nodes[0].NodeAddr = "127.0.0.1:0" }, []string{"nodes[0].node_addr"}},
		{"addr port leading zero", func(s *Spec) { s.Nodes[0].NodeAddr = "127.0.0.1:07400" }, []string{"nodes[0].node_addr"}},
		{"addr wildcard", func(s *Spec) { s.Nodes[0].NodeAddr = "0.0.0.0:7400" }, []string{"nodes[0].node_addr"}},
		{"addr no host", func(s *Spec) { s.Nodes[0].NodeAddr = ":7400" }, []string{"nodes[0].node_addr"}},
		{"addr ipv6", func(s *Spec) { s.Nodes[0].NodeAddr = "[::1]:7400" }, nil},
		{"addr ipv6 unbracketed", func(s *Spec) { s.Nodes[0].NodeAddr = "::1:7400" }, []string{"nodes[0].node_addr"}},
		{"addr bracketed ipv4", func(s *Spec) { s.Nodes[0].NodeAddr = "[127.0.0.1]:7400" }, []string{"nodes[0].node_addr"}},
		{"addr bad name", func(s *Spec) { s.Nodes[0].NodeAddr = "a_b.localhost:7400" }, []string{"nodes[0].node_addr"}},
		{"addr numeric name", func(s *Spec) { s.Nodes[0].NodeAddr = "10.0.0.300:7400" }, []string{"nodes[0].node_addr"}},
		{"addr shared", func(s *Spec) { s.Nodes[1].APIAddr = "127.0.1.1:7400" }, []string{"nodes[1].api_addr"}},
		{"addr shared in another spelling", func(s *Spec) { s.Nodes[6].NodeAddr = "LOCALHOST:7401" }, []string{"nodes[6].api_addr"}},
		{"dns addr bad", func(s *Spec) { s.Nodes[0].DNSAddr = "x" }, []string{"nodes[0].dns_addr"}},

		{"several at once", func(s *Spec) { s.Cluster = ""; s.Partitions = -1; s.Nodes[0].Zone = "Z" },
			[]string{"cluster", "partitions", "nodes[0].zone"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSpec()
			tt.mod(&s)
			err := s.Validate()
			assert.Equal(t, tt.fields, problemFields(t, err), "%v", err)
		})
	}
}

// TestValidateProfileCause: a profile failover refuses names the profile
// and carries failover's own error.
func TestValidateProfileCause(t *testing.T) {
	s := validSpec()
	s.Profile = Profile{Name: ProfileCustom, LeaseDuration: dur(time.Second)}
	err := s.Validate()
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorIs(t, err, failover.ErrInvalidConfig)
	require.Contains(t, err.Error(), "clusterspec: profile.lease_duration: ")
	require.Contains(t, err.Error(), "LeaseDuration")
}

// TestRegionNamesAreDNSRegions: every region name the spec accepts is one
// the routing client's TXT records accept.
func TestRegionNamesAreDNSRegions(t *testing.T) {
	for _, r := range []string{"a", "eu1", "us-east-1", strings.Repeat("z", MaxRegionLen), "0"} {
		var p problems
		require.True(t, p.label("r", r, MaxRegionLen), r)
		require.NoError(t, txtdns.ValidateRegion(r), r)
	}
}

func TestFieldError(t *testing.T) {
	cause := errors.New("cause")
	e := &FieldError{Field: "regions[1]", Problem: "bad", Err: cause}
	assert.Equal(t, "clusterspec: regions[1]: bad", e.Error())
	assert.ErrorIs(t, e, ErrInvalid)
	assert.ErrorIs(t, e, cause)
	assert.ErrorIs(t, &FieldError{Field: "x"}, ErrInvalid)
}
