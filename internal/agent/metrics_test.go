package agent

import (
	"context"
	"encoding/json"
	"go.yaml.in/yaml/v3"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/partition"
)

func TestKindOutcome(t *testing.T) {
	for _, tc := range []struct {
		kind    failover.DecisionKind
		outcome node.CASOutcome
		label   string
		ok      bool
	}{
		{failover.DecideFailover, node.CASCommitted, "committed", true},
		{failover.DecideFailover, node.CASConflict, "conflict", true},
		{failover.DecideFailover, node.CASFailed, "failed", true},
		{failover.DecideStartSwitchover, node.CASCommitted, "started", true},
		{failover.DecideCompleteSwitchover, node.CASCommitted, "completed", true},
		{failover.DecideAbortSwitchover, node.CASCommitted, "aborted", true},
		{failover.DecideCompleteSwitchover, node.CASConflict, "conflict", true},
		{failover.DecideStartSwitchover, node.CASFailed, "failed", true},
		{failover.DecideShrinkQuorum, node.CASCommitted, "", false},
		{failover.DecideReassert, node.CASConflict, "", false},
	} {
		t.Run(tc.kind.String()+"/"+tc.outcome.String(), func(t *testing.T) {
			label, ok := kindOutcome(tc.kind, tc.outcome)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.label, label)
		})
	}
}

// TestNodeObserverCounts: the observer counts each proposal once by kind
// and outcome, times every CAS, and counts an epoch change only when a
// partition it already knew shows a newer epoch.
func TestNodeObserverCounts(t *testing.T) {
	o := newNodeObserver()
	prop := func(k failover.DecisionKind) failover.Proposal { return failover.Proposal{Kind: k} }
	o.CASDone(1, prop(failover.DecideFailover), node.CASCommitted, 30*time.Millisecond)
	o.CASDone(2, prop(failover.DecideFailover), node.CASConflict, 10*time.Millisecond)
	o.CASDone(1, prop(failover.DecideStartSwitchover), node.CASCommitted, time.Millisecond)
	o.CASDone(1, prop(failover.DecideGrowQuorum), node.CASFailed, time.Second)
	o.CASDone(1, prop(failover.DecideGrowQuorum), node.CASOutcome(99), time.Second)
	for _, e := range []failover.Epoch{1, 1, 2, 1, 3} {
		o.Committed(1, 0, failover.State{Epoch: e})
	}
	o.Committed(2, 0, failover.State{Epoch: 7}) // first sight: not a change

	for _, tc := range []struct {
		c    prometheus.Collector
		want float64
	}{
		{o.failovers.WithLabelValues("committed"), 1},
		{o.failovers.WithLabelValues("conflict"), 1},
		{o.failovers.WithLabelValues("failed"), 0},
		{o.switchovers.WithLabelValues("started"), 1},
		{o.switchovers.WithLabelValues("completed"), 0},
		{o.cas.WithLabelValues("committed"), 2},
		{o.cas.WithLabelValues("conflict"), 1},
		{o.cas.WithLabelValues("failed"), 1},
		{o.epochChanges, 2},
	} {
		assert.Equal(t, tc.want, testutil.ToFloat64(tc.c))
	}
	assert.Equal(t, 3, testutil.CollectAndCount(o.cas), "an unknown outcome adds no label value")
	assert.Equal(t, 3, testutil.CollectAndCount(o.casSeconds))
}

// TestNodeObserverEpochMarks: the first sight of each newer epoch and the
// first failover proposal into each epoch keep their times; repeats and
// older epochs do not move them, other kinds of proposal are not failovers.
func TestNodeObserverEpochMarks(t *testing.T) {
	o := newNodeObserver()
	t0 := time.Unix(1000, 0)
	clock := t0
	o.now = func() time.Time { return clock }
	tick := func() { clock = clock.Add(time.Second) }
	o.Committed(1, 0, failover.State{Epoch: 1}) // at t0
	tick()
	o.Committed(1, 0, failover.State{Epoch: 1})
	o.Proposed(1, failover.Proposal{Kind: failover.DecideGrowQuorum, Next: failover.State{Epoch: 1}})
	o.Proposed(1, failover.Proposal{Kind: failover.DecideFailover, Next: failover.State{Epoch: 2}}) // t0+1
	tick()
	o.Proposed(1, failover.Proposal{Kind: failover.DecideFailover, Next: failover.State{Epoch: 2}}) // a retry
	o.Committed(1, 0, failover.State{Epoch: 2})                                                     // t0+2
	tick()
	o.Committed(1, 0, failover.State{Epoch: 2})
	o.Committed(1, 0, failover.State{Epoch: 1}) // an old value arriving late
	o.Promoted(1, 2)                            // t0+3
	tick()
	o.Promoted(1, 2)
	o.Promoted(1, 1)
	assert.Equal(t, epochMark{Epoch: 2, SeenAt: t0.Add(2 * time.Second), FailoverEpoch: 2, FailoverAt: t0.Add(time.Second),
		PromotedEpoch: 2, PromotedAt: t0.Add(3 * time.Second)}, o.mark(1))
	assert.Equal(t, epochMark{}, o.mark(9), "a partition never seen")
}

// TestNodeCollectorCardinality: per-partition series up to the cap, the
// per-region aggregates always (zero for a region lagging nowhere), and
// nothing but fmnode_node_up when the node did not answer.
func TestNodeCollectorCardinality(t *testing.T) {
	leader := func(id partition.ID, lagNorth, lagWest, atRisk uint64) partSnapshot {
		return partSnapshot{id: id, epoch: 2, lag: []regionLag{{"north", lagNorth}, {"west", lagWest}}, atRisk: atRisk}
	}
	three := nodeSnapshot{ok: true, leaseValid: true, leaseRemaining: 1500 * time.Millisecond, hosted: 3, writeRegionParts: 2,
		heldPolls: 7, host: partition.HostStats{PollsHeld: 40, PollsReleased: 30, PollsExpired: 3, PollsNotHeld: 1},
		regions: []string{"east", "north", "west"},
		parts:   []partSnapshot{leader(1, 3, 0, 2), leader(2, 5, 1, 0), {id: 3, epoch: 4}}}
	for _, tc := range []struct {
		name      string
		snap      nodeSnapshot
		maxLabels int
		// want maps series (name{labels}) to values; absent lists names
		// that must have no series.
		want   map[string]float64
		absent []string
	}{
		{name: "below the cap", snap: three, maxLabels: 3,
			want: map[string]float64{
				"fmnode_node_up": 1, "fmnode_lease_valid": 1, "fmnode_lease_remaining_seconds": 1.5,
				"fmnode_hosted_partitions": 3, "fmnode_write_region_partitions": 2, "fmnode_metrics_partitions_aggregated": 0,
				`fmnode_partition_epoch{partition="3"}`:                    4,
				`fmnode_replication_lag_ops{partition="2",region="north"}`: 5,
				`fmnode_replication_lag_max_ops{region="north"}`:           5,
				`fmnode_replication_lag_sum_ops{region="north"}`:           8,
				`fmnode_replication_lag_sum_ops{region="west"}`:            1,
				"fmnode_data_at_risk_ops":                                  2,
				"fmnode_polls_held":                                        7,
				"fmnode_polls_held_total":                                  40,
				"fmnode_polls_released_total":                              30,
				"fmnode_polls_expired_total":                               3,
				"fmnode_polls_not_held_total":                              1,
			},
			absent: []string{`fmnode_replication_lag_max_ops{region="east"}`}},
		{name: "above the cap", snap: three, maxLabels: 2,
			want: map[string]float64{
				"fmnode_metrics_partitions_aggregated":           1,
				`fmnode_replication_lag_max_ops{region="north"}`: 5,
				`fmnode_replication_lag_sum_ops{region="west"}`:  1,
				"fmnode_data_at_risk_ops":                        2,
			},
			absent: []string{"fmnode_partition_epoch", "fmnode_replication_lag_ops"}},
		{name: "write region of nothing", maxLabels: 3,
			snap: nodeSnapshot{ok: true, hosted: 1, regions: []string{"east", "north", "west"}, parts: []partSnapshot{{id: 1, epoch: 1}}},
			want: map[string]float64{`fmnode_replication_lag_max_ops{region="west"}`: 0, "fmnode_data_at_risk_ops": 0, "fmnode_lease_valid": 0}},
		{name: "node did not answer", maxLabels: 3, snap: nodeSnapshot{regions: []string{"east"}},
			want:   map[string]float64{"fmnode_node_up": 0},
			absent: []string{"fmnode_lease_valid", "fmnode_hosted_partitions", "fmnode_data_at_risk_ops"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newNodeCollector(func(context.Context) nodeSnapshot { return tc.snap }, tc.maxLabels, "east")
			reg := prometheus.NewPedanticRegistry()
			require.NoError(t, reg.Register(c))
			got := series(t, reg)
			for k, v := range tc.want {
				if assert.Contains(t, got, k) {
					assert.Equal(t, v, got[k], k)
				}
			}
			for _, name := range tc.absent {
				for k := range got {
					assert.False(t, k == name || strings.HasPrefix(k, name+"{"), "%s exported: %s", name, k)
				}
			}
		})
	}
}

// TestNodeCollectorCachesSnapshots: scrapes within snapshotTTL share one
// snapshot (one turn of the node's loop); a failed one is not cached.
func TestNodeCollectorCachesSnapshots(t *testing.T) {
	calls, ok := 0, false
	c := newNodeCollector(func(context.Context) nodeSnapshot {
		calls++
		return nodeSnapshot{ok: ok, regions: []string{"east"}}
	}, 1, "east")
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	var errs float64
	for range 3 {
		errs = series(t, reg)["fmnode_metrics_snapshot_errors_total"]
	}
	assert.Equal(t, 3, calls, "a failed snapshot was cached")
	assert.Equal(t, 3.0, errs)
	ok = true
	for range 3 {
		_, err := reg.Gather()
		require.NoError(t, err)
	}
	assert.Equal(t, 4, calls, "scrapes within the TTL took more than one snapshot")
}

// series gathers reg into name{labels} -> value (counters and gauges).
func series(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+`="`+l.GetValue()+`"`)
			}
			k := mf.GetName()
			if len(ls) > 0 {
				k += "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.Gauge != nil:
				out[k] = m.GetGauge().GetValue()
			case m.Counter != nil:
				out[k] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// TestMetricsOfARunningCluster: every agent serves /metrics; the metric
// families pass promlint; the core components (data API, node transport,
// DNS) report into the agent's registry; and every metric the Grafana
// dashboard in docs/ queries is exported by the agent that serves DNS
// (the DNS series exist only there).
func TestMetricsOfARunningCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets, fsyncs and gossip")
	}
	as := startCluster(t, 3)
	for _, ta := range as {
		// Through the API mux, as Prometheus scrapes it.
		resp, err := http.Get("http://" + ta.cfg.Bind.APIAddr + PathMetrics)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		problems, err := promlint.New(strings.NewReader(string(body))).Lint()
		require.NoError(t, err)
		assert.Empty(t, problems, "%s: promlint", ta.cfg.Name)
	}

	dnsAgent := as[1]
	require.NotEmpty(t, dnsAgent.cfg.Bind.DNSAddr)
	var mfs []*dto.MetricFamily
	require.Eventually(t, func() bool {
		var err error
		mfs, err = dnsAgent.a.metrics.reg.Gather()
		require.NoError(t, err)
		return series(t, dnsAgent.a.metrics.reg)["fmnode_node_up"] == 1
	}, 10*time.Second, 100*time.Millisecond)
	exported := map[string]dto.MetricType{}
	for _, mf := range mfs {
		exported[mf.GetName()] = mf.GetType()
	}
	for _, name := range []string{"fmnode_dataapi_redirects_total", "fmnode_nodenet_batches_sent_total",
		"fmnode_txtdns_queries_total", "fmnode_txtdns_publish_lag_seconds", "fmnode_failovers_total",
		"fmnode_lease_valid", "fmnode_replication_lag_max_ops", "fmnode_data_at_risk_ops",
		"fmnode_guard_fired_total", "go_goroutines", "process_open_fds"} {
		assert.Contains(t, exported, name)
	}
	st := series(t, dnsAgent.a.metrics.reg)
	assert.Equal(t, 4.0, st["fmnode_hosted_partitions"])
	assert.Equal(t, 1.0, st["fmnode_lease_valid"], "a running node holds its lease")

	names := dashboardMetrics(t, "../../docs/grafana-dashboard.json")
	require.NotEmpty(t, names)
	alerts := alertMetrics(t, "../../docs/deploy/prometheus-alerts.yaml")
	require.NotEmpty(t, alerts)
	for _, name := range append(names, alerts...) {
		if _, ok := exported[name]; ok {
			continue
		}
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		typ, ok := exported[base]
		assert.True(t, ok && base != name && (typ == dto.MetricType_HISTOGRAM || typ == dto.MetricType_SUMMARY),
			"the dashboard or an alert queries %s, which the agent does not export", name)
	}
}

// dashboardMetrics returns every metric name in the dashboard's queries
// (panel targets' expr and templating queries), sorted and unique.
func dashboardMetrics(t *testing.T, path string) []string {
	t.Helper()
	// Metric names in PromQL: ours and the Go and process collectors'
	// (functions, labels and Grafana's $__ variables never start so).
	metricName := regexp.MustCompile(`\b(?:fmnode|go|process)_[a-zA-Z0-9_]+`)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc any
	require.NoError(t, json.Unmarshal(b, &doc))
	var names []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "query") {
					names = append(names, metricName.FindAllString(s, -1)...)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	slices.Sort(names)
	return slices.Compact(names)
}

// checkFailoverMetrics: after the region lost stopped and the survivors
// took every partition over, their metrics say so: each partition's
// failover committed on one of them, each saw every partition's
// epoch change, the lost region lags behind the write made since, and
// the DNS server counted the client's queries.
func checkFailoverMetrics(t *testing.T, survivors []*tagent, parts int, lost string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var committed, lag, queries float64
		changed := true
		for _, ta := range survivors {
			st := series(t, ta.a.metrics.reg)
			committed += st[`fmnode_failovers_total{outcome="committed"}`]
			lag += st[`fmnode_replication_lag_sum_ops{region="`+lost+`"}`]
			changed = changed && st["fmnode_epoch_changes_total"] >= float64(parts)
			for k, v := range st {
				if strings.HasPrefix(k, "fmnode_txtdns_queries_total{") {
					queries += v
				}
			}
		}
		return committed >= float64(parts) && changed && lag >= 1 && queries > 0
	}, 10*time.Second, 200*time.Millisecond, "the survivors' metrics do not show the failover")
}

// alertMetrics returns every metric name in the alert rules' expressions.
func alertMetrics(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(b, &rules))
	metricName := regexp.MustCompile(`\bfmnode_[a-zA-Z0-9_]+`)
	var names []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			found := metricName.FindAllString(r.Expr, -1)
			require.NotEmpty(t, found, "alert %s queries no fmnode metric", r.Alert)
			names = append(names, found...)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
