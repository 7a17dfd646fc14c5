package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/fmnode/fmnode/internal/agent"
	"github.com/fmnode/fmnode/sim"
)

// What the demo reads from the agents' admin API (GET
// /v1/admin/partitions), where the clients cannot see: which region is
// write region of most partitions, when a failover was proposed and
// committed, whether the returning agents caught up and are back in the
// write quorums, and the replication payload they received.

// demoStatuses asks every node of nodes for its status at once; a node
// that does not answer is left out (with its error).
func demoStatuses(ctx context.Context, lc *localCluster, nodes []*localNode) (map[*localNode]agent.NodeStatus, map[*localNode]error) {
	var mu sync.Mutex
	out := map[*localNode]agent.NodeStatus{}
	errs := map[*localNode]error{}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := lc.statusCtx(ctx, n)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[n] = err
				return
			}
			out[n] = st
		}()
	}
	wg.Wait()
	return out, errs
}

// demoRegister is a partition's register as the newest report of any
// agent has it.
type demoRegister struct {
	version     uint64
	epoch       uint64
	writeRegion string
	quorum      []string
}

// demoRegisters is every partition's newest register value over the
// statuses.
func demoRegisters(sts map[*localNode]agent.NodeStatus) map[uint32]demoRegister {
	out := map[uint32]demoRegister{}
	for _, st := range sts {
		for _, p := range st.Partitions {
			if p.RegisterVersion == 0 {
				continue
			}
			if r, ok := out[p.ID]; !ok || p.RegisterVersion > r.version {
				out[p.ID] = demoRegister{version: p.RegisterVersion, epoch: p.RegisterEpoch, writeRegion: p.RegisterWriteRegion, quorum: p.RegisterQuorum}
			}
		}
	}
	return out
}

// busiestRegion is the region that is write region of the most
// partitions (the first in regions on a tie), and how many.
func busiestRegion(regs map[uint32]demoRegister, regions []string) (string, int) {
	count := map[string]int{}
	for _, r := range regs {
		count[r.writeRegion]++
	}
	best := ""
	for _, r := range regions {
		if best == "" || count[r] > count[best] {
			best = r
		}
	}
	return best, count[best]
}

// demoMark is what the surviving agents saw of one partition's failover:
// the earliest failover proposal into an epoch after epoch0 (detection)
// and the earliest sight of such an epoch committed (completion: on the
// proposer, its own commit), over the agents; and when the new write
// region's replica was promoted.
type demoMark struct {
	proposed, committed, promoted time.Time
	epoch                         uint64
}

func demoMarks(sts map[*localNode]agent.NodeStatus, epoch0 map[uint32]uint64) map[uint32]demoMark {
	out := map[uint32]demoMark{}
	for _, st := range sts {
		for _, p := range st.Partitions {
			e0, ok := epoch0[p.ID]
			if !ok {
				continue
			}
			m := out[p.ID]
			if p.FailoverEpoch > e0 && !p.FailoverProposedAt.IsZero() && (m.proposed.IsZero() || p.FailoverProposedAt.Before(m.proposed)) {
				m.proposed = p.FailoverProposedAt
			}
			if p.SeenEpoch > e0 && !p.EpochSeenAt.IsZero() && (m.committed.IsZero() || p.EpochSeenAt.Before(m.committed)) {
				m.committed, m.epoch = p.EpochSeenAt, p.SeenEpoch
			}
			if p.PromotedEpoch > e0 && !p.PromotedAt.IsZero() && (m.promoted.IsZero() || p.PromotedAt.Before(m.promoted)) {
				m.promoted = p.PromotedAt
			}
			out[p.ID] = m
		}
	}
	return out
}

// demoCatchUp reports whether every replica the returning nodes host is
// in its leader's epoch and holds (in its log) what the leader had
// committed at the previous look (prevCommit, updated here; it learns the
// commit itself with the next append), and whether every
// register's write quorum has every region again. The leaders are the
// replicas whose role is leader.
func demoCatchUp(sts map[*localNode]agent.NodeStatus, returning []*localNode, regions int, prevCommit map[uint32]uint64) (caughtUp, inQuorum bool, why string) {
	leaders := map[uint32]agent.PartitionStatus{}
	for _, st := range sts {
		for _, p := range st.Partitions {
			if p.Role == "leader" {
				leaders[p.ID] = p
			}
		}
	}
	caughtUp = true
	for _, n := range returning {
		st, ok := sts[n]
		if !ok {
			return false, false, n.name + " did not answer"
		}
		for _, p := range st.Partitions {
			l, ok := leaders[p.ID]
			want, seen := prevCommit[p.ID]
			if !ok || !seen || p.Epoch != l.Epoch || p.LastLSN < want {
				if caughtUp {
					why = fmt.Sprintf("%s: partition %d at epoch %d holds %d, leader epoch %d committed %d", n.name, p.ID, p.Epoch, p.LastLSN, l.Epoch, want)
				}
				caughtUp = false
			}
		}
	}
	inQuorum = caughtUp
	regs := demoRegisters(sts)
	for id, r := range regs {
		if len(r.quorum) < regions {
			if inQuorum {
				why = fmt.Sprintf("partition %d: write quorum %v", id, r.quorum)
			}
			inQuorum = false
		}
	}
	for id, l := range leaders {
		prevCommit[id] = l.CommitLSN
	}
	return caughtUp, inQuorum, why
}

// demoDataBytes sums what the nodes received as replication payload
// since they started.
func demoDataBytes(sts map[*localNode]agent.NodeStatus, nodes []*localNode) (sum uint64, snapshots uint64) {
	for _, n := range nodes {
		sum += sts[n].Driver.DataBytesReceived
	}
	for _, st := range sts {
		snapshots += st.Snapshots
	}
	return sum, snapshots
}

// nodesIn are the nodes of region r, and the others.
func nodesIn(nodes []*localNode, r string) (in, out []*localNode) {
	for _, n := range nodes {
		if n.region == r {
			in = append(in, n)
		} else {
			out = append(out, n)
		}
	}
	return in, out
}

// demoDist summarises seconds as the simulator does (sim.Dist: the
// q-quantile is the ceil(q*n)-th smallest).
func demoDist(xs []float64) sim.Dist {
	if len(xs) == 0 {
		return sim.Dist{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	q := func(p float64) float64 { return s[min(len(s)-1, max(0, int(math.Ceil(p*float64(len(s))))-1))] }
	return sim.Dist{N: len(s), Mean: sum / float64(len(s)), P50: q(0.5), P99: q(0.99), Max: s[len(s)-1]}
}
