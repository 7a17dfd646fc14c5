package sim

import (
	"fmt"
	"time"
)

// Violation kinds.
const (
	ViolationInvariant       = "invariant"       // a core's own assertion failed
	ViolationProtocol        = "protocol"        // a core rejected input the simulator routed to it
	ViolationRecovery        = "recovery"        // a node could not restart from its disk
	ViolationLinearizability = "linearizability" // porcupine: illegal or unknown
	ViolationLiveness        = "liveness"        // the healed system did not finish in time
	ViolationConvergence     = "convergence"     // replicas disagree after healing
	ViolationSimulator       = "simulator"       // the simulator itself overflowed a bound
)

// Violation is one failure a run found.
type Violation struct {
	At     time.Duration
	Kind   string
	Detail string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s at %v: %s", v.Kind, v.At, v.Detail)
}

// maxViolations bounds what one run keeps: the first few say everything,
// and a broken core can otherwise report one per event.
const maxViolations = 32

// violations collects a run's failures.
type violations struct {
	list    []Violation
	dropped int
}

func (vs *violations) add(at time.Duration, kind, format string, args ...any) {
	if len(vs.list) >= maxViolations {
		vs.dropped++
		return
	}
	vs.list = append(vs.list, Violation{At: at, Kind: kind, Detail: fmt.Sprintf(format, args...)})
}

func (vs *violations) strings() []string {
	out := make([]string, 0, len(vs.list)+1)
	for _, v := range vs.list {
		out = append(out, v.String())
	}
	if vs.dropped > 0 {
		out = append(out, fmt.Sprintf("... and %d more", vs.dropped))
	}
	return out
}
