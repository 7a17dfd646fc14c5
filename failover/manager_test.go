package failover

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mgrHarness runs one Manager per node over an instant network with cuts,
// an in-memory register with compare-and-set, and toy replicas that apply
// the actions. CAS outcomes are delivered on the next step, so proposals
// are in flight for a while.
type mgrHarness struct {
	t        *testing.T
	now      time.Duration
	nodes    []Node
	mgrs     map[NodeID]*Manager
	cut      map[NodeID]bool
	reg      map[string]regEntry
	replicas map[NodeID]map[string]*ReplicaStatus
	pending  []pendingCAS
	proposed []Proposal
	// proposedBy is the node of each proposal in proposed.
	proposedBy []NodeID
	maxInFl    map[Region]int
	// refresh, if set, recomputes a replica's status (say from a data
	// plane model) before it is reported after actions.
	refresh func(n NodeID, part string, st *ReplicaStatus)
	// base is each register's version after the boot (the first lease
	// run's reasserts); validated records each node's ActValidateLease.
	base      map[string]uint64
	validated map[NodeID]map[string]Action
	// missLearn: the node never hears of other nodes' CAS results (their
	// learn messages are lost); it learns only from its own proposals.
	missLearn map[NodeID]bool
	// reach collects each node's Reachability in order.
	reach map[NodeID][]Reachability
}

type regEntry struct {
	version uint64
	state   State
}

type pendingCAS struct {
	node NodeID
	p    Proposal
}

func newMgrHarness(t *testing.T, cfg Config, parts int) *mgrHarness {
	return newMgrHarnessWith(t, cfg, parts, 0, func(int) Region { return "east" })
}

// newSteadyHarness is newMgrHarness run on for two seconds: leases held,
// views settled.
func newSteadyHarness(t *testing.T, cfg Config, parts int) *mgrHarness {
	h := newMgrHarness(t, cfg, parts)
	for i := 0; i < 20; i++ {
		h.step(100 * time.Millisecond)
	}
	return h
}

// newMgrHarnessWith is newMgrHarness with each manager's MaxInFlight
// (0: the default) and each partition's initial write region.
func newMgrHarnessWith(t *testing.T, cfg Config, parts, maxInFlight int, writeRegion func(i int) Region) *mgrHarness {
	h := &mgrHarness{t: t, nodes: []Node{{1, "east"}, {2, "west"}, {3, "north"}},
		mgrs: map[NodeID]*Manager{}, cut: map[NodeID]bool{}, reg: map[string]regEntry{},
		replicas: map[NodeID]map[string]*ReplicaStatus{}, maxInFl: map[Region]int{},
		base: map[string]uint64{}, validated: map[NodeID]map[string]Action{}, missLearn: map[NodeID]bool{}}
	for _, n := range h.nodes {
		h.validated[n.ID] = map[string]Action{}
		m, err := NewManager(ManagerConfig{Failover: cfg, Self: n.ID, Nodes: h.nodes, MaxInFlight: maxInFlight, VerifySkips: 1})
		require.NoError(t, err)
		h.mgrs[n.ID] = m
		h.replicas[n.ID] = map[string]*ReplicaStatus{}
	}
	for i := 0; i < parts; i++ {
		name := fmt.Sprintf("p-%03d", i)
		w := writeRegion(i)
		prio := []Region{w}
		for _, r := range []Region{"east", "west", "north"} {
			if r != w {
				prio = append(prio, r)
			}
		}
		s, err := NewState(name, w, prio, Strong, 1)
		require.NoError(t, err)
		h.reg[name] = regEntry{version: 1, state: s}
		for _, n := range h.nodes {
			require.NoError(t, h.mgrs[n.ID].AddPartition(Placement{Partition: name,
				Replicas: []RegionNode{{"east", 1}, {"west", 2}, {"north", 3}}}))
			st := &ReplicaStatus{Epoch: 1, LastLSN: 10, WriteRegion: n.Region == w, WriteQuorum: s.WriteQuorum.Members}
			h.replicas[n.ID][name] = st
			h.mgrs[n.ID].UpdateReplica(0, name, *st)
			h.mgrs[n.ID].ObserveState(0, name, 1, s)
		}
	}
	h.boot()
	return h
}

// boot runs until the first lease runs are validated: the write region
// reasserts each of its partitions once (a register write per partition
// per lease run, none in steady state). Tests count from there.
func (h *mgrHarness) boot() {
	for i := 0; i < 2000; i++ { // a small MaxInFlight takes many steps
		h.step(100 * time.Millisecond)
		done := len(h.pending) == 0
		for name, e := range h.reg {
			if _, ok := h.validated[h.nodeIn(e.state.WriteRegion)][name]; !ok || e.version != 2 {
				done = false
			}
		}
		if done {
			break
		}
	}
	for name, e := range h.reg {
		_, ok := h.validated[h.nodeIn(e.state.WriteRegion)][name]
		require.True(h.t, ok, "boot: %s validated", name)
		require.Equal(h.t, uint64(2), e.version, "boot: %s reasserted once", name)
		h.base[name] = e.version
	}
	for _, p := range h.proposed {
		require.Equal(h.t, DecideReassert, p.Kind, "boot: only reasserts")
	}
	h.proposed, h.proposedBy = nil, nil
}

func (h *mgrHarness) nodeIn(r Region) NodeID {
	for _, n := range h.nodes {
		if n.Region == r {
			return n.ID
		}
	}
	return 0
}

func (h *mgrHarness) step(d time.Duration) {
	h.now += d
	// CAS outcomes from the previous step.
	pend := h.pending
	h.pending = nil
	for _, pc := range pend {
		e := h.reg[pc.p.Partition]
		m := h.mgrs[pc.node]
		if h.cut[pc.node] {
			// A cut-off node cannot reach a quorum of acceptors either.
			m.CASDone(h.now, pc.p.Partition, false, fmt.Errorf("no quorum"))
			continue
		}
		if e.version == pc.p.Version {
			e = regEntry{version: e.version + 1, state: pc.p.Next}
			h.reg[pc.p.Partition] = e
			m.CASDone(h.now, pc.p.Partition, true, nil)
		} else {
			m.CASDone(h.now, pc.p.Partition, false, nil)
		}
		for _, n := range h.nodes {
			if !h.cut[n.ID] && (!h.missLearn[n.ID] || n.ID == pc.node) {
				h.mgrs[n.ID].ObserveState(h.now, pc.p.Partition, e.version, e.state)
			}
		}
	}
	for _, n := range h.nodes {
		h.mgrs[n.ID].Tick(h.now)
		require.NoError(h.t, h.mgrs[n.ID].Violation())
	}
	for round := 0; round < 5; round++ {
		for _, n := range h.nodes {
			r := h.mgrs[n.ID].Ready()
			if h.reach == nil {
				h.reach = map[NodeID][]Reachability{}
			}
			h.reach[n.ID] = append(h.reach[n.ID], r.Reachability...)
			for _, hb := range r.Heartbeats {
				if h.cut[hb.From] || h.cut[hb.To] {
					continue
				}
				require.NoError(h.t, h.mgrs[hb.To].StepHeartbeat(h.now, hb))
			}
			for _, p := range r.Proposals {
				h.proposed = append(h.proposed, p)
				h.proposedBy = append(h.proposedBy, n.ID)
				h.pending = append(h.pending, pendingCAS{node: n.ID, p: p})
			}
			for _, pa := range r.Actions {
				st := h.replicas[n.ID][pa.Partition]
				for _, a := range pa.Actions {
					switch a.Kind {
					case ActPromote:
						st.Epoch, st.WriteRegion, st.WriteQuorum, st.Fenced = a.Epoch, true, a.WriteQuorum.Members, false
					case ActFollow:
						st.Epoch, st.WriteRegion, st.Fenced = a.Epoch, false, false
					case ActFence:
						st.Fenced = true
					case ActSetWriteQuorum:
						st.WriteQuorum = a.WriteQuorum.Members
					case ActValidateLease:
						h.validated[n.ID][pa.Partition] = a
					}
				}
				if h.refresh != nil {
					h.refresh(n.ID, pa.Partition, st)
				}
				h.mgrs[n.ID].UpdateReplica(h.now, pa.Partition, *st)
			}
		}
	}
	inFl := map[Region]int{}
	for _, pc := range h.pending {
		if pc.p.Kind == DecideFailover {
			inFl[pc.p.Target]++
		}
	}
	for r, n := range inFl {
		h.maxInFl[r] = max(h.maxInFl[r], n)
	}
}

func TestManagerSteadyStateWritesNothing(t *testing.T) {
	h := newMgrHarness(t, FastConfig(), 20)
	for i := 0; i < 600; i++ { // one simulated minute
		h.step(100 * time.Millisecond)
	}
	assert.Empty(t, h.proposed, "no register writes in steady state")
	for _, n := range h.nodes {
		assert.True(t, h.mgrs[n.ID].Liveness().LeaseValid(h.now))
	}
}

func TestManagerFailsOverEveryPartitionOnce(t *testing.T) {
	cfg := FastConfig()
	h := newMgrHarness(t, cfg, 30)
	for i := 0; i < 50; i++ {
		h.step(100 * time.Millisecond)
	}
	h.cut[1] = true // east goes dark
	outage := h.now
	var done time.Duration
	for i := 0; i < 100 && done == 0; i++ {
		h.step(100 * time.Millisecond)
		all := true
		for _, e := range h.reg {
			if e.state.WriteRegion == "east" {
				all = false
			}
		}
		if all {
			done = h.now
		}
	}
	require.NotZero(t, done, "every partition failed over")
	assert.LessOrEqual(t, done-outage, cfg.LeaseDuration+time.Second, "fast profile: within lease + 1 s")
	for name, e := range h.reg {
		assert.Equal(t, Region("west"), e.state.WriteRegion, name)
		assert.Equal(t, Epoch(2), e.state.Epoch, name)
		assert.Equal(t, h.base[name]+1, e.version, "exactly one transition for %s", name)
		assert.Equal(t, "west", e.state.Table.Current().WriteRegion)
	}
	failovers, backups := 0, 0
	for _, p := range h.proposed {
		if p.Backup {
			backups++
		}
		if p.Kind == DecideFailover {
			failovers++
		}
	}
	assert.Equal(t, 30, failovers, "the top candidate proposes; no duplicate proposals")
	assert.Zero(t, backups)
	// The new write regions adopted the new epoch.
	for name, st := range h.replicas[2] {
		assert.True(t, st.WriteRegion, name)
		assert.Equal(t, Epoch(2), st.Epoch, name)
	}
	// Nothing more is written while the old region stays down (its own
	// futile attempts from behind the cut never reach a quorum).
	for i := 0; i < 100; i++ {
		h.step(100 * time.Millisecond)
	}
	for name, e := range h.reg {
		assert.Equal(t, h.base[name]+1, e.version, "no further writes for %s", name)
	}
}

func TestManagerBackupProposesWhenCandidateSilent(t *testing.T) {
	cfg := FastConfig()
	h := newMgrHarness(t, cfg, 5)
	for i := 0; i < 50; i++ {
		h.step(100 * time.Millisecond)
	}
	// west's manager never proposes (its replicas never report): north
	// must take over as backup after the stagger.
	for name := range h.reg {
		h.mgrs[2].parts[name].hasLocal = false
	}
	h.cut[1] = true
	for i := 0; i < 80; i++ {
		h.step(100 * time.Millisecond)
	}
	for name, e := range h.reg {
		assert.Equal(t, Region("north"), e.state.WriteRegion, name)
	}
	assert.Equal(t, uint64(5), h.mgrs[3].Stats().Backups)
}

func TestManagerBlastRadiusCap(t *testing.T) {
	cfg := FastConfig()
	cfg.MaxConcurrentPerTarget = 3
	h := newMgrHarness(t, cfg, 20)
	for i := 0; i < 50; i++ {
		h.step(100 * time.Millisecond)
	}
	h.cut[1] = true
	for i := 0; i < 200; i++ {
		h.step(100 * time.Millisecond)
	}
	for name, e := range h.reg {
		assert.Equal(t, Region("west"), e.state.WriteRegion, name)
	}
	assert.LessOrEqual(t, h.maxInFl["west"], 3)
	assert.Equal(t, 3, h.maxInFl["west"], "the cap is reached, not avoided")
	assert.Positive(t, h.mgrs[2].Stats().Throttled)
}

func TestManagerGlobalPauseRecordsSuppression(t *testing.T) {
	cfg := FastConfig()
	h := newMgrHarness(t, cfg, 3)
	for _, n := range h.nodes {
		h.mgrs[n.ID].SetGlobalPause(true, "maintenance")
	}
	for i := 0; i < 30; i++ {
		h.step(100 * time.Millisecond)
	}
	h.cut[1] = true
	for i := 0; i < 60; i++ {
		h.step(100 * time.Millisecond)
	}
	for _, p := range h.proposed {
		assert.NotEqual(t, DecideFailover, p.Kind, "no failover while paused")
	}
	found := false
	for _, e := range h.mgrs[2].Events() {
		if e.Text == "suppressed: global pause: maintenance" {
			found = true
		}
	}
	assert.True(t, found, "the suppressed failover is recorded with its reason")
	for _, n := range h.nodes {
		h.mgrs[n.ID].SetGlobalPause(false, "")
	}
	for i := 0; i < 10; i++ {
		h.step(100 * time.Millisecond)
	}
	for name, e := range h.reg {
		assert.Equal(t, Region("west"), e.state.WriteRegion, "%s fails over once resumed", name)
	}
}

func TestManagerDrain(t *testing.T) {
	cfg := FastConfig()
	h := newSteadyHarness(t, cfg, 10)
	h.mgrs[1].cfg.DrainConcurrency = 4
	h.mgrs[1].Drain(h.now, "east", "kernel upgrade")
	for i := 0; i < 100; i++ {
		h.step(100 * time.Millisecond)
		// The toy replicas are always caught up: LSN 10 everywhere.
	}
	remaining, active := h.mgrs[1].Draining("east")
	assert.True(t, active)
	assert.Zero(t, remaining)
	for name, e := range h.reg {
		assert.Equal(t, Region("west"), e.state.WriteRegion, name)
		assert.Contains(t, e.state.NeverPromote, Region("east"))
		assert.Equal(t, Epoch(2), e.state.Epoch)
	}
}

// A node's own health, which failback waits on, counts from when it
// regained its lease, not from its boot: a region cut off from the others
// is not "healthy for FailbackAfter" by its own clock alone.
func TestManagerOwnHealthCountsFromLease(t *testing.T) {
	tests := []struct {
		name string
		cut  bool
	}{
		{"never cut: healthy since its first lease", false},
		{"cut and healed: healthy since the heal", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newMgrHarness(t, FastConfig(), 1)
			for i := 0; i < 30; i++ {
				h.step(100 * time.Millisecond)
			}
			from := time.Duration(0)
			if tt.cut {
				h.cut[1] = true
				for i := 0; i < 50; i++ { // 5 s: well past the 2 s lease
					h.step(100 * time.Millisecond)
				}
				require.False(t, h.mgrs[1].Liveness().LeaseValid(h.now))
				h.cut[1] = false
				from = h.now
			}
			for i := 0; i < 20; i++ {
				h.step(100 * time.Millisecond)
			}
			require.True(t, h.mgrs[1].Liveness().LeaseValid(h.now))
			ev, ok := h.mgrs[1].Evidence(h.now, "p-000")
			require.True(t, ok)
			x, ok := ev.Replica("east")
			require.True(t, ok)
			require.True(t, x.Live)
			assert.Greater(t, x.HealthySince, from, "own health starts with a lease acquired after %v", from)
			assert.Less(t, x.HealthySince, h.now)
		})
	}
}

// A drain starts nothing while a hosted partition's register value is
// unknown (a restarted node reading them back): the concurrency cap counts
// running switchovers from those values.
func TestManagerDrainWaitsForEveryState(t *testing.T) {
	h := newSteadyHarness(t, FastConfig(), 4)
	m := h.mgrs[1]
	m.parts["p-002"].have = false
	m.Drain(h.now, "east", "test")
	h.step(100 * time.Millisecond)
	for _, p := range h.proposed {
		assert.NotEqual(t, DecideStartSwitchover, p.Kind, "no switchover before every state is known")
	}
	e := h.reg["p-002"]
	m.ObserveState(h.now, "p-002", e.version, e.state)
	for i := 0; i < 30; i++ {
		h.step(100 * time.Millisecond)
	}
	remaining, _ := m.Draining("east")
	assert.Zero(t, remaining)
}

// Gray failure: the write region keeps heartbeating, but an observer's
// replica sees the commit LSN stand still while clients report errors
// against it: after GrayStall with GrayMinErrors errors that is failure
// evidence, and the partition fails over. Errors that stop, a commit LSN
// that moves, or errors naming another region are not.
func TestManagerGrayFailureFromClientErrors(t *testing.T) {
	tests := []struct {
		name     string
		region   Region
		every    time.Duration // between two reports
		advance  bool          // the observer's commit LSN moves meanwhile
		failover bool
	}{
		{"errors and a stalled commit: fail over", "east", 500 * time.Millisecond, false, true},
		{"commit LSN advancing: no failover", "east", 500 * time.Millisecond, true, false},
		{"errors against a follower region: ignored", "north", 500 * time.Millisecond, false, false},
		{"a single error, then silence: no failover", "east", time.Hour, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := FastConfig()
			h := newMgrHarness(t, cfg, 1)
			for i := 0; i < 30; i++ {
				h.step(100 * time.Millisecond)
			}
			west := h.mgrs[2]
			start, last := h.now, time.Duration(-1)
			var leases [][2]time.Duration // east's lease end after each step
			for h.now < start+3*cfg.GrayStall {
				if last < 0 || h.now-last >= tt.every {
					last = h.now
					west.ReportClientError(h.now, "p-000", tt.region, 1)
					if tt.advance {
						st := h.replicas[2]["p-000"]
						st.CommitLSN++
						west.UpdateReplica(h.now, "p-000", *st)
					}
				}
				h.step(100 * time.Millisecond)
				leases = append(leases, [2]time.Duration{h.now, h.mgrs[1].Liveness().LeaseUntil()})
			}
			e := h.reg["p-000"]
			if !tt.failover {
				assert.Equal(t, Region("east"), e.state.WriteRegion)
				assert.Equal(t, h.base["p-000"], e.version, "no register write")
				return
			}
			require.Equal(t, Region("west"), e.state.WriteRegion)
			tr := e.state.History[len(e.state.History)-1]
			assert.Contains(t, tr.Reason, "gray failure")
			assert.GreaterOrEqual(t, tr.At-start, cfg.GrayStall+cfg.TakeoverDelay(),
				"not before GrayStall and then lease + drift of withheld acks")
			// East kept heartbeating, but its lease had lapsed when the
			// takeover was decided: with reads still working it could
			// otherwise serve stale strong reads after the new epoch's
			// first write. (Before the fix it held a lease past the
			// takeover: one observer's ack out of two renewed it.)
			var leaseAtTakeover time.Duration
			for _, l := range leases {
				if l[0] <= tr.At {
					leaseAtTakeover = l[1]
				}
			}
			assert.LessOrEqual(t, leaseAtTakeover, tr.At, "gray write region's lease lapsed before the takeover")
			assert.False(t, h.mgrs[1].Liveness().Suspects(2), "east was never silent")
		})
	}
}

// The write region calls a follower stalled only when another follower
// keeps up: if every follower stands still, its own data path is the
// likelier culprit, and shrinking them would leave it alone in the write
// quorum where no other region could take over.
func TestManagerStalledFollowerNeedsAnotherKeepingUp(t *testing.T) {
	tests := []struct {
		name        string
		northMoves  bool
		westStalled bool
	}{
		{"another follower keeps up: stalled", true, true},
		{"every follower still: the write region's fault, nobody stalled", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := FastConfig()
			h := newSteadyHarness(t, cfg, 1)
			east := h.mgrs[1]
			st := *h.replicas[1]["p-000"]
			for i := 0; i < 50; i++ { // 5 s > GrayStall
				h.now += 100 * time.Millisecond
				st.LastLSN++
				north := LSN(10)
				if tt.northMoves {
					north = st.LastLSN
				}
				st.Followers = []FollowerStatus{{Region: "west", MatchLSN: 10}, {Region: "north", MatchLSN: north, InSync: tt.northMoves}}
				east.UpdateReplica(h.now, "p-000", st)
			}
			ev, ok := east.Evidence(h.now, "p-000")
			require.True(t, ok)
			west, _ := ev.Replica("west")
			north, _ := ev.Replica("north")
			assert.Equal(t, tt.westStalled, west.Stalled != "", "west: %q", west.Stalled)
			assert.Empty(t, north.Stalled)
		})
	}
}

// TestManagerConflictAfterNewerValueObserved: a node's proposal loses its
// CAS to a value the node had already observed (another node's commit
// reached it before its own outcome). The conflict's value is then no
// newer than what it holds; it must decide again from it rather than wait
// for a newer value that may never come.
func TestManagerConflictAfterNewerValueObserved(t *testing.T) {
	cfg := FastConfig()
	h := newMgrHarness(t, cfg, 1)
	for i := 0; i < 50; i++ {
		h.step(100 * time.Millisecond)
	}
	h.cut[1] = true
	var pc pendingCAS
	for i := 0; i < 100 && pc.node == 0; i++ {
		h.step(100 * time.Millisecond)
		for _, x := range h.pending {
			if x.node == 2 && x.p.Kind == DecideFailover {
				pc = x
			}
		}
	}
	require.Equal(t, NodeID(2), pc.node, "west proposes the failover")
	// Another node rewrites the register (unchanged, at a new version)
	// and west hears of it before its own CAS outcome.
	e := h.reg[pc.p.Partition]
	e.version++
	h.reg[pc.p.Partition] = e
	for _, n := range h.nodes {
		h.mgrs[n.ID].ObserveState(h.now, pc.p.Partition, e.version, e.state)
	}
	for i := 0; i < 100 && h.reg[pc.p.Partition].state.WriteRegion == "east"; i++ {
		h.step(100 * time.Millisecond)
	}
	pr, ok := h.mgrs[2].Proposing(pc.p.Partition)
	require.True(t, ok)
	assert.False(t, pr.Stale)
	assert.Equal(t, Region("west"), h.reg[pc.p.Partition].state.WriteRegion, "failed over after the lost CAS")
}

// A gray verdict against a write region no other region may take over
// (here the write quorum is the write region alone, minimum durability 1)
// must not withhold its lease: the claim is the prelude to a takeover, and
// without one it left the write region unable to acknowledge anything, its
// commit LSN still, and the verdict standing for good (every write of its
// partitions stalled after a partition healed; the background-fault sweep
// of node-failure found it).
func TestManagerGrayWithoutCandidateWithholdsNoLease(t *testing.T) {
	for _, alone := range []bool{true, false} {
		t.Run(fmt.Sprintf("write quorum alone %v", alone), func(t *testing.T) {
			cfg := FastConfig()
			h := newMgrHarness(t, cfg, 1)
			for i := 0; i < 30; i++ {
				h.step(100 * time.Millisecond)
			}
			if alone {
				e := h.reg["p-000"]
				s := e.state.Clone()
				s.WriteQuorum.Members = []Region{"east"}
				h.reg["p-000"] = regEntry{version: e.version + 1, state: s}
				for _, m := range h.mgrs {
					m.ObserveState(h.now, "p-000", e.version+1, s)
				}
			}
			west := h.mgrs[2]
			start, withheld := h.now, false
			for h.now < start+3*cfg.GrayStall {
				west.ReportClientError(h.now, "p-000", "east", 1)
				h.step(500 * time.Millisecond)
				withheld = withheld || west.Liveness().Withholding(1)
			}
			e := h.reg["p-000"]
			if alone {
				assert.False(t, withheld, "a gray claim with no candidate withheld east's lease")
				assert.True(t, h.mgrs[1].Liveness().LeaseValid(h.now), "east lost its lease")
				assert.Equal(t, Region("east"), e.state.WriteRegion)
				return
			}
			assert.True(t, withheld, "with a candidate the claim withholds east's lease")
			assert.Equal(t, Region("west"), e.state.WriteRegion, "and the partition fails over")
		})
	}
}

// A gray verdict withholds the write region's lease only while a takeover
// could follow. When the one candidate left would promote below the
// minimum durability, the takeover is refused, so withholding the lease
// only stopped the write region from committing: its commit LSN stood
// still, the verdict never cleared and every partition with a replica on
// that node stayed short of its write quorum (found by the cluster
// scenario, swarm seeds 1 and 4, at minimum durability 2).
func TestManagerGrayBelowMinimumDurabilityWithholdsNoLease(t *testing.T) {
	cfg := FastConfig()
	h := newMgrHarness(t, cfg, 1)
	for i := 0; i < 30; i++ {
		h.step(100 * time.Millisecond)
	}
	e := h.reg["p-000"]
	s := e.state.Clone()
	s.WriteQuorum.Members = []Region{"east", "west"}
	s.WriteQuorum.MinDurability = 2
	h.reg["p-000"] = regEntry{version: e.version + 1, state: s}
	for _, m := range h.mgrs {
		m.ObserveState(h.now, "p-000", e.version+1, s)
	}
	west := h.mgrs[2]
	start, withheld := h.now, false
	for h.now < start+3*cfg.GrayStall {
		west.ReportClientError(h.now, "p-000", "east", 1)
		h.step(500 * time.Millisecond)
		withheld = withheld || west.Liveness().Withholding(1)
	}
	assert.False(t, withheld, "a gray claim whose takeover the floor refuses withheld east's lease")
	assert.True(t, h.mgrs[1].Liveness().LeaseValid(h.now), "east lost its lease")
	assert.Equal(t, Region("east"), h.reg["p-000"].state.WriteRegion)
}

// A switchover target counts as holding the fenced LSN only once its copy
// is durable. A target that reported ops still in its store's queue
// became write region of an epoch starting above what it kept after a
// crash, and could then never promote (ErrBehind at every evaluation; the
// simulator's cluster-edge-min-durability seed 2 before ba75daf).
func TestManagerSwitchoverWaitsForTheTargetsDurableCopy(t *testing.T) {
	h := newSteadyHarness(t, FastConfig(), 1)
	const name = "p-000"
	target := h.replicas[2][name] // west, first in priority after east
	target.Unsynced = 3
	h.mgrs[2].UpdateReplica(h.now, name, *target)
	h.mgrs[1].Drain(h.now, "east", "kernel upgrade")
	for i := 0; i < 50; i++ {
		h.step(100 * time.Millisecond)
	}
	e := h.reg[name]
	require.Equal(t, PhaseSwitchover, e.state.Phase, "the switchover started")
	require.True(t, e.state.FenceRecorded)
	assert.Equal(t, Epoch(1), e.state.Epoch, "not completed while the target's copy of LSN 8..10 is not durable")

	target.Unsynced = 0
	h.mgrs[2].UpdateReplica(h.now, name, *target)
	for i := 0; i < 30; i++ {
		h.step(100 * time.Millisecond)
	}
	e = h.reg[name]
	assert.Equal(t, Epoch(2), e.state.Epoch, "completed once durable")
	assert.Equal(t, Region("west"), e.state.WriteRegion)
	assert.Equal(t, LSN(10), e.state.Table.Current().StartLSN)
}
