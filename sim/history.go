package sim

import (
	"math"
	"time"

	"github.com/anishathalye/porcupine"
)

// opKind is what a client asked of a register.
type opKind uint8

const (
	opRead opKind = iota + 1 // read the value (the identity change)
	opCAS                    // write Data if the version is Expected
	opBeat                   // raise one slot of a heartbeat table (idempotent)
)

// opStatus is how an operation ended.
type opStatus uint8

const (
	statusOK       opStatus = iota + 1
	statusMismatch          // the CAS read a committed value at another version
	statusUnknown           // it may or may not have taken effect
)

// regInput is a porcupine input: one client operation on one key.
type regInput struct {
	Kind     opKind
	Key      string
	Expected uint64
	Data     string
	// Beats: the slot raised, its new count, and the table's width. A
	// read of a heartbeat table sets Slots and compares only the data:
	// versions there count effective beats, which unobserved unknown beats
	// (pruned below) would throw off.
	Slot, Slots int
	N           uint64
}

// regOutput is a porcupine output. Version/Data is what the operation saw
// (a read or a mismatch) or wrote (a successful CAS or write).
type regOutput struct {
	Status  opStatus
	Version uint64
	Data    string
}

// infiniteReturn is the return time of an operation whose outcome is
// unknown: it may take effect at any point after its call, including
// never (linearised after everything else).
const infiniteReturn int64 = math.MaxInt64

// History records the client operations of a run for the linearizability
// check. Operations that certainly did not happen (refused before any
// accept was sent) are discarded; unknown outcomes keep an infinite return.
type History struct {
	ops     []porcupine.Operation
	dropped []bool
	max     int
	clients int
}

// NewHistory returns a history bounded to max operations (porcupine's cost
// grows with history; a run that would exceed it stops issuing operations).
func NewHistory(max int) *History { return &History{max: max} }

// NewClient returns a fresh client id for porcupine's visualisation.
func (h *History) NewClient() int { h.clients++; return h.clients - 1 }

// Full reports whether the history reached its bound.
func (h *History) Full() bool { return len(h.ops) >= h.max }

// Len returns the number of operations recorded, discarded ones included.
func (h *History) Len() int { return len(h.ops) }

// Call records an invocation and returns its index.
func (h *History) Call(client int, in regInput, at time.Duration) int {
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: int64(at), Return: infiniteReturn})
	h.dropped = append(h.dropped, false)
	return len(h.ops) - 1
}

// Return records a response.
func (h *History) Return(i int, out regOutput, at time.Duration) {
	h.ops[i].Output = out
	if out.Status == statusUnknown {
		h.ops[i].Return = infiniteReturn
		return
	}
	h.ops[i].Return = int64(at)
}

// Discard removes an operation that certainly took no effect.
func (h *History) Discard(i int) { h.dropped[i] = true }

// Operations returns the operations to check, in call order.
//
// A CAS with an unknown outcome whose value no operation ever observed is
// left out, as etcd's robustness tests do with unobserved failed writes:
// every write value is unique and clients only CAS against versions they
// observed, so if such a CAS took effect nothing that returned depended on
// it. Each unknown operation left in multiplies porcupine's search (it may
// be linearised anywhere after its call), and a crash-heavy run has
// hundreds. The same holds for an unknown beat no read saw.
func (h *History) Operations() []porcupine.Operation {
	observed := make(map[string]bool)
	type slotKey struct {
		key  string
		slot int
		n    uint64
	}
	seenBeat := make(map[slotKey]bool)
	for i, op := range h.ops {
		if h.dropped[i] || op.Output == nil {
			continue
		}
		out := op.Output.(regOutput)
		if out.Status == statusUnknown {
			continue
		}
		observed[out.Data] = true
		if in := op.Input.(regInput); in.Kind == opRead && in.Slots > 0 {
			for slot, n := range beatSlots(out.Data, in.Slots) {
				seenBeat[slotKey{in.Key, slot, n}] = true
			}
		}
	}
	out := make([]porcupine.Operation, 0, len(h.ops))
	for i, op := range h.ops {
		if h.dropped[i] {
			continue
		}
		in := op.Input.(regInput)
		unknown := op.Output == nil || op.Output.(regOutput).Status == statusUnknown
		switch {
		case unknown && in.Kind == opRead:
			continue // a read that never returned says nothing
		case unknown && in.Kind == opCAS && !observed[in.Data]:
			continue
		case unknown && in.Kind == opBeat && !seenBeat[slotKey{in.Key, in.Slot, in.N}]:
			// A beat no read saw at exactly its count: a later beat of
			// the same slot (counts only grow) hid it, or it never
			// happened; reads of tables ignore versions, so it is moot.
			continue
		}
		if op.Output == nil {
			op.Output = regOutput{Status: statusUnknown}
			op.Return = infiniteReturn
		}
		out = append(out, op)
	}
	return out
}
