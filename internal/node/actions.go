package node

import (
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
		if err := n.do(p, a); err != nil {
			n.stats.ActionErrors++
			n.obs.ActionFailed(p.id, a, err)
			break
		}
	}
	n.markDirty(p)
}

func (n *Node) do(p *part, a failover.Action) error {
	now, id, e := n.now, p.id, partition.Epoch(a.Epoch)
	switch a.Kind {
	case failover.ActPromote:
		var err error
		if a.Graceful {
			err = n.host.PromoteGraceful(now, id, e, partition.LSN(a.AfterLSN), a.WriteQuorum, 0)
		} else {
			err = n.host.Promote(now, id, e, partition.LSN(a.AfterLSN), a.WriteQuorum, 0)
		}
		if err == nil {
			n.obs.Promoted(id, a.Epoch)
		}
		return err
	case failover.ActFence:
		return n.host.Fence(now, id, e, a.WriteRegion, 0)
	case failover.ActFollow:
		if err := n.host.Fence(now, id, e, a.WriteRegion, 0); err != nil || !a.TruncateSet {
			return err
		}
		if err := n.host.Truncate(now, id, partition.LSN(a.TruncateAfter), 0); err != nil {
			return err
		}
		n.obs.Truncated(id, a.Divergence.FalseProgressOps)
		return nil
	case failover.ActSetWriteQuorum:
		return n.host.SetWriteQuorum(now, id, a.WriteQuorum, 0)
	case failover.ActValidateLease:
		return n.host.ValidateLease(id, a.LeaseGen, e)
	}
	return nil
}
