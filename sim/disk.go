package sim

import (
	"slices"

	"github.com/fmnode/fmnode/caspaxos"
)

// Disk is a simulated acceptor disk: what an fsync made durable, and
// nothing else. A batch reaches it only when its simulated fsync completes;
// a crash before that loses the batch whole (the acceptor's store applies
// batches atomically, so a torn batch is not a state it can be in).
type Disk struct {
	records  map[string]caspaxos.Record
	ageFloor uint64
	syncs    uint64
}

// NewDisk returns an empty disk.
func NewDisk() *Disk { return &Disk{records: make(map[string]caspaxos.Record)} }

// Apply makes b durable.
func (d *Disk) Apply(b caspaxos.Batch) {
	for _, k := range b.Delete {
		delete(d.records, k)
	}
	for _, r := range b.Put {
		r.Value.Data = slices.Clone(r.Value.Data) // the disk owns its bytes
		d.records[r.Key] = r
	}
	if b.AgeFloor > d.ageFloor {
		d.ageFloor = b.AgeFloor
	}
	d.syncs++
}

// State returns what a restarting acceptor recovers: every record sorted by
// key (the Store contract, and a map-order-free input to the acceptor).
func (d *Disk) State() caspaxos.State {
	keys := make([]string, 0, len(d.records))
	for k := range d.records {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	st := caspaxos.State{Records: make([]caspaxos.Record, 0, len(keys)), AgeFloor: d.ageFloor}
	for _, k := range keys {
		r := d.records[k]
		r.Value.Data = slices.Clone(r.Value.Data)
		st.Records = append(st.Records, r)
	}
	return st
}

// Syncs returns the number of batches made durable.
func (d *Disk) Syncs() uint64 { return d.syncs }
