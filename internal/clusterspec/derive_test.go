package clusterspec

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFailoverConfig(t *testing.T) {
	tests := []struct {
		name    string
		profile Profile
		blast   int
		want    func() failover.Config
	}{
		{"paper", Profile{Name: ProfilePaper}, 0, failover.DefaultConfig},
		{"fast", Profile{Name: ProfileFast}, 0, failover.FastConfig},
		{"custom is paper", Profile{Name: ProfileCustom}, 0, failover.DefaultConfig},
		{"custom on fast", Profile{Name: ProfileCustom, Base: ProfileFast}, 0, failover.FastConfig},
		{"blast radius", Profile{Name: ProfileFast}, 25, func() failover.Config {
			c := failover.FastConfig()
			c.MaxConcurrentPerTarget = 25
			return c
		}},
		{"every override", Profile{Name: ProfileCustom, Base: ProfileFast,
			HeartbeatInterval: dur(time.Second), SuspectProbeInterval: dur(time.Second), LeaseDuration: dur(4 * time.Second),
			MaxClockDrift: dur(0), GracefulTimeout: dur(time.Minute), ProposeStagger: dur(0), BackupAfter: dur(time.Second),
			HoldOffBase: dur(0), HoldOffMax: dur(time.Minute), FlapWindow: dur(time.Hour), GrowHoldOffBase: dur(time.Second),
			GrowHoldOffMax: dur(time.Minute), FailbackAfter: dur(0), GrayStall: dur(8 * time.Second),
			CatchUpLagOps: ptr(uint64(10)), GrayMinErrors: ptr(3), HistoryLen: ptr(failover.MaxHistory), AutoFailback: ptr(false)},
			7, func() failover.Config {
				c := failover.FastConfig()
				c.HeartbeatInterval, c.SuspectProbeInterval, c.LeaseDuration = time.Second, time.Second, 4*time.Second
				c.MaxClockDrift, c.GracefulTimeout, c.ProposeStagger, c.BackupAfter = 0, time.Minute, 0, time.Second
				c.HoldOffBase, c.HoldOffMax, c.FlapWindow = 0, time.Minute, time.Hour
				c.GrowHoldOffBase, c.GrowHoldOffMax, c.FailbackAfter, c.GrayStall = time.Second, time.Minute, 0, 8*time.Second
				c.CatchUpLagOps, c.GrayMinErrors, c.HistoryLen, c.AutoFailback = 10, 3, failover.MaxHistory, false
				c.MaxConcurrentPerTarget = 7
				return c
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSpec()
			s.Profile, s.BlastRadius = tt.profile, tt.blast
			require.NoError(t, s.Validate())
			got, err := s.FailoverConfig()
			require.NoError(t, err)
			assert.Equal(t, tt.want(), got)
		})
	}
}

func TestFailoverConfigRefuses(t *testing.T) {
	s := validSpec()
	s.Profile = Profile{Name: ProfileCustom, Base: ProfileFast, HeartbeatInterval: dur(2 * time.Second)}
	_, err := s.FailoverConfig()
	require.ErrorIs(t, err, failover.ErrInvalidConfig)
	assert.Equal(t, []string{"profile.lease_duration"}, problemFields(t, err))

	s.Profile = Profile{Name: "slow"}
	_, err = s.FailoverConfig()
	assert.Equal(t, []string{"profile.name"}, problemFields(t, err))
}

func TestAcceptors(t *testing.T) {
	ids := func(ns ...failover.NodeID) []failover.NodeID { return ns }
	tests := []struct {
		name string
		spec Spec
		want []failover.NodeID
	}{
		{"small: every node", validSpec(), ids(1, 2, 3, 4, 5, 6, 7)},
		{"lopsided 5/2/2: three of the big region, so losing it keeps a majority", gridSpec(1, 5, 2, 2), ids(1, 2, 3, 6, 7, 8, 9)},
		{"ten: three per region", gridSpec(1, 5, 3, 2), ids(1, 2, 3, 6, 7, 8, 9, 10)},
		{"large", gridSpec(1, 4, 4, 4, 4), ids(1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, tt.spec.Validate())
			assert.Equal(t, tt.want, tt.spec.Acceptors())
			for _, n := range tt.spec.Nodes {
				assert.Equal(t, contains(tt.want, failover.NodeID(n.ID)), tt.spec.IsAcceptor(n.ID))
			}
		})
	}
	// Lowest id in the region, whatever the order of the list.
	s := gridSpec(1, 5, 3, 2)
	s.Nodes[0].ID, s.Nodes[4].ID = 40, 1
	assert.Equal(t, ids(1, 2, 3, 6, 7, 8, 9, 10), s.Acceptors())
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestInitialState(t *testing.T) {
	s := validSpec()
	s.NeverPromote = []string{"ap1"}
	st, err := s.InitialState(5)
	require.NoError(t, err)
	require.NoError(t, st.Validate())
	assert.Equal(t, partition.RegisterKey(5), st.Partition)
	assert.Equal(t, quorum.Region("eu1"), st.WriteRegion)
	assert.Equal(t, failover.Epoch(1), st.Epoch)
	assert.Equal(t, []quorum.Region{"eu1", "us1", "ap1"}, st.Priority)
	assert.Equal(t, []quorum.Region{"ap1"}, st.NeverPromote)
	assert.Equal(t, failover.Strong, st.Consistency)
	assert.Equal(t, 2, st.WriteQuorum.MinDurability)
	assert.Equal(t, []quorum.Region{"ap1", "eu1", "us1"}, st.WriteQuorum.Members)

	// The first promotable region writes first.
	s.NeverPromote = []string{"eu1"}
	st, err = s.InitialState(1)
	require.NoError(t, err)
	assert.Equal(t, quorum.Region("us1"), st.WriteRegion)
	assert.Equal(t, "us1", s.Preferred())

	for _, p := range []partition.ID{0, 65} {
		_, err := s.InitialState(p)
		assert.Equal(t, []string{"partitions"}, problemFields(t, err), "partition %d", p)
	}
}

func TestPartitionSpec(t *testing.T) {
	tests := []struct {
		name string
		mod  func(s *Spec)
		want partition.Level
	}{
		{"strong", func(s *Spec) {}, partition.Level{Consistency: partition.Strong}},
		{"session", func(s *Spec) { s.Consistency = ConsistencySession }, partition.Level{Consistency: partition.Session}},
		{"eventual", func(s *Spec) { s.Consistency = ConsistencyEventual }, partition.Level{Consistency: partition.Eventual}},
		{"bounded defaults", func(s *Spec) { s.Consistency, s.MaxStaleness = ConsistencyBounded, Duration(5*time.Second) },
			partition.Level{Consistency: partition.BoundedStaleness, StalenessTime: 5 * time.Second, StalenessOps: DefaultMaxStalenessOps, StalenessHold: DefaultStalenessHold}},
		{"bounded hold cut to T", func(s *Spec) { s.Consistency, s.MaxStaleness = ConsistencyBounded, Duration(300*time.Millisecond) },
			partition.Level{Consistency: partition.BoundedStaleness, StalenessTime: 300 * time.Millisecond, StalenessOps: DefaultMaxStalenessOps, StalenessHold: 300 * time.Millisecond}},
		{"bounded set", func(s *Spec) {
			s.Consistency, s.MaxStaleness, s.MaxStalenessOps, s.StalenessHold = ConsistencyBounded, Duration(time.Second), 9, Duration(2*time.Second)
		}, partition.Level{Consistency: partition.BoundedStaleness, StalenessTime: time.Second, StalenessOps: 9, StalenessHold: 2 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSpec()
			tt.mod(&s)
			require.NoError(t, s.Validate())
			ps := s.PartitionSpec(3)
			assert.Equal(t, tt.want, ps.Level)
			require.NoError(t, ps.Level.Validate())
			assert.Equal(t, partition.Epoch(1), ps.Epoch)
			assert.Equal(t, quorum.WriteQuorum{Replicas: []quorum.Region{"ap1", "eu1", "us1"}, WriteRegion: "eu1",
				Members: []quorum.Region{"ap1", "eu1", "us1"}, MinDurability: 2}, ps.Quorum)
			require.NoError(t, ps.Quorum.Validate())
			st, err := s.InitialState(3)
			require.NoError(t, err)
			assert.Equal(t, st.WriteQuorum, ps.Quorum, "the register and the data plane start from one quorum")
			assert.Equal(t, ps.Level.Consistency, st.Consistency)
		})
	}
}

func TestNodes(t *testing.T) {
	s := validSpec()
	n, ok := s.Node(4)
	assert.True(t, ok)
	assert.Equal(t, "us1-b", n.Name)
	_, ok = s.Node(99)
	assert.False(t, ok)

	s.Nodes[0], s.Nodes[1] = s.Nodes[1], s.Nodes[0]
	assert.Equal(t, []Node{validSpec().Nodes[0], validSpec().Nodes[1]}, s.RegionNodes("eu1"))
	assert.Empty(t, s.RegionNodes("sa1"))
	fns := s.FailoverNodes()
	require.Len(t, fns, 7)
	assert.Equal(t, failover.Node{ID: 1, Region: "eu1"}, fns[0])
	assert.Equal(t, failover.Node{ID: 7, Region: "ap1"}, fns[6])
}

func TestNodeConfig(t *testing.T) {
	s := validSpec()
	c, err := s.NodeConfig(3)
	require.NoError(t, err)
	assert.Equal(t, failover.NodeID(3), c.ID)
	assert.Equal(t, quorum.Region("us1"), c.Region)
	assert.Equal(t, s.FailoverNodes(), c.Nodes)
	assert.Equal(t, s.Acceptors(), c.Acceptors)
	assert.Equal(t, failover.DefaultConfig(), c.Failover)
	_, err = s.NodeConfig(42)
	assert.Equal(t, []string{"nodes"}, problemFields(t, err))
}

// TestFailoverField: every field of failover.Config is set by a key of
// the spec, and a failover validation error naming the field names that
// key; anything else names the profile.
func TestFailoverField(t *testing.T) {
	typ := reflect.TypeFor[failover.Config]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		err := fmt.Errorf("%w: %s: bad", failover.ErrInvalidConfig, name)
		key := failoverField(err)
		require.NotEqual(t, "profile", key, "failover.Config.%s has no key", name)
		_, ok := findKey(key)
		require.True(t, ok, key)
	}
	assert.Equal(t, "blast_radius", failoverField(fmt.Errorf("%w: MaxConcurrentPerTarget: x", failover.ErrInvalidConfig)))
	assert.Equal(t, "profile", failoverField(fmt.Errorf("%w: Unheard: x", failover.ErrInvalidConfig)))
	assert.Equal(t, "profile", failoverField(errors.New("other")))
}
