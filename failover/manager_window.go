// The admission window: at most ManagerConfig.MaxInFlight register
// operations (proposals, creates, reads) with the driver at once. Every
// operation waits its turn in a priority queue (failovers, then creates and
// reads, then every other transition; by partition name within a class) and
// admit hands free slots out in that order, deciding each partition afresh.
// Drains start their switchovers outside the queue, on top of the window;
// operator requests are refused while it is full (windowFull).

package failover

import (
	"container/heap"
	"fmt"
	"time"
)

// opClass orders the register operations waiting for a slot: lower first.
type opClass uint8

const (
	// classFailover: a write region is gone; nothing is more urgent.
	classFailover opClass = iota
	// classRegister: creating a register or reading one back, without
	// which the partition cannot be decided at all.
	classRegister
	// classOther: every other transition (grow, shrink, reassert,
	// switchover steps, pause).
	classOther
)

// classOf is the class a proposal of kind k waits in.
func classOf(k DecisionKind) opClass {
	if k == DecideFailover {
		return classFailover
	}
	return classOther
}

// InFlight returns the register operations with the driver and those
// waiting for a slot.
func (m *Manager) InFlight() (inFlight, waiting int) { return m.ops, len(m.waiting) }

// gate reports whether partition p may start a register operation of
// class c now: only when admit hands it a slot. Otherwise p waits in
// class c (the more urgent class if it already waits). Every operation
// goes through the queue, even with slots free: the partitions an
// evaluation pass decides are then started in priority order, not in the
// order the pass met them.
func (m *Manager) gate(p *partition, c opClass) bool {
	if m.admitting == p {
		return true
	}
	m.queuedNow = true
	switch {
	case p.qidx < 0:
		if m.ops+len(m.waiting) >= m.cfg.MaxInFlight {
			m.stats.Waited++ // the slots will be gone before its turn
		}
		p.qclass = c
		heap.Push(&m.waiting, p)
	case c < p.qclass:
		p.qclass = c
		heap.Fix(&m.waiting, p.qidx)
	}
	return false
}

// unqueue takes p out of the wait queue if it waits there.
func (m *Manager) unqueue(p *partition) {
	if p.qidx >= 0 {
		heap.Remove(&m.waiting, p.qidx)
	}
}

// admit hands free slots to the waiting partitions in priority order,
// deciding each afresh (what it waited for may no longer apply).
func (m *Manager) admit(now time.Duration) {
	for m.ops < m.cfg.MaxInFlight && len(m.waiting) > 0 {
		p := heap.Pop(&m.waiting).(*partition)
		m.admitting = p
		m.evaluate(now, p)
		m.admitting = nil
	}
}

// windowFull refuses an operator request while every slot is taken.
func (m *Manager) windowFull() error {
	if m.ops >= m.cfg.MaxInFlight {
		return fmt.Errorf("%w: %w: %d register operations in flight and %d waiting (MaxInFlight %d)",
			ErrRefused, ErrBusy, m.ops, len(m.waiting), m.cfg.MaxInFlight)
	}
	return nil
}

// waitQueue is a heap of the partitions waiting for a slot, by class then
// name; each partition knows its index (qidx).
type waitQueue []*partition

func (q waitQueue) Len() int { return len(q) }
func (q waitQueue) Less(i, j int) bool {
	if q[i].qclass != q[j].qclass {
		return q[i].qclass < q[j].qclass
	}
	return q[i].name < q[j].name
}
func (q waitQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].qidx, q[j].qidx = i, j
}
func (q *waitQueue) Push(x any) {
	p := x.(*partition)
	p.qidx = len(*q)
	*q = append(*q, p)
}
func (q *waitQueue) Pop() any {
	old := *q
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	p.qidx = -1
	return p
}
