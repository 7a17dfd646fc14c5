package caspaxos

// Record is everything an acceptor keeps about one register: the greatest
// ballot it promised, the ballot of the value it accepted, and that value.
// Invariant: Accepted <= Promised.
type Record struct {
	Key      string
	Promised Ballot
	Accepted Ballot
	Value    Value
}

// Batch is a set of writes an acceptor store applies atomically and durably.
// Within a batch the puts apply in order (a key put twice keeps the later
// record) and then the deletes, so a key both put and deleted is absent.
type Batch struct {
	Put    []Record
	Delete []string
	// AgeFloor, when non-zero, replaces the stored age floor with this
	// value. The store does not take a max: the acceptor only ever raises
	// the floor, and keeping it monotonic is the acceptor's job.
	AgeFloor uint64
}

// Empty reports whether the batch writes nothing.
func (b Batch) Empty() bool { return len(b.Put) == 0 && len(b.Delete) == 0 && b.AgeFloor == 0 }

// State is what an acceptor recovers from its store at start.
type State struct {
	Records  []Record
	AgeFloor uint64
}

// Store is the acceptor's durable storage. Each Apply is atomic (all of the
// batch or none of it survives a crash) and durable (fsynced) before it
// returns: the acceptor's replies depend on it. Implementations must allow
// concurrent Apply calls and should let them share one fsync (group commit).
type Store interface {
	// Load returns every record, sorted by key, and the age floor.
	Load() (State, error)
	// Apply persists b atomically and durably.
	Apply(b Batch) error
	// Close releases the store. Apply after Close returns an error.
	Close() error
}
