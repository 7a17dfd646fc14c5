// The partition timer heap. A partition has at most one timer armed, the
// earliest asked for (partition.timerAt); Evaluate pops the due ones and
// queues their partitions for a recheck. An entry superseded by an earlier
// timer stays in the heap until it surfaces and is dropped.

package failover

import "time"

// setTimer arms p's timer for at, unless one no later is armed (or at is
// not positive).
func (m *Manager) setTimer(p *partition, at time.Duration) {
	if at <= 0 || (p.timerAt != 0 && p.timerAt <= at) {
		return
	}
	p.timerAt = at
	m.timers.push(partTimer{at: at, p: p})
}

// partTimer is a timer armed for partition p at at.
type partTimer struct {
	at time.Duration
	p  *partition
}

// partTimers is a min-heap of timers by time, then partition name. It is
// container/heap's algorithm on the typed slice: heap.Push and heap.Pop
// box every partTimer into an interface (an allocation per timer).
type partTimers []partTimer

func (h partTimers) less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].p.name < h[j].p.name
}

func (h *partTimers) push(t partTimer) {
	*h = append(*h, t)
	h.up(len(*h) - 1)
}

// pop removes and returns the earliest timer; the heap must not be empty.
func (h *partTimers) pop() partTimer {
	old := *h
	n := len(old) - 1
	old[0], old[n] = old[n], old[0]
	old.down(0, n)
	t := old[n]
	old[n] = partTimer{}
	*h = old[:n]
	return t
}

func (h partTimers) up(j int) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || !h.less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

func (h partTimers) down(i0, n int) {
	i := i0
	for {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 { // j1 < 0 after int overflow
			break
		}
		j := j1 // left child
		if j2 := j1 + 1; j2 < n && h.less(j2, j1) {
			j = j2 // right child
		}
		if !h.less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}
