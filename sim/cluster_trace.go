package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// clusterTraceLen bounds each partition's event ring (and the fault ring):
// a failure shows the last events, enough to read the failover, the client
// operations and the faults around it.
const clusterTraceLen = 40

// ctEvent is one traced event, kept as data (formatting every event as it
// happens would cost more than the simulation of it).
type ctEvent struct {
	at   time.Duration
	kind ctKind
	a, b uint64
	s, t string
}

type ctKind uint8

const (
	ctRegister ctKind = iota + 1 // a newer register value: a=version b=epoch s=write region t=what changed
	ctPromote                    // a node promoted its replica: a=epoch s=region
	ctClient                     // a client operation ended: a=client b=epoch s=outcome t=what
	ctFault                      // a fault or operator action (the cluster's own ring)
)

// ctRing is a bounded ring of events.
type ctRing struct {
	ev   [clusterTraceLen]ctEvent
	next int
	n    int
}

func (r *ctRing) add(e ctEvent) {
	r.ev[r.next] = e
	r.next = (r.next + 1) % clusterTraceLen
	r.n = min(r.n+1, clusterTraceLen)
}

func (r *ctRing) list() []ctEvent {
	out := make([]ctEvent, 0, r.n)
	for k := range r.n {
		out = append(out, r.ev[(r.next-r.n+k+clusterTraceLen)%clusterTraceLen])
	}
	return out
}

// clusterTrace keeps each partition's last events and the last faults and
// operator actions, for the compact trace a failing cluster seed prints.
type clusterTrace struct {
	parts  []ctRing
	faults ctRing
}

func newClusterTrace(parts int) *clusterTrace { return &clusterTrace{parts: make([]ctRing, parts)} }

func (ct *clusterTrace) part(i int, e ctEvent) {
	if ct != nil && i >= 0 && i < len(ct.parts) {
		ct.parts[i].add(e)
	}
}

func (ct *clusterTrace) fault(at time.Duration, format string, args ...any) {
	if ct != nil {
		ct.faults.add(ctEvent{at: at, kind: ctFault, s: fmt.Sprintf(format, args...)})
	}
}

// render is partition i's last events merged with the last faults, in
// time order, one line each.
func (ct *clusterTrace) render(name string, i int) []string {
	if ct == nil || i < 0 || i >= len(ct.parts) {
		return nil
	}
	evs := append(ct.parts[i].list(), ct.faults.list()...)
	slices.SortStableFunc(evs, func(a, b ctEvent) int { return int(a.at - b.at) })
	out := []string{fmt.Sprintf("last events of %s (register, promotions, client operations) and of the cluster (faults, operator actions):", name)}
	for _, e := range evs {
		var line string
		switch e.kind {
		case ctRegister:
			line = fmt.Sprintf("register v%d epoch %d write %s %s", e.a, e.b, e.s, e.t)
		case ctPromote:
			line = fmt.Sprintf("promoted in %s at epoch %d", e.s, e.a)
		case ctClient:
			line = fmt.Sprintf("client %d %s %s (epoch %d)", e.a, e.t, e.s, e.b)
		case ctFault:
			line = "* " + e.s
		}
		out = append(out, fmt.Sprintf("%10.3fs %s", e.at.Seconds(), line))
	}
	return out
}

// partOfViolation finds the partition a violation names ("partition
// p-00012", "client 5 of p-00012" or "of p-00012"), or -1.
func (fw *foWorld) partOfViolation(v string) int {
	for i := range fw.parts {
		name := fw.parts[i].name
		if k := strings.Index(v, name); k >= 0 {
			end := k + len(name)
			if end == len(v) || v[end] < '0' || v[end] > '9' {
				return i
			}
		}
	}
	return -1
}

// describeRegister is what changed from one register value to the next,
// for the trace: the newest transition with its reason, or the phase.
func describeTransition(kind, reason string, phase fmt.Stringer, paused bool) string {
	s := fmt.Sprintf("phase %v", phase)
	if kind != "" {
		s = fmt.Sprintf("%s (%s), phase %v", kind, reason, phase)
	}
	if paused {
		s += ", paused"
	}
	return s
}
