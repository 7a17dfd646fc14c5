package caspaxos

import (
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Forwarding to a distinguished proposer (not in the paper; session 9).
// It runs in the simulator and the benchmarks only: internal/nodewire has no
// forward messages yet, so the agent never turns it on.
//
// Backoff, the paper's or the pacing of first attempts (pacing.go), delays
// a proposer before it sends. When proposers write a shared key at
// independent times (steady heartbeats), whether another one starts
// within one round of this one is a coincidence nothing seen before
// predicts, so no delay removes the collision: only serialising the
// proposers before they send does. Forwarding does that.
//
// A proposer that saw another proposer on the key within ForwardMemory, or
// is told of one up front (known writers, below), does not propose its
// change on that shared, so contended, key itself: it sends the change, as
// data (a ForwardableChange, decoded by the peer's ChangeCodec), to the
// key's leader (who leads: below). The leader runs the change in
// its own rounds, where it queues behind the leader's other proposals on
// the key and is applied in one round with every other change waiting
// there (a batch: CASPaxos applies a function to the state, and a sequence
// of changes is one). A proposer's rounds on one key never overlap, so
// while every writer of the key forwards to one leader, nothing collides.
// Every commit is still a full CASPaxos round: forwarding changes only who
// proposes, never what a round may choose, so safety is the protocol's.
//
// Who leads: the writer of the key with the smallest id that has not
// failed, as far as this proposer knows. Hints converge without an
// election: a proposer learns of the key's writers from the ballots its
// rounds see (the last committer in a prepare quorum, the ballot of a
// refusal, a rival's accepted ballot) and from forwards and their
// replies, and keeps the smallest id; if its own id is smaller, it leads
// (proposes itself). A forward to a proposer that knows a smaller one is
// answered ForwardNotMe with it (at most MaxForwardHops redirects, then
// it is taken), and a forward from a smaller id makes the receiver
// redirect it to its sender, which then leads. So the first proposer
// whose rounds saw the smallest writer learns it, and every forward
// afterwards spreads it; at most one round per claimant collides on the
// way. The id order is arbitrary: it ignores where the proposers are
// (here the smallest id happens to sit next to an acceptor).
//
// Known writers (session 11). Learning writers from ballots needs
// rounds, and the rounds of the first events, before any proposer has
// seen another, collide (session 10: burst seeds 1..20 had 405 NAKs in
// their first events, none after; steady 3). So a proposer may be told a
// key's candidate writers up front (ProposerConfig.ForwardWriters: in the
// product a partition's replicas are in the partition layout; in the
// simulator's contention scenario they are the cluster's proposers). A
// key with a known writer other than this proposer is shared from its
// first proposal, and the smallest known writer that did not fail takes
// part in the choice of the leader with the hints: every proposer told
// the same writers names the same leader before any round, so the first
// event forwards too and nothing collides. Nothing else changes: the
// list only tells who to send to, so a wrong or stale one costs latency
// (a forward timeout, a redirect), never safety.
//
// Pacing (pacing.go) orders the first attempts of proposers that propose
// themselves; a forwarded change is not paced at its leader, and a
// leader's own proposal waiting for its pace starts at once when a
// forwarded change queues behind it (endPaceFor): the rivals it waits for
// are the forwarders, and a pace can outlast their forward timeout.
//
// Failure. A forward unanswered within max(ForwardTimeoutMin,
// forwardTimeoutRounds * (EMA + sigma)), or answered busy or failed,
// falls back to the forwarder's own rounds with the paper's backoff, and
// a leader that did not answer is not forwarded to again for
// ForwardMemory (up to maxFailedWriters such writers are remembered per
// key, so that with known writers two dead ones do not take turns). With
// known writers a forward that timed out goes on to the next smallest
// writer instead (at most MaxForwardHops times), and falls back only
// when that is the forwarder itself: the forwarders that timed out
// together name the same next leader, where falling back together made
// them collide. A known writer that is down therefore costs each
// forwarder one timeout (ForwardTimeoutMin before any phase-2 sample:
// 500 ms) per ForwardMemory. A ForwardWriters that leaves out the writers
// the membership reports down avoids even that, and the larger cost: the
// next leader learns that a smaller writer is dead only from its own
// forwards, so whenever its mark has lapsed it redirects the forwards it
// gets there, and they wait out a timeout too (docs/BENCHMARKS.md,
// session 13: p50 80 -> 513 ms in the burst shape; the forwarders'
// failure marks sent along were tried, and spread false ones). A slow
// but live leader is not taken for a dead one as long as the way there,
// its queued round, its batched round and the way back fit in the
// timeout, max(ForwardTimeoutMin, 8 * (EMA + sigma)). A forward that
// timed out has an unknown outcome (the leader may still commit it), so
// its change may be applied twice: ForwardableChange's contract is that a
// change applied to a value it is already part of is harmless (idempotent
// or conditional on a version), the same contract a proposer's own retry
// already relies on when another proposer carried its accept over. A CAS
// that then finds another version reports ErrUnknownOutcome, as after an
// accept that may have been chosen. The leader drops a forward it already
// took (a duplicate), by the forwarder's sequence number.
//
// Bounded: hints for MaxForwardKeys keys (least recently used out), the
// leader's queue is MaxQueuePerKey (a full one answers ForwardBusy), a
// batch is at most the queue, the duplicate filter maxForwardPeers peers,
// the failed writers maxFailedWriters per key, and a ForwardWriters
// answer counts for at most MaxKnownWriters ids (nothing of it is kept).
// Deterministic: time is passed in, no randomness (ForwardWriters must be
// deterministic too).

// ForwardableChange is a change that can travel to another proposer.
// EncodeChange returns its encoding for the peer's ChangeCodec. Applying it
// to a value that already includes it must be harmless (see above).
type ForwardableChange interface {
	Change
	EncodeChange() []byte
}

// ChangeCodec decodes changes forwarded by other proposers.
type ChangeCodec interface {
	DecodeChange(data []byte) (Change, error)
}

// ForwardKind tells a forward from its reply.
type ForwardKind uint8

const (
	// ForwardRequest carries a change to the key's leader.
	ForwardRequest ForwardKind = iota + 1
	// ForwardReply answers one.
	ForwardReply
)

// ForwardStatus is what a leader did with a forwarded change.
type ForwardStatus uint8

const (
	// ForwardOK: committed; Value is the register after the change.
	ForwardOK ForwardStatus = iota + 1
	// ForwardRefused: the change refused (for example a CAS mismatch) at
	// Value, which is committed.
	ForwardRefused
	// ForwardNotMe: the receiver is not the leader; Leader is its hint.
	ForwardNotMe
	// ForwardBusy: the leader's queue for the key is full; nothing ran.
	ForwardBusy
	// ForwardFailed: the leader gave up; Unknown says it may have been chosen.
	ForwardFailed
)

func (s ForwardStatus) String() string {
	switch s {
	case ForwardOK:
		return "ok"
	case ForwardRefused:
		return "refused"
	case ForwardNotMe:
		return "not-me"
	case ForwardBusy:
		return "busy"
	case ForwardFailed:
		return "failed"
	}
	return fmt.Sprintf("ForwardStatus(%d)", uint8(s))
}

// Forward is a message between two proposers about one key.
type Forward struct {
	Kind     ForwardKind
	From, To NodeID
	Key      string
	// Seq numbers the forwarder's forwards; the reply echoes it.
	Seq  uint64
	Hops uint8
	// Change is the encoded change (request).
	Change []byte
	// Reply fields.
	Status  ForwardStatus
	Value   Value
	Leader  NodeID
	Unknown bool
}

func (f Forward) String() string {
	if f.Kind == ForwardRequest {
		return fmt.Sprintf("Forward %d->%d %q seq=%d hops=%d", f.From, f.To, f.Key, f.Seq, f.Hops)
	}
	return fmt.Sprintf("ForwardReply %d->%d %q seq=%d %v leader=%d", f.From, f.To, f.Key, f.Seq, f.Status, f.Leader)
}

// ErrForwardRefused is the error of a forwarded change the leader refused
// when the forwarder cannot rebuild the change's own error.
var ErrForwardRefused = errors.New("caspaxos: forwarded change refused")

const (
	// forwardTimeoutRounds is the forward timeout in phase-2 estimates:
	// one-way to the leader, its queue (one round), a batched round of up
	// to two phases, and back.
	forwardTimeoutRounds = 8
	// maxForwardPeers bounds the duplicate filter (peers with a last seq).
	maxForwardPeers = 4096
	// maxFailedWriters bounds the writers of one key remembered as failed.
	maxFailedWriters = 8
)

// failMark is a writer a forward to timed out: not forwarded to before until.
type failMark struct {
	id    NodeID
	until time.Duration
}

// fwdEntry is what a proposer knows of one key's leader.
type fwdEntry struct {
	key    string
	leader NodeID // 0: none known
	// activeAt: the last sign of another proposer on the key (a foreign
	// ballot, a forward taken or answered); activeSeen: there was one.
	activeAt   time.Duration
	activeSeen bool
	// failed are the writers forwarded to that did not answer, each not
	// again before its until (at most maxFailedWriters, the oldest out).
	// More than one: with known writers (ForwardWriters) a proposer that
	// remembered one only would go back to the first dead writer after
	// the second timed out, one timeout per proposal.
	failed []failMark
	lru    *list.Element
}

// forwardTable holds leader hints per key, bounded, least recently used out.
type forwardTable struct {
	max  int
	keys map[string]*fwdEntry
	lru  *list.List // of *fwdEntry, most recent at front
	// served is the last seq taken from each forwarder (duplicates drop).
	served map[NodeID]uint64
}

func newForwardTable(max int) *forwardTable {
	return &forwardTable{max: max, keys: make(map[string]*fwdEntry), lru: list.New(), served: make(map[NodeID]uint64)}
}

// get returns key's entry, creating it if create.
func (t *forwardTable) get(key string, create bool) *fwdEntry {
	if e := t.keys[key]; e != nil {
		t.lru.MoveToFront(e.lru)
		return e
	}
	if !create {
		return nil
	}
	e := &fwdEntry{key: key}
	e.lru = t.lru.PushFront(e)
	t.keys[key] = e
	for len(t.keys) > t.max {
		old := t.lru.Back().Value.(*fwdEntry)
		t.lru.Remove(old.lru)
		delete(t.keys, old.key)
	}
	return e
}

// fresh reports whether seq from a forwarder is new, and records it. The
// filter is bounded by clearing it when full: a duplicate let through then
// is applied twice, which the ForwardableChange contract makes harmless.
func (t *forwardTable) fresh(from NodeID, seq uint64) bool {
	if last, ok := t.served[from]; ok && seq <= last {
		return false
	}
	if len(t.served) >= maxForwardPeers {
		clear(t.served)
	}
	t.served[from] = seq
	return true
}

func (e *fwdEntry) markActive(now time.Duration) {
	if !e.activeSeen || e.activeAt < now {
		e.activeAt, e.activeSeen = now, true
	}
}

// isFailed reports whether a forward to id timed out within ForwardMemory.
func (e *fwdEntry) isFailed(now time.Duration, id NodeID) bool {
	for _, f := range e.failed {
		if f.id == id && now < f.until {
			return true
		}
	}
	return false
}

// markFailed remembers that a forward to id timed out, until until, and
// drops id from the hint. Expired marks go first, then the oldest.
func (e *fwdEntry) markFailed(now time.Duration, id NodeID, until time.Duration) {
	e.failed = slices.DeleteFunc(e.failed, func(f failMark) bool { return f.id == id || now >= f.until })
	if len(e.failed) >= maxFailedWriters {
		e.failed = slices.Delete(e.failed, 0, len(e.failed)-maxFailedWriters+1)
	}
	e.failed = append(e.failed, failMark{id: id, until: until})
	if e.leader == id {
		e.leader = 0
	}
}

// learnLeader folds c, a writer of the key, into the hint: the smallest
// id that did not fail recently.
func (e *fwdEntry) learnLeader(now time.Duration, c NodeID) {
	if c == 0 || e.isFailed(now, c) {
		return
	}
	if e.leader == 0 || c < e.leader {
		e.leader = c
	}
}

// lead returns the key's leader as self sees it: the smallest of self,
// the hint and known (the smallest known writer, knownWriter; 0: none)
// that did not fail recently.
func (e *fwdEntry) lead(now time.Duration, self, known NodeID) NodeID {
	l := self
	for _, c := range [...]NodeID{e.leader, known} {
		if c != 0 && c < l && !e.isFailed(now, c) {
			l = c
		}
	}
	return l
}

// knownWriter returns the smallest writer of e's key that ForwardWriters
// names, other than this proposer and not failed recently (0: none, or
// no ForwardWriters). Only the first MaxKnownWriters ids count.
func (p *Proposer) knownWriter(now time.Duration, e *fwdEntry) NodeID {
	if p.cfg.ForwardWriters == nil {
		return 0
	}
	ws := p.cfg.ForwardWriters(e.key)
	var best NodeID
	for _, id := range ws[:min(len(ws), MaxKnownWriters)] {
		if id == 0 || id == p.cfg.ID || e.isFailed(now, id) {
			continue
		}
		if best == 0 || id < best {
			best = id
		}
	}
	return best
}

// forwarding reports whether forwarding is on.
func (p *Proposer) forwarding() bool { return p.fwd != nil }

// noteActive records a sign of another proposer on key.
func (p *Proposer) noteActive(now time.Duration, key string) {
	if p.fwd == nil {
		return
	}
	p.fwd.get(key, true).markActive(now)
}

// learnLeader folds a writer of key into the hints.
func (p *Proposer) learnLeader(now time.Duration, key string, c NodeID) {
	if p.fwd == nil {
		return
	}
	p.fwd.get(key, true).learnLeader(now, c)
}

// forwardTarget returns the leader r on ks should be forwarded to, if any:
// forwarding on, the change forwardable and not forwarded here, the key
// shared (another writer seen within ForwardMemory, or one known from
// ForwardWriters), a leader known that is not this proposer and did not
// just fail.
func (p *Proposer) forwardTarget(now time.Duration, ks *keyState, r *request) (NodeID, []byte, bool) {
	if p.fwd == nil || r.kind != kindChange || r.origin != nil || r.fellBack {
		return 0, nil, false
	}
	fc, ok := r.change.(ForwardableChange)
	if !ok {
		return 0, nil, false
	}
	e := p.fwd.get(ks.key, p.cfg.ForwardWriters != nil)
	if e == nil {
		return 0, nil, false
	}
	known := p.knownWriter(now, e)
	if known == 0 && (!e.activeSeen || now-e.activeAt > p.cfg.ForwardMemory) {
		return 0, nil, false
	}
	l := e.lead(now, p.cfg.ID, known)
	if l == p.cfg.ID {
		return 0, nil, false
	}
	return l, fc.EncodeChange(), true
}

// forwardTimeout is how long a forwarder waits for the leader's answer.
func (p *Proposer) forwardTimeout() time.Duration {
	mean, sigma := p.backoff.EMA()
	return max(p.cfg.ForwardTimeoutMin, forwardTimeoutRounds*(mean+sigma))
}

// sendForward sends r's change to leader to and waits for the answer.
func (p *Proposer) sendForward(now time.Duration, ks *keyState, r *request, to NodeID, enc []byte, hops uint8) {
	p.fwdSeq++
	r.fwdSeq, r.fwdTo, r.fwdHops = p.fwdSeq, to, hops
	p.stats.Forwards++
	ks.phase = phaseForward
	p.setTimer(ks, now+p.forwardTimeout())
	p.fwdOut = append(p.fwdOut, Forward{Kind: ForwardRequest, From: p.cfg.ID, To: to, Key: ks.key, Seq: r.fwdSeq, Hops: hops, Change: enc})
	p.queued = true
}

// fallBack ends r's forwarding: it proposes itself from now on.
func (p *Proposer) fallBack(now time.Duration, ks *keyState, r *request, unknown bool) {
	r.fellBack = true
	r.fwdUnknown = r.fwdUnknown || unknown
	p.stats.ForwardFallbacks++
	p.begin(now, ks)
}

// forwardTimedOut: the leader did not answer; its outcome is unknown.
// With known writers the change goes on to the next one: every forwarder
// told the same writers names the same next leader, while falling back
// made the forwarders that timed out together collide (the burst shape
// with its leader dead: 15% of rounds NAKed, 40 proposals given up).
func (p *Proposer) forwardTimedOut(now time.Duration, ks *keyState) {
	r := ks.cur
	p.stats.ForwardTimeouts++
	e := p.fwd.get(ks.key, true)
	e.markFailed(now, r.fwdTo, now+p.cfg.ForwardMemory)
	if fc, ok := r.change.(ForwardableChange); ok && p.cfg.ForwardWriters != nil && int(r.fwdHops) < p.cfg.MaxForwardHops {
		if l := e.lead(now, p.cfg.ID, p.knownWriter(now, e)); l != p.cfg.ID && l != r.fwdTo {
			r.fwdUnknown = true // the dead leader may still have applied it
			p.sendForward(now, ks, r, l, fc.EncodeChange(), r.fwdHops+1)
			return
		}
	}
	p.fallBack(now, ks, r, true)
}

// StepForward feeds a forward or a forward's reply from another proposer.
// With forwarding off it is ignored.
func (p *Proposer) StepForward(now time.Duration, f Forward) {
	if p.fwd == nil || f.To != p.cfg.ID || len(f.Key) > MaxKeyBytes {
		return
	}
	switch f.Kind {
	case ForwardRequest:
		p.stepForwardRequest(now, f)
	case ForwardReply:
		p.stepForwardReply(now, f)
	}
}

func (p *Proposer) replyForward(to NodeID, key string, seq uint64, st ForwardStatus, v Value, leader NodeID, unknown bool) {
	p.fwdOut = append(p.fwdOut, Forward{Kind: ForwardReply, From: p.cfg.ID, To: to, Key: key, Seq: seq, Status: st, Value: v, Leader: leader, Unknown: unknown})
	p.queued = true
}

func (p *Proposer) stepForwardRequest(now time.Duration, f Forward) {
	if !p.fwd.fresh(f.From, f.Seq) {
		return // a duplicate of a forward already taken or answered
	}
	e := p.fwd.get(f.Key, true)
	e.markActive(now)
	e.learnLeader(now, f.From) // it writes the key
	if l := e.lead(now, p.cfg.ID, p.knownWriter(now, e)); l != p.cfg.ID && int(f.Hops) < p.cfg.MaxForwardHops {
		// A smaller writer is known (the sender itself, perhaps): redirect.
		p.stats.ForwardRedirects++
		p.replyForward(f.From, f.Key, f.Seq, ForwardNotMe, Value{}, l, false)
		return
	}
	ch, err := p.cfg.ChangeCodec.DecodeChange(f.Change)
	if err != nil || ch == nil {
		p.replyForward(f.From, f.Key, f.Seq, ForwardFailed, Value{}, 0, false)
		return
	}
	r := &request{id: 0, kind: kindChange, change: ch, start: now, origin: &fwdOrigin{from: f.From, seq: f.Seq}}
	if err := p.enqueue(now, f.Key, r); err != nil {
		p.replyForward(f.From, f.Key, f.Seq, ForwardBusy, Value{}, 0, false)
		return
	}
	p.stats.ForwardsServed++
	p.endPaceFor(now, p.keys[f.Key])
}

// endPaceFor starts at once the first round of a leader's own proposal
// that waits for its pace (pacing.go) when a forwarded change queues
// behind it. The pace waits for the rivals seen at the last events, and a
// rival that forwards no longer proposes; waiting the whole pace (up to
// n+1 gaps, over a second with nine proposers) outlasted the forwarder's
// timeout (session 10: 195 timeouts without faults over burst seeds
// 1..200), after which the forwarder proposed itself and collided. The
// round carries the waiting changes (absorbBatch).
func (p *Proposer) endPaceFor(now time.Duration, ks *keyState) {
	if ks == nil || ks.cur == nil || ks.phase != phaseBackoff || !ks.cur.paced || ks.cur.attempts > 0 || ks.windowWait {
		return
	}
	ks.timerGen = 0 // the pace's timer is void
	p.startRound(now, ks)
}

func (p *Proposer) stepForwardReply(now time.Duration, f Forward) {
	ks := p.keys[f.Key]
	if ks == nil || ks.cur == nil || ks.phase != phaseForward || ks.cur.fwdSeq != f.Seq || ks.cur.fwdTo != f.From {
		return // late, duplicated, or for a forward given up on
	}
	r := ks.cur
	e := p.fwd.get(f.Key, true)
	switch f.Status {
	case ForwardOK, ForwardRefused:
		e.markActive(now)
		e.learnLeader(now, f.From)
		var err error
		if f.Status == ForwardRefused {
			// Apply is deterministic: the change refuses the value it was
			// refused at with its own error (a CAS's VersionMismatchError).
			if _, err = r.change.Apply(f.Value); err == nil {
				err = fmt.Errorf("%w: by leader %d at %v", ErrForwardRefused, f.From, f.Value)
			}
		}
		r.attempts = max(r.attempts, 1)
		p.finish(now, ks, f.Value, err, true)
	case ForwardNotMe:
		e.markActive(now)
		e.learnLeader(now, f.Leader)
		l := e.lead(now, p.cfg.ID, p.knownWriter(now, e))
		fc, ok := r.change.(ForwardableChange)
		if l == p.cfg.ID || l == f.From || !ok || int(r.fwdHops) >= p.cfg.MaxForwardHops {
			// Named the leader (or out of redirects): propose itself.
			r.fellBack = true
			p.begin(now, ks)
			return
		}
		p.sendForward(now, ks, r, l, fc.EncodeChange(), r.fwdHops+1)
	default: // busy, failed
		p.fallBack(now, ks, r, f.Unknown)
	}
}

// ReadyForwards returns the forwards and replies to send to other
// proposers. Drivers with forwarding on call it with Ready.
func (p *Proposer) ReadyForwards() []Forward {
	out := p.fwdOut
	p.fwdOut = nil
	return out
}

// fwdOrigin marks a request run for another proposer.
type fwdOrigin struct {
	from NodeID
	seq  uint64
}

// batchOut is what the members of a batch got in the round at ballot;
// head is the value the request's own change produced, before the batch.
type batchOut struct {
	ballot Ballot
	head   Value
	vals   []Value
	errs   []error
}

// absorbBatch moves the changes queued behind r into r's rounds (with
// forwarding on): a leader applies every change waiting on the key in one
// round.
func (p *Proposer) absorbBatch(ks *keyState, r *request) {
	if p.fwd == nil || r.kind != kindChange || r.attempts > 0 {
		return
	}
	n := 0
	for n < len(ks.queue) && ks.queue[n].kind == kindChange {
		n++
	}
	if n == 0 {
		return
	}
	r.batch = append(r.batch, ks.queue[:n]...)
	clear(ks.queue[:n])
	ks.queue = ks.queue[n:]
}

// applyBatch applies r's batch after next (the value r's own change
// produced) and records each member's outcome for ballot b.
func (p *Proposer) applyBatch(r *request, b Ballot, next Value) Value {
	if len(r.batch) == 0 {
		return next
	}
	out := batchOut{ballot: b, head: next, vals: make([]Value, len(r.batch)), errs: make([]error, len(r.batch))}
	for i, m := range r.batch {
		v, err := m.change.Apply(next)
		switch {
		case err != nil:
		case checkChange(next, v) != nil:
			err = checkChange(next, v)
		case len(v.Data) > p.cfg.MaxValueBytes:
			err = fmt.Errorf("%w: %d bytes (max %d)", ErrValueTooLarge, len(v.Data), p.cfg.MaxValueBytes)
		default:
			next = v
		}
		out.vals[i], out.errs[i] = next, err
	}
	r.batchOuts = append(r.batchOuts, out)
	return next
}

// batchHead returns the value r's own change produced in the round at
// ballot b, if that round carried a batch. The committed value is the
// batch's last: reporting it to r would hand r's caller a state with
// changes applied after its own (a CAS that wrote X reading back Y), so r
// reports its own, linearised first in the batch (session 10).
func (r *request) batchHead(b Ballot) (Value, bool) {
	for _, o := range r.batchOuts {
		if o.ballot == b {
			return o.head, true
		}
	}
	return Value{}, false
}

// batchResult returns member i's outcome in the round at ballot b.
func (r *request) batchResult(b Ballot, i int) (Value, error, bool) {
	for _, o := range r.batchOuts {
		if o.ballot == b {
			return o.vals[i], o.errs[i], true
		}
	}
	return Value{}, nil, false
}

// Encodings of the built-in changes (BuiltinCodec decodes them): a tag
// byte, the expected version as a uvarint, then the data. All three are
// conditional or idempotent, so applying one twice is harmless.
const (
	tagCAS    = 'C'
	tagInit   = 'I'
	tagDelete = 'D'
)

func encodeBuiltin(tag byte, expected uint64, data []byte) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(data))
	b = append(b, tag)
	b = binary.AppendUvarint(b, expected)
	return append(b, data...)
}

// EncodeChange makes CAS forwardable.
func (c casChange) EncodeChange() []byte { return encodeBuiltin(tagCAS, c.expected, c.data) }

// EncodeChange makes InitIfAbsent forwardable.
func (c initChange) EncodeChange() []byte { return encodeBuiltin(tagInit, 0, c.data) }

// EncodeChange makes Delete forwardable.
func (c deleteChange) EncodeChange() []byte { return encodeBuiltin(tagDelete, c.expected, nil) }

// BuiltinCodec decodes forwarded CAS, InitIfAbsent and Delete changes.
type BuiltinCodec struct{}

// DecodeChange decodes one of the built-in encodings.
func (BuiltinCodec) DecodeChange(b []byte) (Change, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: forwarded change of %d bytes", ErrCorrupt, len(b))
	}
	exp, n := binary.Uvarint(b[1:])
	if n <= 0 {
		return nil, fmt.Errorf("%w: forwarded change version", ErrCorrupt)
	}
	data := append([]byte(nil), b[1+n:]...)
	switch b[0] {
	case tagCAS:
		return CAS(exp, data), nil
	case tagInit:
		return InitIfAbsent(data), nil
	case tagDelete:
		return Delete(exp), nil
	}
	return nil, fmt.Errorf("%w: forwarded change tag %q", ErrCorrupt, b[0])
}
