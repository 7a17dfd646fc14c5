package sim

import (
	"time"

	"github.com/fmnode/fmnode/caspaxos"
)

// Forwards between proposers (caspaxos/forward.go) travel on a network of
// their own over the same world, so the same links, partitions, loss,
// duplication and reordering apply to them as to the protocol's messages.

// forwardReceiver routes a delivered forward to the proposer it names.
type forwardReceiver struct{ c *Cluster }

func (r forwardReceiver) Deliver(now time.Duration, from, to int32, f caspaxos.Forward) {
	p := r.c.byID[f.To]
	if p == nil || p.node != to || p.p == nil {
		return // an old incarnation: nobody listens any more
	}
	p.deliverForward(now, f)
}

// sendForward puts a forward on the wire to the proposer it names.
func (c *Cluster) sendForward(from int32, f caspaxos.Forward) {
	p := c.byID[f.To]
	if p == nil {
		return // addressed to a proposer incarnation that no longer exists
	}
	c.fnet.Send(from, p.node, f)
}

func (pp *proposerProc) deliverForward(now time.Duration, f caspaxos.Forward) {
	pp.p.StepForward(pp.c.w.Local(pp.node), f)
	pp.flush()
}

// summarizeForward folds a forward into the trace canonically.
func summarizeForward(t *Trace, f *caspaxos.Forward) {
	t.Byte(byte(f.Kind))
	t.U64(uint64(f.From))
	t.U64(uint64(f.To))
	t.Str(f.Key)
	t.U64(f.Seq)
	t.Byte(f.Hops)
	t.U64(uint64(len(f.Change)))
	t.Byte(byte(f.Status))
	t.U64(f.Value.Version)
	t.U64(uint64(f.Leader))
}
