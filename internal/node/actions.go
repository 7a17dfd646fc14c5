package node

import (
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
)

// act carries out the manager's local actions on the partition replica.
// The first action the data plane refuses stops the rest: the manager
// evaluates again from the replica's next status.
func (n *Node) act(pa failover.PartitionActions) {
	p := n.partOfKey(pa.Partition)
	if p == nil {
		return
	}
	for _, a := range pa.Actions {
		done, err := Do(n.host, n.now, p.id, a)
		if err != nil {
			n.stats.ActionErrors++
			n.obs.ActionFailed(p.id, a, err)
			break
		}
		switch {
		case done.Promoted:
			n.obs.Promoted(p.id, a.Epoch)
		case done.Truncated:
			n.obs.Truncated(p.id, a.Divergence.FalseProgressOps)
		}
	}
	n.markDirty(p)
}

// Done says what an action did beyond its kind.
type Done struct {
	// Promoted: the replica became write region of the action's epoch.
	Promoted bool
	// Truncated: the replica set its false progress aside into the
	// conflict record.
	Truncated bool
}

// Do carries out one failover action (failover.Reconcile's output) on
// partition p's replica in h: the one mapping from the failover core's
// actions to the data plane's operations, for every driver of a host.
func Do(h *partition.Host, now time.Duration, p partition.ID, a failover.Action) (Done, error) {
	e := partition.Epoch(a.Epoch)
	switch a.Kind {
	case failover.ActPromote:
		var err error
		if a.Graceful {
			err = h.PromoteGraceful(now, p, e, partition.LSN(a.AfterLSN), a.WriteQuorum, 0)
		} else {
			err = h.Promote(now, p, e, partition.LSN(a.AfterLSN), a.WriteQuorum, 0)
		}
		return Done{Promoted: err == nil}, err
	case failover.ActFence:
		return Done{}, h.Fence(now, p, e, a.WriteRegion, 0)
	case failover.ActFollow:
		if err := h.Fence(now, p, e, a.WriteRegion, 0); err != nil || !a.TruncateSet {
			return Done{}, err
		}
		if err := h.Truncate(now, p, partition.LSN(a.TruncateAfter), 0); err != nil {
			return Done{}, err
		}
		return Done{Truncated: true}, nil
	case failover.ActSetWriteQuorum:
		return Done{}, h.SetWriteQuorum(now, p, a.WriteQuorum, 0)
	case failover.ActValidateLease:
		return Done{}, h.ValidateLease(p, a.LeaseGen, e)
	}
	return Done{}, nil
}
