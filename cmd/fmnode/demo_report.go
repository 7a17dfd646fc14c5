package main

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/fmnode/fmnode/sim"
)

// demoResult is what `fmnode demo --json` prints. The keys the
// simulator's region-outage JSON has mean the same here (times in seconds
// from the kill; client_reroute_s from the commit of the client's
// partition's failover); Measures says where each figure comes from.
type demoResult struct {
	Demo               string   `json:"demo"`
	Agents             int      `json:"agents"`
	Regions            []string `json:"regions"`
	NodesPerRegion     int      `json:"nodes_per_region"`
	Partitions         int      `json:"partitions"`
	Profile            string   `json:"profile"`
	Consistency        string   `json:"consistency"`
	MinDurability      int      `json:"min_durability"`
	KilledRegion       string   `json:"killed_region"`
	KilledAgents       []string `json:"killed_agents"`
	AffectedPartitions int      `json:"affected_partitions"`
	NotFailedOver      int      `json:"not_failed_over"`

	Detection            sim.Dist    `json:"detection_s"`
	FailoverCompletion   sim.Dist    `json:"failover_completion_s"`
	WriteRecovery        sim.Dist    `json:"write_recovery_s"`
	ClientReroute        sim.Dist    `json:"client_reroute_s"`
	ClientRerouteMissing int         `json:"client_reroute_missing"`
	RPO                  sim.RPODist `json:"rpo_ops"`
	FailedOverWithin60s  float64     `json:"failed_over_within_60s_fraction"`
	// Promotion: per affected partition, from the commit to the new
	// write region's replica becoming write region (agents' promoted_at).
	Promotion sim.Dist `json:"promotion_s"`
	// RerouteSplit: client_reroute_s split per writer at the promotion,
	// the sending of the acknowledged attempt and its answer (the demo's
	// trace of its writers' HTTP attempts).
	RerouteSplit *demoRerouteSplit `json:"reroute_split,omitempty"`
	// SteadyWriteLatency: the strong Puts acknowledged before the kill.
	SteadyWriteLatency sim.Dist `json:"steady_write_latency_s"`
	// PredictionRTTMs is the round trip the prediction's layout models
	// (half the steady write's median latency less its CPU, see demoRTT).
	PredictionRTTMs float64 `json:"prediction_rtt_ms"`
	// PredictionRequestServiceMs is the service time per write the
	// prediction's shared queue charges (demo_burst.go; 0: none was
	// measured, and the prediction models no queue).
	PredictionRequestServiceMs float64 `json:"prediction_request_service_ms"`
	// PredictionHeldPollServiceMs is what it charges a held poll's
	// answer (half: its reception was paid while it was held).
	PredictionHeldPollServiceMs float64 `json:"prediction_held_poll_service_ms"`
	// OutageS is how long the region was down (kill to restart).
	OutageS float64 `json:"outage_s"`
	// ResyncBytes: replication payload (keys and values of ops and
	// snapshot pairs) the restarted agents received from their start
	// until they had caught up (ResyncS after the restart);
	// FullCopyBytes: the keys and values the partitions held then
	// (every acknowledged write and the preload), what a re-sync without
	// the progress table would ship.
	ResyncBytes uint64 `json:"resync_bytes"`
	// ChangedBytes: keys and values of the writes acknowledged from the
	// kill until resync_s, what the returning replicas lacked (the
	// simulator's changed_bytes).
	ChangedBytes    uint64  `json:"changed_bytes"`
	FullCopyBytes   uint64  `json:"full_copy_bytes"`
	ResyncS         float64 `json:"resync_s"`
	ResyncSnapshots uint64  `json:"resync_snapshots"`
	// BackInWriteQuorumS: from the restart until every partition's
	// register has every region in its write quorum again.
	BackInWriteQuorumS float64 `json:"back_in_write_quorum_s"`
	// ReturnError says why the returning agents were not back in every
	// write quorum within the bound (the drill goes on; exit 1).
	ReturnError string `json:"return_error,omitempty"`

	AckedWrites      uint64 `json:"acked_writes"`
	LostAckedWrites  uint64 `json:"lost_acked_writes"`
	UnreadableWrites uint64 `json:"unreadable_writes"`
	WriteErrors      uint64 `json:"write_errors"`
	UnknownOutcomes  uint64 `json:"unknown_outcomes"`
	FirstError       string `json:"first_error,omitempty"`

	Targets    []demoTarget       `json:"targets"`
	Measures   map[string]string  `json:"measures"`
	Prediction *sim.Result        `json:"prediction"`
	Paper      sim.Paper          `json:"paper"`
	Phases     map[string]float64 `json:"phase_s"`
	WallS      float64            `json:"wall_s"`
	NumCPU     int                `json:"num_cpu"`
	// CPU cores the agents together and this process (the writers and
	// the Go client) used during the steady load.
	AgentsCPUCores float64 `json:"agents_cpu_cores_steady"`
	DemoCPUCores   float64 `json:"demo_cpu_cores_steady"`
	// BurstS and BurstAcked: how long the calibration burst took and
	// how many of its writes were acknowledged (demo_burst.go).
	BurstS       float64 `json:"calibration_burst_s"`
	BurstAcked   uint64  `json:"calibration_burst_acked"`
	LoadAvg1Kill float64 `json:"loadavg_1m_at_kill"`
	// The machine's load average at the start and the end.
	LoadAvg1Start float64 `json:"loadavg_1m_start"`
	LoadAvg1End   float64 `json:"loadavg_1m_end"`
}

// demoTarget is one of the targets and whether this run met it.
type demoTarget struct {
	Name string  `json:"name"`
	Want string  `json:"want"`
	Got  float64 `json:"got"`
	Met  bool    `json:"met"`
}

// demoMeasures says where each figure comes from.
func demoMeasures() map[string]string {
	return map[string]string{
		"detection_s": "per affected partition, from the kill to the earliest failover proposal into a newer epoch by any surviving agent " +
			"(the agents' admin API: failover_proposed_at, the proposing node's clock); the simulator's rule (first failover proposal)",
		"failover_completion_s": "per affected partition, from the kill to the earliest time a surviving agent saw the new epoch committed " +
			"(admin API: epoch_seen_at; on the proposer that is its own CAS's outcome, the commit); the simulator's rule (the commit)",
		"write_recovery_s": "per affected partition, from the kill to its writer's first write acknowledged in a newer epoch (the client's " +
			"own observation: the epoch of the Put's session token); from the kill, the writer writes without think time, a steady " +
			"poll's wait after a failed Put, as the simulator's clients do",
		"client_reroute_s": "per writer of an affected partition, from the commit (failover_completion_s's instant) to its first write " +
			"acknowledged in the new epoch; every writer stays up (they run in this process)",
		"rpo_ops":  "acknowledged writes not read back, per affected partition (every acknowledged write is read back strongly at the end)",
		"resync_s": "from the restart until every replica of the returning agents is in its leader's epoch and has applied what the leader had committed a poll before",
		"resync_bytes": "the returning agents' DataBytesReceived (keys and values of the replicated ops and snapshot pairs received " +
			"since their start), at resync_s; the simulator counts the same payload",
		"back_in_write_quorum_s": "from the restart until every register's write quorum holds every region again (the agents' register_write_quorum)",
		"reroute_split": "client_reroute_s per writer split by the demo's trace of its HTTP attempts: known_s commit to promotion, " +
			"ask_s promotion to the sending of the attempt acknowledged, service_s that attempt's send to answer (conn_wait_s of it waiting " +
			"for a connection: a dial and TLS handshake, or a pooled one)",
		"promotion_s": "per affected partition, from the commit to the new write region's replica becoming write region (admin API: promoted_at)",
		"prediction": "fmnode sim's region-outage on the same layout (regions x nodes per region, every write region in the first region, " +
			"the spec's minimum durability, the processes killed so that clients are refused at once, DNS TTL 1 s), its round trip " +
			"half the steady write's median latency measured here, its outage half a heartbeat interval after a beat (a kill's mean phase)",
	}
}

// targets checks the targets.
func (r *demoResult) targets() {
	lease := demoLease(r.Profile).Seconds()
	add := func(name, want string, got float64, met bool) {
		r.Targets = append(r.Targets, demoTarget{Name: name, Want: want, Got: got, Met: met})
	}
	add("write_recovery_s.p99", fmt.Sprintf("<= lease + 1 s = %.2f s", lease), r.WriteRecovery.P99, r.WriteRecovery.N > 0 && r.WriteRecovery.P99 <= lease)
	add("rpo_ops.max", "0", r.RPO.Max, r.RPO.Max == 0)
	add("lost_acked_writes", "0", float64(r.LostAckedWrites), r.LostAckedWrites == 0 && r.UnreadableWrites == 0)
	add("client_reroute_s.max", "<= 1 s", r.ClientReroute.Max, r.ClientReroute.N > 0 && r.ClientReroute.Max <= 1)
	if p := r.Prediction; p != nil && p.FailoverReport != nil {
		for _, m := range []struct {
			name      string
			real, sim sim.Dist
		}{
			{"detection_s", r.Detection, p.Detection},
			{"failover_completion_s", r.FailoverCompletion, p.FailoverCompletion},
			{"write_recovery_s", r.WriteRecovery, p.WriteRecovery},
			{"client_reroute_s", r.ClientReroute, p.ClientReroute},
		} {
			for _, q := range []struct {
				name      string
				real, sim float64
			}{{"p50", m.real.P50, m.sim.P50}, {"p99", m.real.P99, m.sim.P99}} {
				ratio := math.Inf(1)
				if q.sim > 0 {
					ratio = q.real / q.sim
				}
				add(m.name+"."+q.name+" real/sim", "within 25% of the prediction (0.75..1.25)", ratio, ratio >= 0.75 && ratio <= 1.25)
			}
		}
	}
}

// printDemo prints the drill's figures beside the prediction and the
// paper's, in the rows of `fmnode sim --scenario region-outage`.
func printDemo(w io.Writer, r *demoResult) {
	var b strings.Builder
	fmt.Fprintf(&b, "fmnode demo: %d agents (%d regions x %d nodes: %s), %d partitions, profile %s, %s, minimum durability %d\n",
		r.Agents, len(r.Regions), r.NodesPerRegion, strings.Join(r.Regions, ", "), r.Partitions, r.Profile, r.Consistency, r.MinDurability)
	fmt.Fprintf(&b, "region outage: SIGKILL of %s (%s), write region of %d partitions; %d failed over of %d affected; down %.1f s\n",
		r.KilledRegion, strings.Join(r.KilledAgents, ", "), r.AffectedPartitions, r.AffectedPartitions-r.NotFailedOver, r.AffectedPartitions, r.OutageS)
	var p *sim.FailoverReport
	if r.Prediction != nil {
		p = r.Prediction.FailoverReport
	}
	fmt.Fprintf(&b, "%-31s %29s | %29s | %s\n", "", "real (this machine)", fmt.Sprintf("simulator (RTT %.1f ms)", r.PredictionRTTMs), "paper")
	fmt.Fprintf(&b, "%-31s %7s %7s %7s %7s | %7s %7s %7s %7s | %s\n", "metric (s from outage)", "mean", "p50", "p99", "max", "mean", "p50", "p99", "max", "mean / p99")
	row := func(name string, real sim.Dist, pick func(*sim.FailoverReport) sim.Dist, paper string) {
		fmt.Fprintf(&b, "%-31s %7.2f %7.2f %7.2f %7.2f | ", name, real.Mean, real.P50, real.P99, real.Max)
		if p != nil {
			d := pick(p)
			fmt.Fprintf(&b, "%7.2f %7.2f %7.2f %7.2f | ", d.Mean, d.P50, d.P99, d.Max)
		} else {
			fmt.Fprintf(&b, "%29s | ", "n/a")
		}
		fmt.Fprintln(&b, paper)
	}
	pp := r.Paper
	row("detection", r.Detection, func(f *sim.FailoverReport) sim.Dist { return f.Detection }, fmt.Sprintf("%.0f / %.0f", pp.DetectionMean, pp.DetectionP99))
	row("failover completion", r.FailoverCompletion, func(f *sim.FailoverReport) sim.Dist { return f.FailoverCompletion }, fmt.Sprintf("%.0f / %.0f", pp.CompletionMean, pp.CompletionP99))
	row("write recovery", r.WriteRecovery, func(f *sim.FailoverReport) sim.Dist { return f.WriteRecovery }, fmt.Sprintf("%.0f / %.0f", pp.RecoveryMean, pp.RecoveryP99))
	row("client reroute (s from commit)", r.ClientReroute, func(f *sim.FailoverReport) sim.Dist { return f.ClientReroute }, "goal max <= 1 s")
	fmt.Fprintf(&b, "%-31s %7.2f %7.2f %7.2f %7.2f | the nodes' part of the reroute (commit to promotion)\n", "  promotion (s from commit)",
		r.Promotion.Mean, r.Promotion.P50, r.Promotion.P99, r.Promotion.Max)
	if sp := r.RerouteSplit; sp != nil && sp.Traced > 0 {
		for _, x := range []struct {
			name string
			d    sim.Dist
			what string
		}{
			{"  ask (s from promotion)", sp.Ask, "until the writer sent the attempt acknowledged"},
			{"  service (s)", sp.Service, fmt.Sprintf("that attempt, send to answer (of it waiting for a connection: p50 %.2f s, max %.2f s)", sp.ConnWait.P50, sp.ConnWait.Max)},
			{"  attempts from the commit", sp.AttemptsAfterCommit, fmt.Sprintf("HTTP attempts per writer; failed by status %v", sp.Failed)},
		} {
			fmt.Fprintf(&b, "%-31s %7.2f %7.2f %7.2f %7.2f | %s\n", x.name, x.d.Mean, x.d.P50, x.d.P99, x.d.Max, x.what)
		}
	}
	simRPO, simWithin, simResync := "n/a", "n/a", "n/a"
	if p != nil {
		simRPO = fmt.Sprintf("%.2f mean, %.0f p99, %.0f max", p.RPO.Mean, p.RPO.P99, p.RPO.Max)
		simWithin = fmt.Sprintf("%.4f", p.FailedOverWithin60s)
		if p.FullCopyBytes > 0 {
			simResync = fmt.Sprintf("%.2f%% of a full copy", 100*float64(p.ResyncBytes)/float64(p.FullCopyBytes))
		}
	}
	fmt.Fprintf(&b, "%-31s %.2f mean, %.0f p99, %.0f max | sim %s | paper %.0f / %.0f\n", "RPO (acknowledged ops lost)", r.RPO.Mean, r.RPO.P99, r.RPO.Max, simRPO, pp.RPOMean, pp.RPOP99)
	fmt.Fprintf(&b, "%-31s %.4f | sim %s | paper > %.2f\n", "failed over within 60 s", r.FailedOverWithin60s, simWithin, pp.Within60s)
	full := "n/a"
	if r.FullCopyBytes > 0 {
		full = fmt.Sprintf("%.2f%%", 100*float64(r.ResyncBytes)/float64(r.FullCopyBytes))
	}
	fmt.Fprintf(&b, "%-31s %d of %d full copy (%s; changed %d), caught up %.1f s after the restart, %d snapshots | sim %s\n", "re-sync bytes",
		r.ResyncBytes, r.FullCopyBytes, full, r.ChangedBytes, r.ResyncS, r.ResyncSnapshots, simResync)
	if r.ReturnError != "" {
		fmt.Fprintf(&b, "%-31s NOT within the bound: %s\n", "back in every write quorum", r.ReturnError)
	} else {
		fmt.Fprintf(&b, "%-31s %.1f s after the restart\n", "back in every write quorum", r.BackInWriteQuorumS)
	}
	fmt.Fprintf(&b, "%-31s %d, lost %d, unreadable %d (write errors %d, unknown outcomes %d)\n", "acknowledged writes read back",
		r.AckedWrites, r.LostAckedWrites, r.UnreadableWrites, r.WriteErrors, r.UnknownOutcomes)
	fmt.Fprintf(&b, "targets:\n")
	for _, t := range r.Targets {
		mark := "MET "
		if !t.Met {
			mark = "MISS"
		}
		fmt.Fprintf(&b, "  %s %-36s %8.3f  want %s\n", mark, t.Name, t.Got, t.Want)
	}
	fmt.Fprintf(&b, "steady strong writes: p50 %.1f ms, p99 %.1f ms; the prediction's round trip is half the p50 less the service time\n",
		1000*r.SteadyWriteLatency.P50, 1000*r.SteadyWriteLatency.P99)
	fmt.Fprintf(&b, "the prediction's service time: %.3f ms per write (a burst of %d writes drained in %.2f s before the kill), %.3f ms per held poll answered\n",
		r.PredictionRequestServiceMs, r.BurstAcked, r.BurstS, r.PredictionHeldPollServiceMs)
	fmt.Fprintf(&b, "machine: %d CPUs, load average %.2f at the start, %.2f at the kill, %.2f at the end; steady load: agents %.2f cores, writers %.2f\n",
		r.NumCPU, r.LoadAvg1Start, r.LoadAvg1Kill, r.LoadAvg1End, r.AgentsCPUCores, r.DemoCPUCores)
	fmt.Fprintf(&b, "%.0f s in all (prediction %.1f s)\n", r.WallS, r.Phases["prediction"])
	fmt.Fprintf(&b, "how it is measured: `fmnode demo --json` (measures); the prediction replays with: %s\n", replayOf(r.Prediction))
	_, _ = io.WriteString(w, b.String())
}

func replayOf(p *sim.Result) string {
	if p == nil {
		return "n/a"
	}
	return p.Replay
}
