package agentcfg

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fileConfig is a valid file for validConfig's values.
const fileConfig = `
name: fm-1
node_id: 1
region: eu1
zone: eu1-a
cluster: prod
data_dir: /var/lib/fmnode
gossip_key: ` + testKey + `
tls:
  cert_file: /etc/fmnode/node.crt
  key_file: /etc/fmnode/node.key
  ca_file: /etc/fmnode/ca.crt
`

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestParse(t *testing.T) {
	c, err := Parse([]byte(fileConfig))
	require.NoError(t, err)
	assert.Equal(t, validConfig(), c)

	c, err = Parse(nil)
	require.NoError(t, err, "an empty file is the defaults")
	assert.Equal(t, Default(), c)
	c, err = Parse([]byte("# nothing\n"))
	require.NoError(t, err)
	assert.Equal(t, Default(), c)
}

func TestParseNormalizes(t *testing.T) {
	c, err := Parse([]byte("dns: {zone: FM.Example.COM}\nretry_join: []\n"))
	require.NoError(t, err)
	assert.Equal(t, "fm.example.com.", c.DNS.Zone)
	assert.Nil(t, c.RetryJoin)
}

func TestParseRefuses(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       string // in the error
	}{
		{"unknown key", "name: fm-1\nnmae: fm-1\n", "nmae"},
		{"unknown nested key", "tls:\n  cert: x\n", "cert"},
		{"unknown bind key", "bind:\n  rpc_addr: x\n", "rpc_addr"},
		{"duplicate key", "name: a\nname: b\n", `"name" already defined`},
		{"second document", "name: a\n---\nname: b\n", "more than one YAML document"},
		{"not a mapping", "- a\n- b\n", "cannot unmarshal"},
		{"node_id float", "node_id: 1.5\n", "node_id"},
		{"node_id string", "node_id: \"1\"\n", "node_id"},
		{"node_id negative", "node_id: -1\n", "-1"},
		{"node_id too big", "node_id: 65536\n", "65536"},
		{"node_id mapping", "node_id: {a: 1}\n", "node_id"},
		{"duration as integer", "shutdown_timeout: 30\n", "30"},
		{"duration bad", "dns: {ttl: soon}\n", "soon"},
		{"bool bad", "insecure: maybe\n", "maybe"},
		{"list as string", "retry_join: a:1\n", "line 1: retry_join: cannot unmarshal"},
		{"nested type error", "name: a\nlog:\n  level: [debug]\n", "line 3: log.level: cannot unmarshal"},
		{"list element", "retry_join:\n  - a:1\n  - {b: 1}\n", "line 3: retry_join[1]: cannot unmarshal"},
		{"syntax", "name: [\n", "yaml"},
		{"too large", strings.Repeat("#", MaxFileBytes+1), "more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestLoadExample(t *testing.T) {
	c, err := Load("testdata/example.yaml", nil, nil)
	require.NoError(t, err)
	dir, err := filepath.Abs("testdata")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "data"), c.DataDir)
	assert.Equal(t, filepath.Join(dir, "tls/node.crt"), c.TLS.CertFile)
	assert.Equal(t, filepath.Join(dir, "tls/ca.crt"), c.TLS.CAFile)
	assert.Equal(t, "fm.example.com.", c.DNS.Zone)
	assert.Equal(t, []string{"127.0.1.12:7402", "127.0.1.13:7402", "fm-eu1-b-01.internal:7402"}, c.RetryJoin)
	assert.Equal(t, Addrs{NodeAddr: "127.0.1.11:7400", APIAddr: "127.0.0.1:7401", DNSAddr: "127.0.1.11:7453", GossipAddr: "127.0.1.11:7402"}, c.Advertised())
}

func TestLoadPrecedence(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "node.yaml", fileConfig+`
log: {level: warn}
shutdown_timeout: 20s
retry_join: [file-1:7402, file-2:7402]
`)
	env := []string{
		"HOME=/root", "PATH=/bin", // not ours: ignored
		"FMNODE_CONFIG=/elsewhere.yaml",
		"FMNODE_LOG_LEVEL=error",
		"FMNODE_NODE_ID=7",
		"FMNODE_RETRY_JOIN=env-1:7402, env-2:7402",
	}
	args := []string{"--log-level=debug", "--retry-join", "flag-1:7402", "--retry-join=flag-2:7402", "--insecure", "--gossip-key="}
	tests := []struct {
		name      string
		env, args []string
		want      func(c *Config)
	}{
		{"file", nil, nil, func(c *Config) {
			c.Log.Level = "warn"
			c.ShutdownTimeout = 20 * time.Second
			c.RetryJoin = []string{"file-1:7402", "file-2:7402"}
		}},
		{"env over file", env, nil, func(c *Config) {
			c.Log.Level = "error"
			c.NodeID = 7
			c.ShutdownTimeout = 20 * time.Second
			c.RetryJoin = []string{"env-1:7402", "env-2:7402"}
		}},
		{"flags over env", env, args, func(c *Config) {
			c.Log.Level = "debug"
			c.NodeID = 7
			c.ShutdownTimeout = 20 * time.Second
			c.RetryJoin = []string{"flag-1:7402", "flag-2:7402"}
			c.Insecure = true
			c.GossipKey = ""
		}},
		{"flags over file", nil, []string{"--shutdown-timeout", "1m", "--node-id", "9"}, func(c *Config) {
			c.Log.Level = "warn"
			c.NodeID = 9
			c.ShutdownTimeout = time.Minute
			c.RetryJoin = []string{"file-1:7402", "file-2:7402"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Load(path, tt.args, tt.env)
			require.NoError(t, err)
			want := validConfig()
			tt.want(&want)
			assert.Equal(t, want, got)
		})
	}
}

func TestLoadWithoutFile(t *testing.T) {
	env := []string{
		"FMNODE_NAME=fm-1", "FMNODE_NODE_ID=1", "FMNODE_REGION=eu1", "FMNODE_ZONE=eu1-a",
		"FMNODE_CLUSTER=prod", "FMNODE_DATA_DIR=/var/lib/fmnode", "FMNODE_GOSSIP_KEY=" + testKey,
		"FMNODE_TLS_CERT_FILE=/etc/fmnode/node.crt", "FMNODE_TLS_KEY_FILE=/etc/fmnode/node.key",
	}
	c, err := Load("", []string{"--tls-ca-file", "/etc/fmnode/ca.crt"}, env)
	require.NoError(t, err)
	assert.Equal(t, validConfig(), c)
}

func TestLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "node.yaml", fileConfig)
	tests := []struct {
		name      string
		args, env []string
		want      []string // in the error
	}{
		{"unknown flag", []string{"--nmae=x"}, nil, []string{"nmae"}},
		{"bad flag value", []string{"--node-id=x"}, nil, []string{"node-id", `"x"`}},
		{"flag out of range", []string{"--node-id=70000"}, nil, []string{"node-id"}},
		{"positional", []string{"--name=fm-2", "extra"}, nil, []string{"extra"}},
		{"unknown env", nil, []string{"FMNODE_NMAE=x", "FMNODE_LOGLEVEL=x"}, []string{"FMNODE_NMAE", "FMNODE_LOGLEVEL"}},
		{"bad env value", nil, []string{"FMNODE_SHUTDOWN_TIMEOUT=soon"}, []string{"FMNODE_SHUTDOWN_TIMEOUT", "shutdown_timeout", "soon"}},
		{"env without =", nil, []string{"FMNODE_NAME"}, []string{"FMNODE_NAME"}},
		{"invalid after merge", []string{"--log-level=loud"}, []string{"FMNODE_NODE_ID=0"}, []string{"agentcfg: node_id:", "agentcfg: log.level:"}},
		{"too many retry-join flags", repeat("--retry-join=a:1", MaxRetryJoin+1), nil, []string{"retry-join", "more than"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(path, tt.args, tt.env)
			require.ErrorIs(t, err, ErrInvalid)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}

	t.Run("unknown key", func(t *testing.T) {
		p := writeFile(t, dir, "typo.yaml", fileConfig+"advertize: {}\n")
		_, err := Load(p, nil, nil)
		require.ErrorIs(t, err, ErrInvalid)
		assert.Contains(t, err.Error(), "advertize")
		assert.Contains(t, err.Error(), p)
	})
	t.Run("too large", func(t *testing.T) {
		p := writeFile(t, dir, "big.yaml", fileConfig+strings.Repeat("#", MaxFileBytes))
		_, err := Load(p, nil, nil)
		require.ErrorIs(t, err, ErrInvalid)
		assert.Contains(t, err.Error(), "more than 1048576")
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := Load(filepath.Join(dir, "none.yaml"), nil, nil)
		require.ErrorIs(t, err, os.ErrNotExist)
	})
	t.Run("directory", func(t *testing.T) {
		_, err := Load(dir, nil, nil)
		require.ErrorIs(t, err, ErrInvalid)
	})
	t.Run("help", func(t *testing.T) {
		_, err := Load(path, []string{"-h"}, nil)
		require.ErrorIs(t, err, flag.ErrHelp)
	})
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// Relative paths: from the file, against the file's directory; from a
// flag or the environment, against the working directory.
func TestLoadRelativePaths(t *testing.T) {
	dir := t.TempDir()
	body := strings.Replace(fileConfig, "data_dir: /var/lib/fmnode", "data_dir: ./data/../state", 1)
	body = strings.Replace(body, "cert_file: /etc/fmnode/node.crt", "cert_file: tls/node.crt", 1)
	path := writeFile(t, dir, "etc/node.yaml", body)

	c, err := Load(path, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "etc", "state"), c.DataDir)
	assert.Equal(t, filepath.Join(dir, "etc", "tls", "node.crt"), c.TLS.CertFile)
	assert.Equal(t, "/etc/fmnode/node.key", c.TLS.KeyFile, "absolute paths stay")

	// A relative config path: the file's directory still.
	wd, err := os.Getwd()
	require.NoError(t, err)
	rel, err := filepath.Rel(wd, path)
	require.NoError(t, err)
	c, err = Load(rel, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "etc", "state"), c.DataDir)

	c, err = Load(path, []string{"--data-dir=var"}, []string{"FMNODE_TLS_CA_FILE=ca.pem"})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(wd, "var"), c.DataDir)
	assert.Equal(t, filepath.Join(wd, "ca.pem"), c.TLS.CAFile)
}

func TestYAMLRoundTrip(t *testing.T) {
	full := validConfig()
	full.Bind = Addrs{NodeAddr: "0.0.0.0:7400", APIAddr: "[::1]:7401", DNSAddr: "0.0.0.0:53", GossipAddr: "[::]:7402"}
	full.Advertise = Addrs{NodeAddr: "127.0.2.1:7400", DNSAddr: "127.0.2.1:53", GossipAddr: "fm-1.internal:7402"}
	full.RetryJoin = []string{"127.0.2.2:7402", "fm-3.internal:7402"}
	full.DNS = DNS{Zone: "fm.example.com.", TTL: 1500 * time.Millisecond}
	full.Log = Log{Level: "debug", Format: "json"}
	full.DataDir = "/var/lib/fm node: \"#1\""
	full.ShutdownTimeout = 90 * time.Second
	require.NoError(t, full.Validate())

	insecure := validConfig()
	insecure.Insecure, insecure.GossipKey, insecure.TLS = true, "", TLS{}

	for name, c := range map[string]Config{"valid": validConfig(), "full": full, "insecure": insecure, "default": Default()} {
		t.Run(name, func(t *testing.T) {
			b, err := c.YAML()
			require.NoError(t, err)
			if c.GossipKey != "" {
				assert.NotContains(t, string(b), c.GossipKey)
				assert.Contains(t, string(b), "gossip_key: <redacted>")
			}
			back, err := Parse(b)
			require.NoError(t, err, "%s", b)
			if c.GossipKey != "" {
				assert.Equal(t, redacted, back.GossipKey)
				back.GossipKey = c.GossipKey
			}
			assert.Equal(t, c, back, "%s", b)

			raw, err := c.marshal(false)
			require.NoError(t, err)
			back, err = Parse(raw)
			require.NoError(t, err)
			assert.Equal(t, c, back)
		})
	}
}

func TestPrintFlags(t *testing.T) {
	var b strings.Builder
	PrintFlags(&b)
	for _, f := range fields() {
		assert.Regexp(t, "(?m)^  -"+flagName(f.path)+"( value)?$", b.String())
	}
	assert.Contains(t, b.String(), "FMNODE_BIND_NODE_ADDR")
	assert.Contains(t, b.String(), DefaultNodeAddr)
	assert.NotContains(t, b.String(), "(default false)")
}

// fields() covers every leaf of Config, once, and the flag and variable
// names derived from the paths are distinct.
func TestFieldsCoverConfig(t *testing.T) {
	var leaves []string
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			p := prefix + f.Tag.Get("yaml")
			if f.Type.Kind() == reflect.Struct {
				walk(p+".", f.Type)
				continue
			}
			leaves = append(leaves, p)
		}
	}
	walk("", reflect.TypeOf(Config{}))
	var paths []string
	flags, envs := map[string]bool{}, map[string]bool{}
	var c Config
	for _, f := range fields() {
		paths = append(paths, f.path)
		require.False(t, flags[flagName(f.path)], f.path)
		require.False(t, envs[envName(f.path)], f.path)
		flags[flagName(f.path)], envs[envName(f.path)] = true, true
		require.NoError(t, setValue(f.ptr(&c), zeroText(f.ptr(&c)), false), f.path)
	}
	assert.Equal(t, leaves, paths)
	assert.False(t, envs[EnvConfig])
}

func zeroText(p any) string {
	switch p.(type) {
	case *bool:
		return "false"
	case *NodeID:
		return "0"
	case *time.Duration:
		return "0s"
	case *float64:
		return "0"
	}
	return ""
}
