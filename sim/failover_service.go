package sim

import (
	"fmt"
	"time"
)

// serviceQueue is the capacity a layout's nodes share when they run on one
// machine, as fmnode demo's agents do: every client request a node serves
// (a write acknowledged, a read answered) holds one of Slots servers for
// RequestService, and its reply leaves when it is done, first come first
// served.
//
// Why it exists: without it the simulator serves a request in the time of
// its round trips and fsyncs, however many arrive at once. After a
// failover's commit every writer of the affected partitions writes to the
// new write region within one poll interval; on the demo's two cores
// those writes queue (tens of milliseconds at 1000 partitions), and the
// model that ignored it predicted a client reroute p50 a quarter to a half
// faster than the real one. fmnode demo measures the service time on a
// burst of its own before the kill (cmd/fmnode/demo_burst.go).
// Redirects and errors are not charged: they do no fsync and no
// replication, and on the real agents they took about a millisecond while
// a burst of writes queued.
//
// A held poll (partition/poll.go) is a write the agent received during
// the outage and answers after the commit: its reception was paid while
// it waited, and what is left is its write and the answer, which a layout
// charges as HeldPollService. fmnode demo takes half the service time:
// of one request's exchange, the reception (the client's encryption and
// framing, the agent's decryption and parsing) mirrors the answer (the
// agent's, then the client's), and the log and replication work between
// them was too small to see (a burst of redirects, which does none of
// it, drained as slowly as a burst of writes in session 12). The real
// released polls drained at about 0.25 ms a write when the calibrated
// service time was 0.45-0.5 ms.
type serviceQueue struct {
	cost time.Duration
	// free is when each slot next becomes free.
	free []time.Duration
}

// Bounds of the layout's service model.
const (
	maxLayoutServiceSlots   = 256
	maxLayoutRequestService = 100 * time.Millisecond
)

func newServiceQueue(slots int, cost time.Duration) *serviceQueue {
	if slots <= 0 || cost <= 0 {
		return nil
	}
	return &serviceQueue{cost: cost, free: make([]time.Duration, slots)}
}

// serve takes one request arriving at now that costs cost (q.cost for a
// fresh request) and returns when its reply leaves.
func (q *serviceQueue) serve(now, cost time.Duration) time.Duration {
	i := 0
	for j := range q.free {
		if q.free[j] < q.free[i] {
			i = j
		}
	}
	q.free[i] = max(now, q.free[i]) + cost
	return q.free[i]
}

func validateLayoutService(slots int, cost time.Duration) error {
	switch {
	case slots < 0 || slots > maxLayoutServiceSlots:
		return fmt.Errorf("%w: layout: ServiceSlots %d (0..%d)", ErrConfig, slots, maxLayoutServiceSlots)
	case cost < 0 || cost > maxLayoutRequestService:
		return fmt.Errorf("%w: layout: RequestService %v (0..%v)", ErrConfig, cost, maxLayoutRequestService)
	case (slots == 0) != (cost == 0):
		return fmt.Errorf("%w: layout: ServiceSlots %d and RequestService %v: set both (a shared machine) or neither", ErrConfig, slots, cost)
	}
	return nil
}
