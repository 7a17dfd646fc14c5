package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/txtdns/routing"
)

// TestClientRerouteWithinOneSecond: in the region drill, every client
// that stays up writes in its partition's new write region within 1 s of
// the failover's commit, by redirect, whatever the DNS TTL and however
// long the failover stays pending (the paper profile's 47 s, through
// which the dead write region's breaker probes it); a resolver that
// serves old epochs never moves a client back (the run's invariant
// check), and write recovery follows failover completion closely once
// clients do not sleep through it. While the failover is pending the
// clients' polls of the live regions stay near one per RedirectPoll.
func TestClientRerouteWithinOneSecond(t *testing.T) {
	tests := []struct {
		name       string
		profile    string
		outage     time.Duration
		seed       uint64
		ttl, stale time.Duration
		wantStale  bool // the resolvers must have served older epochs
	}{
		{name: "default TTL 5s"},
		{name: "TTL 60s, 5 min serve-stale", ttl: time.Minute, stale: 5 * time.Minute, wantStale: true},
		{name: "paper profile", profile: "paper", outage: 3 * time.Minute},
		{name: "paper profile, seed 3", profile: "paper", outage: 3 * time.Minute, seed: 3},
		{name: "paper profile, TTL 60s", profile: "paper", outage: 3 * time.Minute, ttl: time.Minute, stale: 5 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			profile, outage, seed := "fast", 2*time.Minute, uint64(1)
			if tc.profile != "" {
				profile, outage = tc.profile, tc.outage
			}
			if tc.seed != 0 {
				seed = tc.seed
			}
			res, err := Run(Config{Scenario: "region-outage", Seed: seed, Partitions: 60, FailoverProfile: profile,
				Outage: outage, Duration: outage, DNSTTL: tc.ttl, DNSStale: tc.stale})
			require.NoError(t, err)
			r := res.FailoverReport
			t.Logf("%s", r.Table())
			require.Empty(t, res.Violations)
			require.Equal(t, LinOK, res.Linearizable)
			require.Positive(t, r.ClientReroute.N, "clients of failed-over partitions were measured")
			require.Zero(t, r.ClientRerouteMissing)
			assert.LessOrEqual(t, r.ClientReroute.P99, 1.0, "reroute p99 within 1 s of the commit")
			assert.Equal(t, r.AffectedPartitions, r.ClientUnavailability.N)
			assert.LessOrEqual(t, r.WriteRecovery.P99, r.FailoverCompletion.P99+1.0, "write recovery measures the failover, not think time")
			assert.GreaterOrEqual(t, r.ClientUnavailability.P50, r.FailoverCompletion.P50, "a partition is unavailable at least until its failover")
			maxRate := 2/routing.DefaultRedirectPoll.Seconds() + 1 // steady polls, plus probes and redirects
			assert.Positive(t, r.ClientPendingLoad.AttemptsPerClientS)
			assert.LessOrEqual(t, r.ClientPendingLoad.AttemptsPerClientS, maxRate, "poll load while pending")
			if tc.wantStale {
				assert.Positive(t, r.DNS.RefusedOlder, "older DNS answers reached the clients and were refused")
			}
		})
	}
}

// TestClientBackwardsCheckFires: the check that no DNS answer moves a
// region's clients back must report a route whose epoch decreased.
func TestClientBackwardsCheckFires(t *testing.T) {
	fw, err := newFoWorld(Config{Seed: 1}.withDefaults(), failoverScenario{fault: foRegionOutage}.spec(4, failover.FastConfig()))
	require.NoError(t, err)
	fw.dns.noteEpoch(0, 1, 5)
	require.Empty(t, fw.e.viol.strings())
	fw.dns.noteEpoch(0, 1, 3)
	v := fw.e.viol.strings()
	require.Len(t, v, 1)
	assert.Contains(t, v[0], "back from epoch 5 to 3")
}

func TestDNSConfigErrorsNameTheField(t *testing.T) {
	spec := failoverScenario{fault: foRegionOutage}.spec(4, failover.FastConfig())
	_, err := newFoWorld(Config{Seed: 1, DNSTTL: 1500 * time.Millisecond}.withDefaults(), spec)
	require.ErrorIs(t, err, ErrConfig)
	assert.Contains(t, err.Error(), "DNSTTL")
	_, err = newFoWorld(Config{Seed: 1, DNSStale: -time.Second}.withDefaults(), spec)
	require.ErrorIs(t, err, ErrConfig)
	assert.Contains(t, err.Error(), "DNSStale")
}
