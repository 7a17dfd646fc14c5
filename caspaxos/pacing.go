package caspaxos

import (
	"container/list"
	"slices"
	"time"
)

// Pacing of first attempts (not in the paper).
//
// The paper's backoff, (EMA + sigma) * U(0, 2^(attempt-1)), acts only
// after a NAK. When every observer of one event (a failed region) writes
// the same register at the same instant, the first attempts collide before
// any backoff runs: of 9 simultaneous rounds at most one survives, and the
// retries, spread at random, collide again with a chance that no random
// window small enough for the latency budget removes.
//
// Pacing orders those proposers instead of spreading them. While a
// proposal runs, the proposer notes the latest round of another proposer
// on the key that started at or after the proposal itself (a rival: it
// reacted to the same thing). Ballot counters start at the proposer's clock
// in milliseconds, so the ballots acceptors report date those rounds. The
// next proposal on the key then waits, before its first attempt, until one
// gap after that rival's start offset: it queues behind the proposer it
// saw last. A proposer that saw no rival goes at once. One rival is taken
// for a coincidence (two proposers that happened to write at once, as
// independent heartbeats do, and will not again): the wait starts only
// once paceStreak proposals in a row saw one, so that the contention
// repeats with the event. Over a few repeated
// events the rivals settle into a chain, each one gap after its
// predecessor, and the first attempts stop overlapping. The gap is
// 2 * (EMA + sigma), a round at the phase-2 estimate, floored by
// PaceGapMin so that a fast proposer does not step on a slow predecessor
// whose rounds it cannot see; a chain whose gap was still too short shows
// it as a NAK, and the NAKed proposer moves behind its rival next time.
//
// Two rules keep a settled chain settled (session 8). A paced proposal
// that sees no rival most likely cut off the predecessor it waited for (a
// round slower than the gap, a slow fsync: the predecessor's value had not
// reached the acceptors when this prepare did), so it keeps its pace
// instead of becoming a second first proposer at the next event; only
// paceMisses such proposals in a row forget it. And a learned delay is at
// most one gap per rival known on the key, plus one: in a chain of n
// rivals no place is further back, and a rival dated by a late retry (the
// warm-up's collisions) would otherwise stretch the chain, and every
// member's latency, for as many events as the chain has members.
//
// What it remembers is bounded (MaxPacedKeys, least recently used first
// out; maxRivals per key) and forgotten after PaceMemory: a key that
// stopped seeing rivals proposes at once again. A proposer alone on its
// key never waits.

// Pacer holds the per-key first-attempt delays. It is a deterministic
// value: time is passed in.
type Pacer struct {
	memory time.Duration
	max    int
	keys   map[string]*list.Element
	lru    *list.List // of *paceEntry, most recent at front
}

type paceEntry struct {
	key    string
	delay  time.Duration
	at     time.Duration // when it was learned
	streak int           // proposals in a row that saw a rival
	misses int           // paced proposals in a row that saw no rival
	// rivals are the other proposers seen on the key (at most maxRivals):
	// how long the chain is, which a NAKed proposal retries behind.
	rivals []NodeID
}

// maxRivals bounds the rivals remembered per key.
const maxRivals = 64

// paceMisses is how many paced proposals in a row may see no rival before
// the pace is forgotten. A paced proposal that sees none most likely cut
// off the predecessor it waited for (a round slower than the gap: its
// value never reached the acceptors before this prepare), not that it has
// become first; forgetting at once would put two proposers first at the
// next event.
const paceMisses = 2

// paceStreak is how many proposals in a row must see a rival before the
// next one waits.
const paceStreak = 2

// NewPacer returns a pacer that remembers at most max keys for memory.
func NewPacer(memory time.Duration, max int) *Pacer {
	return &Pacer{memory: memory, max: max, keys: make(map[string]*list.Element), lru: list.New()}
}

// Wait returns how long a new proposal on key waits before its first
// attempt: the delay last learned for the key, or zero when none was
// learned within the memory or the rivals did not repeat yet.
func (p *Pacer) Wait(now time.Duration, key string) time.Duration {
	if p == nil {
		return 0
	}
	e, ok := p.keys[key]
	if !ok {
		return 0
	}
	pe := e.Value.(*paceEntry)
	if now-pe.at > p.memory {
		p.remove(e)
		return 0
	}
	if pe.streak < paceStreak {
		return 0
	}
	return pe.delay
}

// Learn sets the delay of key's next first attempt, after a proposal that
// saw a rival (rivals: the other proposers it saw); zero (no rival)
// forgets the key, unless the proposal was paced (it waited for a
// rival): then the pace is kept up to paceMisses times in a row.
func (p *Pacer) Learn(now time.Duration, key string, delay time.Duration, paced bool, rivals []NodeID) {
	if p == nil {
		return
	}
	e, ok := p.keys[key]
	if delay <= 0 {
		if !ok {
			return
		}
		pe := e.Value.(*paceEntry)
		pe.misses++
		if !paced || pe.misses >= paceMisses || now-pe.at > p.memory {
			p.remove(e)
		}
		return
	}
	if !ok {
		e = p.lru.PushFront(&paceEntry{key: key})
		p.keys[key] = e
		for p.lru.Len() > p.max {
			p.remove(p.lru.Back())
		}
	}
	pe := e.Value.(*paceEntry)
	if now-pe.at > p.memory {
		pe.streak, pe.rivals = 0, pe.rivals[:0] // the earlier rivals are forgotten
	}
	pe.delay, pe.at, pe.misses = delay, now, 0
	pe.streak = min(pe.streak+1, paceStreak)
	for _, id := range rivals {
		pe.rivals = addRival(pe.rivals, id)
	}
	p.lru.MoveToFront(e)
}

// Rivals returns how many other proposers were seen on key within the
// memory: the length of the chain a NAKed proposal retries behind.
func (p *Pacer) Rivals(now time.Duration, key string) int {
	if p == nil {
		return 0
	}
	e, ok := p.keys[key]
	if !ok {
		return 0
	}
	pe := e.Value.(*paceEntry)
	if now-pe.at > p.memory {
		return 0
	}
	return len(pe.rivals)
}

// addRival adds id to the set ids (bounded by maxRivals).
func addRival(ids []NodeID, id NodeID) []NodeID {
	if slices.Contains(ids, id) || len(ids) >= maxRivals {
		return ids
	}
	return append(ids, id)
}

// Len returns the number of keys with a delay.
func (p *Pacer) Len() int {
	if p == nil {
		return 0
	}
	return p.lru.Len()
}

func (p *Pacer) remove(e *list.Element) {
	delete(p.keys, e.Value.(*paceEntry).key)
	p.lru.Remove(e)
}
