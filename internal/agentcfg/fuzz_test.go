package agentcfg

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParse: Parse never panics and fails only with ErrInvalid; a config
// that parses, valid or not, encodes (unredacted) and parses back to the
// same Config (so --print-config shows what runs), with the same verdict
// from Validate; YAML() never shows the key.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("testdata/example.yaml")
	require.NoError(f, err)
	f.Add(example)
	f.Add([]byte(fileConfig))
	full, err := validConfig().marshal(false)
	require.NoError(f, err)
	f.Add(full)
	f.Add([]byte(""))
	f.Add([]byte("insecure: true\nname: a\nnode_id: 0x10\nregion: r\nzone: z\ncluster: c\ndata_dir: d\n"))
	f.Add([]byte("nmae: x\n"))
	f.Add([]byte("node_id: 1.5\n"))
	f.Add([]byte("bind: {node_addr: '[::]:1', api_addr: ':1'}\nadvertise: {node_addr: 'a:1'}\n"))
	f.Add([]byte("retry_join: [a:1, A:1, '[::1]:2']\ndns: {zone: EXAMPLE.com, ttl: 1h}\n"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	// Strings the encoder must quote or escape to read back the same.
	f.Add([]byte("name: \"null\"\nregion: \"0o17\"\nzone: \"true\"\ncluster: \"~\"\ndns: {zone: \"- x\"}\n"))
	f.Add([]byte("data_dir: \"line1\\nline2  \\n\"\ntls: {cert_file: \"\\u0085\\u2028 \", key_file: \"#x\", ca_file: \" a: b\"}\n"))
	f.Add([]byte("data_dir: |\n  a\n   b\n\n\nlog: {level: \"\\t\"}\n"))
	f.Add([]byte("---\n---\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not match ErrInvalid: %v", err)
			}
			return
		}
		raw, err := c.marshal(false)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		back, err := Parse(raw)
		if err != nil {
			t.Fatalf("re-parse: %v\n%s", err, raw)
		}
		require.Equal(t, c, back, "%s", raw)
		require.Equal(t, c.Validate() == nil, back.Validate() == nil)
		red, err := c.YAML()
		require.NoError(t, err)
		back, err = Parse(red)
		require.NoError(t, err)
		require.True(t, back.GossipKey == "" || back.GossipKey == redacted, "%s", red)
	})
}
