package sim

import (
	"errors"
	"fmt"
	"time"
)

// ErrSchedulerFull is reported when a run tries to keep more pending events
// than its bound: a runaway (a timer loop, a message storm) must fail the
// seed instead of eating the machine's memory.
var ErrSchedulerFull = errors.New("sim: scheduler full")

// Handler is something that happens at a point of virtual time. Handlers
// are long-lived objects (a network, a node, a client) and arg says which
// of their things fired, so that scheduling an event allocates nothing.
type Handler interface {
	Fire(now time.Duration, arg uint64)
}

// NoNode marks an event that belongs to no simulated process (the nemesis,
// the run's phase changes): pausing a node never delays it.
const NoNode int32 = -1

// EventID names a scheduled event so it can be cancelled or moved. The
// generation makes an id of a fired or cancelled event harmless: its slot
// may have been reused, but with another generation.
type EventID struct {
	slot int32
	gen  uint32
}

// Valid reports whether id names an event that was scheduled at some point.
func (id EventID) Valid() bool { return id.gen != 0 }

type event struct {
	h       Handler
	arg     uint64
	node    int32
	heapIdx int32 // position in Scheduler.heap, -1 when not pending
	gen     uint32
}

// heapEntry is one pending event in the heap: its ordering key kept
// inline, so that sifting compares entries next to each other instead of
// chasing two slab indices per comparison (with tens of thousands of
// pending events the slab does not fit in cache).
type heapEntry struct {
	at   time.Duration
	seq  uint64
	slot int32
}

func (a *heapEntry) before(b *heapEntry) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// Scheduler is the simulation's event queue: a binary heap of pending
// events ordered by (time, sequence number). The sequence number is the
// order of scheduling, so two events at the same instant always fire in the
// same order in every run: that total order is what makes a seed replay.
//
// Events live in a slab and the heap holds slab indices, so scheduling a
// pending event costs O(log n) and, once the slab has grown to the run's
// high-water mark, allocates nothing.
type Scheduler struct {
	events []event
	heap   []heapEntry
	free   []int32
	seq    uint64
	now    time.Duration
	max    int
	fired  uint64
	err    error
}

// NewScheduler returns a scheduler holding at most maxPending events.
func NewScheduler(maxPending int) *Scheduler {
	if maxPending < 1 {
		maxPending = 1
	}
	return &Scheduler{max: maxPending}
}

// Now returns the virtual time of the event being fired (or last fired).
func (s *Scheduler) Now() time.Duration { return s.now }

// Len returns the number of pending events.
func (s *Scheduler) Len() int { return len(s.heap) }

// Fired returns the number of events fired so far.
func (s *Scheduler) Fired() uint64 { return s.fired }

// Err returns the first overflow, if any.
func (s *Scheduler) Err() error { return s.err }

// At schedules h.Fire(at, arg). An event in the past fires at the current
// instant, after the events already due then: virtual time never goes back.
// node is the simulated process the event belongs to (NoNode for none); the
// world holds back the events of a paused process.
func (s *Scheduler) At(at time.Duration, node int32, h Handler, arg uint64) EventID {
	if len(s.heap) >= s.max {
		if s.err == nil {
			s.err = fmt.Errorf("%w: %d pending events at %v", ErrSchedulerFull, len(s.heap), s.now)
		}
		return EventID{}
	}
	if at < s.now {
		at = s.now
	}
	var slot int32
	if n := len(s.free); n > 0 {
		slot = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		s.events = append(s.events, event{})
		slot = int32(len(s.events) - 1)
	}
	e := &s.events[slot]
	e.gen++
	if e.gen == 0 { // skip the generation that means "never scheduled"
		e.gen = 1
	}
	s.seq++
	e.h, e.arg, e.node = h, arg, node
	e.heapIdx = int32(len(s.heap))
	s.heap = append(s.heap, heapEntry{at: at, seq: s.seq, slot: slot})
	s.up(len(s.heap) - 1)
	return EventID{slot: slot, gen: e.gen}
}

// After schedules h.Fire after d from now.
func (s *Scheduler) After(d time.Duration, node int32, h Handler, arg uint64) EventID {
	return s.At(s.now+d, node, h, arg)
}

// Pending reports whether id is still waiting to fire.
func (s *Scheduler) Pending(id EventID) bool {
	if !id.Valid() || int(id.slot) >= len(s.events) {
		return false
	}
	e := &s.events[id.slot]
	return e.gen == id.gen && e.heapIdx >= 0
}

// Cancel removes a pending event; it reports whether there was one.
func (s *Scheduler) Cancel(id EventID) bool {
	if !s.Pending(id) {
		return false
	}
	i := int(s.events[id.slot].heapIdx)
	s.removeAt(i)
	s.release(id.slot)
	return true
}

// Reschedule moves a pending event to a new time (taking a new sequence
// number, as if cancelled and scheduled again) and returns its id; if id is
// not pending it schedules a new event instead.
func (s *Scheduler) Reschedule(id EventID, at time.Duration, node int32, h Handler, arg uint64) EventID {
	if !s.Pending(id) {
		return s.At(at, node, h, arg)
	}
	if at < s.now {
		at = s.now
	}
	e := &s.events[id.slot]
	s.seq++
	e.h, e.arg, e.node = h, arg, node
	i := int(e.heapIdx)
	s.heap[i].at, s.heap[i].seq = at, s.seq
	if !s.down(i) {
		s.up(i)
	}
	return id
}

// Pop removes the earliest event, advances the clock to it and returns it
// without firing it (the world decides: a paused node's event is held).
func (s *Scheduler) Pop() (at time.Duration, node int32, h Handler, arg uint64, ok bool) {
	if len(s.heap) == 0 {
		return 0, NoNode, nil, 0, false
	}
	slot := s.heap[0].slot
	e := &s.events[slot]
	at, node, h, arg = s.heap[0].at, e.node, e.h, e.arg
	s.popRoot()
	s.release(slot)
	s.now = at
	s.fired++
	return at, node, h, arg, true
}

// PeekTime returns the time of the earliest pending event.
func (s *Scheduler) PeekTime() (time.Duration, bool) {
	if len(s.heap) == 0 {
		return 0, false
	}
	return s.heap[0].at, true
}

// AdvanceTo moves the clock forward to t when nothing is due before it (the
// run's end of phase); it never moves the clock back.
func (s *Scheduler) AdvanceTo(t time.Duration) {
	if t > s.now {
		s.now = t
	}
}

func (s *Scheduler) release(slot int32) {
	e := &s.events[slot]
	e.h = nil // let the handler be collected if the run drops it
	e.heapIdx = -1
	s.free = append(s.free, slot)
}

// up sifts the entry at i towards the root, moving parents down into
// the hole rather than swapping, so each level costs one entry write and
// one heapIdx update.
func (s *Scheduler) up(i int) {
	x := s.heap[i]
	for i > 0 {
		p := (i - 1) / 2
		if !x.before(&s.heap[p]) {
			break
		}
		s.place(i, s.heap[p])
		i = p
	}
	s.place(i, x)
}

// down sifts the entry at i towards the leaves; it reports whether it moved.
func (s *Scheduler) down(i int) bool {
	start, n := i, len(s.heap)
	x := s.heap[i]
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && s.heap[r].before(&s.heap[l]) {
			c = r
		}
		if !s.heap[c].before(&x) {
			break
		}
		s.place(i, s.heap[c])
		i = c
	}
	s.place(i, x)
	return i > start
}

func (s *Scheduler) place(i int, e heapEntry) {
	s.heap[i] = e
	s.events[e.slot].heapIdx = int32(i)
}

// popRoot removes the root. The hole it leaves goes down to a leaf along
// the lesser children (one comparison per level, where sifting the last
// entry down from the root takes two), and the last entry fills it from
// there upwards: it came from the bottom and usually stays near it.
// Which event pops next is fixed by the total order on (time, sequence
// number), however the heap arranges the rest.
func (s *Scheduler) popRoot() {
	last := len(s.heap) - 1
	s.events[s.heap[0].slot].heapIdx = -1
	if last == 0 {
		s.heap = s.heap[:0]
		return
	}
	x := s.heap[last]
	s.heap = s.heap[:last]
	n, i := last, 0
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && s.heap[r].before(&s.heap[c]) {
			c = r
		}
		s.place(i, s.heap[c])
		i = c
	}
	s.heap[i] = x
	s.up(i)
}

func (s *Scheduler) removeAt(i int) {
	last := len(s.heap) - 1
	s.events[s.heap[i].slot].heapIdx = -1
	if i != last {
		s.heap[i] = s.heap[last]
	}
	s.heap = s.heap[:last]
	if i != last {
		if !s.down(i) {
			s.up(i)
		}
	}
}
