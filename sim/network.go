package sim

import (
	"time"
)

// Receiver gets the messages a Network delivers.
type Receiver[M any] interface {
	Deliver(now time.Duration, from, to int32, m M)
}

// NetStats counts what a network did with its messages.
type NetStats struct {
	Sent, Delivered          uint64
	DroppedCut, DroppedDown  uint64
	DroppedLoss, DroppedFull uint64
	Duplicated, Reordered    uint64
}

// Dropped sums every kind of drop.
func (s NetStats) Dropped() uint64 {
	return s.DroppedCut + s.DroppedDown + s.DroppedLoss + s.DroppedFull
}

type inflight[M any] struct {
	from, to int32
	msg      M
}

// Network carries messages of one type between nodes of a world, through
// the world's Links. Several networks (CASPaxos, later replication and
// heartbeats) can share one world and so one set of partitions.
//
// Messages are delivered in order per directed link unless the reorder
// fault picks them: then a message takes an extra delay and later ones may
// overtake it. In-flight messages live in a slab indexed by the event's
// arg, so sending allocates nothing once the slab has grown.
type Network[M any] struct {
	w         *World
	rcv       Receiver[M]
	summarize func(t *Trace, m *M)
	slots     []inflight[M]
	free      []int32
	max       int
	lastAt    []time.Duration // per directed link: FIFO floor
	Stats     NetStats
	// Clone, when set, deep-copies a duplicated message: a receiver that
	// recycles a message's arrays once it is done with it must not see the
	// other copy change.
	Clone func(m *M) M
}

// NewNetwork returns a network delivering to rcv, keeping at most
// maxInFlight messages in flight; summarize folds a message into the trace
// (what it says, canonically: no pointers, no map order).
func NewNetwork[M any](w *World, rcv Receiver[M], maxInFlight int, summarize func(t *Trace, m *M)) *Network[M] {
	n := len(w.Nodes)
	return &Network[M]{w: w, rcv: rcv, summarize: summarize, max: maxInFlight, lastAt: make([]time.Duration, n*n)}
}

// InFlight returns the number of messages in flight.
func (n *Network[M]) InFlight() int { return len(n.slots) - len(n.free) }

// Send puts m on the wire from -> to, subject to the world's faults.
func (n *Network[M]) Send(from, to int32, m M) {
	w := n.w
	n.Stats.Sent++
	if !w.Live(from) {
		n.Stats.DroppedDown++
		return
	}
	links := w.Links
	if links.Cut(from, to) {
		n.Stats.DroppedCut++
		return
	}
	loop := from == to
	r := w.netRand
	if !loop && links.Loss > 0 && r.Float64() < links.Loss {
		n.Stats.DroppedLoss++
		w.Faults[FaultLoss]++
		return
	}
	copies := 1
	if !loop && links.Duplicate > 0 && r.Float64() < links.Duplicate {
		copies = 2
		n.Stats.Duplicated++
		w.Faults[FaultDuplicate]++
	}
	for c := 0; c < copies; c++ {
		if c > 0 && n.Clone != nil {
			m = n.Clone(&m) // the receiver may reuse a copy's arrays
		}
		n.schedule(from, to, &m, loop)
	}
}

func (n *Network[M]) schedule(from, to int32, m *M, loop bool) {
	w := n.w
	if n.InFlight() >= n.max {
		n.Stats.DroppedFull++
		return
	}
	ra, rb := w.Nodes[from].Region, w.Nodes[to].Region
	d := w.Topo.oneWay(w.netRand, ra, rb, loop)
	if f := w.Links.spike(ra, rb); f > 1 {
		d = time.Duration(float64(d) * f)
	}
	now := w.Now()
	at := now + d
	link := int(from)*len(w.Nodes) + int(to)
	if !loop && w.Links.Reorder > 0 && w.netRand.Float64() < w.Links.Reorder {
		// Held back by up to four times its delay, outside the FIFO order.
		at += time.Duration(w.netRand.Int64N(int64(4*d) + 1))
		n.Stats.Reordered++
		w.Faults[FaultReorder]++
	} else {
		if at < n.lastAt[link] {
			at = n.lastAt[link]
		}
		n.lastAt[link] = at
	}
	var slot int32
	if k := len(n.free); k > 0 {
		slot = n.free[k-1]
		n.free = n.free[:k-1]
	} else {
		n.slots = append(n.slots, inflight[M]{})
		slot = int32(len(n.slots) - 1)
	}
	f := &n.slots[slot]
	f.from, f.to, f.msg = from, to, *m
	w.Sched.At(at, to, n, uint64(slot))
}

// Fire delivers the message in slot arg.
func (n *Network[M]) Fire(now time.Duration, arg uint64) {
	slot := int32(arg)
	f := &n.slots[slot]
	from, to := f.from, f.to
	w := n.w
	t := &w.Trace
	cut := w.Links.Cut(from, to)
	live := w.Live(to)
	if !live || cut {
		n.release(slot)
		// The node is down (or its buffer overflowed while paused), or
		// the link was cut while the message was in flight.
		if cut {
			n.Stats.DroppedCut++
		} else {
			n.Stats.DroppedDown++
		}
		t.Begin(traceDrop, now)
		t.U64(uint64(from)<<32 | uint64(to))
		return
	}
	t.Begin(traceDeliver, now)
	t.U64(uint64(from)<<32 | uint64(to))
	if n.summarize != nil {
		// Summarise in place: a pointer to a copy would escape to the heap.
		n.summarize(t, &f.msg)
	}
	n.Stats.Delivered++
	// The message is handed over from its slot (messages are large: a
	// copy out first cost as much as the call's own), and the slot is
	// freed after: what the receiver sends meanwhile takes other slots.
	n.rcv.Deliver(now, from, to, f.msg)
	n.release(slot)
}

// release empties slot (the slab must not pin old messages) and frees it.
func (n *Network[M]) release(slot int32) {
	var zero inflight[M]
	n.slots[slot] = zero
	n.free = append(n.free, slot)
}
