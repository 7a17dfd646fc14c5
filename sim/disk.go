package sim

import (
	"github.com/fmnode/fmnode/caspaxos"
)

// Disk is a simulated acceptor disk: what an fsync made durable, and
// nothing else. A batch reaches it only when its simulated fsync completes
// (the acceptorProc keeps the in-flight ones); a crash before that loses the
// batch whole (the acceptor's store applies batches atomically, so a torn
// batch is not a state it can be in).
//
// The record semantics (puts before deletes within a batch, AgeFloor
// replacing the floor, CheckBatch bounds) are caspaxos.MemoryStore's, the
// in-memory twin the conformance suite holds to the durable stores: the
// simulator has no store semantics of its own to drift from them.
type Disk struct {
	store *caspaxos.MemoryStore
}

// NewDisk returns an empty disk.
func NewDisk() *Disk { return &Disk{store: caspaxos.NewMemoryStore()} }

// Apply makes b durable, or refuses it whole as a real store would (a batch
// out of the record bounds).
func (d *Disk) Apply(b caspaxos.Batch) error { return d.store.Apply(b) }

// State returns what a restarting acceptor recovers: every record sorted by
// key (the Store contract, and a map-order-free input to the acceptor).
func (d *Disk) State() caspaxos.State { return d.store.Snapshot() }
