package agent

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/partition"
)

// PathMetrics serves the agent's Prometheus metrics (GET).
const PathMetrics = "/metrics"

// DefaultMaxPartitionLabels is how many hosted partitions an agent labels
// its per-partition series with (epoch, replication lag). Above it only
// the per-region aggregates are exported: a node hosting thousands of
// partitions would otherwise make every scrape, and the TSDB, grow with
// them. The aggregates are exported in both cases, so dashboards and
// alerts need only them. A constant rather than a config field: nothing
// yet needs to tune it, and the cluster's partition count is fixed at
// init anyway.
const DefaultMaxPartitionLabels = 256

const (
	// snapshotTTL is how long one node snapshot serves scrapes: several
	// Prometheus servers (or a curl loop) scraping at once must not each
	// take a turn of the node's loop.
	snapshotTTL = time.Second
	// snapshotTimeout bounds the wait for the node's loop. A scrape that
	// finds it stuck reports the last snapshot's age rather than hanging
	// (Prometheus's own scrape timeout is 10 s by default).
	snapshotTimeout = 2 * time.Second
)

// metrics are one agent's: its registry (never the global default: three
// agents in one test process must not share series), the observer the
// node reports its register outcomes to, and the collector that reads the
// node's state at scrape time.
type metrics struct {
	reg    *prometheus.Registry
	obs    *nodeObserver
	node   *nodeCollector
	guards *guardCounters
}

func newMetrics(a *Agent) (*metrics, error) {
	reg := prometheus.NewRegistry()
	m := &metrics{reg: reg, obs: newNodeObserver(), node: newNodeCollector(a.nodeSnapshot, DefaultMaxPartitionLabels, a.cfg.Region),
		guards: newGuardCounters()}
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.obs, m.node, m.guards,
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("agent: metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// nodeObserver counts what the node reports as it happens: proposals'
// outcomes by kind, CAS latency, epoch changes. Its methods run on the
// node's loop (node.Observer's contract); the epochs map is only touched
// there, the counters are safe for the scrape to read.
type nodeObserver struct {
	node.NopObserver
	failovers, switchovers, cas *prometheus.CounterVec
	casSeconds                  *prometheus.HistogramVec
	epochChanges                prometheus.Counter
	// epochs is the last epoch seen per partition: the first value a
	// partition shows after a start is not a change.
	epochs map[partition.ID]failover.Epoch
	// marks: per hosted partition, when this node first saw its current
	// epoch committed and when it first proposed a failover into an
	// epoch (wall clock): a drill's detection and failover completion,
	// as this node saw them (see epochMark).
	marks map[partition.ID]epochMark
	now   func() time.Time
}

// epochMark is when a node saw a partition's epochs move: SeenAt is the
// first time it saw Epoch committed (on the proposer, its own CAS's
// outcome: the commit), FailoverAt the first time it proposed a failover
// into FailoverEpoch, PromotedAt when its replica became write region of
// PromotedEpoch. One per partition, overwritten by newer epochs.
type epochMark struct {
	Epoch         failover.Epoch
	SeenAt        time.Time
	FailoverEpoch failover.Epoch
	FailoverAt    time.Time
	PromotedEpoch failover.Epoch
	PromotedAt    time.Time
}

func newNodeObserver() *nodeObserver {
	o := &nodeObserver{
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fmnode_failovers_total",
			Help: "Failovers this node proposed, by outcome of the register CAS."}, []string{"outcome"}),
		switchovers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fmnode_switchovers_total",
			Help: "Switchover steps this node proposed: started, completed, aborted when committed; else conflict or failed."}, []string{"outcome"}),
		cas: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fmnode_register_cas_total",
			Help: "Register transitions this node proposed (every kind), by outcome."}, []string{"outcome"}),
		casSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fmnode_register_cas_duration_seconds",
			Help:    "From a transition's submission to the proposer to its outcome, on the node's clock.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5 ms .. 16 s
		}, []string{"outcome"}),
		epochChanges: prometheus.NewCounter(prometheus.CounterOpts{Name: "fmnode_epoch_changes_total",
			Help: "Times a hosted partition's register showed a newer epoch than this node knew (a failover or switchover by any node)."}),
		epochs: map[partition.ID]failover.Epoch{},
		marks:  map[partition.ID]epochMark{},
		now:    time.Now,
	}
	// Every label value exists from the start, at zero: rate() over a
	// series that appears with its first increment misses that increment.
	// Failovers and switchovers are counted from the node's
	// Observer.CASDone, so each is a proposal this node made (a failover
	// another node decided is counted there, and here as an epoch change).
	for _, v := range []string{"committed", "conflict", "failed"} {
		o.failovers.WithLabelValues(v)
	}
	for _, v := range []string{"started", "completed", "aborted", "conflict", "failed"} {
		o.switchovers.WithLabelValues(v)
	}
	for _, v := range []string{"committed", "conflict", "failed"} {
		o.cas.WithLabelValues(v)
		o.casSeconds.WithLabelValues(v)
	}
	return o
}

func (o *nodeObserver) Describe(ch chan<- *prometheus.Desc) {
	o.failovers.Describe(ch)
	o.switchovers.Describe(ch)
	o.cas.Describe(ch)
	o.casSeconds.Describe(ch)
	o.epochChanges.Describe(ch)
}

func (o *nodeObserver) Collect(ch chan<- prometheus.Metric) {
	o.failovers.Collect(ch)
	o.switchovers.Collect(ch)
	o.cas.Collect(ch)
	o.casSeconds.Collect(ch)
	o.epochChanges.Collect(ch)
}

func (o *nodeObserver) Committed(p partition.ID, _ uint64, s failover.State) {
	last, seen := o.epochs[p]
	if seen && s.Epoch > last {
		o.epochChanges.Inc()
	}
	if !seen || s.Epoch > last {
		o.epochs[p] = s.Epoch
		m := o.marks[p]
		m.Epoch, m.SeenAt = s.Epoch, o.now()
		o.marks[p] = m
	}
}

// Proposed notes the first failover this node proposes into each epoch.
func (o *nodeObserver) Proposed(p partition.ID, prop failover.Proposal) {
	if prop.Kind != failover.DecideFailover {
		return
	}
	m := o.marks[p]
	if prop.Next.Epoch > m.FailoverEpoch {
		m.FailoverEpoch, m.FailoverAt = prop.Next.Epoch, o.now()
		o.marks[p] = m
	}
}

// Promoted notes when this node's replica became write region of an
// epoch.
func (o *nodeObserver) Promoted(p partition.ID, e failover.Epoch) {
	m := o.marks[p]
	if e > m.PromotedEpoch {
		m.PromotedEpoch, m.PromotedAt = e, o.now()
		o.marks[p] = m
	}
}

// mark is partition p's epochMark; call it on the node's loop (as the
// observer's methods run).
func (o *nodeObserver) mark(p partition.ID) epochMark { return o.marks[p] }

func (o *nodeObserver) CASDone(_ partition.ID, prop failover.Proposal, outcome node.CASOutcome, took time.Duration) {
	if outcome != node.CASCommitted && outcome != node.CASConflict && outcome != node.CASFailed {
		return // an outcome this version does not know: no new label value
	}
	out := outcome.String()
	o.cas.WithLabelValues(out).Inc()
	o.casSeconds.WithLabelValues(out).Observe(took.Seconds())
	if label, ok := kindOutcome(prop.Kind, outcome); ok {
		if prop.Kind == failover.DecideFailover {
			o.failovers.WithLabelValues(label).Inc()
		} else {
			o.switchovers.WithLabelValues(label).Inc()
		}
	}
}

// kindOutcome names a failover's or switchover step's outcome label; ok is
// false for the other kinds (quorum changes, pauses, reasserts...), which
// only fmnode_register_cas_total counts.
func kindOutcome(k failover.DecisionKind, o node.CASOutcome) (string, bool) {
	switch k {
	case failover.DecideFailover, failover.DecideStartSwitchover, failover.DecideCompleteSwitchover, failover.DecideAbortSwitchover:
	default:
		return "", false
	}
	switch {
	case o != node.CASCommitted || k == failover.DecideFailover:
		return o.String(), true
	case k == failover.DecideStartSwitchover:
		return "started", true
	case k == failover.DecideCompleteSwitchover:
		return "completed", true
	default:
		return "aborted", true
	}
}

// nodeSnapshot is what the collector reads from the node at a scrape.
type nodeSnapshot struct {
	// ok: the node answered (false before the agent hosts partitions, or
	// when its loop did not answer within snapshotTimeout).
	ok                       bool
	leaseValid               bool
	leaseRemaining           time.Duration
	manager                  failover.ManagerStats
	proposer                 caspaxos.ProposerStats
	host                     partition.HostStats
	heldPolls                int
	hosted, writeRegionParts int
	parts                    []partSnapshot
	// regions are the cluster's regions, for the aggregates' labels.
	regions []string
}

// partSnapshot is one hosted replica.
type partSnapshot struct {
	id    partition.ID
	epoch uint64
	// lag is, on the write region's replica, how many ops each follower
	// region lacks (LastLSN - Match); empty elsewhere.
	lag []regionLag
	// atRisk: ops the write region acknowledged (CommitLSN) that no other
	// region holds yet (above the highest follower Match).
	atRisk uint64
}

type regionLag struct {
	region string
	ops    uint64
}

// nodeSnapshot reads the node through its loop (the only safe way: the
// node is not safe for concurrent use).
func (a *Agent) nodeSnapshot(ctx context.Context) nodeSnapshot {
	h := a.host.Load()
	if h == nil {
		return nodeSnapshot{}
	}
	// fn hands its snapshot over a channel rather than filling a variable
	// of ours: after a timeout Do returns while fn may still run later on
	// the loop, and it must then write nothing this scrape reads.
	res := make(chan nodeSnapshot, 1)
	err := h.drv.Do(ctx, func(now time.Duration, n *node.Node) error {
		s := nodeSnapshot{ok: true, regions: h.spec.Regions}
		live := n.Manager().Liveness()
		s.leaseValid = live.LeaseValid(now)
		s.leaseRemaining = max(live.LeaseUntil()-now, 0)
		s.manager = n.Manager().Stats()
		s.proposer = n.Proposer().Stats()
		s.host, s.heldPolls = n.Host().Stats(), n.Host().HeldPolls()
		var fs []partition.FollowerProgress
		for _, id := range n.Host().Partitions() {
			pr, err := n.Host().ProgressWithoutHistory(id, fs)
			if err != nil {
				continue
			}
			fs = pr.Followers
			s.hosted++
			ps := partSnapshot{id: id, epoch: uint64(pr.Epoch)}
			if pr.Role == partition.RoleLeader {
				s.writeRegionParts++
				var best partition.LSN
				for _, f := range pr.Followers {
					ps.lag = append(ps.lag, regionLag{region: string(f.Region), ops: uint64(pr.LastLSN - min(f.Match, pr.LastLSN))})
					best = max(best, f.Match)
				}
				if pr.CommitLSN > best {
					ps.atRisk = uint64(pr.CommitLSN - best)
				}
			}
			s.parts = append(s.parts, ps)
		}
		res <- s
		return nil
	})
	if err != nil {
		return nodeSnapshot{regions: h.spec.Regions}
	}
	return <-res
}

// nodeCollector exports the node's state at scrape time from a snapshot
// cached for snapshotTTL.
type nodeCollector struct {
	snap      func(context.Context) nodeSnapshot
	maxLabels int
	self      string // this agent's region: it has no lag to itself

	mu     sync.Mutex
	last   nodeSnapshot
	lastAt time.Time

	snapFailed atomic.Uint64

	up, leaseValid, leaseRemaining, hosted, writeRegion, aggregated *prometheus.Desc
	epoch, lag, lagMax, lagSum, atRisk, heldPolls                   *prometheus.Desc
	counters                                                        []counterDesc
	snapErrors                                                      *prometheus.Desc
}

// counterDesc is one counter read from the core's stats.
type counterDesc struct {
	desc *prometheus.Desc
	get  func(*nodeSnapshot) uint64
}

func newNodeCollector(snap func(context.Context) nodeSnapshot, maxLabels int, self string) *nodeCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	c := &nodeCollector{snap: snap, maxLabels: maxLabels, self: self,
		up:             d("fmnode_node_up", "1 when the node hosts its partitions and its loop answered the last snapshot."),
		leaseValid:     d("fmnode_lease_valid", "1 while this node's lease (its right to act as write region) is valid."),
		leaseRemaining: d("fmnode_lease_remaining_seconds", "Time left on this node's lease, on its own clock (0 when lapsed)."),
		hosted:         d("fmnode_hosted_partitions", "Partitions this node hosts a replica of."),
		writeRegion:    d("fmnode_write_region_partitions", "Hosted partitions whose write region is this node's replica."),
		aggregated: d("fmnode_metrics_partitions_aggregated",
			"1 when this node hosts more partitions than it labels series with: only the per-region aggregates are exported."),
		epoch: d("fmnode_partition_epoch", "A hosted partition's epoch (only up to the partition label cap).", "partition"),
		lag: d("fmnode_replication_lag_ops",
			"Ops a follower region lacks behind this node's write-region replica (only up to the partition label cap).", "partition", "region"),
		lagMax: d("fmnode_replication_lag_max_ops", "The largest replication lag of a follower region over the partitions this node is write region of.", "region"),
		lagSum: d("fmnode_replication_lag_sum_ops", "The replication lag of a follower region summed over the partitions this node is write region of.", "region"),
		atRisk: d("fmnode_data_at_risk_ops",
			"Ops this node's write-region replicas acknowledged that no other region holds yet (lost if this region is lost); non-zero only where the write quorum lets a write region acknowledge alone."),
		snapErrors: d("fmnode_metrics_snapshot_errors_total", "Scrapes for which the node's loop did not answer in time."),
		heldPolls: d("fmnode_polls_held",
			"Clients' polls this node's followers hold until their partition's failover commits (partition/poll.go)."),
	}
	cd := func(name, help string, get func(*nodeSnapshot) uint64) {
		c.counters = append(c.counters, counterDesc{desc: d(name, help), get: get})
	}
	cd("fmnode_manager_evaluations_total", "Partition evaluations by the failover manager.", func(s *nodeSnapshot) uint64 { return s.manager.Evaluations })
	cd("fmnode_manager_proposals_total", "Register transitions the failover manager proposed.", func(s *nodeSnapshot) uint64 { return s.manager.Proposals })
	cd("fmnode_manager_backup_proposals_total", "Proposals made as backup after the preferred proposer was silent.", func(s *nodeSnapshot) uint64 { return s.manager.Backups })
	cd("fmnode_manager_cas_conflicts_total", "Proposals that lost their CAS to another value.", func(s *nodeSnapshot) uint64 { return s.manager.CASConflict })
	cd("fmnode_manager_cas_failures_total", "Proposals that failed (refused, or the proposer gave up).", func(s *nodeSnapshot) uint64 { return s.manager.CASFailed })
	cd("fmnode_manager_throttled_total", "Failovers held back by the blast-radius cap.", func(s *nodeSnapshot) uint64 { return s.manager.Throttled })
	cd("fmnode_proposer_rounds_total", "CASPaxos rounds the register's proposer started.", func(s *nodeSnapshot) uint64 { return s.proposer.Rounds })
	cd("fmnode_proposer_naks_total", "CASPaxos rounds ended by a conflicting ballot.", func(s *nodeSnapshot) uint64 { return s.proposer.NAKs })
	cd("fmnode_proposer_timeouts_total", "CASPaxos rounds ended by a phase timeout.", func(s *nodeSnapshot) uint64 { return s.proposer.Timeouts })
	cd("fmnode_proposer_unknown_outcomes_total", "Register operations given up with their outcome unknown.", func(s *nodeSnapshot) uint64 { return s.proposer.Unknown })
	cd("fmnode_polls_held_total", "Clients' polls a follower held for their partition's route to move.", func(s *nodeSnapshot) uint64 { return s.host.PollsHeld })
	cd("fmnode_polls_released_total", "Held polls answered because the route moved (a failover committed).", func(s *nodeSnapshot) uint64 { return s.host.PollsReleased })
	cd("fmnode_polls_expired_total", "Held polls answered at the end of their wait, nothing new.", func(s *nodeSnapshot) uint64 { return s.host.PollsExpired })
	cd("fmnode_polls_not_held_total", "Polls answered at once because the node held its maximum.", func(s *nodeSnapshot) uint64 { return s.host.PollsNotHeld })
	return c
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.leaseValid, c.leaseRemaining, c.hosted, c.writeRegion, c.aggregated,
		c.epoch, c.lag, c.lagMax, c.lagSum, c.atRisk, c.snapErrors, c.heldPolls} {
		ch <- d
	}
	for _, cd := range c.counters {
		ch <- cd.desc
	}
}

// snapshot returns a snapshot at most snapshotTTL old. The lock makes
// concurrent scrapes share one turn of the node's loop.
func (c *nodeCollector) snapshot() nodeSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.lastAt.IsZero() && time.Since(c.lastAt) < snapshotTTL {
		return c.last
	}
	ctx, cancel := context.WithTimeout(context.Background(), snapshotTimeout)
	defer cancel()
	s := c.snap(ctx)
	if !s.ok && len(s.regions) > 0 {
		// Hosting, but the loop did not answer: count it, and do not
		// cache the failure (the next scrape tries again).
		c.snapFailed.Add(1)
		return s
	}
	c.last, c.lastAt = s, time.Now()
	return s
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snapshot()
	c.collect(s, ch)
}

// collect turns a snapshot into metrics; split from Collect so that tests
// feed it snapshots.
func (c *nodeCollector) collect(s nodeSnapshot, ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	ch <- prometheus.MustNewConstMetric(c.snapErrors, prometheus.CounterValue, float64(c.snapFailed.Load()))
	gauge(c.up, b2f(s.ok))
	if !s.ok {
		// Nothing else is known: absent series, not zeros that would
		// look like a healthy idle node.
		return
	}
	gauge(c.leaseValid, b2f(s.leaseValid))
	gauge(c.leaseRemaining, s.leaseRemaining.Seconds())
	gauge(c.hosted, float64(s.hosted))
	gauge(c.writeRegion, float64(s.writeRegionParts))
	gauge(c.heldPolls, float64(s.heldPolls))
	labelled := len(s.parts) <= c.maxLabels
	gauge(c.aggregated, b2f(!labelled))
	for _, cd := range c.counters {
		ch <- prometheus.MustNewConstMetric(cd.desc, prometheus.CounterValue, float64(cd.get(&s)))
	}
	// Every other region gets its aggregates, zero when this node is the
	// write region of nothing: the series exist on every agent.
	lagMax, lagSum := map[string]uint64{}, map[string]uint64{}
	for _, r := range s.regions {
		if r != c.self {
			lagMax[r], lagSum[r] = 0, 0
		}
	}
	var atRisk uint64
	for _, p := range s.parts {
		id := strconv.FormatUint(uint64(p.id), 10)
		if labelled {
			gauge(c.epoch, float64(p.epoch), id)
		}
		for _, l := range p.lag {
			if labelled {
				gauge(c.lag, float64(l.ops), id, l.region)
			}
			if _, known := lagMax[l.region]; !known {
				continue // not a region of the spec: keep the label set bounded
			}
			lagMax[l.region] = max(lagMax[l.region], l.ops)
			lagSum[l.region] += l.ops
		}
		atRisk += p.atRisk
	}
	regions := make([]string, 0, len(lagMax))
	for r := range lagMax {
		regions = append(regions, r)
	}
	slices.Sort(regions)
	for _, r := range regions {
		gauge(c.lagMax, float64(lagMax[r]), r)
		gauge(c.lagSum, float64(lagSum[r]), r)
	}
	gauge(c.atRisk, float64(atRisk))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
