package node

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
)

// Placement is a hosted partition: its id and which node hosts each
// region's replica (this node among them). The node keeps Replicas: the
// caller must not modify the array afterwards.
type Placement struct {
	ID       partition.ID
	Replicas []failover.RegionNode
}

// CreatePartition adds a new partition replica with its first spec. The
// register is created separately (CreateRegister), by one node.
func (n *Node) CreatePartition(now time.Duration, pl Placement, spec partition.Spec) error {
	p, err := n.addPart(pl)
	if err != nil {
		return err
	}
	if err := n.host.Create(now, pl.ID, spec, 0); err != nil {
		n.dropPart(p)
		return fmt.Errorf("node %d: create partition %d: %w", n.cfg.ID, pl.ID, err)
	}
	n.markDirty(p)
	return nil
}

// OpenPartition adds a partition replica recovered from the store. The
// node knows no register value for it yet, so it reads it back.
func (n *Node) OpenPartition(now time.Duration, pl Placement, rec partition.Recovered) error {
	if rec.Partition != pl.ID {
		return fmt.Errorf("node %d: open partition %d with the records of %d: %w", n.cfg.ID, pl.ID, rec.Partition, ErrInvalidConfig)
	}
	p, err := n.addPart(pl)
	if err != nil {
		return err
	}
	if err := n.host.Open(now, rec); err != nil {
		n.dropPart(p)
		return fmt.Errorf("node %d: open partition %d: %w", n.cfg.ID, pl.ID, err)
	}
	n.mgr.RequestRead(p.name)
	n.fed = true
	n.markDirty(p)
	return nil
}

// CreateRegister writes partition id's initial register state, unless the
// register holds one already (then the node adopts that).
func (n *Node) CreateRegister(id partition.ID, s failover.State) error {
	p, err := n.hosted(id, "create register of")
	if err != nil {
		return err
	}
	if err := n.mgr.Create(p.name, s); err != nil {
		return fmt.Errorf("node %d: %w", n.cfg.ID, err)
	}
	n.fed = true
	return nil
}

func (n *Node) addPart(pl Placement) (*part, error) {
	if pl.ID == 0 || pl.ID > MaxPartitionID {
		return nil, fmt.Errorf("node %d: partition id %d out of 1..%d: %w", n.cfg.ID, pl.ID, MaxPartitionID, ErrInvalidConfig)
	}
	if n.part(pl.ID) != nil {
		return nil, fmt.Errorf("node %d: partition %d added twice: %w", n.cfg.ID, pl.ID, ErrInvalidConfig)
	}
	mine := false
	for _, rn := range pl.Replicas {
		if _, ok := n.peer(rn.Node); !ok {
			return nil, fmt.Errorf("node %d: partition %d places region %s on unknown node %d: %w", n.cfg.ID, pl.ID, rn.Region, rn.Node, ErrInvalidConfig)
		}
		if r := n.nodeRegion[rn.Node]; r != rn.Region {
			return nil, fmt.Errorf("node %d: partition %d places region %s on node %d of region %s: %w", n.cfg.ID, pl.ID, rn.Region, rn.Node, r, ErrInvalidConfig)
		}
		if rn.Node == n.cfg.ID {
			if rn.Region != n.cfg.Region {
				return nil, fmt.Errorf("node %d: partition %d places region %s on this node of region %s: %w", n.cfg.ID, pl.ID, rn.Region, n.cfg.Region, ErrInvalidConfig)
			}
			mine = true
		}
	}
	if !mine {
		return nil, fmt.Errorf("node %d: partition %d has no replica here: %w", n.cfg.ID, pl.ID, ErrInvalidConfig)
	}
	// The node keeps pl.Replicas (partitions placed alike may share one
	// array: at 100k partitions a copy each is 7 MB a node).
	p := &part{id: pl.ID, name: partition.RegisterKey(pl.ID), replicas: pl.Replicas}
	if err := n.mgr.AddPartition(failover.Placement{Partition: p.name, Replicas: p.replicas}); err != nil {
		return nil, fmt.Errorf("node %d: %w", n.cfg.ID, err)
	}
	p.handle, _ = n.mgr.Handle(p.name)
	if k := int(pl.ID) + 1; k > len(n.parts) {
		n.parts = slices.Grow(n.parts, k-len(n.parts))[:k]
		n.state = slices.Grow(n.state, k-len(n.state))[:k]
		n.known = slices.Grow(n.known, k-len(n.known))[:k]
		n.handles = slices.Grow(n.handles, k-len(n.handles))[:k]
		r := len(n.regions)
		n.nodeOfReg = slices.Grow(n.nodeOfReg, k*r-len(n.nodeOfReg))[:k*r]
	}
	n.parts[pl.ID] = p
	n.state[pl.ID] = stateClean
	n.known[pl.ID], n.handles[pl.ID] = math.MaxUint64, p.handle
	for _, rn := range pl.Replicas {
		if ri := n.regionIndex(rn.Region); ri >= 0 {
			n.nodeOfReg[int(pl.ID)*len(n.regions)+ri] = rn.Node
		}
	}
	return p, nil
}

// dropPart undoes addPart for a partition the host refused (the manager
// keeps its entry; the partition then has no replica status and no action
// reaches it).
func (n *Node) dropPart(p *part) {
	n.parts[p.id], n.state[p.id] = nil, 0
	clear(n.nodeOfReg[int(p.id)*len(n.regions) : int(p.id+1)*len(n.regions)])
}

// hosted returns hosted partition id, or an error saying that the request
// (what) was refused because the partition has no replica here.
func (n *Node) hosted(id partition.ID, what string) (*part, error) {
	if p := n.part(id); p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("node %d: %s partition %d: not hosted here: %w", n.cfg.ID, what, id, failover.ErrRefused)
}

// part returns hosted partition id, or nil.
func (n *Node) part(id partition.ID) *part {
	if int(id) < len(n.parts) {
		return n.parts[id]
	}
	return nil
}

// partOfKey returns the hosted partition whose register key is key.
func (n *Node) partOfKey(key string) *part {
	id, ok := parseRegisterKey(key)
	if !ok {
		return nil
	}
	return n.part(id)
}

// parseRegisterKey inverts partition.RegisterKey ("p/<id>", canonical).
func parseRegisterKey(key string) (partition.ID, bool) {
	if len(key) < 3 || len(key) > 12 || key[0] != 'p' || key[1] != '/' || key[2] == '0' {
		return 0, false
	}
	var v uint64
	for i := 2; i < len(key); i++ {
		c := key[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if v > MaxPartitionID {
		return 0, false
	}
	return partition.ID(v), true
}

func (n *Node) markDirty(p *part) { n.markDirtyID(p.id) }

// markDirtyID marks hosted partition id's replica status for the manager.
func (n *Node) markDirtyID(id partition.ID) {
	if int(id) < len(n.state) && n.state[id] == stateClean {
		n.state[id] = stateDirty
		n.dirty = append(n.dirty, id)
	}
}
