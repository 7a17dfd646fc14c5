// The Manager: its configuration and defaults, the entry it keeps per
// hosted partition, the placement of the partitions it hosts
// (AddPartition), the event log, and the loop's entry points: the inputs
// StepHeartbeat, Tick and Evaluate, NextDeadline, and Ready for the
// outputs. The manager_*.go files hold the concepts the loop calls into.

package failover

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/fmnode/fmnode/guard"
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
	Waited      uint64 // operations that found every slot taken (MaxInFlight)
	Reads       uint64
	ReadsFailed uint64
	// Rechecks counts partitions due for evaluation (a timer fired, or
	// only write-quorum members' catch-up flags moved) whose evaluation
	// was skipped because it could change nothing (Manager.quiet).
	Rechecks uint64
	// StatusUnchanged counts replica status reports equal to the one
	// before (dropped at once).
	StatusUnchanged uint64
}

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	Failover Config
	Self     NodeID
	Nodes    []Node
	// Boot is the node's boot counter (durable, growing at every start):
	// it orders this incarnation's liveness views after the earlier ones'
	// (Liveness.SetBoot). 0 for a node without one (tests).
	Boot uint64
	// MaxEvents bounds the event log.
	MaxEvents int
	// DrainConcurrency bounds switchovers a drain runs at once.
	DrainConcurrency int
	// DrainRate bounds, per second, how fast a drain starts switchovers:
	// a token bucket of DrainBurst starts refilled at DrainRate per second
	// on the injected clock, rebuilt from the switchover starts in the
	// registers when a drain is asked for again after a restart (see
	// Drain). 0 means DefaultDrainRate; NoDrainRateLimit turns the limit
	// off (DrainConcurrency alone then paces the drain).
	DrainRate float64
	// DrainBurst is how many switchovers a drain may start at once after
	// a pause (0: DefaultDrainBurst, or DrainConcurrency if smaller). It
	// is at most DrainConcurrency: starts beyond that cannot run at once.
	DrainBurst int
	// MaxInFlight bounds the register operations (proposals, creates and
	// reads) this manager has with the driver at once. The rest wait in
	// priority order (failovers, then creates and reads, then every other
	// transition; by partition within each) and start as operations
	// finish: none is dropped or retried while it waits. Keep it well
	// under the proposer's bound on keys in flight
	// (caspaxos.ProposerConfig.MaxInFlight), which refuses beyond it.
	// Drains add at most DrainConcurrency switchovers on top.
	MaxInFlight int
	// VerifySkips, when positive, checks one in VerifySkips of the
	// evaluations skipped as quiet: Decide runs on the current evidence and
	// must reach the last decision again, else Violation reports it. The
	// skip rests on an argument about what Decide reads (quiet); this
	// keeps a later change to Decide from silently breaking it. The
	// simulator samples; tests check every skip.
	VerifySkips int
	// Guards counts the guards its decisions pass through (policy holds,
	// candidate filters, refused shrinks and requests, the drift margin on
	// a takeover); nil counts nothing.
	Guards guard.Counter
}

// Manager runs failover for every partition replica on one node. It is a
// pure state machine like the protocol cores: drivers feed it heartbeats,
// register values, CAS outcomes, replica status and time, and carry out the
// heartbeats, proposals and local actions it returns. Nothing happens per
// partition in steady state: a partition is evaluated only when something
// it depends on changed or a timer it set fires.
type Manager struct {
	cfg    ManagerConfig
	guards guard.Counter
	// violation is the first skipped evaluation that VerifySkips found
	// would have decided differently.
	violation error
	// lastPlacement is the placement AddPartition stored last (shared by
	// the partitions placed alike).
	lastPlacement []RegionNode
	// viewSeq is the liveness view last turned into Reachability, peerDown
	// the nodes it suspected, and reach the changes not yet handed over.
	viewSeq  uint64
	peerDown map[NodeID]bool
	reach    []Reachability
	live     *Liveness
	self     Node
	parts    map[string]*partition
	names    []string // sorted
	// sorted holds the partitions in the order of names.
	sorted []*partition
	// evBuf backs the evidence of the evaluation running now: evaluate
	// runs on every status change, and nothing keeps its evidence after
	// it returns (Evidence, for callers, builds its own).
	evBuf []ReplicaEvidence
	// lagBuf is trackLag's scratch.
	lagBuf []followerLag

	failedNodes  map[NodeID]bool
	healthySince map[NodeID]time.Duration
	// selfLeased: this node holds a lease (a majority of the other
	// regions acknowledge its heartbeats), continuously since
	// selfLeasedSince. It is its own health as the others see it: a node
	// cut off from the others is never "healthy for FailbackAfter" by its
	// own clock alone.
	selfLeased      bool
	selfLeasedSince time.Duration
	// leaseGen is the lease run last seen (Liveness.LeaseGen).
	leaseGen uint64
	now      time.Duration

	timers partTimers
	// dirty holds the partitions to evaluate (partition.dirty set), in
	// the order they were marked; evaluateDirty sorts them by name.
	dirty      []*partition
	dirtySpare []*partition

	inflightTo map[Region]int // failover proposals in flight by target region
	// ops counts the register operations with the driver (at most
	// cfg.MaxInFlight, plus drains); waiting holds the partitions whose
	// next operation waits for a slot, in priority order; admitting is the
	// partition admit is evaluating (it may start an operation).
	ops       int
	waiting   waitQueue
	admitting *partition
	queuedNow bool // the evaluation running now queued its partition
	reads     []string
	// grayBy counts, per node, the hosted partitions whose write region on
	// that node this node judges gray; a node with any is claimed gray in
	// the liveness views (its lease acks are withheld).
	grayBy   map[NodeID]int
	draining map[Region]string
	paused   bool
	pauseWhy string

	// drainPaces holds each drain's rate limit (drainPaceOf).
	drainPaces map[Region]*drainPace

	proposals []Proposal
	actions   []PartitionActions
	events    []Event
	stats     ManagerStats
}

// partition is the manager's entry for one hosted (or watched) partition:
// its placement, the register value it holds, the local replica's last
// status, the bookkeeping derived from them, and what it has in flight
// with the driver or waiting for the window.
type partition struct {
	name      string
	placement []RegionNode
	myRegion  Region

	version uint64
	state   State

	local ReplicaStatus
	// statusSeq counts the local replica's status reports.
	statusSeq uint64
	// grow: regions this node, as write region, counts in its commit rule
	// ahead of the register (prepared grows), in region order.
	grow []pendingGrow
	// gs is the gray-failure bookkeeping, nil while there is none (client
	// errors against a live write region are rare: out of line, it costs
	// a pointer per partition instead of 90 bytes).
	gs *grayState
	// lag is the write region's record of each follower that holds less
	// than it has assigned: since when its match LSN stands still.
	lag []followerLag
	// inflightV is the register version the proposal in flight was made
	// against.
	inflightV uint64
	// create: the value to write if the register has none (Create).
	create *State
	// inflightGen is the lease run the proposal in flight was made in
	// (0: made without a lease); inflightMine and inflightEpoch say whether
	// it makes this region write region, and of which epoch.
	inflightGen   uint64
	inflightEpoch Epoch
	// validGen and validEpoch: a register write this node proposed within
	// lease run validGen committed with this region as write region of
	// validEpoch (ActValidateLease was emitted for them).
	validGen   uint64
	validEpoch Epoch
	inflightT  Region

	// pending is the decision awaiting its preferred proposer, and since
	// when; backups act after a stagger.
	pendingKey   string
	pendingSince time.Duration
	// last is what quiet and LastDecision need of the latest decision:
	// the whole Decision (reasons, candidates) made this struct, one per
	// partition per node, 144 bytes larger (Explain recomputes them).
	last    lastDecision
	timerAt time.Duration
	// readRetryAt: a failed read is asked again no sooner.
	readRetryAt time.Duration
	// qidx is the partition's index in Manager.waiting (-1: not waiting)
	// and qclass the class it waits in.
	qidx int

	// The flags share two words (one partition per hosted partition per
	// node: the struct stays in the 768-byte size class).
	qclass    opClass
	inflightK DecisionKind
	hasMine   bool
	have      bool
	hasLocal  bool
	inflight  bool
	// readWant: a read-back was asked for (RequestRead) and has not been
	// handed over; reading: it is with the driver.
	readWant     bool
	reading      bool
	inflightMine bool
	// stale: a proposal lost a CAS; nothing is proposed until a newer
	// register value is observed (the driver reads it back).
	stale bool
	// dirty: the partition is in Manager.dirty.
	dirty bool
	// changed: something an evaluation reads may have changed since the
	// partition was last evaluated (markDirty). A partition queued without
	// it (markRecheck) is evaluated only if its last decision may not
	// stand (quiet).
	changed bool
	// soleSelf: the placement names each region once and exactly one
	// replica on this node (quiet relies on it).
	soleSelf bool
}

// Manager defaults for the zero ManagerConfig fields.
const (
	DefaultMaxEvents        = 1024
	DefaultDrainConcurrency = 16
	// DefaultDrainRate and DefaultDrainBurst: a drain starts 4
	// switchovers at once, then 20 per second (4300 partitions in about
	// 3.6 minutes), unless DrainConcurrency binds first.
	DefaultDrainRate  = 20.0
	DefaultDrainBurst = 4
	// DefaultMaxInFlight is a quarter of the proposer's default bound
	// (caspaxos.DefaultMaxInFlight).
	DefaultMaxInFlight = 16384
)

// NewManager builds a manager for node cfg.Self.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.MaxEvents == 0 {
		cfg.MaxEvents = DefaultMaxEvents
	}
	if cfg.DrainConcurrency == 0 {
		cfg.DrainConcurrency = DefaultDrainConcurrency
	}
	if cfg.MaxEvents < 1 {
		return nil, configErr("MaxEvents", "must be positive, got %d", cfg.MaxEvents)
	}
	if cfg.DrainConcurrency < 1 {
		return nil, configErr("DrainConcurrency", "must be positive, got %d", cfg.DrainConcurrency)
	}
	if err := cfg.fillDrainRate(); err != nil {
		return nil, err
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.MaxInFlight < 1 {
		return nil, configErr("MaxInFlight", "must be positive, got %d", cfg.MaxInFlight)
	}
	if cfg.VerifySkips < 0 {
		return nil, configErr("VerifySkips", "must not be negative, got %d", cfg.VerifySkips)
	}
	live, err := NewLiveness(cfg.Failover, cfg.Self, cfg.Nodes)
	if err != nil {
		return nil, err
	}
	live.SetBoot(cfg.Boot)
	live.SetGuards(cfg.Guards)
	return &Manager{
		cfg:          cfg,
		guards:       guard.Or(cfg.Guards),
		live:         live,
		self:         live.Self(),
		parts:        make(map[string]*partition),
		failedNodes:  make(map[NodeID]bool),
		healthySince: make(map[NodeID]time.Duration),
		inflightTo:   make(map[Region]int),
		grayBy:       make(map[NodeID]int),
		draining:     make(map[Region]string),
		peerDown:     make(map[NodeID]bool),
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
	// Placements repeat (the same nodes host partition after partition):
	// one equal to the last added shares its array, which nothing writes.
	placement := m.lastPlacement
	if !slices.Equal(placement, pl.Replicas) {
		placement = slices.Clip(slices.Clone(pl.Replicas))
		m.lastPlacement = placement
	}
	p := &partition{name: pl.Partition, placement: placement, qidx: -1}
	mine := 0
	p.soleSelf = true
	for i, rn := range pl.Replicas {
		if rn.Node == m.self.ID {
			p.myRegion, p.hasMine = rn.Region, true
			mine++
		}
		for _, o := range pl.Replicas[:i] {
			if o.Region == rn.Region {
				p.soleSelf = false
			}
		}
	}
	p.soleSelf = p.soleSelf && mine == 1
	m.parts[pl.Partition] = p
	i := sort.SearchStrings(m.names, pl.Partition)
	m.names = slices.Insert(m.names, i, pl.Partition)
	m.sorted = slices.Insert(m.sorted, i, p)
	return nil
}

// nodeOf returns the node that hosts p's replica in region r.
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
// A driver calls it once at start (the first heartbeat round goes out
// then) and then at NextDeadline; after other inputs Evaluate suffices.
func (m *Manager) Tick(now time.Duration) {
	m.now = now
	m.live.Tick(now)
	m.refreshLiveness(now)
	m.Evaluate(now)
}

// Evaluate is Tick without advancing the liveness view: the partition
// timers due, the drains, and the partitions marked by inputs (status
// reports, register values, CAS and read outcomes, client errors). A
// driver calls it after such inputs and Tick at NextDeadline and after
// StepHeartbeat: the view changes with time only at its own deadlines, so
// refreshing it after every input (a verdict per node, each report) bought
// nothing.
func (m *Manager) Evaluate(now time.Duration) {
	m.now = now
	for len(m.timers) > 0 && m.timers[0].at <= now {
		t := m.timers.pop()
		if p := t.p; p.timerAt == t.at {
			p.timerAt = 0
			// A timer is a reason to look again, not a change: the
			// evaluation runs unless quiet shows it would change nothing
			// (that includes the timer's own reason: a RetryAt or a
			// backup stagger that is due, a gray check, a read retry).
			m.markRecheck(p)
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
		if t.p.timerAt == t.at {
			return min(next, t.at)
		}
		m.timers.pop()
	}
	return next
}

// markDirty queues p for evaluation: something it depends on changed.
func (m *Manager) markDirty(p *partition) {
	p.changed = true
	m.markRecheck(p)
}

// markRecheck queues p to be evaluated unless its last decision provably
// stands (quiet): for a timer that fired, and for catch-up flags that no
// decision reads.
func (m *Manager) markRecheck(p *partition) {
	if !p.dirty {
		p.dirty = true
		m.dirty = append(m.dirty, p)
	}
}

// event appends to the event log, dropping the oldest beyond MaxEvents.
func (m *Manager) event(name string, k DecisionKind, text string) {
	m.events = append(m.events, Event{At: m.now, Partition: name, Kind: k, Text: text})
	if over := len(m.events) - m.cfg.MaxEvents; over > 0 {
		m.events = slices.Delete(m.events, 0, over)
	}
}

// ManagerReady is what the driver must carry out.
type ManagerReady struct {
	Heartbeats []Heartbeat
	Proposals  []Proposal
	Actions    []PartitionActions
	// Reads are the partitions whose register value to read back; the
	// driver feeds each value through ObserveState and then calls
	// ReadDone.
	Reads []string
	// Reachability says which of this node's replicas' peers the liveness
	// view now counts reachable or not; the driver hands each to its
	// partition host (partition.Host.SetReachable), so that write regions
	// probe a suspected node's replicas not at all instead of once per
	// partition (the view's own probes notice its return).
	Reachability []Reachability
}

// Ready hands over the heartbeats, proposals and actions.
func (m *Manager) Ready() ManagerReady {
	r := ManagerReady{Heartbeats: m.live.Ready(), Proposals: m.proposals, Actions: m.actions, Reads: m.reads,
		Reachability: m.reach}
	m.proposals, m.actions, m.reads, m.reach = nil, nil, nil, nil
	return r
}
