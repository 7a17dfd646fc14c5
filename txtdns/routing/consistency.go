package routing

import (
	"slices"
	"time"
)

// Consistency is a read's consistency level, as the data plane defines
// them. It decides which regions the client may read from and in which order.
type Consistency uint8

// Consistency levels.
const (
	// ConsistencyStrong reads see every acknowledged write: they go to the
	// write region, like writes.
	ConsistencyStrong Consistency = iota
	// ConsistencyBoundedStaleness reads lag the write region by at most
	// Request.MaxStaleness: preferred regions first (the replica refuses
	// with a StaleRead when it lags more), then the write region.
	ConsistencyBoundedStaleness
	// ConsistencySession reads see the caller's own writes (its Session
	// tokens): preferred regions first (the replica refuses with a
	// StaleRead until it has applied the token), then the write region.
	ConsistencySession
	// ConsistencyEventual reads may see any replica: preferred regions,
	// then the priority list.
	ConsistencyEventual
)

func (c Consistency) String() string {
	switch c {
	case ConsistencyStrong:
		return "strong"
	case ConsistencyBoundedStaleness:
		return "bounded_staleness"
	case ConsistencySession:
		return "session"
	case ConsistencyEventual:
		return "eventual"
	default:
		return "unknown"
	}
}

// Request describes one routed operation.
type Request struct {
	// Write routes to the write region; Consistency is then ignored.
	Write bool
	// Consistency of a read.
	Consistency Consistency
	// Session, if set, supplies the partition's token to reads and
	// receives the token every successful operation returns.
	Session *Session
	// MaxStaleness is passed to bounded-staleness reads.
	MaxStaleness time.Duration
}

// ReadOptions are the options of Client.Read.
type ReadOptions struct {
	Consistency  Consistency
	Session      *Session
	MaxStaleness time.Duration
}

// maxCandidates bounds the regions one operation considers: the write
// region, a priority list and the preferred regions.
const maxCandidates = 1 + 2*8

// Candidates returns the regions to try for req, best first, into buf:
// writes and strong reads go to the write region, then the priority list
// (a region that is no longer the write region answers with a redirect);
// session and bounded-staleness reads go to the preferred regions (those
// in the priority list, if known), then the write region, then the rest of
// the priority list; eventual reads go to the preferred regions, then the
// priority list, then the write region.
func Candidates(buf []string, e Entry, req Request, preferred []string) []string {
	out := buf[:0]
	add := func(r string) {
		if r != "" && len(out) < cap(buf) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	if req.Write || req.Consistency == ConsistencyStrong {
		add(e.WriteRegion)
		for _, r := range e.Priority {
			add(r)
		}
		return out
	}
	for _, r := range preferred {
		if e.Priority == nil || r == e.WriteRegion || slices.Contains(e.Priority, r) {
			add(r)
		}
	}
	if req.Consistency != ConsistencyEventual {
		add(e.WriteRegion)
	}
	for _, r := range e.Priority {
		add(r)
	}
	add(e.WriteRegion)
	return out
}
