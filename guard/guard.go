// Package guard names every guard and reject path of the cores (caspaxos,
// partition, failover, internal/node) and counts when one fires.
//
// A sweep of the simulator proves little about a guard that no seed
// reaches: a bug that breaks the guard's branch would pass every seed. So
// each guard counts itself through a Counter the driver injects (the
// simulator's Counts, the daemon's Prometheus counters), and the sweep's
// summary reports guards_fired by name. CI fails when a guard listed as
// reached by the sweep (Reach == ReachSweep) never fired across the CI
// sweep.
//
// The list of guards is here, in one place: Infos. A core fires a guard
// with c.Fire(guard.X); a pure function (failover.Decide) returns the
// guards it passed through as a Set, and its caller fires them.
package guard

// Name is one guard. The zero value is no guard.
type Name uint8

// Counter counts guards as they fire. Cores call it from their single
// thread; an implementation shared by several (the daemon's) must be safe
// for concurrent use.
type Counter interface {
	Fire(Name)
}

// Or returns c, or a Counter that drops everything when c is nil, so a core
// never checks for nil.
func Or(c Counter) Counter {
	if c == nil {
		return Discard{}
	}
	return c
}

// Discard drops every count.
type Discard struct{}

// Fire does nothing.
func (Discard) Fire(Name) {}

// Counts is the in-memory Counter: one count per guard, for one thread
// (the simulator runs a world on one goroutine).
type Counts [NumNames]uint64

// Fire counts n (a name out of range is ignored).
func (c *Counts) Fire(n Name) {
	if n > 0 && n < NumNames {
		c[n]++
	}
}

// Map returns the guards that fired, by key.
func (c *Counts) Map() map[string]uint64 {
	out := make(map[string]uint64)
	for n := Name(1); n < NumNames; n++ {
		if c[n] > 0 {
			out[n.String()] = c[n]
		}
	}
	return out
}

// Set is a set of guards, for pure functions that report the guards they
// passed through instead of counting them (the caller fires them once).
type Set uint64

// Add puts n in the set.
func (s *Set) Add(n Name) { *s |= 1 << n }

// Has reports whether n is in the set.
func (s Set) Has(n Name) bool { return s&(1<<n) != 0 }

// FireAll fires every guard in s on c.
func (s Set) FireAll(c Counter) {
	for n := Name(1); s != 0 && n < NumNames; n++ {
		if s.Has(n) {
			c.Fire(n)
			s &^= 1 << n
		}
	}
}

// String is the guard's key (as in guards_fired).
func (n Name) String() string {
	if n == 0 || n >= NumNames {
		return "unknown"
	}
	return n.info().Key
}

// Lookup returns the guard with key k.
func Lookup(k string) (Name, bool) {
	for n := Name(1); n < NumNames; n++ {
		if n.info().Key == k {
			return n, true
		}
	}
	return 0, false
}

// Missing returns the guards the CI sweep must fire (Required) that have
// no count in fired (guards_fired, summed over the sweep).
func Missing(fired map[string]uint64) []Info {
	var out []Info
	for _, n := range Required() {
		if fired[n.String()] == 0 {
			out = append(out, n.Info())
		}
	}
	return out
}
