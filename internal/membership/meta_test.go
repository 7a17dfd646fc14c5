package membership

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func testMeta() Meta {
	return Meta{
		Cluster: "prod", Name: "n1", NodeID: 0x0102,
		Region: "eu", Zone: "eu-a",
		NodeAddr: "127.0.0.1:7000", APIAddr: "127.0.0.1:8000", Version: "v0.5.0",
		DNSAddr: "127.0.0.1:8053",
	}
}

func TestMetaRoundTrip(t *testing.T) {
	full := Meta{
		Cluster: strings.Repeat("c", MaxClusterBytes), Name: strings.Repeat("n", MaxNameBytes),
		NodeID: 0xffff, Region: strings.Repeat("r", MaxRegionBytes), Zone: strings.Repeat("z", MaxRegionBytes),
		NodeAddr: strings.Repeat("a", MaxAddrBytes), APIAddr: strings.Repeat("b", MaxAddrBytes),
		Version: strings.Repeat("v", MaxVersionBytes), DNSAddr: strings.Repeat("d", MaxAddrBytes), Leaving: true,
	}
	minimal := Meta{Cluster: "c", Name: "n", NodeID: 1, Region: "r", NodeAddr: "h:1"}
	for _, tc := range []struct {
		name string
		meta Meta
		size int
	}{
		{"typical", testMeta(), 0},
		{"minimal", minimal, 12 + 1 + 1 + 1 + 3},
		{"leaving", Meta{Cluster: "c", Name: "n", NodeID: 1, Region: "r", NodeAddr: "h:1", Leaving: true}, 0},
		{"largest", full, MaxMetaBytes},
		{"utf8", Meta{Cluster: "ñ", Name: "ノード", NodeID: 7, Region: "région", NodeAddr: "[::1]:1"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.meta.MarshalBinary()
			require.NoError(t, err)
			if tc.size != 0 {
				require.Len(t, b, tc.size)
			}
			require.LessOrEqual(t, len(b), MaxMetaBytes)
			got, err := DecodeMeta(b)
			require.NoError(t, err)
			require.Equal(t, tc.meta, got)
		})
	}
}

func TestMetaGolden(t *testing.T) {
	m := Meta{Cluster: "c", Name: "n", NodeID: 0x0102, Region: "r", Zone: "z", NodeAddr: "a", APIAddr: "b", Version: "v", DNSAddr: "d"}
	b, err := m.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, []byte{2, 1, 2, 0, 1, 'c', 1, 'n', 1, 'r', 1, 'z', 1, 'a', 1, 'b', 1, 'v', 1, 'd'}, b)
	m.Leaving = true
	b, err = m.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, byte(1), b[3])
}

func TestMetaEncodeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*Meta)
		field string
	}{
		{"zero id", func(m *Meta) { m.NodeID = 0 }, "NodeID"},
		{"no cluster", func(m *Meta) { m.Cluster = "" }, "Cluster"},
		{"no name", func(m *Meta) { m.Name = "" }, "Name"},
		{"no region", func(m *Meta) { m.Region = "" }, "Region"},
		{"no node addr", func(m *Meta) { m.NodeAddr = "" }, "NodeAddr"},
		{"long cluster", func(m *Meta) { m.Cluster = strings.Repeat("c", MaxClusterBytes+1) }, "Cluster"},
		{"long name", func(m *Meta) { m.Name = strings.Repeat("n", MaxNameBytes+1) }, "Name"},
		{"long zone", func(m *Meta) { m.Zone = strings.Repeat("z", MaxRegionBytes+1) }, "Zone"},
		{"long api", func(m *Meta) { m.APIAddr = strings.Repeat("a", MaxAddrBytes+1) }, "APIAddr"},
		{"long version", func(m *Meta) { m.Version = strings.Repeat("v", MaxVersionBytes+1) }, "Version"},
		{"long dns", func(m *Meta) { m.DNSAddr = strings.Repeat("d", MaxAddrBytes+1) }, "DNSAddr"},
		{"bad utf8", func(m *Meta) { m.Region = "\xff" }, "Region"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testMeta()
			tc.edit(&m)
			_, err := m.MarshalBinary()
			require.ErrorIs(t, err, ErrInvalidMeta)
			require.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestDecodeMetaStrict(t *testing.T) {
	good, err := testMeta().MarshalBinary()
	require.NoError(t, err)
	with := func(edit func([]byte) []byte) []byte { return edit(bytes.Clone(good)) }
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"nil", nil, "too short"},
		{"version only", []byte{2}, "too short"},
		{"no flags", []byte{2, 0, 1}, "too short"},
		{"unknown flag", with(func(b []byte) []byte { b[3] = 2; return b }), "flags: unknown flags 0x2"},
		{"unknown version", with(func(b []byte) []byte { b[0] = 3; return b }), "unknown version 3"},
		{"version 1", with(func(b []byte) []byte { b[0] = 1; return b }), "unknown version 1"},
		{"version zero", with(func(b []byte) []byte { b[0] = 0; return b }), "unknown version 0"},
		{"zero id", with(func(b []byte) []byte { b[1], b[2] = 0, 0; return b }), "NodeID"},
		{"trailing byte", append(bytes.Clone(good), 0), "1 trailing bytes"},
		{"truncated", good[:len(good)-1], "DNSAddr: truncated"},
		{"missing field", good[:4], "Cluster: missing"},
		{"oversized cluster", append([]byte{2, 0, 1, 0, MaxClusterBytes + 1}, bytes.Repeat([]byte("c"), MaxClusterBytes+1)...), "Cluster: 65 bytes exceed 64"},
		{"empty name", []byte{2, 0, 1, 0, 1, 'c', 0, 1, 'r', 0, 1, 'a', 0, 0, 0}, "Name: required"},
		{"bad utf8", []byte{2, 0, 1, 0, 1, 'c', 1, 'n', 1, 0xff, 0, 1, 'a', 0, 0, 0}, "Region: not valid UTF-8"},
		{"over limit", bytes.Repeat([]byte{1}, MaxMetaBytes+1), "exceed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeMeta(tc.in)
			require.ErrorIs(t, err, ErrInvalidMeta)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// FuzzDecodeMeta: node meta is outside bytes. Decoding never panics, and
// what decodes re-encodes to the same bytes.
func FuzzDecodeMeta(f *testing.F) {
	good, err := testMeta().MarshalBinary()
	require.NoError(f, err)
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{1, 0, 1, 1, 1, 'c', 1, 'n', 1, 'r', 0, 1, 'a', 0, 0})
	f.Add(append(bytes.Clone(good), 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMeta(b)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidMeta)
			return
		}
		again, err := m.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, b, again)
	})
}
