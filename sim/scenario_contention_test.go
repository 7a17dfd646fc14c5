package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nakRound is one round the proposer counted as a NAK, reconstructed from
// the messages the network delivered.
type nakRound struct {
	proposer caspaxos.NodeID
	ballot   caspaxos.Ballot
	phase    caspaxos.MsgType // MsgPrepareReply or MsgAcceptReply
	fast     bool             // an accept without a prepare at that ballot
	retry    bool             // the proposer's previous round of the key was a NAK too
	at       time.Duration    // when the deciding refusal arrived
	start    time.Duration    // first delivery of the round's first request
	winner   caspaxos.Ballot  // greatest conflicting ballot reported
	winStart time.Duration    // first delivery of the winner's first request (-1: never seen)
	// winNext: the winning ballot is the promise a committed accept carried.
	winNext bool
	// lastOther is the last commit by another proposer before this round started.
	lastOther time.Duration
}

// nakDiagnosis rebuilds every NAK of a contention run from the wire: a
// round is NAKed when refusals from a majority of the three acceptors
// arrive before acks from a majority, which is how the proposer counts.
type nakDiagnosis struct {
	firstSeen map[caspaxos.Ballot]time.Duration
	prepared  map[caspaxos.Ballot]bool
	// nextOf maps a piggybacked promise to the ballot of the accept that carried it.
	nextOf   map[caspaxos.Ballot]caspaxos.Ballot
	replies  map[roundKey]*roundTally
	troubled map[caspaxos.NodeID]bool
	commits  []commitAt
	naks     []nakRound
}

type roundKey struct {
	b caspaxos.Ballot
	t caspaxos.MsgType
}

type roundTally struct{ acks, naks int }

type commitAt struct {
	at time.Duration
	by caspaxos.NodeID
}

func newNakDiagnosis() *nakDiagnosis {
	return &nakDiagnosis{
		firstSeen: make(map[caspaxos.Ballot]time.Duration),
		prepared:  make(map[caspaxos.Ballot]bool),
		nextOf:    make(map[caspaxos.Ballot]caspaxos.Ballot),
		replies:   make(map[roundKey]*roundTally),
		troubled:  make(map[caspaxos.NodeID]bool),
	}
}

func (d *nakDiagnosis) tap(now time.Duration, m caspaxos.Message) {
	for _, it := range m.Items {
		switch m.Type {
		case caspaxos.MsgPrepare, caspaxos.MsgAccept:
			if _, ok := d.firstSeen[it.Ballot]; !ok {
				d.firstSeen[it.Ballot] = now
			}
			if m.Type == caspaxos.MsgPrepare {
				d.prepared[it.Ballot] = true
			}
			if !it.Next.IsZero() {
				d.nextOf[it.Next] = it.Ballot
			}
		case caspaxos.MsgPrepareReply, caspaxos.MsgAcceptReply:
			d.reply(now, m, it)
		}
	}
}

func (d *nakDiagnosis) reply(now time.Duration, m caspaxos.Message, it caspaxos.Item) {
	k := roundKey{it.Ballot, m.Type}
	t := d.replies[k]
	if t == nil {
		t = &roundTally{}
		d.replies[k] = t
	}
	if t.acks >= 2 || t.naks >= 2 {
		return // decided already
	}
	if it.Reject == caspaxos.RejectNone {
		t.acks++
		if t.acks == 2 && m.Type == caspaxos.MsgAcceptReply {
			d.troubled[m.To] = false
			d.commits = append(d.commits, commitAt{now, m.To})
		}
		return
	}
	if it.Reject != caspaxos.RejectConflict {
		return
	}
	t.naks++
	if t.naks < 2 {
		return
	}
	n := nakRound{
		proposer: m.To, ballot: it.Ballot, phase: m.Type, at: now,
		fast:  m.Type == caspaxos.MsgAcceptReply && !d.prepared[it.Ballot],
		retry: d.troubled[m.To], start: d.firstSeen[it.Ballot], winner: it.Conflict, winStart: -1,
		lastOther: -1,
	}
	w := it.Conflict
	if b, ok := d.nextOf[w]; ok {
		w, n.winNext = b, true
	}
	if ws, ok := d.firstSeen[w]; ok {
		n.winStart = ws
	}
	for i := len(d.commits) - 1; i >= 0; i-- {
		if c := d.commits[i]; c.by != m.To && c.at <= n.start {
			n.lastOther = c.at
			break
		}
	}
	d.troubled[m.To] = true
	d.naks = append(d.naks, n)
}

// summary buckets the NAKs by what caused them.
func (d *nakDiagnosis) summary() map[string]int {
	s := make(map[string]int)
	for _, n := range d.naks {
		phase := "prepare"
		if n.phase == caspaxos.MsgAcceptReply {
			phase = "accept"
		}
		if n.fast {
			phase = "fast-accept"
		}
		att := "first"
		if n.retry {
			att = "retry"
		}
		s[phase+"/"+att]++
		gap := "winner-unseen"
		if n.winStart >= 0 {
			g := n.winStart - n.start
			switch {
			case n.winner.Proposer == n.proposer:
				gap = "own-ballot"
			case g < 0:
				gap = "winner-earlier"
			case g <= 50*time.Millisecond:
				gap = "winner-later<=50ms"
			case g <= 200*time.Millisecond:
				gap = "winner-later<=200ms"
			default:
				gap = "winner-later>200ms"
			}
		}
		s["gap:"+gap]++
		if n.winNext {
			s["winner-committed-first"]++
		}
		s[fmt.Sprintf("regions:%s<-%s", regionOf(n.proposer), regionOf(n.winner.Proposer))]++
		if n.lastOther >= 0 && n.start-n.lastOther < 5*time.Second {
			s["other-commit<5s-before"]++
		}
	}
	return s
}

// regionOf names the region of a proposer of the contention scenario
// (slot s runs on node s, nodes are spread over the regions round robin).
func regionOf(id caspaxos.NodeID) string {
	return DefaultWAN().Regions[(uint64(id)-proposerIDBase)%proposerIDStride%3]
}

func (d *nakDiagnosis) String() string {
	s := d.summary()
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-28s %d\n", k, s[k])
	}
	return b.String()
}

// TestContentionNAKsAccountedFor rebuilds every NAK of a contention run
// from the wire and checks the rebuild matches the proposers' own count,
// so that the causes it reports (phase, fast path, retry, who won and how
// far apart the two rounds started) describe all of them. Run with -v to
// see the causes.
func TestContentionNAKsAccountedFor(t *testing.T) {
	cases := []struct {
		interval, duration time.Duration
	}{
		{30 * time.Second, 6 * time.Hour},
		{5 * time.Second, time.Hour},
	}
	for _, tc := range cases {
		for _, v := range contentionVariants() {
			t.Run(fmt.Sprintf("%v/%v", tc.interval, v.name), func(t *testing.T) {
				cfg := Config{Scenario: "contention", Seed: 1, Faults: FaultsNone, Duration: tc.duration, Interval: tc.interval}
				require.NoError(t, cfg.normalize())
				d := newNakDiagnosis()
				r, err := runContention(cfg, v, d.tap)
				require.NoError(t, err)
				require.Empty(t, r.Violations)
				require.Positive(t, r.Metrics["rounds"])
				assert.Equal(t, r.Metrics["naks"], float64(len(d.naks)), "every NAK rebuilt from the wire")
				t.Logf("rounds %v naks %v\n%s", r.Metrics["rounds"], r.Metrics["naks"], d)
			})
		}
	}
}

// Turns avoid the first-round collisions the backoffs cannot (they act
// only after a NAK), and cost nothing to a proposer alone on its key.
func TestContentionTurns(t *testing.T) {
	cases := []struct {
		name      string
		proposers int
	}{
		{"nine proposers", 0},
		{"one proposer", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Scenario: "contention", Seed: 3, Faults: FaultsNone, Duration: 6 * time.Hour, Proposers: tc.proposers}
			r := run(t, cfg)
			require.Empty(t, r.Violations)
			m := r.Metrics
			if tc.proposers == 1 {
				assert.Zero(t, m["naks_adaptive"])
				assert.Zero(t, m["naks_turns"])
				assert.Equal(t, m["latency_p50_ms_adaptive"], m["latency_p50_ms_turns"], "alone, a proposer never waits for a turn")
				assert.Equal(t, m["latency_p99_ms_adaptive"], m["latency_p99_ms_turns"])
				return
			}
			// Against no backoff: adaptive forwards to the key's leader
			// since session 9 and has fewer NAKs than turns.
			assert.Positive(t, m["naks_none"])
			assert.Less(t, m["naks_turns"]*10, m["naks_none"], "turns remove at least nine tenths of the NAKs")
		})
	}
}

// TestContentionAdaptiveTargets holds the adaptive backoff (with its
// pacing of first attempts and, since session 9, forwarding to the key's
// leader) to issue 18's targets, counted, not timed: the simulator is
// deterministic, so these are the same numbers on every machine. In both
// shapes (the burst, where the 9 proposers write at the same instant every
// 30 s, and the steady independent heartbeats, whose collisions no delay
// can foresee but forwarding avoids) adaptive must make no NAK at all
// after the warm-up (≤ 0.0028% of about 950 rounds is zero), give up no
// proposal, commit at least as much as the exponential backoff, and keep
// its p99 within 1.5x of no backoff's. Seeds 3, 23 and 29 had
// 3, 6 and 10 NAKs after the warm-up before session 8's two pacing rules
// (a paced miss keeps the pace, the delay is capped by the chain; see
// BENCHMARKS.md): seed 29's began with a slow round cut off by its
// successor, who then forgot its pace and went first too.
func TestContentionAdaptiveTargets(t *testing.T) {
	variants := contentionVariants()[:3] // none, exponential, adaptive
	for _, burst := range []bool{true, false} {
		for _, seed := range []uint64{3, 23, 29} {
			t.Run(fmt.Sprintf("burst=%v/seed%d", burst, seed), func(t *testing.T) {
				cfg := Config{Scenario: contentionScenario{burst: burst}.Name(), Seed: seed, Faults: FaultsNone}
				require.NoError(t, cfg.normalize())
				m := map[string]map[string]float64{}
				for _, v := range variants {
					v.burst = burst
					r, err := runContention(cfg, v, nil)
					require.NoError(t, err)
					require.Empty(t, r.Violations)
					m[v.name] = r.Metrics
				}
				none, exp, ad := m["none"], m["exponential"], m["adaptive"]
				assert.GreaterOrEqual(t, ad["goodput_per_second"], exp["goodput_per_second"], "goodput at least exponential's")
				assert.LessOrEqual(t, ad["latency_p99_ms"], 1.5*none["latency_p99_ms"], "p99 within 1.5x of no backoff's")
				assert.Zero(t, ad["failures"], "no proposal given up")
				assert.Positive(t, none["naks_warm"], "the key is contended")
				assert.Positive(t, ad["forwards"], "adaptive forwarded")
				assert.Zero(t, ad["forward_timeouts"], "no forward lost without faults")
				assert.Positive(t, ad["rounds_warm"])
				assert.Zero(t, ad["naks_warm"], "no conflict after the warm-up (rounds %v)", ad["rounds_warm"])
			})
		}
	}
}

// TestContentionBurstTargetsPooled holds issue 18's targets for the burst
// shape the way docs/BENCHMARKS.md reports them: no NAK after the warm-up,
// no proposal given up, mean goodput at least exponential's and mean p99
// within 1.5x of no backoff's, pooled over seeds 1..40.
//
// Since session 9 the adaptive variant forwards a shared key's changes to
// its leader, which applies every change waiting there in one round, so
// after the warm-up about four proposals share a round: 40 seeds hold
// ~36,000 proposals but only ~8,600 rounds, and zero NAKs in 8,600 rounds
// says the per-round rate is below 0.012%, not below 0.0028%. The NAK
// count is therefore pooled over seeds 1..200 for adaptive alone, enough
// rounds (~43,000) for zero to mean below 0.0028% per round (the stricter
// reading, as BENCHMARKS.md holds it) and so per proposal. What forwarding
// itself guarantees is held too: the changes were forwarded, none was
// lost to a timeout without faults, and the leader batched them (fewer
// rounds than proposals). Over the 200 seeds, the first two events (before
// the hints converge) lose 4 forwards to timeouts and seed 142 gives up
// one proposal at the very first event, when nobody has seen anybody and
// only the paper's backoff acts; after the warm-up nothing times out or
// gives up. Pacing alone (adaptive without Forward) has 4 NAKs after the
// warm-up on seeds 41..80 (session 8) and a round per proposal, so it
// fails here; so does a leader that keeps pacing its own proposal while
// forwarded changes wait behind it (session 9's code: 195 of 190,053
// forwards time out, all in the warm-up, and the p99 is 381 ms, not 251).
// The warm-up figures above are session 10's: since session 11 the
// adaptive variant is told the key's writers up front, so its first
// events forward too (TestContentionKnownWritersNoNAKs).
func TestContentionBurstTargetsPooled(t *testing.T) {
	if testing.Short() {
		t.Skip("280 simulated hours")
	}
	const (
		seeds     = 40  // the comparisons of goodput and p99
		nakSeeds  = 200 // adaptive's NAK count
		paperRate = 0.000028
	)
	sum := map[string]map[string]float64{}
	pool := func(seed uint64, v contentionVariant) {
		cfg := Config{Scenario: "contention-burst", Seed: seed, Faults: FaultsNone}
		require.NoError(t, cfg.normalize())
		v.burst = true
		r, err := runContention(cfg, v, nil)
		require.NoError(t, err)
		require.Empty(t, r.Violations, "seed %d %s", seed, v.name)
		name := v.name
		if seed > seeds {
			name += "-more"
		}
		if sum[name] == nil {
			sum[name] = map[string]float64{}
		}
		for k, x := range r.Metrics {
			sum[name][k] += x
		}
	}
	variants := contentionVariants()[:3]
	for seed := uint64(1); seed <= seeds; seed++ {
		for _, v := range variants {
			pool(seed, v)
		}
	}
	adaptive := variants[2]
	require.Equal(t, "adaptive", adaptive.name)
	for seed := uint64(seeds + 1); seed <= nakSeeds; seed++ {
		pool(seed, adaptive)
	}
	none, exp, ad, more := sum["none"], sum["exponential"], sum["adaptive"], sum["adaptive-more"]
	naks, rounds, proposals := ad["naks_warm"]+more["naks_warm"], ad["rounds_warm"]+more["rounds_warm"], ad["proposals_warm"]+more["proposals_warm"]
	t.Logf("adaptive: naks_warm %v of %v rounds (%v proposals) over seeds 1..%d; over 1..%d p99 %.0f ms (none %.0f), goodput %.5f (exponential %.5f)",
		naks, rounds, proposals, nakSeeds, seeds, ad["latency_p99_ms"]/seeds, none["latency_p99_ms"]/seeds,
		ad["goodput_per_second"]/seeds, exp["goodput_per_second"]/seeds)
	assert.Zero(t, naks, "no conflict after the warm-up")
	assert.Greater(t, rounds, 1/paperRate, "enough rounds for zero to mean below 0.0028%% per round")
	assert.Less(t, 2*rounds, proposals, "the leader batched the forwarded changes")
	assert.Positive(t, ad["forwards"]+more["forwards"], "adaptive forwarded")
	assert.Zero(t, ad["forward_timeouts_warm"]+more["forward_timeouts_warm"], "no forward lost after the warm-up")
	assert.Less(t, 10000*(ad["forward_timeouts"]+more["forward_timeouts"]), ad["forwards"]+more["forwards"],
		"under 1 in 10,000 forwards times out, warm-up included")
	assert.Zero(t, ad["failures_warm"]+more["failures_warm"], "no proposal given up after the warm-up")
	assert.Zero(t, ad["failures"], "no proposal given up over seeds 1..40")
	assert.GreaterOrEqual(t, ad["goodput_per_second"], exp["goodput_per_second"], "goodput at least exponential's")
	assert.LessOrEqual(t, ad["latency_p99_ms"], 1.5*none["latency_p99_ms"], "p99 within 1.5x of no backoff's")
}

// TestContentionKnownWritersNoNAKs: told the key's writers up front
// (ClusterConfig.KnownWriters, session 11), the adaptive variant makes no
// NAK over the whole hour in either shape, its first events included: the
// smallest id leads from the first event and the others forward to it
// (no forward lost, none given up). Without being told, the same seeds'
// first events collide (session 10's code, the contrast): every burst
// seed, and the steady seeds picked here (steady seeds 1..20 had 3 NAKs
// in all, one on each of these).
func TestContentionKnownWritersNoNAKs(t *testing.T) {
	steadyNAKSeeds := []uint64{3, 14, 20}
	cases := []struct {
		burst bool
		seeds []uint64
	}{
		{true, []uint64{1, 2, 3}},
		{false, steadyNAKSeeds},
	}
	for _, tc := range cases {
		for _, seed := range tc.seeds {
			t.Run(fmt.Sprintf("burst=%v/seed%d", tc.burst, seed), func(t *testing.T) {
				cfg := Config{Scenario: contentionScenario{burst: tc.burst}.Name(), Seed: seed, Faults: FaultsNone}
				require.NoError(t, cfg.normalize())
				v := contentionVariants()[2]
				require.Equal(t, "adaptive", v.name)
				require.True(t, v.knownWriters, "adaptive is told the writers")
				v.burst = tc.burst
				r, err := runContention(cfg, v, nil)
				require.NoError(t, err)
				require.Empty(t, r.Violations)
				m := r.Metrics
				assert.Positive(t, m["rounds"])
				assert.Zero(t, m["naks"], "no NAK in the whole hour (rounds %v)", m["rounds"])
				assert.Zero(t, m["failures"], "none given up")
				assert.Positive(t, m["forwards"], "forwarded")
				assert.Zero(t, m["forward_timeouts"], "no forward lost without faults")

				v.knownWriters = false
				r, err = runContention(cfg, v, nil)
				require.NoError(t, err)
				require.Empty(t, r.Violations)
				assert.Positive(t, r.Metrics["naks"], "not told, the first events collide")
			})
		}
	}
}

// TestContentionDeadLeader: with the key's leader (the smallest known
// writer) dead after the warm-up, the others' forwards to it time out and
// they go on through the next writer: every beat still commits, none is
// given up, and the cost is the forward timeouts, which the run without
// the kill does not have.
func TestContentionDeadLeader(t *testing.T) {
	for _, burst := range []bool{false, true} {
		t.Run(fmt.Sprintf("burst=%v", burst), func(t *testing.T) {
			cfg := Config{Scenario: contentionScenario{burst: burst}.Name(), Seed: 1, Faults: FaultsNone, Duration: 30 * time.Minute}
			require.NoError(t, cfg.normalize())
			vs := contentionVariants()
			v := vs[len(vs)-1]
			require.Equal(t, "deadleader", v.name)
			require.True(t, v.killLeader && v.knownWriters && v.forward)
			v.burst = burst
			r, err := runContention(cfg, v, nil)
			require.NoError(t, err)
			require.Empty(t, r.Violations)
			m := r.Metrics
			assert.Positive(t, m["forward_timeouts_warm"], "forwards to the dead leader time out")
			assert.Positive(t, m["proposals_warm"])
			assert.Zero(t, m["failures_warm"], "none given up without the leader")

			v.killLeader = false
			r, err = runContention(cfg, v, nil)
			require.NoError(t, err)
			assert.Zero(t, r.Metrics["forward_timeouts_warm"], "the control: no timeout with the leader up")
		})
	}
}
