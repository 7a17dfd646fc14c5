package sim

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
)

// foMetrics collects what a failover run measures. Times are virtual.
type foMetrics struct {
	outage   bool
	t0       time.Duration
	affected []bool
	epochT0  []failover.Epoch
	detect   []time.Duration // first failover proposal after t0 (0: none)
	complete []time.Duration // commit of the CAS that moved the write region
	recover  []time.Duration // first acknowledged write in the new epoch
	// unavail: per partition, the longest spell (ending after the outage
	// began) from a client's first write not yet acknowledged to the next
	// acknowledged one (+1ns; 0: none).
	unavail []time.Duration

	steadyOn     bool
	steadyFrom   time.Duration
	steadyTo     time.Duration
	steadyWrites uint64
	regWrites    uint64
	// regByKind counts register writes by the transition they recorded
	// (the newest history entry; "unrecorded" when none was added).
	regByKind map[string]uint64

	acks [][]partition.Token

	resyncOn    bool
	resyncNodes []bool
	resyncBytes uint64

	promotions uint64
	// promoteAt: per affected partition, the first promotion after its
	// failover committed (+1ns; kept only with Config.RerouteTrace).
	promoteAt      []time.Duration
	failovers      uint64
	falseProgress  uint64
	actionErrors   uint64
	firstActionErr string
	// refused counts register operations the node's proposer refused at
	// submit, by kind (init, cas, read).
	refused foRefused
	// The lease-overlap check's runs and findings (lease_overlap.go).
	leaseChecks, leaseOverlaps uint64
}

// foRefused counts register operations a proposer refused at submit.
type foRefused struct {
	Init uint64 `json:"init"`
	CAS  uint64 `json:"cas"`
	Read uint64 `json:"read"`
}

func (m *foMetrics) init(parts int) {
	m.affected = make([]bool, parts)
	m.epochT0 = make([]failover.Epoch, parts)
	m.detect = make([]time.Duration, parts)
	m.complete = make([]time.Duration, parts)
	m.recover = make([]time.Duration, parts)
	m.unavail = make([]time.Duration, parts)
	m.acks = make([][]partition.Token, parts)
}

// startOutage marks the partitions whose write region is on a failing node.
func (m *foMetrics) startOutage(fw *foWorld, down []bool, at time.Duration) int {
	m.outage, m.t0 = true, at
	n := 0
	for i := range fw.parts {
		r := &fw.reg[i]
		node, ok := fw.nodeFor(i, r.state.WriteRegion)
		m.affected[i] = ok && down[node]
		m.epochT0[i] = r.state.Epoch
		if m.affected[i] {
			n++
		}
	}
	return n
}

func (m *foMetrics) registerWrite(fw *foWorld, i int, old, s failover.State, at time.Duration) {
	m.regWrites++
	kind := "unrecorded"
	if n := len(s.History); n > 0 && (len(old.History) == 0 || s.History[n-1] != old.History[len(old.History)-1]) {
		kind = s.History[n-1].Kind.String()
	} else if sameState(old, s) {
		kind = "reassert" // a lease run's validation rewrites the value unchanged
	}
	if m.regByKind == nil {
		m.regByKind = make(map[string]uint64)
	}
	m.regByKind[kind]++
	if m.steadyOn && at >= m.steadyFrom {
		m.steadyWrites++
	}
	if s.WriteRegion != old.WriteRegion {
		m.failovers++
		if m.outage && m.affected[i] && m.complete[i] == 0 && at >= m.t0 {
			m.complete[i] = at - m.t0 + 1 // +1ns: zero means "not yet"
			m.notePartitioned(fw, i, s.WriteRegion)
		}
	}
}

func (m *foMetrics) proposal(fw *foWorld, i int, p failover.Proposal, at time.Duration) {
	if p.Kind == failover.DecideFailover && m.outage && m.affected[i] && m.detect[i] == 0 && at >= m.t0 {
		m.detect[i] = at - m.t0 + 1
	}
}

func (m *foMetrics) promoted(fw *foWorld, i int, at time.Duration) {
	m.promotions++
	if fw.traceOn() && m.outage && m.affected[i] && m.complete[i] != 0 {
		if m.promoteAt == nil {
			m.promoteAt = make([]time.Duration, len(fw.parts))
		}
		if m.promoteAt[i] == 0 {
			m.promoteAt[i] = at + 1
		}
	}
}

func (m *foMetrics) ack(fw *foWorld, i int, tok partition.Token, at time.Duration) {
	m.acks[i] = append(m.acks[i], tok)
	if fw.onAck != nil {
		fw.onAck(i, tok, at)
	}
	if m.outage && m.affected[i] && m.recover[i] == 0 && at >= m.t0 && failover.Epoch(tok.Epoch) > m.epochT0[i] {
		m.recover[i] = at - m.t0 + 1
	}
}

// clientAck closes the client's unavailability spell and notes its first
// write acknowledged in an epoch newer than the outage's.
func (m *foMetrics) clientAck(fw *foWorld, c *foClient, tok partition.Token, at time.Duration) {
	if c.spellOpen {
		c.spellOpen = false
		if m.outage && at >= m.t0 {
			m.unavail[c.part] = max(m.unavail[c.part], at-c.spellFrom+1)
		}
	}
	if m.outage && m.affected[c.part] && c.firstNewAck == 0 && at >= m.t0 && failover.Epoch(tok.Epoch) > m.epochT0[c.part] {
		c.firstNewAck = at + 1
	}
}

// notePartitioned marks the watched clients of partition i that cannot
// reach the replica of its new write region now (the client's or that
// replica's node down or paused, or a link between them cut): their
// reroute time would measure the network partition or the outage, not
// routing. Called at the failover's commit and at every attempt the
// client makes until its first write lands in the new epoch.
func (m *foMetrics) notePartitioned(fw *foWorld, i int, region quorum.Region) {
	for _, c := range fw.clientsOf(i) {
		m.checkReach(fw, c, region)
	}
}

func (m *foMetrics) checkReach(fw *foWorld, c *foClient, region quorum.Region) {
	if !c.rerouteWatch || c.partitioned || c.firstNewAck != 0 {
		return
	}
	w := fw.e.w
	node, ok := fw.nodeFor(c.part, region)
	if !ok || !w.Live(c.node) || !w.Live(node) || w.Links.Cut(c.node, node) || w.Links.Cut(node, c.node) {
		c.partitioned = true
	}
}

// attemptReach is checkReach at one of client c's attempts, once its
// partition's failover committed.
func (m *foMetrics) attemptReach(fw *foWorld, c *foClient) {
	if m.outage && m.affected[c.part] && m.complete[c.part] != 0 {
		m.checkReach(fw, c, fw.reg[c.part].state.WriteRegion)
	}
}

// pending reports whether client c's partition is affected by the outage
// and its failover has not committed yet (the client's load counts).
func (m *foMetrics) pending(c *foClient) bool {
	return c.rerouteWatch && m.outage && m.affected[c.part] && m.complete[c.part] == 0
}

// pendingLoad is the clients' load while their failovers were pending:
// attempts and DNS queries per client per second, over the clients that
// stayed up from the outage to the commit.
func (m *foMetrics) pendingLoad(fw *foWorld) PendingLoad {
	var secs float64
	var sends, queries int
	for _, c := range fw.clients {
		if !c.rerouteWatch || !m.affected[c.part] || m.complete[c.part] == 0 {
			continue
		}
		secs += float64(m.complete[c.part]-1) / float64(time.Second)
		sends, queries = sends+c.pendingSends, queries+c.pendingQueries
	}
	if secs == 0 {
		return PendingLoad{}
	}
	return PendingLoad{AttemptsPerClientS: float64(sends) / secs, DNSQueriesPerClientS: float64(queries) / secs}
}

// PendingLoad is what the clients of an affected partition send while
// its failover is pending (per client per second).
type PendingLoad struct {
	AttemptsPerClientS   float64 `json:"attempts_per_client_s"`
	DNSQueriesPerClientS float64 `json:"dns_queries_per_client_s"`
}

// clientFigures are the clients' view of the failover: for every client
// that stayed up, from the failover's commit to its first write in the new
// write region (and how many never got there), and per affected
// partition the longest spell without an acknowledged write.
//
// Only clients that could reach the new write region's replica are in
// reroute (checked at the commit and at each of their attempts until
// their first write landed there, see notePartitioned); the others are
// counted in cut and their times, from the commit too, are in cutSecs.
func (m *foMetrics) clientFigures(fw *foWorld) (reroute, cutSecs, unavail []float64, missing, cut int) {
	for _, c := range fw.clients {
		i := c.part
		if !m.affected[i] || !c.rerouteWatch || m.complete[i] == 0 {
			continue
		}
		if c.partitioned {
			cut++
		}
		if c.firstNewAck == 0 {
			if !c.partitioned {
				missing++
			}
			continue
		}
		commit := m.t0 + m.complete[i] - 1
		d := max(0, float64(c.firstNewAck-1-commit)/float64(time.Second))
		if c.partitioned {
			cutSecs = append(cutSecs, d)
		} else {
			reroute = append(reroute, d)
		}
	}
	u, _ := secs(m.unavail, m.affected)
	return reroute, cutSecs, u, missing, cut
}

// clientRerouteMeasures is the rule behind client_reroute_s, in every
// failover scenario.
const clientRerouteMeasures = "client_reroute_s: per client of an affected partition that stayed up from the outage, seconds from the " +
	"failover's commit to its first write acknowledged in the new epoch, over the clients that could reach the new write region's " +
	"replica (client and replica nodes live, no link between them cut) at the commit and at each of their attempts until that write; " +
	"the others are client_reroute_partitioned (count; their times from the commit in client_reroute_partitioned_s), as their wait " +
	"measures the fault, not routing"

// dataSent counts the bytes shipped to a returning node: ops and snapshot
// pairs (what a re-sync costs, against a full copy).
func (m *foMetrics) dataSent(fw *foWorld, to int32, msg *partition.Message) {
	if !m.resyncOn || !m.resyncNodes[to] {
		return
	}
	for i := range msg.Entries {
		m.resyncBytes += uint64(msg.Entries[i].Size())
	}
	for _, kv := range msg.KVs {
		m.resyncBytes += uint64(len(kv.Key) + len(kv.Value))
	}
}

// Dist summarises a distribution in seconds.
type Dist struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

func distOf(xs []float64) Dist {
	if len(xs) == 0 {
		return Dist{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	q := func(p float64) float64 { return s[min(len(s)-1, int(math.Ceil(p*float64(len(s))))-1)] }
	return Dist{N: len(s), Mean: sum / float64(len(s)), P50: q(0.5), P99: q(0.99), Max: s[len(s)-1]}
}

// FailoverReport is what the failover scenarios report (JSON keys are the
// issue's schema; times in seconds from the outage).
type FailoverReport struct {
	Partitions         int    `json:"partitions"`
	FailoverProfile    string `json:"failover_profile"`
	AffectedPartitions int    `json:"affected_partitions"`
	Detection          Dist   `json:"detection_s"`
	FailoverCompletion Dist   `json:"failover_completion_s"`
	WriteRecovery      Dist   `json:"write_recovery_s"`
	// WriteRecoveryMeasures says what write_recovery_s measures.
	WriteRecoveryMeasures string `json:"write_recovery_measures"`
	// ClientReroute: per client that stayed up and could reach the new
	// write region (see clientRerouteMeasures), seconds from the commit
	// of its partition's failover to its first write acknowledged by the
	// new write region; ClientRerouteMissing counts those that never got
	// there. ClientReroutePartitioned counts the clients that could not
	// reach the new write region's replica at the commit or at one of
	// their attempts; ClientReroutePartitionedS is their time from the
	// commit (those that got there). ClientUnavailability: per affected
	// partition, the longest
	// spell in seconds from a client's first unacknowledged write to its
	// next acknowledged one.
	ClientReroute        Dist `json:"client_reroute_s"`
	ClientRerouteMissing int  `json:"client_reroute_missing"`
	// ClientRerouteMeasures states the rule (clientRerouteMeasures).
	ClientRerouteMeasures     string `json:"client_reroute_measures"`
	ClientReroutePartitioned  int    `json:"client_reroute_partitioned"`
	ClientReroutePartitionedS Dist   `json:"client_reroute_partitioned_s"`
	ClientUnavailability      Dist   `json:"client_unavailability_s"`
	// ClientPendingLoad: the clients' attempts and DNS queries per client
	// per second while their partition's failover was pending.
	ClientPendingLoad PendingLoad `json:"client_pending_load"`
	// ClientRerouteTrace: the routing steps of the slowest reroutes
	// (only with Config.RerouteTrace).
	ClientRerouteTrace            []RerouteTrace    `json:"client_reroute_trace,omitempty"`
	DNS                           foDNSStats        `json:"dns"`
	DNSTTLSeconds                 float64           `json:"dns_ttl_s"`
	DNSStaleSeconds               float64           `json:"dns_resolver_stale_s"`
	FailedOverWithin60s           float64           `json:"failed_over_within_60s_fraction"`
	NotFailedOver                 int               `json:"not_failed_over"`
	RPO                           RPODist           `json:"rpo_ops"`
	SteadyRegisterWritesPerPartHr float64           `json:"steady_register_writes_per_partition_hour"`
	RegisterWrites                uint64            `json:"register_writes"`
	RegisterWritesByKind          map[string]uint64 `json:"register_writes_by_kind"`
	Failovers                     uint64            `json:"failovers"`
	ResyncBytes                   uint64            `json:"resync_bytes"`
	FullCopyBytes                 uint64            `json:"full_copy_bytes"`
	ResyncSeconds                 float64           `json:"resync_s"`
	FalseProgressOps              uint64            `json:"false_progress_ops"`
	ActionErrors                  uint64            `json:"action_errors"`
	FirstActionError              string            `json:"first_action_error,omitempty"`
	// RegisterOpsRefused: register operations a node's proposer refused
	// at submit (its bound on keys in flight, or the node down).
	RegisterOpsRefused foRefused `json:"register_ops_refused"`
	// LeaseChecks is the moves of a write region the lease-overlap check
	// ran on (lease_overlap.go), LeaseOverlaps those it found another
	// replica still serving on its lease at (each a violation).
	LeaseChecks   uint64 `json:"lease_checks"`
	LeaseOverlaps uint64 `json:"lease_overlaps"`
	Paper         Paper  `json:"paper"`
}

// RPODist is the data loss in acknowledged operations per partition.
type RPODist struct {
	Mean float64 `json:"mean"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// Paper holds the paper's figures for the region drill (BRIEF section 2).
type Paper struct {
	DetectionMean, DetectionP99   float64
	CompletionMean, CompletionP99 float64
	RecoveryMean, RecoveryP99     float64
	RPOMean, RPOP99               float64
	Within60s                     float64
}

func paperFigures() Paper {
	return Paper{DetectionMean: 45, DetectionP99: 58, CompletionMean: 52, CompletionP99: 113,
		RecoveryMean: 48, RecoveryP99: 105, RPOMean: 0, RPOP99: 2, Within60s: 0.99}
}

func secs(ds []time.Duration, affected []bool) ([]float64, int) {
	var out []float64
	missing := 0
	for i, d := range ds {
		if !affected[i] {
			continue
		}
		if d == 0 {
			missing++
			continue
		}
		out = append(out, float64(d-1)/float64(time.Second))
	}
	return out, missing
}

// report assembles the figures once the run is over.
func (m *foMetrics) report(fw *foWorld, profile string, lost []int) *FailoverReport {
	r := &FailoverReport{Partitions: len(fw.parts), FailoverProfile: profile, Paper: paperFigures(),
		RegisterWrites: m.regWrites, RegisterWritesByKind: m.regByKind, Failovers: m.failovers, ResyncBytes: m.resyncBytes,
		FalseProgressOps: m.falseProgress, ActionErrors: m.actionErrors, FirstActionError: m.firstActionErr,
		RegisterOpsRefused: m.refused, LeaseChecks: m.leaseChecks, LeaseOverlaps: m.leaseOverlaps}
	for _, a := range m.affected {
		if a {
			r.AffectedPartitions++
		}
	}
	det, _ := secs(m.detect, m.affected)
	comp, missing := secs(m.complete, m.affected)
	rec, _ := secs(m.recover, m.affected)
	r.Detection, r.FailoverCompletion, r.WriteRecovery = distOf(det), distOf(comp), distOf(rec)
	r.NotFailedOver = missing
	r.WriteRecoveryMeasures = "per affected partition, seconds from the outage to its first write acknowledged in a new epoch; " +
		"from the outage, the partition's live clients write without think time (retrying with the routing backoff) until one lands. " +
		clientRerouteMeasures
	reroute, cutSecs, unavail, rmiss, cut := m.clientFigures(fw)
	r.ClientReroute, r.ClientRerouteMissing, r.ClientUnavailability = distOf(reroute), rmiss, distOf(unavail)
	r.ClientRerouteMeasures, r.ClientReroutePartitioned, r.ClientReroutePartitionedS = clientRerouteMeasures, cut, distOf(cutSecs)
	r.ClientPendingLoad = m.pendingLoad(fw)
	if n := fw.e.cfg.RerouteTrace; n > 0 {
		r.ClientRerouteTrace = m.rerouteTraces(fw, n)
	}
	if fw.dns != nil {
		r.DNS, r.DNSTTLSeconds, r.DNSStaleSeconds = fw.dns.stats, fw.dns.ttl.Seconds(), fw.dns.stale.Seconds()
	}
	if r.AffectedPartitions > 0 {
		within := 0
		for _, c := range comp {
			if c <= 60 {
				within++
			}
		}
		r.FailedOverWithin60s = float64(within) / float64(r.AffectedPartitions)
	}
	var rpo []float64
	for i, l := range lost {
		if m.affected[i] || l > 0 {
			rpo = append(rpo, float64(l))
		}
	}
	d := distOf(rpo)
	r.RPO = RPODist{Mean: d.Mean, P99: d.P99, Max: d.Max}
	if hours := (m.steadyTo - m.steadyFrom).Hours(); hours > 0 {
		r.SteadyRegisterWritesPerPartHr = float64(m.steadyWrites) / float64(len(fw.parts)) / hours
	}
	return r
}

// Table renders the report next to the paper's figures for a person.
func (r *FailoverReport) Table() string {
	var b strings.Builder
	p := r.Paper
	fmt.Fprintf(&b, "region outage: %d partitions, %d failed over of %d affected, profile %s\n",
		r.Partitions, r.AffectedPartitions-r.NotFailedOver, r.AffectedPartitions, r.FailoverProfile)
	fmt.Fprintf(&b, "%-34s %9s %9s %9s %9s   %s\n", "metric (s from outage)", "mean", "p50", "p99", "max", "paper (mean / p99)")
	row := func(name string, d Dist, pm, pp float64) {
		fmt.Fprintf(&b, "%-34s %9.1f %9.1f %9.1f %9.1f   %.0f / %.0f\n", name, d.Mean, d.P50, d.P99, d.Max, pm, pp)
	}
	row("detection", r.Detection, p.DetectionMean, p.DetectionP99)
	row("failover completion", r.FailoverCompletion, p.CompletionMean, p.CompletionP99)
	row("write recovery", r.WriteRecovery, p.RecoveryMean, p.RecoveryP99)
	if r.ClientReroute.N > 0 {
		fmt.Fprintf(&b, "%-34s %9.2f %9.2f %9.2f %9.2f   goal max <= 1 s, every client (%d clients, %d never rerouted)\n", "client reroute (s from commit)",
			r.ClientReroute.Mean, r.ClientReroute.P50, r.ClientReroute.P99, r.ClientReroute.Max, r.ClientReroute.N, r.ClientRerouteMissing)
	} else {
		fmt.Fprintf(&b, "%-34s %9s %9s %9s %9s   goal max <= 1 s, every client (no client measured, %d never rerouted)\n", "client reroute (s from commit)",
			"n/a", "n/a", "n/a", "n/a", r.ClientRerouteMissing)
	}
	if r.ClientReroutePartitioned > 0 {
		d := r.ClientReroutePartitionedS
		fmt.Fprintf(&b, "%-34s %9.2f %9.2f %9.2f %9.2f   %d clients partitioned from the new write region (not in the row above; %d got there)\n",
			"  partitioned (s from commit)", d.Mean, d.P50, d.P99, d.Max, r.ClientReroutePartitioned, d.N)
	}
	fmt.Fprintf(&b, "%-34s %9.1f %9.1f %9.1f %9.1f   longest spell without an acknowledged write\n", "client unavailability/partition",
		r.ClientUnavailability.Mean, r.ClientUnavailability.P50, r.ClientUnavailability.P99, r.ClientUnavailability.Max)
	fmt.Fprintf(&b, "%-34s %9.2f attempts + %.2f dns queries per client per second while the failover was pending\n", "client load (pending)",
		r.ClientPendingLoad.AttemptsPerClientS, r.ClientPendingLoad.DNSQueriesPerClientS)
	fmt.Fprintf(&b, "%-34s %9.2f %9s %9.0f %9.0f   %.0f / %.0f\n", "RPO (acknowledged ops lost)", r.RPO.Mean, "", r.RPO.P99, r.RPO.Max, p.RPOMean, p.RPOP99)
	fmt.Fprintf(&b, "%-34s %9.4f %39s\n", "failed over within 60 s", r.FailedOverWithin60s, fmt.Sprintf("> %.2f", p.Within60s))
	fmt.Fprintf(&b, "%-34s %9.3f %39s\n", "steady register writes/partition/h", r.SteadyRegisterWritesPerPartHr, "0 (heartbeats write nothing)")
	full := "n/a"
	if r.FullCopyBytes > 0 {
		full = fmt.Sprintf("%.2f%%", 100*float64(r.ResyncBytes)/float64(r.FullCopyBytes))
	}
	fmt.Fprintf(&b, "%-34s %9d of %d full copy (%s), caught up in %.1f s\n", "re-sync bytes", r.ResyncBytes, r.FullCopyBytes, full, r.ResyncSeconds)
	fmt.Fprintf(&b, "%-34s %9d (false progress ops set aside: %d) %s\n", "register writes (all)", r.RegisterWrites, r.FalseProgressOps, formatKinds(r.RegisterWritesByKind))
	fmt.Fprintf(&b, "%-34s %9d queries, TTL %.0f s, resolver serve-stale %.0f s: %d stale served, %d older answers refused\n", "dns",
		r.DNS.Queries, r.DNSTTLSeconds, r.DNSStaleSeconds, r.DNS.StaleServed, r.DNS.RefusedOlder)
	fmt.Fprintf(&b, "write recovery: %s\n", r.WriteRecoveryMeasures)
	if len(r.ClientRerouteTrace) > 0 {
		fmt.Fprintf(&b, "slowest reroutes (times in s from the commit):\n%s", formatRerouteTraces(r.ClientRerouteTrace))
	}
	return b.String()
}

// formatKinds renders register writes by kind, sorted by kind.
func formatKinds(by map[string]uint64) string {
	kinds := make([]string, 0, len(by))
	for k := range by {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	out := ""
	for _, k := range kinds {
		out += fmt.Sprintf(" %s=%d", k, by[k])
	}
	if out == "" {
		return ""
	}
	return "by kind:" + out
}

// sameState reports whether two register values encode alike.
func sameState(a, b failover.State) bool {
	ea, errA := failover.Encode(nil, a)
	eb, errB := failover.Encode(nil, b)
	return errA == nil && errB == nil && bytes.Equal(ea, eb)
}
