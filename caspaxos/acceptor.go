package caspaxos

import (
	"fmt"
	"sort"

	"github.com/fmnode/fmnode/guard"
)

// Acceptor is the CASPaxos acceptor as a pure state machine. It keeps every
// record in memory (recovered from the store at start) and turns requests
// into replies plus the writes those replies depend on.
//
// Driving it: Step each request, then take Ready(). The driver must persist
// Ready.Batch durably (Store.Apply) before sending Ready.Messages, and must not
// send the messages of a later Ready before the batch of an earlier one is
// durable. Stepping many requests before one Ready is how group commit works:
// all their writes share one fsync.
type Acceptor struct {
	id       NodeID
	records  map[string]*Record
	ageFloor uint64
	// eraseFloor is the greatest ballot promised on any register this
	// acceptor erased. An absent key may have been erased, and a proposer
	// may still hold a promise for it from before the erase; refusing
	// ballots up to this floor on absent keys keeps such a proposer from
	// resurrecting a stale value. It is stored as the record of key "".
	eraseFloor Ballot

	pending   Batch
	putIndex  map[string]int // key -> index in pending.Put, so a key is written once per batch
	outbox    []Message
	violation error
	// reuses counts Accepts that carried a second value at the ballot of
	// the value this acceptor had accepted; reuse is the first of them.
	reuses uint64
	reuse  error
	// guards counts the refusals (SetGuards; none by default).
	guards guard.Counter
}

// eraseFloorKey is the reserved key under which the erase floor is stored;
// registers never use the empty key.
const eraseFloorKey = ""

// NewAcceptor recovers an acceptor from its stored state.
func NewAcceptor(id NodeID, st State) (*Acceptor, error) {
	a := &Acceptor{
		id:       id,
		records:  make(map[string]*Record, len(st.Records)),
		ageFloor: st.AgeFloor,
		putIndex: make(map[string]int),
		guards:   guard.Discard{},
	}
	for i := range st.Records {
		r := st.Records[i]
		if r.Promised.Less(r.Accepted) {
			return nil, fmt.Errorf("%w: record %q: accepted ballot %v above promise %v", ErrCorrupt, r.Key, r.Accepted, r.Promised)
		}
		if r.Key == eraseFloorKey {
			a.eraseFloor = r.Promised
			continue
		}
		if _, dup := a.records[r.Key]; dup {
			return nil, fmt.Errorf("%w: record %q stored twice", ErrCorrupt, r.Key)
		}
		a.records[r.Key] = &r
	}
	return a, nil
}

// ID returns the acceptor's id.
func (a *Acceptor) ID() NodeID { return a.id }

// AgeFloor returns the smallest proposer age this acceptor serves.
func (a *Acceptor) AgeFloor() uint64 { return a.ageFloor }

// Len returns the number of registers held.
func (a *Acceptor) Len() int { return len(a.records) }

// Get returns a copy of the record for key.
func (a *Acceptor) Get(key string) (Record, bool) {
	r, ok := a.records[key]
	if !ok {
		return Record{}, false
	}
	return *r, true
}

// Keys returns every key held, sorted (for GC scans and tests).
func (a *Acceptor) Keys() []string {
	keys := make([]string, 0, len(a.records))
	for k := range a.records {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// EraseFloor returns the greatest ballot promised on an erased register.
func (a *Acceptor) EraseFloor() Ballot { return a.eraseFloor }

// Violation returns the first broken invariant, if any. Drivers treat it as
// fatal (the simulator fails the seed).
func (a *Acceptor) Violation() error { return a.violation }

// BallotReuse reports the Accepts that carried a second value at the ballot
// this acceptor had accepted another value at: how many, and the first.
// Ballots are unique per proposal, so each one is a proposer that broke
// Paxos (two values under one ballot can both be chosen by different
// quorums). The acceptor refuses them and its own state stays sound, so
// this is not a Violation: a driver that stops on Violation must not let a
// remote peer stop its acceptor. The simulator, whose proposers are the
// real cores, fails the seed on it; a runtime should log and count it.
func (a *Acceptor) BallotReuse() (uint64, error) { return a.reuses, a.reuse }

// HasReady reports whether Ready would return anything.
func (a *Acceptor) HasReady() bool { return len(a.outbox) > 0 || !a.pending.Empty() }

// Ready hands over the writes to persist and the replies to send after them.
func (a *Acceptor) Ready() (Batch, []Message) {
	b, out := a.pending, a.outbox
	a.pending = Batch{}
	a.outbox = nil
	clear(a.putIndex)
	return b, out
}

// Step handles one request. Replies are queued for Ready; unknown or reply
// messages are ignored (a driver counts them as protocol errors).
func (a *Acceptor) Step(m Message) error {
	if !m.Type.Valid() || m.Type.IsReply() {
		return fmt.Errorf("%w: acceptor %d got %v", ErrCorrupt, a.id, m.Type)
	}
	reply := Message{Type: m.Type + 1, From: a.id, To: m.From, Age: a.ageFloor}
	if m.Type == MsgRaiseAge {
		if m.Age > a.ageFloor {
			a.ageFloor = m.Age
			a.pending.AgeFloor = m.Age
		}
		reply.Age = a.ageFloor
		a.outbox = append(a.outbox, reply)
		return nil
	}
	reply.Items = make([]Item, 0, len(m.Items))
	for i := range m.Items {
		in := &m.Items[i]
		var out Item
		switch {
		case in.Key == eraseFloorKey || len(in.Key) > MaxKeyBytes:
			out = Item{Key: in.Key, Ballot: in.Ballot, Next: in.Next, Reject: RejectMalformed}
		case m.Age < a.ageFloor:
			out = Item{Key: in.Key, Ballot: in.Ballot, Next: in.Next, Reject: RejectStaleAge}
		case m.Type == MsgPrepare:
			out = a.prepare(m.From, in)
		case m.Type == MsgAccept:
			out = a.accept(m.From, in)
		case m.Type == MsgErase:
			out = a.erase(in)
		}
		if out.Reject != RejectNone {
			a.countReject(m.Type, out.Reject)
		}
		reply.Items = append(reply.Items, out)
	}
	a.outbox = append(a.outbox, reply)
	return nil
}

// SetGuards makes the acceptor count its refusals on c (nil: none).
func (a *Acceptor) SetGuards(c guard.Counter) { a.guards = guard.Or(c) }

func (a *Acceptor) countReject(t MsgType, r Reject) {
	switch {
	case r == RejectStaleAge:
		a.guards.Fire(guard.AcceptorStaleAge)
	case r == RejectMalformed:
		a.guards.Fire(guard.AcceptorMalformed)
	case r == RejectNotTombstone:
		a.guards.Fire(guard.AcceptorNotTombstone)
	case t == MsgPrepare:
		a.guards.Fire(guard.AcceptorPrepareConflict)
	default:
		a.guards.Fire(guard.AcceptorAcceptConflict)
	}
}

func (a *Acceptor) prepare(from NodeID, in *Item) Item {
	out := Item{Key: in.Key, Ballot: in.Ballot}
	if in.Ballot.IsZero() || in.Ballot.Proposer != from {
		out.Reject = RejectMalformed
		return out
	}
	r := a.records[in.Key]
	if r == nil {
		if !a.eraseFloor.Less(in.Ballot) {
			out.Reject = RejectConflict
			out.Conflict = a.eraseFloor
			return out
		}
		r = &Record{Key: in.Key}
	}
	if in.Ballot.Less(r.Promised) || in.Ballot.Less(r.Accepted) {
		out.Reject = RejectConflict
		out.Conflict = r.Promised.Max(r.Accepted)
		return out
	}
	if r.Promised.Less(in.Ballot) {
		next := *r
		next.Promised = in.Ballot
		a.put(next)
		r = a.records[in.Key]
	}
	out.Accepted = r.Accepted
	out.Value = r.Value
	return out
}

func (a *Acceptor) accept(from NodeID, in *Item) Item {
	out := Item{Key: in.Key, Ballot: in.Ballot, Next: in.Next}
	if in.Ballot.IsZero() || in.Ballot.Proposer != from ||
		(!in.Next.IsZero() && (!in.Ballot.Less(in.Next) || in.Next.Proposer != from)) {
		out.Reject = RejectMalformed
		return out
	}
	r := a.records[in.Key]
	if r == nil {
		if !a.eraseFloor.Less(in.Ballot) {
			out.Reject = RejectConflict
			out.Conflict = a.eraseFloor
			return out
		}
		r = &Record{Key: in.Key}
	}
	if in.Ballot.Less(r.Promised) || in.Ballot.Less(r.Accepted) {
		out.Reject = RejectConflict
		out.Conflict = r.Promised.Max(r.Accepted)
		return out
	}
	if r.Accepted == in.Ballot && !r.Value.Equal(in.Value) {
		// One ballot, two values: only a broken proposer does this. The
		// stored value stays (it may have been chosen), and it is reported.
		a.reuses++
		if a.reuse == nil {
			a.reuse = fmt.Errorf("acceptor %d key %q: proposer %d reused ballot %v: accepted %v, then sent %v",
				a.id, in.Key, from, in.Ballot, r.Value, in.Value)
		}
		out.Reject = RejectMalformed
		return out
	}
	next := Record{Key: in.Key, Promised: in.Ballot.Max(in.Next), Accepted: in.Ballot, Value: in.Value}
	if next.Promised.Less(r.Promised) {
		next.Promised = r.Promised
	}
	if next.Promised != r.Promised || next.Accepted != r.Accepted || !next.Value.Equal(r.Value) {
		a.put(next)
	}
	return out
}

// erase removes a register that GC has tombstoned on every acceptor at
// ballot in.Ballot and fenced by raising the age floor. Erasing an absent
// key succeeds, so the step is idempotent.
func (a *Acceptor) erase(in *Item) Item {
	out := Item{Key: in.Key, Ballot: in.Ballot}
	r := a.records[in.Key]
	if r == nil {
		return out
	}
	if r.Value.Exists() || r.Accepted != in.Ballot || r.Promised != r.Accepted {
		out.Reject = RejectNotTombstone
		out.Conflict = r.Promised.Max(r.Accepted)
		return out
	}
	delete(a.records, in.Key)
	if a.eraseFloor.Less(r.Promised) {
		a.eraseFloor = r.Promised
		a.queuePut(Record{Key: eraseFloorKey, Promised: a.eraseFloor})
	}
	if i, ok := a.putIndex[in.Key]; ok {
		// A put of this key earlier in the same batch must not survive it.
		a.pending.Put = append(a.pending.Put[:i], a.pending.Put[i+1:]...)
		delete(a.putIndex, in.Key)
		for k, j := range a.putIndex {
			if j > i {
				a.putIndex[k] = j - 1
			}
		}
	}
	a.pending.Delete = append(a.pending.Delete, in.Key)
	return out
}

// put installs rec in memory and queues it for persistence, checking the
// invariants that make Paxos safe: promises and accepted ballots never go back.
func (a *Acceptor) put(rec Record) {
	if old := a.records[rec.Key]; old != nil {
		if rec.Promised.Less(old.Promised) || rec.Accepted.Less(old.Accepted) {
			a.fail(fmt.Errorf("acceptor %d key %q: ballot went backwards: promised %v->%v accepted %v->%v",
				a.id, rec.Key, old.Promised, rec.Promised, old.Accepted, rec.Accepted))
		}
	}
	if rec.Promised.Less(rec.Accepted) {
		a.fail(fmt.Errorf("acceptor %d key %q: accepted %v above promised %v", a.id, rec.Key, rec.Accepted, rec.Promised))
	}
	stored := rec
	a.records[rec.Key] = &stored
	a.queuePut(rec)
}

// queuePut adds rec to the pending batch, replacing an earlier write of the
// same key in this batch.
func (a *Acceptor) queuePut(rec Record) {
	if i, ok := a.putIndex[rec.Key]; ok {
		a.pending.Put[i] = rec
		return
	}
	for i, k := range a.pending.Delete {
		if k == rec.Key {
			a.pending.Delete = append(a.pending.Delete[:i], a.pending.Delete[i+1:]...)
			break
		}
	}
	a.putIndex[rec.Key] = len(a.pending.Put)
	a.pending.Put = append(a.pending.Put, rec)
}

func (a *Acceptor) fail(err error) {
	if a.violation == nil {
		a.violation = fmt.Errorf("invariant violated: %w", err)
	}
}
