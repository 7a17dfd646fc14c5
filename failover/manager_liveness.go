// Liveness glue: changes of the liveness view (failure verdicts, node
// health, this node's own lease and lease run) turned into partitions to
// evaluate, and changes of its suspicions of peer nodes turned into
// Reachability for the driver.

package failover

import "time"

// refreshLiveness marks partitions dirty when a node's failure verdict or
// reachability changed.
func (m *Manager) refreshLiveness(now time.Duration) {
	m.refreshReachability()
	changed := false
	if g := m.live.LeaseGen(); g != m.leaseGen {
		// A new lease run: every partition this node is write region of
		// must be revalidated (reassert) before its replica counts it.
		m.leaseGen = g
		changed = true
	}
	if leased := m.live.LeaseValid(now); leased != m.selfLeased {
		m.selfLeased = leased
		if leased {
			m.selfLeasedSince = now
		}
		changed = true
	}
	for _, n := range m.live.Nodes() {
		failed, _, _ := m.live.Failed(n.ID, now)
		up := n.ID == m.self.ID || (!failed && m.live.Alive(n.ID))
		_, wasUp := m.healthySince[n.ID]
		if up && !wasUp {
			m.healthySince[n.ID] = now
			changed = true
		} else if !up && wasUp {
			delete(m.healthySince, n.ID)
			changed = true
		}
		if failed != m.failedNodes[n.ID] {
			m.failedNodes[n.ID] = failed
			changed = true
		}
	}
	if changed {
		for _, p := range m.sorted {
			m.markDirty(p)
		}
	}
}

// refreshReachability turns changes of the view's suspicions into
// Reachability for the driver: for every hosted partition with a replica
// on a node whose verdict changed. A view changes rarely; the cost is one
// pass over the partitions per change.
func (m *Manager) refreshReachability() {
	v := m.live.ViewSeq()
	if v == m.viewSeq {
		return
	}
	m.viewSeq = v
	for _, n := range m.live.Nodes() {
		down := !m.live.Alive(n.ID)
		if down == m.peerDown[n.ID] {
			continue
		}
		if down {
			m.peerDown[n.ID] = true
		} else {
			delete(m.peerDown, n.ID)
		}
		for _, p := range m.sorted {
			if !p.hasMine {
				continue
			}
			for _, rn := range p.placement {
				if rn.Node == n.ID && rn.Region != p.myRegion {
					m.reach = append(m.reach, Reachability{Partition: p.name, Region: rn.Region, Reachable: !down})
				}
			}
		}
	}
}

// Reachability is one change of a peer replica's reachability: the replica
// of Partition in Region sits on a node the view now suspects (or no
// longer does).
type Reachability struct {
	Partition string
	Region    Region
	Reachable bool
}
