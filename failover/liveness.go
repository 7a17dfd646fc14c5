package failover

import (
	"fmt"
	"slices"
	"time"

	"github.com/fmnode/fmnode/guard"
	"github.com/fmnode/fmnode/quorum"
)

// Region names a region; it is the quorum package's type.
type Region = quorum.Region

// NodeID identifies a node (a host of partition replicas and acceptors).
type NodeID = quorum.ID

// Node places a node in a region.
type Node struct {
	ID     NodeID
	Region Region
}

// HeartbeatKind distinguishes the liveness messages.
type HeartbeatKind uint8

const (
	// KindHeartbeat announces the sender is alive and carries its view.
	KindHeartbeat HeartbeatKind = iota + 1
	// KindHeartbeatAck answers a heartbeat; acks from a majority of the
	// nodes outside the sender's region extend the sender's lease.
	KindHeartbeatAck
	// KindView carries a changed suspicion set at once, so that a quorum
	// of observers agrees without waiting for the next heartbeat round.
	// It also answers a probe.
	KindView
	// KindProbe asks a node the sender suspects to answer with its view
	// (see Config.SuspectProbeInterval). It carries no view of its own.
	KindProbe
)

// Heartbeat is the only liveness traffic: per node pair, never per
// partition, so its cost does not grow with the number of partitions.
type Heartbeat struct {
	Kind HeartbeatKind
	From NodeID
	To   NodeID
	// Seq numbers the sender's heartbeat rounds; acks echo it.
	Seq uint64
	// Suspects is the sender's view: the nodes it has not heard from for
	// longer than the takeover delay (sorted).
	Suspects []NodeID
	// ViewSeq numbers the sender's views, so a reordered older view never
	// replaces a newer one.
	ViewSeq uint64
	// SentAt is the sender's clock when it sent the view. A view counts as
	// a vote only while it is fresh (see Liveness).
	SentAt time.Duration
	// Gray lists the nodes the sender has gray-failure evidence against
	// (alive, but its data plane stalled); every observer that sees the
	// claim withholds its acks from them (sorted).
	Gray []NodeID
	// Withheld lists the nodes the sender has withheld acks from for at
	// least the takeover delay: like a suspicion, a vote that they hold
	// no lease any more (sorted).
	Withheld []NodeID
}

// Liveness is one node's pure view of which nodes are alive and of its own
// lease.
//
// Lease: a node may act as write region until sent + LeaseDuration of the
// newest heartbeat round that enough nodes outside its region acknowledged:
// obs - (obs/2+1) + 1 of them, the fewest that meet every vote quorum.
//
// Failure: a node is declared failed when a majority of the nodes outside
// its region, spread over a majority of the other regions, suspect it (have
// not heard from it for TakeoverDelay) in views that are fresh: sent within
// VoteFreshness. A view travels in every heartbeat, so votes stay fresh as
// long as the suspicion lasts.
//
// Why this is safe: the lease quorum and the vote quorum are drawn from the
// same observer set and their sizes add up to more than it, so they share a
// node o. o withholds acks from a
// node for VoteFreshness after the last message in which it suspected it,
// and a vote is used only within VoteFreshness (less the drift bound) of
// being sent. So while o's vote counts, o has granted no lease to the
// suspect since the suspicion; and any lease o granted before the
// suspicion ended TakeoverDelay before it, that is, before the vote. A lease
// regained after a lapse says nothing about the register: a node that
// regains one must revalidate its partitions' state before serving as
// write region again (the register's epoch is the fence, the lease only
// bounds how long a cut-off write region keeps serving): each new run has
// a new LeaseGen, and the Manager lets a partition's replica count the
// lease only once a register write it proposed within the run committed
// (a plain read is not enough: a takeover decided before the run may
// still be in flight and commit after the read).
//
// Gray failure: a node still heard from but whose data plane stalls keeps
// its lease by heartbeating, and with it could keep serving strong reads
// after another region took over. So a gray verdict (SetGray) acts on the
// lease: the node claims it in its views, and every observer that holds a
// fresh claim (its own or another's) withholds its acks from the gray
// node. An observer that has withheld for TakeoverDelay votes against it
// (Withheld), and those votes count in Failed like suspicions: by the
// same quorum intersection, a node declared failed so holds no lease.
type Liveness struct {
	guards  guard.Counter
	cfg     Config
	self    Node
	nodes   []Node // sorted by id
	regions []Region
	index   map[NodeID]int

	lastHeard []time.Duration // by node index
	heardAny  []bool
	views     [][]NodeID // by node index: the node's last reported suspects
	viewSeqs  []uint64
	viewAt    []time.Duration // sender's clock at the view
	// lastAssert[i]: own clock when a message of ours last suspected node i.
	lastAssert []time.Duration
	suspects   []NodeID // own view
	viewSeq    uint64
	// nextProbe: when the suspects are next sent a probe between rounds
	// (probeSuspects).
	nextProbe time.Duration
	// now is the latest time the view was ticked or stepped at.
	now time.Duration

	// Gray: localGray[i] is this node's own gray verdict on node i;
	// grayViews and heldViews are each node's last Gray and Withheld lists;
	// withholding[i] says this node withholds acks from i, since
	// withholdSince[i]; claims and held are the own Gray and Withheld.
	localGray     []bool
	grayViews     [][]NodeID
	heldViews     [][]NodeID
	withholding   []bool
	withholdSince []time.Duration
	claims        []NodeID
	held          []NodeID

	seq        uint64
	nextBeat   time.Duration
	rounds     []round // outstanding heartbeat rounds, bounded
	leaseUntil time.Duration
	// leaseGen numbers the lease's runs: it grows whenever a lease is
	// granted while none held (at start, after every lapse). A run is one
	// stretch during which no takeover can be decided (see Liveness).
	leaseGen   uint64
	leaseSince time.Duration
	started    bool

	out []Heartbeat
}

type round struct {
	seq    uint64
	sent   time.Duration
	acked  []NodeID
	leased bool
}

// maxRounds bounds the heartbeat rounds awaiting acks: older ones can no
// longer extend the lease past a newer one anyway.
const maxRounds = 8

// VoteFreshness is how long a suspicion counts as a vote after it was
// sent, and how long a suspecting node withholds acks afterwards.
func (c Config) VoteFreshness() time.Duration {
	return 2*c.HeartbeatInterval + c.MaxClockDrift
}

// NewLiveness builds the view of node self over the given topology.
func NewLiveness(cfg Config, self NodeID, nodes []Node) (*Liveness, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Liveness{cfg: cfg, guards: guard.Discard{}, index: make(map[NodeID]int, len(nodes))}
	l.nodes = slices.Clone(nodes)
	slices.SortFunc(l.nodes, func(a, b Node) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	found := false
	for i, n := range l.nodes {
		if _, dup := l.index[n.ID]; dup {
			return nil, configErr("nodes", "node %d listed twice", n.ID)
		}
		if n.Region == "" {
			return nil, configErr("nodes", "node %d has no region", n.ID)
		}
		l.index[n.ID] = i
		if !slices.Contains(l.regions, n.Region) {
			l.regions = append(l.regions, n.Region)
		}
		if n.ID == self {
			l.self = n
			found = true
		}
	}
	if !found {
		return nil, configErr("self", "node %d is not in the topology", self)
	}
	slices.Sort(l.regions)
	k := len(l.nodes)
	l.lastHeard = make([]time.Duration, k)
	l.heardAny = make([]bool, k)
	l.views = make([][]NodeID, k)
	l.viewSeqs = make([]uint64, k)
	l.viewAt = make([]time.Duration, k)
	l.lastAssert = make([]time.Duration, k)
	l.localGray = make([]bool, k)
	l.grayViews = make([][]NodeID, k)
	l.heldViews = make([][]NodeID, k)
	l.withholding = make([]bool, k)
	l.withholdSince = make([]time.Duration, k)
	for i := range l.lastAssert {
		l.lastAssert[i] = -cfg.VoteFreshness()
	}
	return l, nil
}

// SetBoot numbers this incarnation's views above every view an earlier
// incarnation of the node sent: its ViewSeq starts at boot << 32 (boot is
// the node's durable boot counter, growing at every start). Observers
// drop a view whose ViewSeq is below the last one they kept (a reordered
// older view), so a restarted node that counted its views from zero again
// went unheard until it had changed its view as often as before the
// restart: its suspicions and gray claims, and with them its votes,
// never reached the observers that had not restarted (found by the
// cluster scenario: a gray claim no candidate agreed with held a write
// region's lease withheld for good). Call it before the first message.
func (l *Liveness) SetBoot(boot uint64) {
	l.viewSeq = max(l.viewSeq, boot<<32)
}

// Self returns this node.
func (l *Liveness) Self() Node { return l.self }

// Nodes returns the topology, sorted by id.
func (l *Liveness) Nodes() []Node { return l.nodes }

// Regions returns the regions, sorted.
func (l *Liveness) Regions() []Region { return l.regions }

// LeaseUntil is the local time until which this node may act as write region.
func (l *Liveness) LeaseUntil() time.Duration { return l.leaseUntil }

// LeaseValid reports whether the lease holds at now.
func (l *Liveness) LeaseValid(now time.Duration) bool { return now < l.leaseUntil }

// LeaseGen numbers the current lease run (0: never leased): it grows each
// time a lease is granted while none held, so a lapse and regain between
// two looks at LeaseValid is never missed. A run says nothing about the
// registers: a takeover decided while the previous run had lapsed may
// commit during this one (see Manager's reassert).
func (l *Liveness) LeaseGen() uint64 { return l.leaseGen }

// LeaseSince is the local time the current lease run began.
func (l *Liveness) LeaseSince() time.Duration { return l.leaseSince }

// start counts nodes not yet heard from from now, not from zero, so a
// (re)started node does not suspect everyone at once.
func (l *Liveness) start(now time.Duration) {
	if l.started {
		return
	}
	l.started = true
	l.nextBeat = now
	for i := range l.lastHeard {
		if !l.heardAny[i] {
			l.lastHeard[i] = now
		}
	}
}

// Tick sends a heartbeat round when one is due and refreshes the view.
func (l *Liveness) Tick(now time.Duration) {
	l.now = max(l.now, now)
	l.start(now)
	if now >= l.nextBeat {
		l.seq++
		l.nextBeat = now + l.cfg.HeartbeatInterval
		l.rounds = append(l.rounds, round{seq: l.seq, sent: now})
		if len(l.rounds) > maxRounds {
			l.rounds = l.rounds[len(l.rounds)-maxRounds:]
		}
		l.checkRound(now, &l.rounds[len(l.rounds)-1])
		l.refresh(now)
		l.broadcast(now, KindHeartbeat)
		l.nextProbe = now + l.cfg.SuspectProbeInterval // the round reached the suspects too
		return
	}
	if l.refresh(now) {
		l.broadcast(now, KindView)
	}
	if len(l.suspects) > 0 && now >= l.nextProbe {
		l.probeSuspects(now)
	}
}

// probeSuspects sends each suspected node a probe between heartbeat
// rounds: if it is back, its answer (its view) ends the suspicion within
// SuspectProbeInterval on both sides, instead of at the next rounds. A
// probe carries no view, so it is never a vote and never extends the
// withholding of acks from the suspect (lastAssert).
func (l *Liveness) probeSuspects(now time.Duration) {
	l.nextProbe = now + l.cfg.SuspectProbeInterval
	for _, s := range l.suspects {
		l.out = append(l.out, Heartbeat{Kind: KindProbe, From: l.self.ID, To: s, SentAt: now})
	}
}

func (l *Liveness) broadcast(now time.Duration, kind HeartbeatKind) {
	for _, n := range l.nodes {
		if n.ID != l.self.ID {
			l.out = append(l.out, l.viewMsg(now, kind, n.ID))
		}
	}
	l.asserted(now)
}

// viewMsg is a message of the given kind carrying this node's view.
func (l *Liveness) viewMsg(now time.Duration, kind HeartbeatKind, to NodeID) Heartbeat {
	return Heartbeat{Kind: kind, From: l.self.ID, To: to, Seq: l.seq,
		Suspects: l.suspects, ViewSeq: l.viewSeq, SentAt: now, Gray: l.claims, Withheld: l.held}
}

// SetGuards makes the view count the guards it passes through (nil: none).
func (l *Liveness) SetGuards(c guard.Counter) { l.guards = guard.Or(c) }

// asserted records that a message carrying the view left now: its
// suspicions and withheld acks are votes from now on.
func (l *Liveness) asserted(now time.Duration) {
	for _, s := range l.suspects {
		l.lastAssert[l.index[s]] = now
	}
	for _, s := range l.held {
		l.lastAssert[l.index[s]] = now
	}
}

// SetGray records (or clears) this node's own gray verdict on node n: n is
// heard from but its data plane stalls. From now on this node withholds
// its acks from n, and so does every observer that sees the claim.
func (l *Liveness) SetGray(now time.Duration, n NodeID, gray bool) {
	i, ok := l.index[n]
	if !ok || n == l.self.ID || l.localGray[i] == gray {
		return
	}
	l.localGray[i] = gray
	if l.refresh(now) {
		l.broadcast(now, KindView)
	}
}

// Withholding reports whether this node withholds its acks from n.
func (l *Liveness) Withholding(n NodeID) bool {
	i, ok := l.index[n]
	return ok && l.withholding[i]
}

// grayClaimed reports whether node i is claimed gray by this node or by a
// fresh view of an observer outside its region.
func (l *Liveness) grayClaimed(i int, now time.Duration) bool {
	if l.localGray[i] {
		return true
	}
	fresh := l.cfg.VoteFreshness() - l.cfg.MaxClockDrift
	n := l.nodes[i]
	for j, m := range l.nodes {
		if m.Region != n.Region && m.ID != l.self.ID && now-l.viewAt[j] <= fresh && slices.Contains(l.grayViews[j], n.ID) {
			return true
		}
	}
	return false
}

// NextDeadline is when Tick next has work: a heartbeat round, a probe of
// the suspects, a suspicion, a withholding that turns into a vote, or a
// vote that goes stale.
func (l *Liveness) NextDeadline() time.Duration {
	next := l.nextBeat
	if len(l.suspects) > 0 {
		next = min(next, l.nextProbe)
	}
	fresh := l.cfg.VoteFreshness() - l.cfg.MaxClockDrift
	for i, n := range l.nodes {
		// A view that votes against anyone stops counting when it goes
		// stale (verdict, grayClaimed): a verdict changes then, with no
		// message.
		if at := l.viewAt[i] + fresh + 1; at > l.now && (len(l.views[i]) > 0 || len(l.heldViews[i]) > 0 || len(l.grayViews[i]) > 0) {
			next = min(next, at)
		}
		if l.withholding[i] && !slices.Contains(l.held, n.ID) {
			if at := l.withholdSince[i] + l.cfg.TakeoverDelay(); at < next {
				next = at
			}
		}
		if n.ID == l.self.ID || slices.Contains(l.suspects, n.ID) {
			continue
		}
		if at := l.lastHeard[i] + l.cfg.TakeoverDelay() + 1; at < next {
			next = at
		}
	}
	return next
}

// refresh recomputes the own view; it reports whether it changed.
func (l *Liveness) refresh(now time.Duration) bool {
	var sus, claims, held []NodeID
	for i, n := range l.nodes {
		if n.ID == l.self.ID {
			continue
		}
		if silent := now - l.lastHeard[i]; silent > l.cfg.TakeoverDelay() {
			sus = append(sus, n.ID)
		} else if silent > l.cfg.LeaseDuration {
			// Its lease may still run on a clock that drifted: only the
			// margin keeps this node from suspecting it.
			l.guards.Fire(guard.TakeoverDriftMargin)
		}
		if l.localGray[i] {
			claims = append(claims, n.ID)
		}
		switch w := l.grayClaimed(i, now); {
		case w && !l.withholding[i]:
			l.withholding[i], l.withholdSince[i] = true, now
		case !w:
			l.withholding[i] = false
		}
		if l.withholding[i] && now-l.withholdSince[i] >= l.cfg.TakeoverDelay() {
			held = append(held, n.ID)
		}
	}
	if slices.Equal(sus, l.suspects) && slices.Equal(claims, l.claims) && slices.Equal(held, l.held) {
		return false
	}
	l.suspects, l.claims, l.held = sus, claims, held
	l.viewSeq++
	return true
}

// Step handles a liveness message received at local time now.
func (l *Liveness) Step(now time.Duration, m Heartbeat) error {
	i, ok := l.index[m.From]
	if !ok || m.To != l.self.ID {
		return fmt.Errorf("failover: liveness message %d->%d outside the topology", m.From, m.To)
	}
	l.now = max(l.now, now)
	l.start(now)
	l.lastHeard[i] = now
	l.heardAny[i] = true
	answer := false
	switch m.Kind {
	case KindHeartbeat:
		l.setView(i, m)
		// A node we recently told others we suspect gets no ack: our
		// suspicion may still count as a vote somewhere. Nor does a node
		// claimed gray: its lease must lapse before anyone takes over.
		if l.refresh(now) {
			l.broadcast(now, KindView)
		}
		if now >= l.lastAssert[i]+l.cfg.VoteFreshness() && !l.withholding[i] {
			l.out = append(l.out, Heartbeat{Kind: KindHeartbeatAck, From: l.self.ID, To: m.From, Seq: m.Seq})
		}
	case KindView:
		l.setView(i, m)
	case KindProbe:
		answer = true
	case KindHeartbeatAck:
		for k := range l.rounds {
			rd := &l.rounds[k]
			if rd.seq == m.Seq && !slices.Contains(rd.acked, m.From) && l.nodes[i].Region != l.self.Region {
				rd.acked = append(rd.acked, m.From)
				l.checkRound(now, rd)
			}
		}
	default:
		return fmt.Errorf("failover: unknown liveness message kind %d", m.Kind)
	}
	if l.refresh(now) {
		l.broadcast(now, KindView) // reaches the prober too
	} else if answer {
		// A prober suspects us: our view (refreshed above, so without a
		// suspicion of the prober we may have had) tells it we are back.
		l.out = append(l.out, l.viewMsg(now, KindView, m.From))
		l.asserted(now)
	}
	return nil
}

func (l *Liveness) setView(i int, m Heartbeat) {
	if m.ViewSeq < l.viewSeqs[i] {
		return
	}
	l.viewSeqs[i] = m.ViewSeq
	l.views[i] = slices.Clone(m.Suspects)
	l.grayViews[i] = slices.Clone(m.Gray)
	l.heldViews[i] = slices.Clone(m.Withheld)
	l.viewAt[i] = m.SentAt
}

// observers returns how many nodes lie outside region r.
func (l *Liveness) observers(r Region) int {
	n := 0
	for _, x := range l.nodes {
		if x.Region != r {
			n++
		}
	}
	return n
}

// leaseAcks is how many observer acks extend a lease: the smallest count
// that intersects every vote quorum (obs/2+1 of the same observers), like a
// flexible quorum. With two observers (two regions and a witness) one ack
// suffices, so the surviving region keeps a lease while the other is down.
func leaseAcks(obs int) int { return obs - (obs/2 + 1) + 1 }

func (l *Liveness) checkRound(now time.Duration, rd *round) {
	obs := l.observers(l.self.Region)
	if rd.leased || (obs > 0 && len(rd.acked) < leaseAcks(obs)) {
		return
	}
	rd.leased = true
	if until := rd.sent + l.cfg.LeaseDuration; until > l.leaseUntil {
		if now >= l.leaseUntil && until > now {
			l.leaseGen++ // held none until now: a new run
			l.leaseSince = now
		}
		l.leaseUntil = until
	}
}

// Ready returns the liveness messages to send.
func (l *Liveness) Ready() []Heartbeat {
	out := l.out
	l.out = nil
	return out
}

// Suspects reports whether this node itself suspects n.
func (l *Liveness) Suspects(n NodeID) bool { return slices.Contains(l.suspects, n) }

// Failed reports whether node n is declared failed at local time now: a
// majority of the nodes outside n's region, covering a majority of the
// other regions, suspect it (silent) or have withheld their acks from it
// for the takeover delay (gray) in fresh views. It also returns the regions
// voting and the regions needed, for explanations.
func (l *Liveness) Failed(n NodeID, now time.Duration) (failed bool, regionVotes, regionsNeeded int) {
	v := l.verdict(n, now)
	return v.failed, v.regions, v.needed
}

// GrayFailed reports whether n is declared failed with at least one vote
// cast for a gray failure rather than silence.
func (l *Liveness) GrayFailed(n NodeID, now time.Duration) bool {
	v := l.verdict(n, now)
	return v.failed && v.gray > 0
}

type verdict struct {
	failed                bool
	regions, needed, gray int
}

func (l *Liveness) verdict(n NodeID, now time.Duration) verdict {
	i, ok := l.index[n]
	if !ok {
		return verdict{}
	}
	target := l.nodes[i].Region
	fresh := l.cfg.VoteFreshness() - l.cfg.MaxClockDrift
	votes, gray := 0, 0
	var voted []Region
	for j, m := range l.nodes {
		if m.Region == target {
			continue
		}
		var sus, held bool
		if m.ID == l.self.ID {
			sus, held = slices.Contains(l.suspects, n), slices.Contains(l.held, n)
		} else if now-l.viewAt[j] <= fresh {
			sus, held = slices.Contains(l.views[j], n), slices.Contains(l.heldViews[j], n)
		}
		if sus || held {
			votes++
			if !sus {
				gray++
			}
			if !slices.Contains(voted, m.Region) {
				voted = append(voted, m.Region)
			}
		}
	}
	obs := l.observers(target)
	needed := (len(l.regions)-1)/2 + 1
	return verdict{failed: obs > 0 && votes >= obs/2+1 && len(voted) >= needed, regions: len(voted), needed: needed, gray: gray}
}

// ViewSeq counts the changes of this node's view (suspects, gray claims,
// withheld acks): a driver that mirrors the view elsewhere rechecks it
// only when ViewSeq moved.
func (l *Liveness) ViewSeq() uint64 { return l.viewSeq }

// Alive reports whether n is not suspected by this node.
func (l *Liveness) Alive(n NodeID) bool {
	return n == l.self.ID || !slices.Contains(l.suspects, n)
}
