package caspaxos

import (
	"container/list"
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
// What it remembers is bounded (MaxPacedKeys, least recently used first
// out) and forgotten after PaceMemory: a key that stopped seeing rivals
// proposes at once again. A proposer alone on its key never waits.

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
}

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
// saw a rival; zero (no rival) forgets the key.
func (p *Pacer) Learn(now time.Duration, key string, delay time.Duration) {
	if p == nil {
		return
	}
	e, ok := p.keys[key]
	if delay <= 0 {
		if ok {
			p.remove(e)
		}
		return
	}
	if ok {
		pe := e.Value.(*paceEntry)
		if now-pe.at > p.memory {
			pe.streak = 0 // the earlier rivals are forgotten
		}
		pe.delay, pe.at = delay, now
		pe.streak = min(pe.streak+1, paceStreak)
		p.lru.MoveToFront(e)
		return
	}
	p.keys[key] = p.lru.PushFront(&paceEntry{key: key, delay: delay, at: now, streak: 1})
	for p.lru.Len() > p.max {
		p.remove(p.lru.Back())
	}
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
