package sim

import (
	"strings"
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

// TestScriptedRerouteWithinOneSecond: in the scripted scenarios, every
// client that could reach its partition's new write region writes there
// within 1 s of the commit. In graceful-drain the fenced write region
// answers "paused" and the drain driver (a node of the target region)
// restarts mid-drain: the clients whose new write region is on it are
// partitioned from it and reported apart. In failback the cut region's
// own clients cannot reach the new write region until the heal: they
// are reported apart, and the other regions' clients are measured.
func TestScriptedRerouteWithinOneSecond(t *testing.T) {
	tests := []struct {
		scenario, profile string
		partitions        int
		outage            time.Duration
		wantPartitioned   bool
	}{
		{scenario: "graceful-drain", profile: "fast", partitions: 60, outage: time.Minute, wantPartitioned: true},
		{scenario: "graceful-drain", profile: "paper", partitions: 60, outage: time.Minute, wantPartitioned: true},
		{scenario: "failback", profile: "fast", partitions: 20, outage: 30 * time.Second, wantPartitioned: true},
	}
	for _, tc := range tests {
		t.Run(tc.scenario+"/"+tc.profile, func(t *testing.T) {
			res, err := Run(Config{Scenario: tc.scenario, Seed: 1, Partitions: tc.partitions, FailoverProfile: tc.profile,
				Outage: tc.outage, Duration: tc.outage})
			require.NoError(t, err)
			r := res.FailoverReport
			t.Logf("%s", r.Table())
			require.Empty(t, res.Violations)
			require.Equal(t, LinOK, res.Linearizable)
			require.Positive(t, r.ClientReroute.N, "clients that could reach the new write region were measured")
			require.Zero(t, r.ClientRerouteMissing)
			assert.LessOrEqual(t, r.ClientReroute.P99, 1.0, "reroute p99 within 1 s of the commit")
			if tc.wantPartitioned {
				assert.Positive(t, r.ClientReroutePartitioned, "clients cut from the new write region are reported apart")
				assert.Greater(t, r.ClientReroutePartitionedS.Max, 1.0, "and their wait measures the fault")
			}
			assert.Contains(t, r.WriteRecoveryMeasures, "client_reroute_partitioned")
		})
	}
}

// TestRerouteTableSaysNA: with no client measured the table prints n/a,
// not zeros.
func TestRerouteTableSaysNA(t *testing.T) {
	line := func(r FailoverReport) string {
		for _, l := range strings.Split(r.Table(), "\n") {
			if strings.HasPrefix(l, "client reroute") {
				return l
			}
		}
		return ""
	}
	r := FailoverReport{ClientRerouteMissing: 2}
	assert.Contains(t, line(r), "n/a")
	assert.NotContains(t, line(r), "0.00")
	r.ClientReroute = distOf([]float64{0.4, 0.6})
	assert.NotContains(t, line(r), "n/a")
	assert.Contains(t, line(r), "0.60")
}

// TestTimedOutWriteRetriedAsANewWrite replays, in miniature, what swarm
// seeds 146, 167 and 205 of the cluster sweep did: a write's attempt
// timed out after it committed (another client read its value), another
// write was acknowledged, and the routing core's retry of the first write
// committed again and was acknowledged. Resending the same value makes
// that history illegal although every core behaved; the retry must be
// recorded as a new write with its own value, the timed-out attempt as a
// write of unknown outcome.
func TestTimedOutWriteRetriedAsANewWrite(t *testing.T) {
	fw, err := newFoWorld(Config{Seed: 1}.withDefaults(), failoverScenario{fault: foRegionOutage}.spec(4, failover.FastConfig()))
	require.NoError(t, err)
	h := fw.e.hist
	c := fw.clients[0]
	c.write, c.value = true, "w.1"
	c.hi = h.Call(c.hclient, regInput{Kind: opCAS, Key: c.keyStr, Data: c.value}, 0)
	committed := c.value // the first attempt commits, its reply is lost
	other := h.NewClient()
	read := func(at time.Duration, saw string) {
		i := h.Call(other, regInput{Kind: opRead, Key: c.keyStr}, at)
		h.Return(i, regOutput{Status: statusOK, Data: saw}, at+time.Millisecond)
	}
	read(time.Second, committed)
	wi := h.Call(other, regInput{Kind: opCAS, Key: c.keyStr, Data: "other"}, 1500*time.Millisecond)
	h.Return(wi, regOutput{Status: statusOK, Data: "other"}, 1600*time.Millisecond)

	c.delivered, c.mayHaveApplied = true, true // the attempt reached the replica and timed out
	fw.retryAsNewWrite(c, 2*time.Second)
	assert.NotEqual(t, "w.1", c.value, "the retry writes a new value")
	committed = c.value // the retry commits and is acknowledged
	h.Return(c.hi, regOutput{Status: statusOK, Data: c.value}, 3*time.Second)
	read(4*time.Second, committed)

	assert.Equal(t, LinOK, checkKV(h.Operations(), 10*time.Second))
}
