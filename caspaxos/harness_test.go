package caspaxos

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/quorum"
)

// cluster wires acceptors and proposers with synchronous, in-order delivery
// and an optional drop filter. It is a test harness, not a simulator: the
// sim package exercises faults, this one checks rules step by step.
type cluster struct {
	t         *testing.T
	now       time.Duration
	acceptors map[NodeID]*Acceptor
	stores    map[NodeID]*MemoryStore
	proposers map[NodeID]*Proposer
	// drop, if set, decides per message whether it is lost.
	drop    func(m Message) bool
	results map[NodeID][]Result
	sent    []Message
}

func newCluster(t *testing.T, acceptors int, proposers ...NodeID) *cluster {
	t.Helper()
	c := &cluster{
		t:         t,
		acceptors: map[NodeID]*Acceptor{},
		stores:    map[NodeID]*MemoryStore{},
		proposers: map[NodeID]*Proposer{},
		results:   map[NodeID][]Result{},
	}
	ids := make([]quorum.ID, 0, acceptors)
	for i := 1; i <= acceptors; i++ {
		id := NodeID(100 + i)
		ids = append(ids, id)
		a, err := NewAcceptor(id, State{})
		require.NoError(t, err)
		c.acceptors[id] = a
		c.stores[id] = NewMemoryStore()
	}
	for _, pid := range proposers {
		cfg := DefaultProposerConfig(pid, quorum.MajorityConfig(ids...))
		p, err := NewProposer(cfg, rand.New(rand.NewPCG(uint64(pid), 7)))
		require.NoError(t, err)
		c.proposers[pid] = p
	}
	return c
}

// run delivers messages until the system is quiet.
func (c *cluster) run() {
	for i := 0; i < 10000; i++ {
		progressed := false
		for _, pid := range sortedIDs(c.proposers) {
			p := c.proposers[pid]
			msgs, res := p.Ready()
			c.results[pid] = append(c.results[pid], res...)
			for _, m := range msgs {
				progressed = true
				c.sent = append(c.sent, m)
				if c.drop != nil && c.drop(m) {
					continue
				}
				a := c.acceptors[m.To]
				require.NoError(c.t, a.Step(m))
				b, replies := a.Ready()
				require.NoError(c.t, c.stores[m.To].Apply(b))
				require.NoError(c.t, a.Violation())
				for _, r := range replies {
					c.sent = append(c.sent, r)
					if c.drop != nil && c.drop(r) {
						continue
					}
					c.proposers[r.To].Step(c.now, r)
				}
			}
		}
		if progressed {
			continue
		}
		// Quiet: advance time to the next deadline, if any.
		next, ok := time.Duration(0), false
		for _, pid := range sortedIDs(c.proposers) {
			if d, has := c.proposers[pid].NextDeadline(); has && (!ok || d < next) {
				next, ok = d, true
			}
		}
		if !ok {
			return
		}
		if next > c.now {
			c.now = next
		}
		for _, pid := range sortedIDs(c.proposers) {
			c.proposers[pid].Tick(c.now)
		}
	}
	c.t.Fatal("cluster did not quiesce")
}

// do proposes and runs to completion, returning the single result.
func (c *cluster) do(pid NodeID, key string, ch Change) Result {
	c.t.Helper()
	before := len(c.results[pid])
	if _, ok := ch.(eraseMarker); ok {
		require.NoError(c.t, c.proposers[pid].Erase(c.now, RequestID(before+1), key))
	} else {
		require.NoError(c.t, c.proposers[pid].Propose(c.now, RequestID(before+1), key, ch))
	}
	c.run()
	require.Len(c.t, c.results[pid], before+1)
	return c.results[pid][before]
}

func sortedIDs[V any](m map[NodeID]V) []NodeID {
	ids := make([]NodeID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	for i := 1; i < len(ids); i++ {
		for j := i; j > 0 && ids[j] < ids[j-1]; j-- {
			ids[j], ids[j-1] = ids[j-1], ids[j]
		}
	}
	return ids
}

func countType(msgs []Message, t MsgType) int {
	n := 0
	for _, m := range msgs {
		if m.Type == t {
			n++
		}
	}
	return n
}
