package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestReplayCommandKeepsRunShapingFlags: the DNS timings and a
// non-default liveness bound change a run, so its replay names them.
func TestReplayCommandKeepsRunShapingFlags(t *testing.T) {
	cfg := Config{Scenario: "region-outage", Seed: 2, Faults: FaultsLight, DNSTTL: 2 * time.Second,
		DNSStale: 3 * time.Second, LivenessBound: 90 * time.Second}
	assert.Equal(t, "go run ./cmd/fmnode sim --scenario region-outage --seed 2 --faults light --dns-ttl 2s --dns-stale 3s --liveness 1m30s",
		ReplayCommand(cfg))
	cfg.LivenessBound = DefaultLivenessBound
	assert.NotContains(t, ReplayCommand(cfg), "--liveness")
}
