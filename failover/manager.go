package failover

import (
	"container/heap"
	"fmt"
	"slices"
	"sort"
	"time"
)

// RegionNode places one replica of a partition.
type RegionNode struct {
	Region Region
	Node   NodeID
}

// Placement says which node hosts each region's replica of a partition.
type Placement struct {
	Partition string
	Replicas  []RegionNode
}

// FollowerStatus is the write region's view of one follower.
type FollowerStatus struct {
	Region   Region
	MatchLSN LSN
	// InSync: the follower counts in the write region's commit rule and
	// holds every committed LSN.
	InSync bool
}

// ReplicaStatus is what the local replica of a partition reports.
type ReplicaStatus struct {
	Epoch       Epoch
	LastLSN     LSN
	CommitLSN   LSN
	WriteRegion bool
	Fenced      bool
	WriteQuorum []Region
	Followers   []FollowerStatus
}

// Proposal asks the driver to compare-and-set a partition's register from
// Version to Next. The driver reports the outcome with CASDone and feeds
// the register's current value back with ObserveState.
type Proposal struct {
	Partition string
	Version   uint64
	Next      State
	Kind      DecisionKind
	Target    Region
	Backup    bool // proposed by a backup after the preferred proposer was silent
}

// PartitionActions are the local actions for one partition's replica.
type PartitionActions struct {
	Partition string
	Version   uint64
	Actions   []Action
}

// Event is an entry of the manager's bounded log of what it did or
// refused, for operators (every suppressed action is recorded here).
type Event struct {
	At        time.Duration
	Partition string
	Kind      DecisionKind
	Text      string
}

// ManagerStats counts the manager's work.
type ManagerStats struct {
	Evaluations uint64
	Proposals   uint64
	Backups     uint64
	Suppressed  uint64
	CASConflict uint64
	CASFailed   uint64
	Throttled   uint64 // failovers held back by the blast-radius cap
}

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	Failover Config
	Self     NodeID
	Nodes    []Node
	// MaxEvents bounds the event log.
	MaxEvents int
	// DrainConcurrency bounds switchovers a drain runs at once.
	DrainConcurrency int
}

// Manager runs failover for every partition replica on one node. It is a
// pure state machine like the protocol cores: drivers feed it heartbeats,
// register values, CAS outcomes, replica status and time, and carry out the
// heartbeats, proposals and local actions it returns. Nothing happens per
// partition in steady state: a partition is evaluated only when something
// it depends on changed or a timer it set fires.
type Manager struct {
	cfg   ManagerConfig
	live  *Liveness
	self  Node
	parts map[string]*partition
	names []string // sorted

	failedNodes  map[NodeID]bool
	healthySince map[NodeID]time.Duration
	now          time.Duration

	timers  partTimers
	dirty   []string
	isDirty map[string]bool

	inflightTo map[Region]int // failover proposals in flight by target region
	draining   map[Region]string
	paused     bool
	pauseWhy   string

	proposals []Proposal
	actions   []PartitionActions
	events    []Event
	stats     ManagerStats
}

type partition struct {
	name      string
	placement []RegionNode
	myRegion  Region
	hasMine   bool

	have    bool
	version uint64
	state   State

	local    ReplicaStatus
	hasLocal bool
	gray     string
	inflight bool
	// stale: a proposal lost a CAS; nothing is proposed until a newer
	// register value is observed (the driver reads it back).
	stale     bool
	inflightK DecisionKind
	inflightT Region

	// pending is the decision awaiting its preferred proposer, and since
	// when; backups act after a stagger.
	pendingKey   string
	pendingSince time.Duration
	last         Decision
	timerAt      time.Duration
}

// NewManager builds a manager for node cfg.Self.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.MaxEvents == 0 {
		cfg.MaxEvents = 1024
	}
	if cfg.DrainConcurrency == 0 {
		cfg.DrainConcurrency = 16
	}
	if cfg.MaxEvents < 1 {
		return nil, configErr("MaxEvents", "must be positive, got %d", cfg.MaxEvents)
	}
	if cfg.DrainConcurrency < 1 {
		return nil, configErr("DrainConcurrency", "must be positive, got %d", cfg.DrainConcurrency)
	}
	live, err := NewLiveness(cfg.Failover, cfg.Self, cfg.Nodes)
	if err != nil {
		return nil, err
	}
	return &Manager{
		cfg:          cfg,
		live:         live,
		self:         live.Self(),
		parts:        make(map[string]*partition),
		failedNodes:  make(map[NodeID]bool),
		healthySince: make(map[NodeID]time.Duration),
		isDirty:      make(map[string]bool),
		inflightTo:   make(map[Region]int),
		draining:     make(map[Region]string),
	}, nil
}

// Liveness exposes the node's liveness view.
func (m *Manager) Liveness() *Liveness { return m.live }

// Stats returns the counters.
func (m *Manager) Stats() ManagerStats { return m.stats }

// Events returns the bounded event log, oldest first.
func (m *Manager) Events() []Event { return slices.Clone(m.events) }

// Partitions returns the hosted partitions, sorted.
func (m *Manager) Partitions() []string { return m.names }

// State returns the cached register value of a partition.
func (m *Manager) State(name string) (State, uint64, bool) {
	p := m.parts[name]
	if p == nil || !p.have {
		return State{}, 0, false
	}
	return p.state, p.version, true
}

// AddPartition registers a partition hosted (or watched) by this node.
func (m *Manager) AddPartition(pl Placement) error {
	if _, dup := m.parts[pl.Partition]; dup {
		return fmt.Errorf("failover: partition %q added twice", pl.Partition)
	}
	p := &partition{name: pl.Partition, placement: slices.Clone(pl.Replicas)}
	for _, rn := range pl.Replicas {
		if rn.Node == m.self.ID {
			p.myRegion, p.hasMine = rn.Region, true
		}
	}
	m.parts[pl.Partition] = p
	i := sort.SearchStrings(m.names, pl.Partition)
	m.names = slices.Insert(m.names, i, pl.Partition)
	return nil
}

func (m *Manager) nodeOf(p *partition, r Region) (NodeID, bool) {
	for _, rn := range p.placement {
		if rn.Region == r {
			return rn.Node, true
		}
	}
	return 0, false
}

// StepHeartbeat handles a liveness message.
func (m *Manager) StepHeartbeat(now time.Duration, hb Heartbeat) error {
	m.now = now
	if err := m.live.Step(now, hb); err != nil {
		return err
	}
	m.refreshLiveness(now)
	return nil
}

// Tick advances time: heartbeats, liveness changes and due re-evaluations.
func (m *Manager) Tick(now time.Duration) {
	m.now = now
	m.live.Tick(now)
	m.refreshLiveness(now)
	for len(m.timers) > 0 && m.timers[0].at <= now {
		t := heap.Pop(&m.timers).(partTimer)
		if p := m.parts[t.name]; p != nil && p.timerAt == t.at {
			p.timerAt = 0
			m.markDirty(t.name)
		}
	}
	m.tickDrains(now)
	m.evaluateDirty(now)
}

// NextDeadline returns when Tick next has work.
func (m *Manager) NextDeadline() time.Duration {
	next := m.live.NextDeadline()
	for len(m.timers) > 0 {
		t := m.timers[0]
		if p := m.parts[t.name]; p != nil && p.timerAt == t.at {
			return min(next, t.at)
		}
		heap.Pop(&m.timers)
	}
	return next
}

// refreshLiveness marks partitions dirty when a node's failure verdict or
// reachability changed.
func (m *Manager) refreshLiveness(now time.Duration) {
	changed := false
	for _, n := range m.live.Nodes() {
		failed, _, _ := m.live.Failed(n.ID, now)
		up := n.ID == m.self.ID || (!failed && m.live.Alive(n.ID))
		_, wasUp := m.healthySince[n.ID]
		if up && !wasUp {
			m.healthySince[n.ID] = now
			changed = true
		} else if !up && wasUp {
			delete(m.healthySince, n.ID)
			changed = true
		}
		if failed != m.failedNodes[n.ID] {
			m.failedNodes[n.ID] = failed
			changed = true
		}
	}
	if changed {
		for _, name := range m.names {
			m.markDirty(name)
		}
	}
}

func (m *Manager) markDirty(name string) {
	if !m.isDirty[name] {
		m.isDirty[name] = true
		m.dirty = append(m.dirty, name)
	}
}

func (m *Manager) setTimer(p *partition, at time.Duration) {
	if at <= 0 || (p.timerAt != 0 && p.timerAt <= at) {
		return
	}
	p.timerAt = at
	heap.Push(&m.timers, partTimer{at: at, name: p.name})
}

// ObserveState feeds a committed register value (from a watch, a read or a
// CAS). Older versions are ignored.
func (m *Manager) ObserveState(now time.Duration, name string, version uint64, s State) {
	m.now = now
	p := m.parts[name]
	if p == nil || (p.have && version <= p.version) {
		return
	}
	p.have, p.version, p.state = true, version, s
	p.pendingKey = ""
	p.stale = false
	m.markDirty(name)
	m.reconcile(p)
}

// CASDone reports a proposal's outcome. On a conflict the driver also
// feeds the fresh value through ObserveState; the partition is decided
// again from it.
func (m *Manager) CASDone(now time.Duration, name string, ok bool, err error) {
	m.now = now
	p := m.parts[name]
	if p == nil || !p.inflight {
		return
	}
	p.inflight = false
	if p.inflightK == DecideFailover {
		m.inflightTo[p.inflightT]--
	}
	switch {
	case ok:
	case err != nil:
		m.stats.CASFailed++
		m.event(p.name, p.inflightK, fmt.Sprintf("proposal failed: %v", err))
		// Try again after a stagger: the register may be unreachable.
		m.setTimer(p, now+m.cfg.Failover.ProposeStagger)
	default:
		m.stats.CASConflict++
		p.stale = true
	}
	m.markDirty(name)
}

// UpdateReplica feeds the local replica's status.
func (m *Manager) UpdateReplica(now time.Duration, name string, st ReplicaStatus) {
	m.now = now
	p := m.parts[name]
	if p == nil {
		return
	}
	changed := !p.hasLocal || p.local.Epoch != st.Epoch || p.local.Fenced != st.Fenced ||
		p.local.WriteRegion != st.WriteRegion || !equalRegions(p.local.WriteQuorum, st.WriteQuorum) ||
		!sameInSync(p.local, st)
	p.local, p.hasLocal = st, true
	if changed {
		m.markDirty(name)
		m.reconcile(p)
	}
}

// sameInSync reports whether a and b list the same in-sync followers in
// the same order. It runs on every replica status update, so it compares
// in place rather than building a string per side.
func sameInSync(a, b ReplicaStatus) bool {
	i, j := 0, 0
	for {
		for i < len(a.Followers) && !a.Followers[i].InSync {
			i++
		}
		for j < len(b.Followers) && !b.Followers[j].InSync {
			j++
		}
		if i == len(a.Followers) || j == len(b.Followers) {
			return i == len(a.Followers) && j == len(b.Followers)
		}
		if a.Followers[i].Region != b.Followers[j].Region {
			return false
		}
		i, j = i+1, j+1
	}
}

// SetGray marks (why != "") or clears a gray failure of a partition's
// write region: alive, but its commit LSN stalled while clients see errors.
func (m *Manager) SetGray(now time.Duration, name, why string) {
	if p := m.parts[name]; p != nil && p.gray != why {
		p.gray = why
		m.markDirty(name)
	}
}

// SetGlobalPause suppresses (or resumes) automatic failover everywhere.
func (m *Manager) SetGlobalPause(paused bool, reason string) {
	m.paused, m.pauseWhy = paused, reason
	for _, name := range m.names {
		m.markDirty(name)
	}
}

// reconcile emits the local actions that align the local replica with the state.
func (m *Manager) reconcile(p *partition) {
	if !p.have || !p.hasMine || !p.hasLocal {
		return
	}
	acts, err := Reconcile(p.state, LocalReplica{
		Region: p.myRegion, Epoch: p.local.Epoch, LastLSN: p.local.LastLSN,
		WriteRegion: p.local.WriteRegion, Fenced: p.local.Fenced, WriteQuorum: p.local.WriteQuorum,
	})
	if err != nil {
		m.event(p.name, DecideNone, "reconcile: "+err.Error())
		return
	}
	if len(acts) > 0 {
		m.actions = append(m.actions, PartitionActions{Partition: p.name, Version: p.version, Actions: acts})
	}
}

// Evidence assembles what this node knows about a partition.
func (m *Manager) Evidence(now time.Duration, name string) (Evidence, bool) {
	p := m.parts[name]
	if p == nil || !p.have {
		return Evidence{}, false
	}
	return m.evidence(now, p), true
}

func (m *Manager) evidence(now time.Duration, p *partition) Evidence {
	s := p.state
	ev := Evidence{Now: now, Proposer: p.myRegion, GlobalPause: m.paused, GlobalPauseReason: m.pauseWhy}
	if !p.hasMine {
		ev.Proposer = m.self.Region
	}
	ev.Replicas = make([]ReplicaEvidence, 0, len(p.placement)) // one allocation per evaluation, not one per growth
	for _, rn := range p.placement {
		x := ReplicaEvidence{Region: rn.Region}
		if since, up := m.healthySince[rn.Node]; up {
			x.Live, x.HealthySince = true, since
		}
		if rn.Node == m.self.ID && p.hasLocal {
			x.Reported, x.Epoch, x.LastLSN, x.Fenced = true, p.local.Epoch, p.local.LastLSN, p.local.Fenced
		}
		if p.hasLocal && p.local.WriteRegion && p.myRegion == s.WriteRegion {
			for _, f := range p.local.Followers {
				if f.Region == rn.Region {
					x.InSync = f.InSync
					if !x.Reported {
						x.Reported, x.Epoch, x.LastLSN = true, p.local.Epoch, f.MatchLSN
					}
				}
			}
		}
		ev.Replicas = append(ev.Replicas, x)
	}
	if n, ok := m.nodeOf(p, s.WriteRegion); ok {
		if failed, votes, needed := m.live.Failed(n, now); failed {
			ev.WriteRegionFailed = true
			ev.FailureWhy = fmt.Sprintf("node %d silent for over %v: a majority of observer nodes in %d of %d other regions agree (need %d)",
				n, m.cfg.Failover.TakeoverDelay(), votes, len(m.live.Regions())-1, needed)
		} else if p.gray != "" {
			ev.WriteRegionFailed = true
			ev.FailureWhy = "gray failure: " + p.gray
		}
	}
	return ev
}

func (m *Manager) evaluateDirty(now time.Duration) {
	if len(m.dirty) == 0 {
		return
	}
	names := m.dirty
	m.dirty = nil
	slices.Sort(names)
	for _, name := range names {
		delete(m.isDirty, name)
		if p := m.parts[name]; p != nil {
			m.evaluate(now, p)
		}
	}
}

func (m *Manager) evaluate(now time.Duration, p *partition) {
	if !p.have || p.inflight || p.stale {
		return
	}
	m.stats.Evaluations++
	ev := m.evidence(now, p)
	d := Decide(m.cfg.Failover, p.state, ev)
	p.last = d
	if d.Suppressed != "" {
		m.stats.Suppressed++
		key := "suppressed:" + d.Suppressed
		if p.pendingKey != key {
			p.pendingKey = key
			m.event(p.name, d.Kind, "suppressed: "+d.Suppressed)
		}
	}
	if d.RetryAt > now {
		m.setTimer(p, d.RetryAt)
	}
	if d.Kind == DecideNone {
		return
	}
	key := fmt.Sprintf("%v>%s@%d", d.Kind, d.Target, p.version)
	if p.pendingKey != key {
		p.pendingKey, p.pendingSince = key, now
	}
	preferred := m.preferredProposer(p, d)
	if preferred != p.myRegion || !p.hasMine {
		// Back up the preferred proposer after a stagger that grows with
		// this region's rank, so that normally exactly one node proposes.
		rank := m.backupRank(p, d)
		if rank < 0 {
			return
		}
		at := p.pendingSince + time.Duration(rank)*m.cfg.Failover.BackupAfter
		if now < at {
			m.setTimer(p, at)
			return
		}
		if d.Kind == DecideFailover && d.Next == nil {
			// Take over the promotion from the silent candidates ranked above.
			d = m.decidePassingOver(now, p, ev)
			if d.Next == nil || d.Target != p.myRegion {
				return
			}
		}
		if d.Next == nil {
			return
		}
		m.stats.Backups++
		m.propose(p, d, true)
		return
	}
	if d.Next == nil {
		return
	}
	if d.Kind == DecideFailover && m.inflightTo[d.Target] >= m.cfg.Failover.MaxConcurrentPerTarget {
		m.stats.Throttled++
		m.setTimer(p, now+m.cfg.Failover.ProposeStagger/4+1)
		return
	}
	m.propose(p, d, false)
}

// decidePassingOver decides again as if the candidates ranked above this
// region were down: they had their stagger and did not promote themselves.
func (m *Manager) decidePassingOver(now time.Duration, p *partition, ev Evidence) Decision {
	for _, c := range Rank(p.state, ev, p.state.WriteRegion) {
		if c.Region == p.myRegion {
			break
		}
		for i := range ev.Replicas {
			if ev.Replicas[i].Region == c.Region {
				ev.Replicas[i].Live = false
			}
		}
	}
	return Decide(m.cfg.Failover, p.state, ev)
}

func (m *Manager) preferredProposer(p *partition, d Decision) Region {
	switch d.Kind {
	case DecideFailover, DecideCompleteSwitchover:
		return d.Target
	case DecideStartSwitchover:
		return p.state.WriteRegion
	}
	return p.state.WriteRegion
}

// backupRank is this region's turn as a backup proposer (1 = first), or -1.
func (m *Manager) backupRank(p *partition, d Decision) int {
	if !p.hasMine {
		return -1
	}
	if d.Kind == DecideFailover {
		rank := 0
		for _, c := range d.Candidates {
			if !c.Eligible {
				continue
			}
			if c.Region == p.myRegion {
				return rank
			}
			rank++
		}
		return -1
	}
	if d.Kind == DecideGrowQuorum || d.Kind == DecideSwitchoverFenced {
		return -1 // only the write region knows enough
	}
	return 1 + p.state.PriorityOf(p.myRegion)
}

func (m *Manager) propose(p *partition, d Decision, backup bool) {
	p.inflight, p.inflightK, p.inflightT = true, d.Kind, d.Target
	if d.Kind == DecideFailover {
		m.inflightTo[d.Target]++
	}
	m.stats.Proposals++
	m.proposals = append(m.proposals, Proposal{Partition: p.name, Version: p.version, Next: *d.Next, Kind: d.Kind, Target: d.Target, Backup: backup})
	m.event(p.name, d.Kind, fmt.Sprintf("propose %v to %s: %s", d.Kind, d.Target, joinReasons(d.Reasons)))
}

func joinReasons(rs []string) string {
	out := ""
	for i, r := range rs {
		if i > 0 {
			out += "; "
		}
		out += r
	}
	return out
}

func (m *Manager) event(name string, k DecisionKind, text string) {
	m.events = append(m.events, Event{At: m.now, Partition: name, Kind: k, Text: text})
	if over := len(m.events) - m.cfg.MaxEvents; over > 0 {
		m.events = slices.Delete(m.events, 0, over)
	}
}

// Switchover asks for a graceful move of a partition's write region.
func (m *Manager) Switchover(now time.Duration, name string, target Region, reason string) error {
	p := m.parts[name]
	if p == nil || !p.have {
		return fmt.Errorf("%w: unknown partition %q", ErrRefused, name)
	}
	if p.inflight {
		return fmt.Errorf("%w: partition %q has a proposal in flight", ErrRefused, name)
	}
	d, err := RequestSwitchover(m.cfg.Failover, p.state, m.evidence(now, p), target, reason)
	if err != nil {
		return err
	}
	m.propose(p, d, false)
	return nil
}

// SetPaused pauses or resumes automatic failover of one partition.
func (m *Manager) SetPaused(now time.Duration, name string, paused bool, reason string) error {
	p := m.parts[name]
	if p == nil || !p.have {
		return fmt.Errorf("%w: unknown partition %q", ErrRefused, name)
	}
	if p.inflight {
		return fmt.Errorf("%w: partition %q has a proposal in flight", ErrRefused, name)
	}
	d, err := RequestPause(m.cfg.Failover, p.state, m.evidence(now, p), paused, reason)
	if err != nil || d.Next == nil {
		return err
	}
	m.propose(p, d, false)
	return nil
}

// Drain moves every partition whose write region is r elsewhere by
// graceful switchovers, DrainConcurrency at a time. It is resumable:
// calling it again continues with whatever is still in r.
func (m *Manager) Drain(now time.Duration, r Region, reason string) {
	m.draining[r] = reason
	m.tickDrains(now)
}

// StopDrain ends a drain.
func (m *Manager) StopDrain(r Region) { delete(m.draining, r) }

// Draining reports the partitions still to move out of r.
func (m *Manager) Draining(r Region) (remaining int, active bool) {
	_, active = m.draining[r]
	for _, name := range m.names {
		if p := m.parts[name]; p.have && p.state.WriteRegion == r {
			remaining++
		}
	}
	return remaining, active
}

func (m *Manager) tickDrains(now time.Duration) {
	if len(m.draining) == 0 {
		return
	}
	regions := make([]Region, 0, len(m.draining))
	for r := range m.draining {
		regions = append(regions, r)
	}
	slices.Sort(regions)
	for _, r := range regions {
		running := 0
		for _, name := range m.names {
			p := m.parts[name]
			if p.have && (p.state.Phase == PhaseSwitchover && p.state.WriteRegion == r || p.inflight && p.inflightK == DecideStartSwitchover) {
				running++
			}
		}
		for _, name := range m.names {
			if running >= m.cfg.DrainConcurrency {
				break
			}
			p := m.parts[name]
			if !p.have || p.inflight || p.state.WriteRegion != r || p.state.Phase != PhaseSteady {
				continue
			}
			ev := m.evidence(now, p)
			var target Region
			for _, c := range Rank(p.state, ev, r) {
				if c.Eligible {
					target = c.Region
					break
				}
			}
			if target == "" {
				m.event(name, DecideStartSwitchover, "drain: no eligible target")
				continue
			}
			d, err := RequestSwitchover(m.cfg.Failover, p.state, ev, target, "drain "+string(r)+": "+m.draining[r])
			if err != nil {
				m.event(name, DecideStartSwitchover, "drain: "+err.Error())
				continue
			}
			if !slices.Contains(d.Next.NeverPromote, r) {
				d.Next.NeverPromote = append(d.Next.NeverPromote, r)
			}
			m.propose(p, d, false)
			running++
		}
	}
}

// LastDecision returns the most recent decision for a partition.
func (m *Manager) LastDecision(name string) (Decision, bool) {
	p := m.parts[name]
	if p == nil {
		return Decision{}, false
	}
	return p.last, true
}

// ManagerReady is what the driver must carry out.
type ManagerReady struct {
	Heartbeats []Heartbeat
	Proposals  []Proposal
	Actions    []PartitionActions
}

// Ready hands over the heartbeats, proposals and actions.
func (m *Manager) Ready() ManagerReady {
	r := ManagerReady{Heartbeats: m.live.Ready(), Proposals: m.proposals, Actions: m.actions}
	m.proposals, m.actions = nil, nil
	return r
}

type partTimer struct {
	at   time.Duration
	name string
}

type partTimers []partTimer

func (h partTimers) Len() int { return len(h) }
func (h partTimers) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].name < h[j].name
}
func (h partTimers) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *partTimers) Push(x any)   { *h = append(*h, x.(partTimer)) }
func (h *partTimers) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
