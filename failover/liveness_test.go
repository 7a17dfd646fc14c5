package failover

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newLivenessTrio returns the liveness of nodes 1-3, one per region.
func newLivenessTrio(t *testing.T, cfg Config) map[NodeID]*Liveness {
	nodes := []Node{{1, "east"}, {2, "west"}, {3, "north"}}
	ls := map[NodeID]*Liveness{}
	for _, n := range nodes {
		l, err := NewLiveness(cfg, n.ID, nodes)
		require.NoError(t, err)
		ls[n.ID] = l
	}
	return ls
}

func TestLivenessLeaseAndDetection(t *testing.T) {
	cfg := FastConfig()
	ls := newLivenessTrio(t, cfg)
	deliver := func(now time.Duration, drop func(Heartbeat) bool) {
		for i := 0; i < 10; i++ {
			any := false
			for _, id := range []NodeID{1, 2, 3} {
				for _, m := range ls[id].Ready() {
					any = true
					if drop == nil || !drop(m) {
						require.NoError(t, ls[m.To].Step(now, m))
					}
				}
			}
			if !any {
				return
			}
		}
	}
	now := time.Duration(0)
	for ; now < 3*time.Second; now += 100 * time.Millisecond {
		for _, id := range []NodeID{1, 2, 3} {
			ls[id].Tick(now)
		}
		deliver(now, nil)
	}
	assert.True(t, ls[1].LeaseValid(now))
	f, _, _ := ls[2].Failed(1, now)
	assert.False(t, f)

	// Cut node 1 off: its lease lapses before anyone declares it failed.
	cut := func(m Heartbeat) bool { return m.From == 1 || m.To == 1 }
	var leaseEnd, declared time.Duration
	for end := now + 5*time.Second; now < end; now += 10 * time.Millisecond {
		for _, id := range []NodeID{1, 2, 3} {
			ls[id].Tick(now)
		}
		deliver(now, cut)
		if leaseEnd == 0 && !ls[1].LeaseValid(now) {
			leaseEnd = now
		}
		if f, votes, needed := ls[2].Failed(1, now); f && declared == 0 {
			declared = now
			assert.Equal(t, 2, votes)
			assert.Equal(t, 2, needed)
		}
	}
	require.NotZero(t, leaseEnd)
	require.NotZero(t, declared)
	assert.Greater(t, declared, leaseEnd+cfg.MaxClockDrift-10*time.Millisecond)
	assert.LessOrEqual(t, declared-leaseEnd, cfg.HeartbeatInterval+cfg.MaxClockDrift+100*time.Millisecond)
	f, _, _ = ls[2].Failed(3, now)
	assert.False(t, f, "north is healthy")

	_, err := NewLiveness(cfg, 9, ls[1].Nodes())
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.Error(t, ls[1].Step(now, Heartbeat{Kind: KindHeartbeat, From: 7, To: 1}))
}

// TestLivenessLeaseSafetyProperty runs random topologies, delays, losses,
// cuts and clock offsets within the drift bound, and checks at every event
// that no node is declared failed (by any observer) while its own lease,
// read on its own clock, still holds.
func TestLivenessLeaseSafetyProperty(t *testing.T) {
	declared, gray := 0, 0
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			d, g := runLeaseSafety(t, seed, 1+int(seed%3))
			declared, gray = declared+d, gray+g
		})
	}
	// The property is only meaningful if failures were actually declared,
	// for silence and for gray verdicts (a node heard from whose observers
	// withhold its lease).
	assert.Greater(t, declared, 20, "cuts must lead to failure declarations")
	assert.Greater(t, gray, 20, "gray verdicts must lead to failure declarations")
}

type lvEvent struct {
	at   time.Duration
	seq  int
	node NodeID
	msg  *Heartbeat
}

type lvQueue []lvEvent

func (q lvQueue) Len() int { return len(q) }
func (q lvQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q lvQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *lvQueue) Push(x any)   { *q = append(*q, x.(lvEvent)) }
func (q *lvQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

func runLeaseSafety(t *testing.T, seed uint64, perRegion int) (declared, grayDeclared int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	cfg := FastConfig()
	regionsN := 2 + rng.IntN(4)
	var nodes []Node
	id := NodeID(1)
	for r := 0; r < regionsN; r++ {
		for k := 0; k < perRegion; k++ {
			nodes = append(nodes, Node{ID: id, Region: Region(fmt.Sprintf("r%d", r))})
			id++
		}
	}
	ls := map[NodeID]*Liveness{}
	offset := map[NodeID]time.Duration{}
	for _, n := range nodes {
		l, err := NewLiveness(cfg, n.ID, nodes)
		require.NoError(t, err)
		ls[n.ID] = l
		offset[n.ID] = time.Duration(rng.Int64N(int64(cfg.MaxClockDrift))) - cfg.MaxClockDrift/2
	}
	local := func(n NodeID, real time.Duration) time.Duration { return real + offset[n] + time.Hour }
	loss := rng.Float64() * 0.3
	maxDelay := time.Duration(1+rng.IntN(400)) * time.Millisecond
	// cut[n] = until when node n is cut off (both directions).
	cut := map[NodeID]time.Duration{}
	// Gray verdicts: an observer judges a node gray until a time.
	type grayVerdict struct {
		by, on NodeID
		until  time.Duration
	}
	var grays []grayVerdict
	q := &lvQueue{}
	seq := 0
	push := func(e lvEvent) { seq++; e.seq = seq; heap.Push(q, e) }
	for _, n := range nodes {
		push(lvEvent{at: time.Duration(rng.IntN(100)) * time.Millisecond, node: n.ID})
	}
	const horizon = 30 * time.Second
	for q.Len() > 0 {
		e := heap.Pop(q).(lvEvent)
		if e.at > horizon {
			break
		}
		l := ls[e.node]
		if e.msg != nil {
			require.NoError(t, l.Step(local(e.node, e.at), *e.msg))
		} else {
			l.Tick(local(e.node, e.at))
			push(lvEvent{at: e.at + time.Duration(20+rng.IntN(80))*time.Millisecond, node: e.node})
			if rng.Float64() < 0.004 {
				victim := nodes[rng.IntN(len(nodes))].ID
				cut[victim] = e.at + time.Duration(rng.IntN(8000))*time.Millisecond
			}
			if rng.Float64() < 0.004 {
				on := nodes[rng.IntN(len(nodes))].ID
				grays = append(grays, grayVerdict{by: e.node, on: on, until: e.at + time.Duration(rng.IntN(10000))*time.Millisecond})
				l.SetGray(local(e.node, e.at), on, true)
			}
			kept := grays[:0]
			for _, g := range grays {
				if g.by == e.node && e.at >= g.until {
					still := false
					for _, o := range grays {
						still = still || (o != g && o.by == g.by && o.on == g.on && e.at < o.until)
					}
					if !still {
						l.SetGray(local(e.node, e.at), g.on, false)
					}
					continue
				}
				kept = append(kept, g)
			}
			grays = kept
		}
		for _, m := range l.Ready() {
			if e.at < cut[m.From] || e.at < cut[m.To] || rng.Float64() < loss {
				continue
			}
			mm := m
			push(lvEvent{at: e.at + time.Duration(rng.Int64N(int64(maxDelay))), node: m.To, msg: &mm})
		}
		// The invariant, checked after every event.
		for _, obs := range nodes {
			for _, n := range nodes {
				if n.ID == obs.ID {
					continue
				}
				f, _, _ := ls[obs.ID].Failed(n.ID, local(obs.ID, e.at))
				if f {
					declared++
					if ls[obs.ID].GrayFailed(n.ID, local(obs.ID, e.at)) {
						grayDeclared++
					}
				}
				if f && ls[n.ID].LeaseValid(local(n.ID, e.at)) {
					t.Fatalf("seed %d: at %v node %d declares node %d failed while its lease holds until %v (its clock %v)",
						seed, e.at, obs.ID, n.ID, ls[n.ID].LeaseUntil(), local(n.ID, e.at))
				}
			}
		}
	}
	return declared, grayDeclared
}

// TestLivenessProbesSuspects: between heartbeat rounds a node probes only
// the nodes it suspects, once per SuspectProbeInterval, with no view in
// the probe; when a cut heals, both sides end their suspicion within about
// one probe interval instead of at their next rounds (30 s apart here).
func TestLivenessProbesSuspects(t *testing.T) {
	cfg := DefaultConfig()
	ls := newLivenessTrio(t, cfg)
	var probes []Heartbeat
	step := func(now time.Duration, cut bool) {
		for _, id := range []NodeID{1, 2, 3} {
			ls[id].Tick(now)
		}
		for i := 0; i < 10; i++ {
			any := false
			for _, id := range []NodeID{1, 2, 3} {
				for _, m := range ls[id].Ready() {
					any = true
					if m.Kind == KindProbe {
						probes = append(probes, m)
					}
					if !cut || (m.From != 1 && m.To != 1) {
						require.NoError(t, ls[m.To].Step(now, m))
					}
				}
			}
			if !any {
				return
			}
		}
	}
	const tick = 100 * time.Millisecond
	now := time.Duration(0)
	for ; now < time.Minute; now += tick {
		step(now, false)
	}
	require.Empty(t, probes, "probes while nobody is suspected")
	cutAt := now
	for ; now < cutAt+3*time.Minute+15*time.Second; now += tick { // heal mid-round
		step(now, true)
	}
	require.False(t, ls[2].Alive(1))
	require.False(t, ls[1].Alive(2))
	suspectedFor := now - cutAt - cfg.TakeoverDelay()
	byPair := map[[2]NodeID]int{}
	for _, p := range probes {
		require.Nil(t, p.Suspects, "a probe carries no view")
		byPair[[2]NodeID{p.From, p.To}]++
	}
	require.Len(t, byPair, 4, "each side probes only the other side: %v", byPair)
	want := int(suspectedFor / cfg.SuspectProbeInterval)
	for pair, n := range byPair {
		require.InDelta(t, want, n, float64(want)/5+2, "probes %v", pair)
	}
	healAt := now
	for ; ls[1].Alive(2) == false || ls[1].Alive(3) == false || !ls[2].Alive(1) || !ls[3].Alive(1); now += tick {
		require.Less(t, now-healAt, cfg.SuspectProbeInterval+2*tick, "suspicion outlived the heal")
		step(now, false)
	}
}

// TestLivenessNextDeadlineCoversVerdicts: a driver that ticks the view only
// at NextDeadline (and steps it on messages) misses no verdict change: a
// verdict on any node never differs from the one at the last tick before
// NextDeadline has come. Here node 2 declares node 1 failed on its own and
// node 3's suspicion, then node 3 falls silent as well: node 2's verdict
// on node 1 ends when node 3's view goes stale, with no message.
func TestLivenessNextDeadlineCoversVerdicts(t *testing.T) {
	cfg := FastConfig()
	ls := newLivenessTrio(t, cfg)
	type verdicts map[NodeID]bool
	verdictsAt := func(l *Liveness, now time.Duration) verdicts {
		v := verdicts{}
		for _, n := range l.Nodes() {
			v[n.ID], _, _ = l.Failed(n.ID, now)
		}
		return v
	}
	var lastTicked verdicts
	changes := 0
	cut := map[NodeID]bool{}
	const tick = 10 * time.Millisecond
	for now := time.Duration(0); now < 40*time.Second; now += tick {
		switch now {
		case 5 * time.Second:
			cut[1] = true
		case 15 * time.Second:
			cut[3] = true
		}
		for _, id := range []NodeID{1, 3} { // node 2 is ticked lazily below
			ls[id].Tick(now)
		}
		if v := verdictsAt(ls[2], now); lastTicked != nil && !assert.ObjectsAreEqual(v, lastTicked) {
			require.GreaterOrEqual(t, now, ls[2].NextDeadline(), "verdicts changed at %v (%v -> %v) before the deadline", now, lastTicked, v)
			changes++
		}
		if lastTicked == nil || now >= ls[2].NextDeadline() {
			ls[2].Tick(now)
			lastTicked = verdictsAt(ls[2], now)
		}
		for i := 0; i < 10; i++ {
			any := false
			for _, id := range []NodeID{1, 2, 3} {
				for _, m := range ls[id].Ready() {
					any = true
					if !cut[m.From] && !cut[m.To] {
						require.NoError(t, ls[m.To].Step(now, m))
						if m.To == 2 {
							lastTicked = verdictsAt(ls[2], now)
						}
					}
				}
			}
			if !any {
				break
			}
		}
	}
	f, _, _ := ls[2].Failed(1, 40*time.Second)
	require.False(t, f, "node 3's vote went stale")
	require.Positive(t, changes, "no verdict changed between messages: the test tests nothing")
}

// TestManagerReachabilityFollowsTheView: when a node's view suspects
// another node, its manager tells the driver, once per hosted partition,
// that the replica there is unreachable, and reachable again once the
// node is heard from; a node never reports its own replicas.
func TestManagerReachabilityFollowsTheView(t *testing.T) {
	const parts = 3
	h := newSteadyHarness(t, FastConfig(), parts)
	for _, n := range h.nodes {
		require.Empty(t, h.reach[n.ID], "node %d reported a change with everyone up", n.ID)
	}
	h.cut[3] = true // north
	for i := 0; i < 100 && h.mgrs[1].Liveness().Alive(3); i++ {
		h.step(100 * time.Millisecond)
	}
	require.False(t, h.mgrs[1].Liveness().Alive(3))
	h.cut[3] = false
	for i := 0; i < 100 && !h.mgrs[1].Liveness().Alive(3); i++ {
		h.step(100 * time.Millisecond)
	}
	require.True(t, h.mgrs[1].Liveness().Alive(3))
	got := map[bool]int{}
	for _, r := range h.reach[1] {
		require.Equal(t, Region("north"), r.Region)
		got[r.Reachable]++
	}
	assert.Equal(t, map[bool]int{false: parts, true: parts}, got, "east's changes: %v", h.reach[1])
	for _, r := range h.reach[3] {
		assert.NotEqual(t, Region("north"), r.Region, "north reported its own replica")
	}
}

// A restarted node's views count again at once: its new incarnation's
// view sequence starts above the old one's (SetBoot). Before, the
// observers that had kept the old incarnation's higher ViewSeq dropped
// every view of the new one, so its gray claims and votes never reached
// them (found by the cluster scenario, swarm seeds 6 and 10).
func TestLivenessViewsOfARestartedNodeCount(t *testing.T) {
	cfg := FastConfig()
	nodes := []Node{{ID: 1, Region: "east"}, {ID: 2, Region: "north"}, {ID: 3, Region: "west"}}
	boot := func(b uint64) *Liveness {
		l, err := NewLiveness(cfg, 2, nodes)
		require.NoError(t, err)
		l.SetBoot(b)
		return l
	}
	obs, err := NewLiveness(cfg, 1, nodes)
	require.NoError(t, err)
	deliver := func(l *Liveness, now time.Duration) {
		for _, m := range l.Ready() {
			if m.To == 1 {
				require.NoError(t, obs.Step(now, m))
			}
		}
	}
	now := time.Second
	old := boot(1)
	for k := range 6 { // the old incarnation's view changes six times
		old.SetGray(now, 3, k%2 == 0)
		deliver(old, now)
		now += 10 * time.Millisecond
	}
	require.False(t, obs.Withholding(3), "the old incarnation's last view claims nothing")
	restarted := boot(2)
	restarted.SetGray(now, 3, true)
	deliver(restarted, now)
	assert.True(t, obs.Withholding(3), "the restarted node's gray claim reached the observer")
}
