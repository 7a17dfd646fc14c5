package storetest

import (
	"bytes"
	"reflect"
	"sort"

	"github.com/fmnode/fmnode/caspaxos"
)

// History is every state a store passed through, in order. Crash tests
// use it to state what recovery may return: a store restored from damaged
// or torn files must come back in one of these states (ideally the last),
// never in one it never held.
type History struct {
	records map[string]caspaxos.Record
	floor   uint64
	states  []caspaxos.State
}

// NewHistory starts a history at the empty state.
func NewHistory() *History {
	h := &History{records: make(map[string]caspaxos.Record)}
	h.snap()
	return h
}

// Apply records the state after b (puts in order, then deletes).
func (h *History) Apply(b caspaxos.Batch) {
	for _, r := range b.Put {
		r.Value.Data = bytes.Clone(r.Value.Data)
		h.records[r.Key] = r
	}
	for _, k := range b.Delete {
		delete(h.records, k)
	}
	if b.AgeFloor != 0 {
		h.floor = b.AgeFloor
	}
	h.snap()
}

func (h *History) snap() {
	st := caspaxos.State{AgeFloor: h.floor}
	for _, r := range h.records {
		st.Records = append(st.Records, r)
	}
	sort.Slice(st.Records, func(i, j int) bool { return st.Records[i].Key < st.Records[j].Key })
	h.states = append(h.states, Normalize(st))
}

// Len returns the number of states, the empty start included.
func (h *History) Len() int { return len(h.states) }

// Latest returns the current state.
func (h *History) Latest() caspaxos.State { return h.states[len(h.states)-1] }

// Index returns the position of st in the history (the latest match), or -1.
func (h *History) Index(st caspaxos.State) int {
	st = Normalize(st)
	for i := len(h.states) - 1; i >= 0; i-- {
		if reflect.DeepEqual(h.states[i], st) {
			return i
		}
	}
	return -1
}

// Prefix returns the history of the first n batches applied to h: what a
// crash test continues from when recovery kept only those.
func (h *History) Prefix(n int) *History {
	p := NewHistory()
	p.states = append(p.states[:0], h.states[:n+1]...)
	last := p.states[n]
	p.floor = last.AgeFloor
	for _, r := range last.Records {
		p.records[r.Key] = r
	}
	return p
}
