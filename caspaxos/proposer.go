package caspaxos

import (
	"container/heap"
	"container/list"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fmnode/fmnode/guard"
	"github.com/fmnode/fmnode/quorum"
)

// RequestID identifies a proposal to its caller; results carry it back.
type RequestID uint64

// Result is the outcome of one proposal.
type Result struct {
	ID  RequestID
	Key string
	// Value is the committed value: the new one on success, the current
	// one when the change function refused (Err then says why).
	Value Value
	Err   error
	// Attempts is the number of rounds the proposal used.
	Attempts int
	// FastPath reports that the committing round skipped phase 1.
	FastPath   bool
	Start, End time.Duration
}

// ProposerStats counts what a proposer did; all counters only grow.
type ProposerStats struct {
	Proposals uint64 // accepted by Propose
	Commits   uint64 // proposals that committed (including refused changes)
	Failures  uint64 // proposals that gave up
	Unknown   uint64 // of the failures, those whose outcome is unknown
	Rounds    uint64 // attempts started
	// FirstRounds counts the rounds that were a request's first attempt.
	// With forwarding a round carries a batch of proposals (and a served
	// forward is no proposal here), so Rounds - Proposals no longer counts
	// the retries; Rounds - FirstRounds does.
	FirstRounds uint64
	NAKs        uint64 // rounds ended by a conflicting ballot
	FirstNAKs   uint64 // of the NAKs, those that ended a proposal's first round
	Timeouts    uint64 // rounds ended by a phase timeout
	// WindowWaits counts rounds that waited for the window of rounds in
	// flight (flow.go).
	WindowWaits uint64
	FastPath    uint64 // rounds that went straight to phase 2
	Fenced      uint64 // rounds rejected for a stale age
	Paced       uint64 // proposals whose first attempt waited for a rival (pacing.go)
	// Forwarding (forward.go): Forwards sent to a leader (redirects
	// included), ForwardsServed taken from other proposers (their
	// proposals count at their origin, the rounds here), ForwardTimeouts
	// unanswered, ForwardFallbacks proposals that proposed themselves after
	// forwarding, ForwardRedirects forwards answered "not me".
	Forwards         uint64
	ForwardsServed   uint64
	ForwardTimeouts  uint64
	ForwardFallbacks uint64
	ForwardRedirects uint64
}

type phase uint8

const (
	phaseIdle phase = iota
	phaseBackoff
	phasePrepare
	phaseAccept
	phaseRaiseAge
	phaseErase
	phaseForward // waiting for the leader the change was forwarded to
)

type requestKind uint8

const (
	kindChange requestKind = iota
	kindErase
)

type request struct {
	id     RequestID
	kind   requestKind
	change Change
	start  time.Duration
	// ballots at which this request sent a mutating accept; a later round
	// that finds one of them accepted knows the value is its own.
	mutatingBallots []Ballot
	attempts        int
	lastErr         error
	// rivalAt is the start of the latest round of another proposer on the
	// key that started at or after this request (rivalSeen: there was
	// one); it paces the key's next proposal (pacing.go).
	rivalAt   time.Duration
	rivalSeen bool
	// rivals are the other proposers whose rounds on the key started at
	// or after this request (at most maxRivals); paced: its first attempt
	// waited for a rival.
	rivals []NodeID
	paced  bool

	// Forwarding (forward.go). origin: run for another proposer, which
	// gets the answer. fwdSeq/fwdTo/fwdHops: the forward in flight;
	// fellBack: proposes itself from now on; fwdUnknown: a forward of it
	// may have been committed by its leader. batch: changes applied in
	// this request's rounds after its own, batchOuts what each got.
	origin     *fwdOrigin
	fwdSeq     uint64
	fwdTo      NodeID
	fwdHops    uint8
	fellBack   bool
	fwdUnknown bool
	batch      []*request
	batchOuts  []batchOut
}

// keyState is everything the proposer tracks for one key.
type keyState struct {
	key   string
	queue []*request
	cur   *request
	phase phase

	cfg      *quorum.Config // configuration of the running round
	ballot   Ballot
	next     Ballot
	fast     bool
	deadline time.Duration
	timerGen uint64

	acks    []NodeID
	rejects []NodeID
	best    Ballot // highest accepted ballot among phase-1 replies
	bestVal Value
	// proposed is what phase 2 sends; outcome/outErr is what the caller
	// gets once it commits.
	proposed Value
	outErr   error
	// srcBallot is the round whose computation proposed is (the running
	// one, or the earlier round of this request a prepare found accepted).
	srcBallot Ballot
	started   time.Duration // phase-2 start, for the EMA
	maxSeen   Ballot
	// erase bookkeeping: the ballot at which the full identity pass put the tombstone.
	eraseBallot Ballot

	// fast-path cache: a prepare quorum promised cacheBallot while holding cacheValue.
	cacheOK     bool
	cacheBallot Ballot
	cacheValue  Value
	cachedAt    time.Duration
	lru         *list.Element

	// foreignAt is the start of the latest round of another proposer this
	// proposer learned of on the key (from the ballots in acceptors'
	// replies, which start at the clock's milliseconds); foreignSeen says
	// whether there was one. It predicts whether a cached promise survived.
	foreignAt   time.Duration
	foreignSeen bool

	// Flow control (flow.go): inRound, the key's round holds a place in
	// the window; windowWait, it waits for one; phaseAt, phase 1's start.
	inRound    bool
	windowWait bool
	phaseAt    time.Duration
}

// Proposer is the CASPaxos proposer as a pure state machine. Callers
// Propose; the driver feeds replies with Step and time with Tick, and
// collects outgoing messages and results with Ready. One proposal per key is
// active at a time (others queue behind it, bounded); any number of keys
// proceed at once, and their items to one acceptor share one message.
type Proposer struct {
	guards  guard.Counter
	cfg     ProposerConfig
	quorum  *quorum.Config
	rng     Rand
	age     uint64
	backoff Backoff
	pacer   *Pacer // nil with pacing off
	flow    flow
	// fwd holds leader hints with forwarding on (nil off); fwdOut the
	// forwards to send, fwdSeq numbers them.
	fwd    *forwardTable
	fwdOut []Forward
	fwdSeq uint64

	keys   map[string]*keyState
	active int
	// forgotten is the greatest ballot counter this proposer sent on a key
	// whose state it has since dropped (idle without a cache, evicted, or
	// forgotten with the caches). A key's state is where the proposer
	// remembers its own ballots, and a state created anew knows none of
	// them: its first ballot starts above (forgotten, ID), so that a
	// round never reuses a ballot an earlier round sent on the same key
	// with another value, even within one millisecond of the clock or
	// after a conflict pushed the counter past it. One number for every
	// key, so no memory per forgotten key: it lifts a fresh key's first
	// ballot (of any key) only while it is not below the clock's
	// milliseconds, so counters keep following the clock.
	forgotten uint64

	timers timerHeap
	// timerGen numbers timers proposer-wide: a key's state may be dropped
	// and recreated while its old timers are still in the heap.
	timerGen uint64
	lru      *list.List // of *keyState with a cache, most recent at front
	cached   int
	out      map[NodeID]*outbox
	// queued: an item went to an outbox since the last Ready.
	queued   bool
	outOrder []NodeID
	results  []Result
	stats    ProposerStats
}

type outbox struct {
	prepare []Item
	accept  []Item
	erase   []Item
	raise   bool
}

// NewProposer validates cfg and returns a proposer drawing randomness from rng.
func NewProposer(cfg ProposerConfig, rng Rand) (*Proposer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rng == nil {
		return nil, configErr("rng", "must not be nil")
	}
	q := cfg.Quorum
	var pacer *Pacer
	if cfg.pacing() {
		pacer = NewPacer(cfg.PaceMemory, cfg.MaxPacedKeys)
	}
	var fwd *forwardTable
	if cfg.forwarding() {
		fwd = newForwardTable(cfg.MaxForwardKeys)
	}
	return &Proposer{
		fwd:     fwd,
		guards:  guard.Or(cfg.Guards),
		pacer:   pacer,
		cfg:     cfg,
		quorum:  &q,
		rng:     rng,
		age:     cfg.Age,
		backoff: NewBackoff(cfg.Backoff, cfg.BackoffBase, cfg.BackoffMax, cfg.EMAAlpha),
		flow:    newFlow(cfg),
		keys:    make(map[string]*keyState),
		lru:     list.New(),
		out:     make(map[NodeID]*outbox),
	}, nil
}

// ID returns the proposer's id.
func (p *Proposer) ID() NodeID { return p.cfg.ID }

// Age returns the proposer's current age.
func (p *Proposer) Age() uint64 { return p.age }

// Quorum returns the acceptor configuration new rounds use.
func (p *Proposer) Quorum() quorum.Config { return *p.quorum }

// Stats returns the counters.
func (p *Proposer) Stats() ProposerStats { return p.stats }

// BackoffEMA returns the adaptive backoff's phase-2 estimate.
func (p *Proposer) BackoffEMA() (mean, sigma time.Duration) { return p.backoff.EMA() }

// InFlight returns the number of keys with an active proposal.
func (p *Proposer) InFlight() int { return p.active }

// SetQuorum switches to a new acceptor configuration for rounds that start
// from now on; running rounds finish under the one they started with. The
// fast-path caches are dropped: a promise from a quorum of the old
// configuration is not necessarily one of the new.
func (p *Proposer) SetQuorum(q quorum.Config) error {
	if err := q.Validate(); err != nil {
		return configErr("Quorum", "%v", err)
	}
	p.quorum = &q
	p.dropCaches()
	return nil
}

// Propose starts (or queues) change on key. The result arrives through Ready.
func (p *Proposer) Propose(now time.Duration, id RequestID, key string, ch Change) error {
	if ch == nil {
		return fmt.Errorf("%w: nil change for key %q", ErrBadChange, key)
	}
	return p.enqueue(now, key, &request{id: id, kind: kindChange, change: ch, start: now})
}

// Erase runs the garbage collection of a register that a Delete change has
// tombstoned: an identity pass that every acceptor of the accept set must
// accept, then raising every acceptor's age floor above the age of every
// proposer that might hold a cached promise (fencing them), then erasing
// the record everywhere. Each step is idempotent, so a failed Erase can be
// run again. It fails with ErrExists if the register is live.
func (p *Proposer) Erase(now time.Duration, id RequestID, key string) error {
	return p.enqueue(now, key, &request{id: id, kind: kindErase, change: Read(), start: now})
}

func (p *Proposer) enqueue(now time.Duration, key string, r *request) error {
	if len(key) > MaxKeyBytes {
		return fmt.Errorf("%w: %d bytes (max %d)", ErrKeyTooLarge, len(key), MaxKeyBytes)
	}
	ks := p.keys[key]
	if ks != nil && ks.cur != nil {
		if len(ks.queue) >= p.cfg.MaxQueuePerKey {
			p.guards.Fire(guard.ProposerOverloaded)
			return fmt.Errorf("%w: key %q has %d waiting", ErrKeyBusy, key, len(ks.queue))
		}
		ks.queue = append(ks.queue, r)
		if r.origin == nil {
			p.stats.Proposals++
		}
		return nil
	}
	if p.active >= p.cfg.MaxInFlight {
		p.guards.Fire(guard.ProposerOverloaded)
		return fmt.Errorf("%w: %d keys active", ErrOverloaded, p.active)
	}
	if ks == nil {
		ks = &keyState{key: key}
		p.keys[key] = ks
	}
	if r.origin == nil {
		p.stats.Proposals++
	}
	ks.cur = r
	p.active++
	p.begin(now, ks)
	return nil
}

// begin starts ks.cur, or waits for the proposer's turn if the key is
// contended and turns are on, or for its place behind the rival it saw
// last if pacing is on.
func (p *Proposer) begin(now time.Duration, ks *keyState) {
	if to, enc, ok := p.forwardTarget(now, ks, ks.cur); ok {
		p.sendForward(now, ks, ks.cur, to, enc, 0)
		return
	}
	if w := p.turnWait(now, ks); w > 0 {
		ks.phase = phaseBackoff
		p.setTimer(ks, now+w)
		return
	}
	// A change forwarded here is not paced: its forwarder already gave up
	// its own place, and a pace (up to n+1 gaps) can outlast its forward
	// timeout, which would make it propose itself as well (forward.go).
	if ks.cur.kind == kindChange && ks.cur.origin == nil {
		if w := p.pacer.Wait(now, ks.key); w > 0 {
			p.stats.Paced++
			ks.cur.paced = true
			ks.phase = phaseBackoff
			p.setTimer(ks, now+w)
			return
		}
	}
	p.startRound(now, ks)
}

// learnPace sets the pace of the key's next proposal from the rival that
// r saw last: one PaceGap after its start offset, or none without a rival.
func (p *Proposer) learnPace(now time.Duration, ks *keyState, r *request) {
	if p.pacer == nil || r.kind != kindChange {
		return
	}
	d := time.Duration(0)
	if r.rivalSeen {
		// One gap after the rival's start offset, but at most one gap per
		// rival known on the key (plus one): in a settled chain of n
		// rivals no place is further back, and a rival dated by a late
		// retry would otherwise stretch the chain for several events.
		gap := p.backoff.PaceGap(p.cfg.PaceGapMin)
		n := max(p.pacer.Rivals(now, ks.key), len(r.rivals))
		d = min(r.rivalAt-r.start.Truncate(time.Millisecond)+gap, time.Duration(n+1)*gap, p.cfg.BackoffMax)
	}
	p.pacer.Learn(now, ks.key, d, r.paced, r.rivals)
}

// turnWait returns how long a new proposal on ks waits for the
// proposer's turn: zero with turns off, on a key no other proposer was
// seen on within TurnMemory, or inside the proposer's turn while a round
// still fits in what is left of it.
func (p *Proposer) turnWait(now time.Duration, ks *keyState) time.Duration {
	c := &p.cfg
	if c.Turns == 0 || !ks.foreignSeen || now-ks.foreignAt > c.TurnMemory || now < 0 {
		return 0
	}
	cycle := time.Duration(c.Turns) * c.TurnLength
	start := time.Duration(c.TurnIndex) * c.TurnLength
	off := now % cycle
	mean, sigma := p.backoff.EMA()
	if in := off - start; in >= 0 && in < c.TurnLength && in+2*(mean+sigma) <= c.TurnLength {
		return 0
	}
	return (start - off + cycle) % cycle
}

// startRound begins the next attempt of ks.cur.
func (p *Proposer) startRound(now time.Duration, ks *keyState) {
	if !p.admit(ks) {
		return // waits for the window (flow.go)
	}
	r := ks.cur
	p.absorbBatch(ks, r)
	r.attempts++
	p.stats.Rounds++
	if r.attempts == 1 {
		p.stats.FirstRounds++
	}
	ks.cfg = p.quorum
	ks.acks = ks.acks[:0]
	ks.rejects = ks.rejects[:0]
	ks.fast = false
	if r.kind == kindChange && p.cacheUsable(now, ks) {
		// One round trip: a prepare quorum already promised cacheBallot
		// while holding cacheValue, so phase 1 is done.
		ks.ballot = ks.cacheBallot
		ks.fast = true
		p.stats.FastPath++
		p.toAccept(now, ks, ks.cacheValue)
		return
	}
	// Start from the clock when it is ahead of every ballot seen for the
	// key: a proposer that has not written for a while would otherwise
	// start below the current ballot and be refused once per change.
	floor := ks.maxSeen.Max(ks.ballot)
	if ms := uint64(max(now, 0) / time.Millisecond); ms > floor.Counter {
		floor = Ballot{Counter: ms}
	}
	if ks.ballot.IsZero() {
		// A fresh key state: the ballots this proposer used on the key
		// before its state was dropped are at most forgotten. The clock
		// alone does not keep them apart: two rounds within one
		// millisecond, or a counter pushed past the clock by a conflict,
		// would start at a ballot that already carried another value.
		floor = floor.Max(Ballot{Counter: p.forgotten, Proposer: p.cfg.ID})
	}
	b, err := NextBallot(p.cfg.ID, floor)
	if err != nil {
		p.finish(now, ks, Value{}, err, false)
		return
	}
	ks.ballot = b
	ks.maxSeen = ks.maxSeen.Max(b)
	ks.best = Ballot{}
	ks.bestVal = Value{}
	ks.phase = phasePrepare
	ks.phaseAt = now
	p.setTimer(ks, now+p.phaseTimeout(p.cfg.Phase1Timeout))
	for _, id := range ks.cfg.Prepare.Members {
		ob := p.outboxFor(id)
		ob.prepare = append(ob.prepare, Item{Key: ks.key, Ballot: b})
	}
}

// toAccept applies the change to cur and sends phase 2.
func (p *Proposer) toAccept(now time.Duration, ks *keyState, cur Value) {
	r := ks.cur
	next, outErr := cur, error(nil)
	if r.kind == kindErase {
		if cur.Exists() {
			p.finish(now, ks, cur, fmt.Errorf("%w: erase of live register %q at version %d", ErrExists, ks.key, cur.Version), false)
			return
		}
	} else if own := r.ownsBallot(ks.best); own && !ks.fast {
		// A previous round of this request put this value at one of its
		// own ballots: finish committing it rather than applying the change twice.
		next = cur
		ks.srcBallot = ks.best
	} else {
		ks.srcBallot = ks.ballot
		var err error
		next, err = r.change.Apply(cur)
		if err != nil {
			next, outErr = cur, err
		} else if err := checkChange(cur, next); err != nil {
			p.finish(now, ks, cur, err, false)
			return
		} else if len(next.Data) > p.cfg.MaxValueBytes {
			p.finish(now, ks, cur, fmt.Errorf("%w: %d bytes (max %d)", ErrValueTooLarge, len(next.Data), p.cfg.MaxValueBytes), false)
			return
		}
		next = p.applyBatch(r, ks.ballot, next)
	}
	if next.Version != cur.Version {
		r.mutatingBallots = append(r.mutatingBallots, ks.ballot)
	}
	ks.proposed = next
	ks.outErr = outErr
	ks.phase = phaseAccept
	ks.acks = ks.acks[:0]
	ks.rejects = ks.rejects[:0]
	ks.next = Ballot{}
	if !p.cfg.DisableFastPath && r.kind == kindChange {
		if nb, err := NextBallot(p.cfg.ID, ks.ballot); err == nil {
			ks.next = nb
		}
	}
	ks.started = now
	p.setTimer(ks, now+p.phaseTimeout(p.cfg.Phase2Timeout))
	for _, id := range ks.cfg.Accept.Members {
		ob := p.outboxFor(id)
		ob.accept = append(ob.accept, Item{Key: ks.key, Ballot: ks.ballot, Next: ks.next, Value: next})
	}
}

// cacheUsable reports whether the next round of ks should bet on its
// cached promise. A promise is overtaken by the next round of any other
// proposer on the key, and then the bet costs a refused round (a NAK).
// Foreign rounds arrive at a rate of about one per the quiet time that
// preceded the cache, so the chance that the cache is stale is about
// age/quiet; the bet is taken while that is at most FastPathRisk, and
// never after FastPathTTL.
func (p *Proposer) cacheUsable(now time.Duration, ks *keyState) bool {
	if !ks.cacheOK || p.cfg.DisableFastPath {
		return false
	}
	age := now - ks.cachedAt
	if age > p.cfg.FastPathTTL {
		return false
	}
	if !ks.foreignSeen {
		return true
	}
	quiet := ks.cachedAt - ks.foreignAt
	return float64(age) <= p.cfg.FastPathRisk*float64(quiet)
}

// noteForeign records that b, a ballot an acceptor reported for ks, may
// be another proposer's round. Ballot counters start at the proposer's
// clock in milliseconds, so the counter dates the round; a date in the
// future (a clock ahead of ours, or a counter pushed up by refusals) is
// taken as now.
func (p *Proposer) noteForeign(now time.Duration, ks *keyState, b Ballot) {
	if b.IsZero() || b.Proposer == p.cfg.ID {
		return
	}
	at := now
	if c := b.Counter; c < uint64(max(now, 0)/time.Millisecond) {
		at = time.Duration(c) * time.Millisecond
	}
	if !ks.foreignSeen || ks.foreignAt < at {
		ks.foreignAt, ks.foreignSeen = at, true
	}
	p.noteActive(now, ks.key)
	p.learnLeader(now, ks.key, b.Proposer)
	// Ballot counters are milliseconds: a rival that reacted in the same
	// millisecond as this request dates at or after its truncated start.
	if r := ks.cur; r != nil && at >= r.start.Truncate(time.Millisecond) {
		r.rivals = addRival(r.rivals, b.Proposer)
		if !r.rivalSeen || r.rivalAt < at {
			r.rivalAt, r.rivalSeen = at, true
		}
	}
}

func (r *request) ownsBallot(b Ballot) bool {
	for _, m := range r.mutatingBallots {
		if m == b {
			return true
		}
	}
	return false
}

// Step feeds one reply from an acceptor. Replies that do not match the
// running round of their key (late, duplicated, reordered) are ignored.
func (p *Proposer) Step(now time.Duration, m Message) {
	if !m.Type.IsReply() {
		return
	}
	if m.Age > p.age {
		// An acceptor was fenced above us by a GC: every cached promise we
		// hold predates it, and our next message would be refused anyway.
		p.age = m.Age
		p.dropCaches()
	}
	if m.Type == MsgRaiseAgeReply {
		p.stepRaiseAge(now, m)
		return
	}
	for i := range m.Items {
		it := &m.Items[i]
		ks := p.keys[it.Key]
		if ks == nil || ks.cur == nil || it.Ballot != ks.ballot {
			continue
		}
		switch {
		case m.Type == MsgPrepareReply && ks.phase == phasePrepare:
			p.onPrepareReply(now, ks, m.From, m.Age, it)
		case m.Type == MsgAcceptReply && ks.phase == phaseAccept:
			p.onAcceptReply(now, ks, m.From, m.Age, it)
		case m.Type == MsgEraseReply && ks.phase == phaseErase:
			p.onEraseReply(now, ks, m.From, it)
		}
	}
}

// countNAK counts a round of ks ended by a conflicting ballot, and apart
// those that were the proposal's first round (collisions no backoff after
// a NAK can prevent).
func (p *Proposer) countNAK(ks *keyState) {
	p.guards.Fire(guard.ProposerNAK)
	p.stats.NAKs++
	if ks.cur.attempts == 1 {
		p.stats.FirstNAKs++
	}
}

func contains(ids []NodeID, id NodeID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// onReject records a refusal; it returns true when the round is over.
func (p *Proposer) onReject(now time.Duration, ks *keyState, set quorum.Set, from NodeID, floor uint64, it *Item) bool {
	if !set.Contains(from) || contains(ks.rejects, from) || contains(ks.acks, from) {
		return false
	}
	ks.rejects = append(ks.rejects, from)
	p.clearCache(ks)
	switch it.Reject {
	case RejectStaleAge:
		if floor > p.age {
			p.age = floor
			p.dropCaches()
		}
		p.stats.Fenced++
		p.guards.Fire(guard.ProposerStaleAge)
		p.failRound(now, ks, fmt.Errorf("%w: acceptor %d floor %d", ErrStaleAge, from, floor), false)
		return true
	case RejectConflict:
		ks.maxSeen = ks.maxSeen.Max(it.Conflict)
		p.noteForeign(now, ks, it.Conflict)
	}
	if !set.CanReach(func(id NodeID) bool { return contains(ks.rejects, id) }) {
		// The refused round stays a doubt: a minority may have accepted its
		// value, and a later prepare by anyone can adopt and commit it.
		err := fmt.Errorf("%w: %v from acceptor %d (greatest seen %v)", ErrConflict, it.Reject, from, ks.maxSeen)
		if it.Reject == RejectConflict {
			p.countNAK(ks)
		}
		p.failRound(now, ks, err, true)
		return true
	}
	return false
}

func (p *Proposer) onPrepareReply(now time.Duration, ks *keyState, from NodeID, floor uint64, it *Item) {
	set := ks.cfg.Prepare
	if it.Reject != RejectNone {
		p.onReject(now, ks, set, from, floor, it)
		return
	}
	if !set.Contains(from) || contains(ks.acks, from) || contains(ks.rejects, from) {
		return
	}
	ks.acks = append(ks.acks, from)
	if ks.best.Less(it.Accepted) {
		ks.best = it.Accepted
		ks.bestVal = it.Value
	}
	ks.maxSeen = ks.maxSeen.Max(it.Accepted)
	p.noteForeign(now, ks, it.Accepted)
	if !set.IsQuorum(func(id NodeID) bool { return contains(ks.acks, id) }) {
		return
	}
	p.flow.sample(now - ks.phaseAt)
	// The last committer writes the key (forward.go).
	p.learnLeader(now, ks.key, ks.best.Proposer)
	p.toAccept(now, ks, ks.bestVal)
}

func (p *Proposer) onAcceptReply(now time.Duration, ks *keyState, from NodeID, floor uint64, it *Item) {
	set := ks.cfg.Accept
	full := ks.cur.kind == kindErase
	if it.Reject != RejectNone {
		if full && it.Reject == RejectConflict {
			// The identity pass must reach every acceptor: any refusal ends it.
			ks.maxSeen = ks.maxSeen.Max(it.Conflict)
			p.countNAK(ks)
			p.failRound(now, ks, fmt.Errorf("%w: acceptor %d refused the GC identity pass", ErrConflict, from), true)
			return
		}
		p.onReject(now, ks, set, from, floor, it)
		return
	}
	if !set.Contains(from) || contains(ks.acks, from) || contains(ks.rejects, from) || it.Next != ks.next {
		return
	}
	ks.acks = append(ks.acks, from)
	if full {
		if len(ks.acks) < len(set.Members) {
			return
		}
	} else if !set.IsQuorum(func(id NodeID) bool { return contains(ks.acks, id) }) {
		return
	}
	p.backoff.Observe(now - ks.started)
	p.flow.sample(now - ks.started)
	if full {
		p.startRaiseAge(now, ks)
		return
	}
	// Acks promised ks.next; if they form a prepare quorum the next round
	// of this key may skip phase 1.
	if !ks.next.IsZero() && ks.cfg == p.quorum &&
		ks.cfg.Prepare.IsQuorum(func(id NodeID) bool { return contains(ks.acks, id) }) {
		p.setCache(ks, ks.next, ks.proposed)
		ks.cachedAt = now
	} else {
		p.clearCache(ks)
	}
	p.finish(now, ks, ks.proposed, ks.outErr, true)
}

// startRaiseAge fences every proposer older than the new floor: their
// cached promises (and delayed messages) for the erased key become useless.
func (p *Proposer) startRaiseAge(now time.Duration, ks *keyState) {
	ks.eraseBallot = ks.ballot
	ks.phase = phaseRaiseAge
	ks.acks = ks.acks[:0]
	p.age++
	p.dropCaches()
	p.setTimer(ks, now+p.cfg.Phase2Timeout)
	for _, id := range ks.cfg.Acceptors() {
		p.outboxFor(id).raise = true
	}
}

func (p *Proposer) stepRaiseAge(now time.Duration, m Message) {
	for _, k := range p.sortedEraseKeys(phaseRaiseAge) {
		ks := p.keys[k]
		if m.Age < p.age || contains(ks.acks, m.From) || !contains(ks.cfg.Acceptors(), m.From) {
			continue
		}
		ks.acks = append(ks.acks, m.From)
		if len(ks.acks) < len(ks.cfg.Acceptors()) {
			continue
		}
		ks.phase = phaseErase
		ks.acks = ks.acks[:0]
		ks.rejects = ks.rejects[:0]
		ks.ballot = ks.eraseBallot
		p.setTimer(ks, now+p.cfg.Phase2Timeout)
		for _, id := range ks.cfg.Acceptors() {
			ob := p.outboxFor(id)
			ob.erase = append(ob.erase, Item{Key: ks.key, Ballot: ks.eraseBallot})
		}
	}
}

// sortedEraseKeys lists keys in phase ph in a deterministic order.
func (p *Proposer) sortedEraseKeys(ph phase) []string {
	var keys []string
	for k, ks := range p.keys {
		if ks.cur != nil && ks.phase == ph {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func (p *Proposer) onEraseReply(now time.Duration, ks *keyState, from NodeID, it *Item) {
	if contains(ks.acks, from) {
		return
	}
	if it.Reject != RejectNone {
		ks.maxSeen = ks.maxSeen.Max(it.Conflict)
		p.failRound(now, ks, fmt.Errorf("%w: acceptor %d: %v", ErrConflict, from, it.Reject), true)
		return
	}
	ks.acks = append(ks.acks, from)
	if len(ks.acks) < len(ks.cfg.Acceptors()) {
		return
	}
	p.finish(now, ks, Value{}, nil, true)
}

// Tick advances time: expired phases fail their round, expired backoffs
// start the next one.
func (p *Proposer) Tick(now time.Duration) {
	for len(p.timers) > 0 && p.timers[0].at <= now {
		t := heap.Pop(&p.timers).(timer)
		ks := p.keys[t.key]
		if ks == nil || ks.cur == nil || ks.timerGen != t.gen {
			continue
		}
		if ks.phase == phaseBackoff {
			p.startRound(now, ks)
			continue
		}
		if ks.phase == phaseForward {
			p.forwardTimedOut(now, ks)
			continue
		}
		p.clearCache(ks)
		p.stats.Timeouts++
		p.guards.Fire(guard.ProposerTimeout)
		base := p.cfg.Phase1Timeout
		if ks.phase != phasePrepare {
			base = p.cfg.Phase2Timeout
		}
		p.flow.timedOut(now, p.phaseTimeout(base))
		p.failRound(now, ks, fmt.Errorf("%w: %v after %d acks", ErrTimeout, phaseName(ks.phase), len(ks.acks)), true)
	}
}

// NextDeadline returns the earliest time Tick has work to do.
func (p *Proposer) NextDeadline() (time.Duration, bool) {
	for len(p.timers) > 0 {
		t := p.timers[0]
		ks := p.keys[t.key]
		if ks != nil && ks.cur != nil && ks.timerGen == t.gen {
			return t.at, true
		}
		heap.Pop(&p.timers)
	}
	return 0, false
}

// failRound ends the running round; the request retries after a backoff
// or, out of attempts, finishes with an error.
func (p *Proposer) failRound(now time.Duration, ks *keyState, cause error, backoff bool) {
	p.roundEnded(now, ks)
	r := ks.cur
	r.lastErr = cause
	p.clearCache(ks)
	if r.attempts >= p.cfg.MaxAttempts {
		p.finish(now, ks, Value{}, fmt.Errorf("%w: key %q after %d attempts: %w", ErrNoQuorum, ks.key, r.attempts, cause), false)
		return
	}
	d := time.Duration(0)
	if backoff {
		d = p.backoff.Delay(r.attempts, p.rng)
	}
	ks.phase = phaseBackoff
	p.setTimer(ks, now+d)
}

// finish reports the result of ks.cur (and of the changes batched in its
// rounds) and starts the next queued request.
func (p *Proposer) finish(now time.Duration, ks *keyState, v Value, err error, committed bool) {
	if committed {
		p.flow.committed()
	}
	p.roundEnded(now, ks)
	r := ks.cur
	if committed && len(r.batch) > 0 {
		if head, ok := r.batchHead(ks.srcBallot); ok {
			v = head
		}
	}
	p.report(now, ks, r, v, err, committed)
	var requeue []*request
	for i, m := range r.batch {
		switch {
		case committed:
			mv, merr, ok := r.batchResult(ks.srcBallot, i)
			if !ok {
				// Never: every committed value was computed by a round
				// of r, which recorded its batch. Report the doubt.
				m.fwdUnknown = true
				mv, merr = Value{}, fmt.Errorf("%w: batch of round %v lost", ErrNoQuorum, ks.srcBallot)
			}
			p.report(now, ks, m, mv, merr, ok)
		case len(r.mutatingBallots) > 0:
			// The batch rode in accepts that may have been chosen.
			m.mutatingBallots = r.mutatingBallots
			p.report(now, ks, m, Value{}, err, false)
		default:
			requeue = append(requeue, m) // never sent: run again
		}
	}
	r.batch, r.batchOuts = nil, nil
	if len(requeue) > 0 {
		// At most MaxQueuePerKey went into the batch, so the queue stays
		// below twice its bound.
		ks.queue = append(requeue, ks.queue...)
	}
	if r.origin == nil {
		p.learnPace(now, ks, r)
	}
	ks.timerGen = 0 // no timer of this key is live any more
	ks.phase = phaseIdle
	ks.fast = false
	if len(ks.queue) > 0 {
		ks.cur = ks.queue[0]
		ks.queue[0] = nil
		ks.queue = ks.queue[1:]
		p.begin(now, ks)
		return
	}
	ks.cur = nil
	ks.queue = nil
	p.active--
	if !ks.cacheOK {
		p.forget(ks)
	}
}

// report hands r's outcome to its caller, or to the proposer it was
// forwarded from.
func (p *Proposer) report(now time.Duration, ks *keyState, r *request, v Value, err error, committed bool) {
	res := Result{ID: r.id, Key: ks.key, Value: v, Err: err, Attempts: r.attempts, FastPath: ks.fast, Start: r.start, End: now}
	if err != nil && (len(r.mutatingBallots) > 0 || r.fwdUnknown) && (errors.Is(err, ErrNoQuorum) || errors.Is(err, ErrVersionMismatch) || errors.Is(err, ErrExists)) {
		// An earlier round sent a mutating accept (or a forward) that may
		// have been chosen; a refusal now may be a refusal of our own write.
		res.Err = fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
		res.Value = Value{}
	}
	if o := r.origin; o != nil {
		st := ForwardOK
		switch {
		case committed && res.Err != nil:
			st = ForwardRefused
		case !committed:
			st = ForwardFailed
		}
		p.replyForward(o.from, ks.key, o.seq, st, res.Value, p.cfg.ID, errors.Is(res.Err, ErrUnknownOutcome))
		return
	}
	switch {
	case committed:
		p.stats.Commits++
	case errors.Is(res.Err, ErrUnknownOutcome):
		p.stats.Failures++
		p.stats.Unknown++
		p.guards.Fire(guard.ProposerUnknownOutcome)
	default:
		p.stats.Failures++
		if errors.Is(res.Err, ErrNoQuorum) {
			p.guards.Fire(guard.ProposerNoQuorum)
		}
	}
	p.results = append(p.results, res)
}

// forget drops the state of idle key ks, folding the ballots it sent into
// forgotten: the next state of the key starts above them.
func (p *Proposer) forget(ks *keyState) {
	p.forgotten = max(p.forgotten, ks.ballot.Counter, ks.next.Counter, ks.cacheBallot.Counter)
	delete(p.keys, ks.key)
}

func (p *Proposer) setTimer(ks *keyState, at time.Duration) {
	p.timerGen++
	ks.timerGen = p.timerGen
	ks.deadline = at
	heap.Push(&p.timers, timer{at: at, key: ks.key, gen: ks.timerGen})
}

func (p *Proposer) setCache(ks *keyState, b Ballot, v Value) {
	ks.cacheOK = true
	ks.cacheBallot = b
	ks.cacheValue = v
	if ks.lru != nil {
		p.lru.MoveToFront(ks.lru)
		return
	}
	ks.lru = p.lru.PushFront(ks)
	p.cached++
	for p.cached > p.cfg.MaxCachedKeys {
		old := p.lru.Back().Value.(*keyState)
		p.clearCache(old)
		if old.cur == nil && p.keys[old.key] == old {
			p.forget(old)
		}
	}
}

func (p *Proposer) clearCache(ks *keyState) {
	ks.cacheOK = false
	ks.cacheValue = Value{}
	if ks.lru != nil {
		p.lru.Remove(ks.lru)
		ks.lru = nil
		p.cached--
	}
}

func (p *Proposer) dropCaches() {
	for e := p.lru.Front(); e != nil; {
		nx := e.Next()
		ks := e.Value.(*keyState)
		p.clearCache(ks)
		if ks.cur == nil && p.keys[ks.key] == ks {
			p.forget(ks)
		}
		e = nx
	}
}

// outboxFor returns acceptor id's outbox, for an item about to be queued.
func (p *Proposer) outboxFor(id NodeID) *outbox {
	p.queued = true
	ob := p.out[id]
	if ob == nil {
		ob = &outbox{}
		p.out[id] = ob
		p.outOrder = append(p.outOrder, id)
		slices.Sort(p.outOrder)
	}
	return ob
}

// HasReady reports whether Ready would return anything.
func (p *Proposer) HasReady() bool {
	// queued, not a scan of the outboxes: drivers ask after every event,
	// and ranging over the map cost a tenth of a drill's register work.
	return len(p.results) > 0 || p.queued || len(p.fwdOut) > 0
}

// Ready returns the messages to send (at most MaxBatchItems items each,
// one batch per acceptor and type) and the finished results.
func (p *Proposer) Ready() ([]Message, []Result) {
	var msgs []Message
	for _, id := range p.outOrder {
		ob := p.out[id]
		msgs = p.appendBatches(msgs, MsgPrepare, id, ob.prepare)
		msgs = p.appendBatches(msgs, MsgAccept, id, ob.accept)
		msgs = p.appendBatches(msgs, MsgErase, id, ob.erase)
		if ob.raise {
			msgs = append(msgs, Message{Type: MsgRaiseAge, From: p.cfg.ID, To: id, Age: p.age})
		}
		ob.prepare, ob.accept, ob.erase, ob.raise = ob.prepare[:0], ob.accept[:0], ob.erase[:0], false
	}
	p.queued = false
	res := p.results
	p.results = nil
	return msgs, res
}

func (p *Proposer) appendBatches(msgs []Message, t MsgType, to NodeID, items []Item) []Message {
	for len(items) > 0 {
		n := min(len(items), p.cfg.MaxBatchItems)
		batch := make([]Item, n)
		copy(batch, items[:n])
		msgs = append(msgs, Message{Type: t, From: p.cfg.ID, To: to, Age: p.age, Items: batch})
		items = items[n:]
	}
	return msgs
}

func phaseName(ph phase) string {
	switch ph {
	case phasePrepare:
		return "prepare"
	case phaseAccept:
		return "accept"
	case phaseRaiseAge:
		return "raise-age"
	case phaseErase:
		return "erase"
	case phaseBackoff:
		return "backoff"
	case phaseForward:
		return "forward"
	}
	return "idle"
}

type timer struct {
	at  time.Duration
	key string
	gen uint64
}

// timerHeap orders timers by time, then key, so that ties resolve the same
// way in every run.
type timerHeap []timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	if h[i].key != h[j].key {
		return h[i].key < h[j].key
	}
	return h[i].gen < h[j].gen
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
