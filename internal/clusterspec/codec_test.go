package clusterspec

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// golden is validSpec's canonical encoding. A change here is a change of
// the format every deployed register holds: it needs a new Format.
const golden = `{"format":1,"cluster":"prod","regions":["eu1","us1","ap1"],"partitions":64,"consistency":"strong","min_durability":2,"profile":{"name":"paper"},` +
	`"nodes":[{"id":1,"name":"eu1-a","region":"eu1","zone":"eu1-a","node_addr":"127.0.1.1:7400","api_addr":"127.0.1.1:7401"},` +
	`{"id":2,"name":"eu1-b","region":"eu1","zone":"eu1-b","node_addr":"127.0.1.2:7400","api_addr":"127.0.1.2:7401","dns_addr":"127.0.1.2:53"},` +
	`{"id":3,"name":"us1-a","region":"us1","zone":"us1-a","node_addr":"127.0.2.1:7400","api_addr":"127.0.2.1:7401"},` +
	`{"id":4,"name":"us1-b","region":"us1","zone":"us1-b","node_addr":"127.0.2.2:7400","api_addr":"127.0.2.2:7401"},` +
	`{"id":5,"name":"us1-c","region":"us1","zone":"us1-c","node_addr":"127.0.2.3:7400","api_addr":"127.0.2.3:7401"},` +
	`{"id":6,"name":"ap1-a","region":"ap1","zone":"ap1-a","node_addr":"127.0.3.1:7400","api_addr":"127.0.3.1:7401"},` +
	`{"id":7,"name":"ap1-b","region":"ap1","zone":"ap1-b","node_addr":"localhost:7400","api_addr":"localhost:7401"}]}`

func TestEncodeGolden(t *testing.T) {
	b, err := Encode(validSpec())
	require.NoError(t, err)
	assert.Equal(t, golden, string(b))
	s, err := Decode([]byte(golden))
	require.NoError(t, err)
	assert.Equal(t, validSpec(), s)
}

func TestEncodeFull(t *testing.T) {
	s := validSpec()
	s.Consistency = ConsistencyBounded
	s.MaxStaleness, s.MaxStalenessOps, s.StalenessHold = Duration(1500*time.Millisecond), 50, Duration(time.Second)
	s.NeverPromote = []string{"ap1"}
	s.BlastRadius = 100
	s.Profile = Profile{Name: ProfileCustom, Base: ProfileFast, HeartbeatInterval: dur(time.Second), SuspectProbeInterval: dur(time.Second),
		LeaseDuration: dur(3 * time.Second), GrayStall: dur(5 * time.Second), AutoFailback: ptr(false)}
	b, err := Encode(s)
	require.NoError(t, err)
	want := `"never_promote":["ap1"],"partitions":64,"consistency":"bounded","max_staleness":"1.5s","max_staleness_ops":50,"staleness_hold":"1s","min_durability":2,` +
		`"profile":{"name":"custom","base":"fast","heartbeat_interval":"1s","suspect_probe_interval":"1s","lease_duration":"3s","gray_stall":"5s","auto_failback":false},"blast_radius":100,`
	assert.Contains(t, string(b), want)
	back, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, s, back)
}

// TestEncodeCanonical: node order and never_promote order do not change
// the bytes; Encode leaves its argument alone.
func TestEncodeCanonical(t *testing.T) {
	a := validSpec()
	a.NeverPromote = []string{"ap1", "us1"}
	b := a.Clone()
	b.NeverPromote = []string{"us1", "ap1"}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(b.Nodes), func(i, j int) { b.Nodes[i], b.Nodes[j] = b.Nodes[j], b.Nodes[i] })
	order := append([]Node(nil), b.Nodes...)
	ea, err := Encode(a)
	require.NoError(t, err)
	eb, err := Encode(b)
	require.NoError(t, err)
	assert.Equal(t, string(ea), string(eb))
	assert.Equal(t, order, b.Nodes, "Encode must not sort its argument's nodes in place")
	d, err := Decode(eb)
	require.NoError(t, err)
	assert.Equal(t, []string{"us1", "ap1"}, d.NeverPromote)
}

func TestEncodeRefusesInvalid(t *testing.T) {
	s := validSpec()
	s.Partitions = 0
	_, err := Encode(s)
	assert.Equal(t, []string{"partitions"}, problemFields(t, err))
}

// TestRoundTrip: for random valid specs, Decode(Encode(s)) is s in
// canonical form, and encoding that again gives the same bytes.
func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for i := range 300 {
		s := randomSpec(r)
		require.NoError(t, s.Validate(), "spec %d", i)
		b, err := Encode(s)
		require.NoError(t, err)
		back, err := Decode(b)
		require.NoError(t, err)
		require.Equal(t, s.canonical(), back)
		b2, err := Encode(back)
		require.NoError(t, err)
		require.Equal(t, string(b), string(b2))
	}
}

func TestDecodeRefuses(t *testing.T) {
	good := golden
	tests := []struct {
		name  string
		in    string
		field string // the field the first error names
		text  string // in the message
	}{
		{"empty", "", "spec", "not JSON"},
		{"not JSON", "{", "spec", "not JSON"},
		{"array", "[]", "spec", "not JSON"},
		{"no format", `{"cluster":"x"}`, "format", "missing"},
		{"later format", `{"format":2,"a_field_of_format_2":true}`, "format", "version 2"},
		{"unknown field", strings.Replace(good, `"cluster"`, `"clutser":"x","cluster"`, 1), "spec", "clutser"},
		{"unknown node field", strings.Replace(good, `"id":3,`, `"id":3,"weight":2,`, 1), "spec", "weight"},
		{"trailing data", good + `{}`, "spec", "after top-level value"},
		{"trailing garbage", good + ` x`, "spec", "after top-level value"},
		{"duration as number", strings.Replace(good, `"min_durability":2`, `"min_durability":2,"max_staleness":1000`, 1), "spec", "duration is a string"},
		{"duration garbage", strings.Replace(good, `"min_durability":2`, `"min_durability":2,"max_staleness":"1 fortnight"`, 1), "spec", "not a duration"},
		{"id out of range", strings.Replace(good, `"id":3,`, `"id":65536,`, 1), "spec", "uint16"},
		{"fractional", strings.Replace(good, `"partitions":64`, `"partitions":6.5`, 1), "spec", "partitions"},
		{"invalid", strings.Replace(good, `"partitions":64`, `"partitions":0`, 1), "partitions", "1..4194304"},
		{"too large", good + strings.Repeat(" ", MaxBytes), "spec", "more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.in))
			require.Error(t, err)
			fields := problemFields(t, err)
			assert.Equal(t, tt.field, fields[0], "%v", err)
			assert.Contains(t, err.Error(), tt.text)
		})
	}
}

// TestDecodeTrailingWhitespace: whitespace after the value is not data.
func TestDecodeTrailingWhitespace(t *testing.T) {
	_, err := Decode([]byte(golden + " \n\t"))
	require.NoError(t, err)
	_, err = Decode(bytes.Repeat([]byte(" "), 3))
	require.Error(t, err)
}

// TestDecodeErrorBounded: an error quotes at most a bounded part of the
// input.
func TestDecodeErrorBounded(t *testing.T) {
	long := strings.Repeat("x", 100000)
	for _, in := range []string{
		strings.Replace(golden, `"cluster"`, `"`+long+`":1,"cluster"`, 1),
		strings.Replace(golden, `"prod"`, `"`+long+`"`, 1),
		strings.Replace(golden, `"partitions":64`, `"partitions":"`+long+`"`, 1),
		`{"format":1,` + long,
	} {
		_, err := Decode([]byte(in))
		require.ErrorIs(t, err, ErrInvalid)
		assert.Less(t, len(err.Error()), 1000)
	}
}
