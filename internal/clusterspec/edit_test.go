package clusterspec

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonPaths are the JSON paths of Spec's fields, the profile's one level
// down, in declaration order.
func jsonPaths(typ reflect.Type, prefix string) []string {
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Type == reflect.TypeFor[Profile]() {
			out = append(out, jsonPaths(f.Type, name+".")...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
}

// TestKeysComplete: every field of a spec is a key, named by its JSON
// path, in spec order; the fixed ones are exactly those init fixes.
func TestKeysComplete(t *testing.T) {
	var names, settable []string
	for _, k := range keys() {
		names = append(names, k.name)
		if k.fixed == "" {
			settable = append(settable, k.name)
		}
	}
	assert.Equal(t, jsonPaths(reflect.TypeFor[Spec](), ""), names)
	var listed []string
	for _, k := range Keys() {
		listed = append(listed, k.Name)
		assert.NotEmpty(t, k.Usage, k.Name)
		assert.NotContains(t, k.Usage, "\n", k.Name)
	}
	assert.Equal(t, settable, listed)
	for _, fixed := range []string{"format", "cluster", "regions", "partitions", "nodes"} {
		assert.NotContains(t, listed, fixed)
	}
}

func TestGet(t *testing.T) {
	s := validSpec()
	s.NeverPromote = []string{"ap1", "us1"}
	s.Profile = Profile{Name: ProfileCustom, LeaseDuration: dur(90 * time.Second), AutoFailback: ptr(false)}
	tests := []struct{ key, want string }{
		{"format", "1"},
		{"cluster", "prod"},
		{"regions", "eu1,us1,ap1"},
		{"never_promote", "us1,ap1"},
		{"partitions", "64"},
		{"consistency", "strong"},
		{"max_staleness", "0s"},
		{"max_staleness_ops", "0"},
		{"min_durability", "2"},
		{"profile.name", "custom"},
		{"profile.base", ""},
		{"profile.lease_duration", "1m30s"},
		{"profile.heartbeat_interval", ""},
		{"profile.auto_failback", "false"},
		{"blast_radius", "0"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, err := s.Get(tt.key)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	nodes, err := s.Get("nodes")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(nodes, `[{"id":1,"name":"eu1-a"`), nodes)
	_, err = s.Get("lease_duration")
	assert.Equal(t, []string{"lease_duration"}, problemFields(t, err))
}

func TestSet(t *testing.T) {
	tests := []struct {
		key, value string
		want       func(s *Spec) // the expected result; nil: an error
		fields     []string      // the fields the error names
	}{
		{"consistency", "eventual", func(s *Spec) { s.Consistency = ConsistencyEventual }, nil},
		{"consistency", "Strong", nil, []string{"consistency"}},
		{"consistency", "bounded", nil, []string{"max_staleness"}},
		{"max_staleness", "5s", nil, []string{"max_staleness"}},
		{"max_staleness", "soon", nil, []string{"max_staleness"}},
		{"min_durability", "3", func(s *Spec) { s.MinDurability = 3 }, nil},
		{"min_durability", "4", nil, []string{"min_durability"}},
		{"min_durability", "-1", nil, []string{"min_durability"}},
		{"min_durability", "99999999999", nil, []string{"min_durability"}},
		{"never_promote", "ap1, us1", func(s *Spec) { s.NeverPromote = []string{"us1", "ap1"} }, nil},
		{"never_promote", "", func(s *Spec) {}, nil},
		{"never_promote", "ap1,,us1", nil, []string{"never_promote[1]"}},
		{"never_promote", "eu1,us1,ap1", nil, []string{"never_promote"}},
		{"blast_radius", "50", func(s *Spec) { s.BlastRadius = 50 }, nil},
		{"blast_radius", "", func(s *Spec) {}, nil},
		{"blast_radius", "x", nil, []string{"blast_radius"}},
		{"pause", "db maintenance, ticket 42", func(s *Spec) { s.Pause = "db maintenance, ticket 42" }, nil},
		{"pause", "", func(s *Spec) {}, nil},
		{"pause", "line\nbreak", nil, []string{"pause"}},
		{"pause", "   ", nil, []string{"pause"}},
		{"profile.name", "fast", func(s *Spec) { s.Profile.Name = ProfileFast }, nil},
		{"profile.name", "slow", nil, []string{"profile.name"}},
		{"profile.lease_duration", "60s", nil, []string{"profile.lease_duration"}},
		{"profile.base", "fast", nil, []string{"profile.base"}},
		{"cluster", "other", nil, []string{"cluster"}},
		{"regions", "a,b", nil, []string{"regions"}},
		{"partitions", "128", nil, []string{"partitions"}},
		{"nodes", "[]", nil, []string{"nodes"}},
		{"format", "1", nil, []string{"format"}},
		{"no_such_key", "1", nil, []string{"no_such_key"}},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			s := validSpec()
			got, err := s.Set(tt.key, tt.value)
			assert.Equal(t, validSpec(), s, "Set must leave its receiver alone")
			if tt.want == nil {
				require.Error(t, err)
				assert.Equal(t, tt.fields, problemFields(t, unwrapSet(err)), "%v", err)
				assert.Contains(t, err.Error(), tt.key, "the error names the key")
				return
			}
			require.NoError(t, err)
			want := validSpec()
			tt.want(&want)
			assert.Equal(t, want, got)
		})
	}
}

// unwrapSet strips Apply's "set <keys>: " wrapping off a validation error.
func unwrapSet(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

func TestSetFixedSaysWhy(t *testing.T) {
	_, err := validSpec().Set("partitions", "128")
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "not settable: fixed at init: placement and every partition's register are derived from it")
}

// TestApply: keys that only make sense together change in one Apply.
func TestApply(t *testing.T) {
	s := validSpec()
	b, err := s.Apply(Change{"consistency", "bounded"}, Change{"max_staleness", "5s"}, Change{"staleness_hold", "250ms"})
	require.NoError(t, err)
	assert.Equal(t, ConsistencyBounded, b.Consistency)
	assert.Equal(t, Duration(5*time.Second), b.MaxStaleness)
	assert.Equal(t, Duration(250*time.Millisecond), b.StalenessHold)

	// Back to strong: the bounds must go with it.
	_, err = b.Set("consistency", "strong")
	assert.Equal(t, []string{"max_staleness", "staleness_hold"}, problemFields(t, unwrapSet(err)))
	back, err := b.Apply(Change{"consistency", "strong"}, Change{"max_staleness", ""}, Change{"staleness_hold", "0s"})
	require.NoError(t, err)
	assert.Equal(t, s, back)

	c, err := s.Apply(Change{"profile.name", "custom"}, Change{"profile.base", "fast"}, Change{"profile.lease_duration", "5s"},
		Change{"profile.gray_stall", "10s"}, Change{"profile.history_len", "4"})
	require.NoError(t, err)
	fc, err := c.FailoverConfig()
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, fc.LeaseDuration)
	assert.Equal(t, 500*time.Millisecond, fc.HeartbeatInterval)
	assert.Equal(t, 4, fc.HistoryLen)

	// A relation failover checks, reported under the key that was set.
	_, err = c.Set("profile.lease_duration", "500ms")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "set profile.lease_duration: clusterspec: profile.lease_duration: failover: ")

	_, err = s.Apply(Change{"blast_radius", "1"}, Change{"blast_radius", "2"})
	assert.Equal(t, []string{"blast_radius"}, problemFields(t, err))
}

// TestSetGetRoundTrip: for every settable key of a spec that sets it,
// setting the value Get returns changes nothing.
func TestSetGetRoundTrip(t *testing.T) {
	s := validSpec()
	s.Consistency, s.MaxStaleness, s.MaxStalenessOps, s.StalenessHold = ConsistencyBounded, Duration(1500*time.Millisecond), 7, Duration(time.Second)
	s.NeverPromote = []string{"us1"}
	s.BlastRadius = 3
	s.Profile = Profile{Name: ProfileCustom, Base: ProfileFast,
		HeartbeatInterval: dur(time.Second), SuspectProbeInterval: dur(time.Second), LeaseDuration: dur(4 * time.Second),
		MaxClockDrift: dur(0), GracefulTimeout: dur(time.Minute), ProposeStagger: dur(0), BackupAfter: dur(time.Second),
		HoldOffBase: dur(0), HoldOffMax: dur(time.Minute), FlapWindow: dur(time.Hour), GrowHoldOffBase: dur(time.Second),
		GrowHoldOffMax: dur(time.Minute), FailbackAfter: dur(0), GrayStall: dur(8 * time.Second),
		CatchUpLagOps: ptr(uint64(10)), GrayMinErrors: ptr(3), HistoryLen: ptr(5), AutoFailback: ptr(true)}
	require.NoError(t, s.Validate())
	for _, k := range Keys() {
		v, err := s.Get(k.Name)
		require.NoError(t, err)
		if strings.HasPrefix(k.Name, "profile.") && k.Name != "profile.name" {
			require.NotEmpty(t, v, "%s: the test spec sets every override", k.Name)
		}
		got, err := s.Set(k.Name, v)
		require.NoError(t, err, k.Name)
		require.Equal(t, s, got, k.Name)
		require.Empty(t, Diff(s, got), k.Name)
	}
}

// TestSetUnsetsOverride: "" unsets an override, leaving the base's value.
func TestSetUnsetsOverride(t *testing.T) {
	s := validSpec()
	s.Profile = Profile{Name: ProfileCustom, GrayMinErrors: ptr(5)}
	got, err := s.Set("profile.gray_min_errors", "")
	require.NoError(t, err)
	assert.Nil(t, got.Profile.GrayMinErrors)
	for _, bad := range []string{"+5", "0x5", "05", "5.0", "five"} {
		_, err := s.Set("profile.gray_min_errors", bad)
		assert.Equal(t, []string{"profile.gray_min_errors"}, problemFields(t, err), bad)
	}
}

func TestDiff(t *testing.T) {
	a := validSpec()
	assert.Empty(t, Diff(a, a))
	b, err := a.Apply(Change{"consistency", "session"}, Change{"profile.name", "fast"}, Change{"blast_radius", "9"})
	require.NoError(t, err)
	assert.Equal(t, []string{"consistency", "profile.name", "blast_radius"}, Diff(a, b))

	// Order of nodes and never_promote is not a change; a node is.
	c := a.Clone()
	c.Nodes[0], c.Nodes[1] = c.Nodes[1], c.Nodes[0]
	assert.Empty(t, Diff(a, c))
	c.Nodes[0].APIAddr = "127.0.9.9:1"
	c.Partitions = 65
	assert.Equal(t, []string{"partitions", "nodes"}, Diff(a, c))
}
