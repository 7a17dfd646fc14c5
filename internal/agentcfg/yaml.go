package agentcfg

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// YAML is the effective config as YAML (for --print-config), with the
// gossip key redacted. Parse reads it back to the same Config, but for the
// key.
func (c Config) YAML() ([]byte, error) { return c.marshal(true) }

func (c Config) marshal(redact bool) ([]byte, error) {
	if redact && c.GossipKey != "" {
		c.GossipKey = redacted
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("agentcfg: encode: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("agentcfg: encode: %w", err)
	}
	return buf.Bytes(), nil
}
