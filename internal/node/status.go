package node

import (
	"github.com/fmnode/fmnode/failover"
)

// flushStatus feeds the manager the status of every replica whose
// progress may have changed since it last looked.
func (n *Node) flushStatus() {
	// Double-buffered: marks made while feeding go to the other slice, and
	// neither is reallocated per flush.
	dirty := n.dirty
	n.dirty, n.dirtySpare = n.dirtySpare[:0], nil
	defer func() { n.dirtySpare = dirty[:0] }()
	for _, id := range dirty {
		if n.state[id] != stateDirty {
			continue // dropped meanwhile
		}
		n.state[id] = stateClean
		pr, err := n.host.ProgressWithoutHistory(id, n.progBuf) // the status needs no history
		if err != nil {
			continue
		}
		if pr.Followers != nil {
			n.progBuf = pr.Followers[:0]
		}
		st := failover.StatusFromProgressInto(pr, n.cfg.Region, n.statBuf)
		if st.Followers != nil {
			n.statBuf = st.Followers[:0]
		}
		if st.Epoch > n.known[id] {
			// The data plane heard of a newer epoch than any register value
			// this node knows: a commit whose learn never reached it (the
			// committing node crashed first, or the message was lost).
			// Read the register back.
			n.stats.ReadsBack++
			n.mgr.RequestRead(n.parts[id].name)
		}
		n.mgr.UpdateReplicaAt(n.now, n.handles[id], st)
		n.fed = true
	}
}
