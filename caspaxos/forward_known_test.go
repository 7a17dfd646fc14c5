package caspaxos

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writersOf returns a ForwardWriters that names ids for every key.
func writersOf(ids ...NodeID) func(string) []NodeID {
	return func(string) []NodeID { return ids }
}

// withWriters sets ForwardWriters (and ForwardTimeoutMin, if positive).
func withWriters(w func(string) []NodeID, timeoutMin time.Duration) func(*ProposerConfig) {
	return func(c *ProposerConfig) {
		c.ForwardWriters = w
		if timeoutMin > 0 {
			c.ForwardTimeoutMin = timeoutMin
		}
	}
}

// TestForwardKnownWritersLeadFromTheFirstProposal: proposers told the
// key's writers (ForwardWriters) forward to the smallest from their very
// first proposal, so writers that all start at once, before any has seen
// another (the first event), do not collide; not told, they do.
func TestForwardKnownWritersLeadFromTheFirstProposal(t *testing.T) {
	ids := []NodeID{1, 2, 3, 4}
	cases := []struct {
		name    string
		writers func(string) []NodeID
		// forward: 2, 3 and 4 forward to 1 and run no round.
		forward bool
	}{
		{"told the writers", writersOf(ids...), true},
		{"told the writers, unsorted and with duplicates", writersOf(4, 2, 1, 3, 1), true},
		{"not told", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newFwdHarness(t, withWriters(tc.writers, 0), ids...)
			for _, id := range ids {
				h.propose(id, appendChange{tok: fmt.Sprintf("t%d", id), once: true})
			}
			h.run(h.now + time.Hour)
			naks := uint64(0)
			for _, id := range ids {
				naks += h.stats(id).NAKs
				rs := h.results[id]
				require.Len(t, rs, 1)
				require.NoError(t, rs[0].Err, "proposer %d", id)
			}
			final := logOf(h.read())
			for _, id := range ids {
				assert.Equal(t, 1, count(final, fmt.Sprintf("t%d", id)), "t%d applied once", id)
			}
			if !tc.forward {
				assert.Positive(t, naks, "the first proposals collide")
				return
			}
			assert.Zero(t, naks, "nothing collides")
			assert.Equal(t, uint64(3), h.stats(1).ForwardsServed, "the smallest leads")
			for _, id := range ids[1:] {
				s := h.stats(id)
				assert.Equal(t, uint64(1), s.Forwards, "proposer %d forwarded once", id)
				assert.Zero(t, s.Rounds, "proposer %d ran no round", id)
				assert.Zero(t, s.ForwardRedirects+s.ForwardTimeouts+s.ForwardFallbacks, "proposer %d", id)
			}
		})
	}
}

// TestForwardKnownWriterDown: a known writer that is down (never
// answers) costs each forwarder one timeout; the change then goes on to
// the next smallest writer (falling back only when that is the forwarder
// itself), and its next proposals go there first, for ForwardMemory.
// With two down, each costs one timeout and neither is tried again (one
// remembered failure would send every other proposal back to the first).
func TestForwardKnownWriterDown(t *testing.T) {
	const timeoutMin = 300 * time.Millisecond
	type step struct {
		id       NodeID
		to       NodeID // the first forward's target (0: no forward)
		timeouts int
		then     NodeID // where the change went after the timeouts (0: the proposer itself)
	}
	cases := []struct {
		name    string
		present []NodeID
		writers []NodeID
		steps   []step
	}{
		{"the smallest down", []NodeID{2, 3}, []NodeID{1, 2, 3}, []step{
			{2, 1, 1, 0}, {2, 0, 0, 0}, // 2 leads once 1 failed
			{3, 1, 1, 2}, {3, 2, 0, 0}, {3, 2, 0, 0},
		}},
		{"the two smallest down", []NodeID{3, 4}, []NodeID{1, 2, 3, 4}, []step{
			{3, 1, 2, 0}, {3, 0, 0, 0},
			{4, 1, 2, 3}, {4, 3, 0, 0}, {4, 3, 0, 0}, {4, 3, 0, 0},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newFwdHarness(t, withWriters(writersOf(tc.writers...), timeoutMin), tc.present...)
			for i, st := range tc.steps {
				h.now += time.Second
				before := h.stats(st.id)
				n := len(h.seenFwd)
				start := h.now
				res := h.do(st.id, appendChange{tok: fmt.Sprintf("s%d", i), once: true})
				require.NoError(t, res.Err, "step %d", i)
				s := h.stats(st.id)
				var first *Forward
				var sent []NodeID
				for j := n; j < len(h.seenFwd); j++ {
					if f := h.seenFwd[j]; f.From == st.id && f.Kind == ForwardRequest {
						if first == nil {
							first = &f
						}
						sent = append(sent, f.To)
					}
				}
				if st.to == 0 {
					assert.Nil(t, first, "step %d: %d leads", i, st.id)
				} else if assert.NotNil(t, first, "step %d: forwarded", i) {
					assert.Equal(t, st.to, first.To, "step %d: forwarded to", i)
				}
				assert.Equal(t, before.ForwardTimeouts+uint64(st.timeouts), s.ForwardTimeouts, "step %d: timeouts", i)
				if st.timeouts > 0 {
					assert.LessOrEqual(t, res.End-start, time.Duration(st.timeouts)*timeoutMin+time.Second, "step %d: bounded", i)
					if st.then == 0 {
						assert.Equal(t, before.ForwardFallbacks+1, s.ForwardFallbacks, "step %d: fell back", i)
						assert.Len(t, sent, st.timeouts, "step %d: one forward per timeout", i)
					} else {
						assert.Equal(t, before.ForwardFallbacks, s.ForwardFallbacks, "step %d: no fallback", i)
						assert.Equal(t, st.then, sent[len(sent)-1], "step %d: forwarded on to the next writer", i)
					}
				}
			}
			final := logOf(h.read())
			for i := range tc.steps {
				assert.Equal(t, 1, count(final, fmt.Sprintf("s%d", i)), "s%d applied once", i)
			}
		})
	}
}

// TestForwardKnownWritersBounds: zero ids and the proposer's own are
// skipped (its own id alone does not make a key shared: a hint gone
// stale stays unused), only the first MaxKnownWriters ids of an answer
// count, and views that differ converge through redirects
// (MaxForwardHops).
func TestForwardKnownWritersBounds(t *testing.T) {
	many := make([]NodeID, 0, MaxKnownWriters+1)
	for i := range MaxKnownWriters {
		many = append(many, NodeID(200+i))
	}
	many = append(many, 1) // past the bound: does not count
	cases := []struct {
		name    string
		present []NodeID
		writers map[NodeID][]NodeID
		from    NodeID
		// stale: warm up (from learns the others' hints), then let
		// ForwardMemory pass before from proposes.
		stale bool
		// to: the targets of from's forwards, in order (none: proposes itself).
		to        []NodeID
		redirects map[NodeID]uint64
	}{
		{"zero and own id skipped", []NodeID{5}, map[NodeID][]NodeID{5: {0, 5}}, 5, false, nil, nil},
		{"a zero after a writer skipped", []NodeID{5, 7}, map[NodeID][]NodeID{5: {5, 7}, 7: {5, 0}}, 7, false, []NodeID{5}, nil},
		{"its own id alone does not share a key", []NodeID{5, 7}, map[NodeID][]NodeID{5: {5, 7}, 7: {7}}, 7, true, nil, nil},
		// 200..202 are not there: each forward times out and the change
		// goes on to the next, MaxForwardHops times, then proposes itself.
		{"only the first MaxKnownWriters ids count", []NodeID{1, 500}, map[NodeID][]NodeID{500: many, 1: {1}}, 500, false, []NodeID{200, 201, 202}, nil},
		{"a writer that knows a smaller one redirects", []NodeID{1, 2, 3},
			map[NodeID][]NodeID{1: {1, 2, 3}, 2: {1, 2, 3}, 3: {2, 3}}, 3, false, []NodeID{2, 1}, map[NodeID]uint64{2: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newFwdHarness(t, nil, tc.present...)
			for _, id := range tc.present {
				cfg := fwdConfig(id, withWriters(writersOf(tc.writers[id]...), 300*time.Millisecond))
				p, err := NewProposer(cfg, rand.New(rand.NewPCG(uint64(id), 7)))
				require.NoError(t, err)
				h.props[id] = p
			}
			if tc.stale {
				h.warm()
				h.now += DefaultForwardMemory + time.Second
				h.seenFwd = h.seenFwd[:0]
			}
			before := h.stats(tc.from)
			res := h.do(tc.from, appendChange{tok: "x", once: true})
			require.NoError(t, res.Err)
			var to []NodeID
			for _, f := range h.seenFwd {
				if f.From == tc.from && f.Kind == ForwardRequest {
					to = append(to, f.To)
				}
			}
			assert.Equal(t, tc.to, to, "forwards of %d", tc.from)
			for id, n := range tc.redirects {
				assert.Equal(t, n, h.stats(id).ForwardRedirects, "redirects by %d", id)
			}
			if len(tc.to) == 0 {
				assert.Greater(t, h.stats(tc.from).Rounds, before.Rounds, "proposed itself")
			}
		})
	}
}

// TestFwdEntryFailedMarksBounded: the failed writers of a key are at most
// maxFailedWriters (the oldest out), expire, and leave the hint.
func TestFwdEntryFailedMarksBounded(t *testing.T) {
	cases := []struct {
		name   string
		marks  []NodeID
		at     time.Duration // when isFailed is asked (marks last a second)
		failed []NodeID
		not    []NodeID
	}{
		{"within the bound", []NodeID{1, 2, 3}, 0, []NodeID{1, 2, 3}, []NodeID{4}},
		{"past the bound, the oldest out", []NodeID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0, []NodeID{3, 10}, []NodeID{1, 2}},
		{"a mark again moves it last", []NodeID{1, 2, 3, 4, 5, 6, 7, 8, 1, 9}, 0, []NodeID{1, 9}, []NodeID{2}},
		{"expired", []NodeID{1, 2}, time.Second, nil, []NodeID{1, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := &fwdEntry{key: "k", leader: tc.marks[0]}
			for _, id := range tc.marks {
				e.markFailed(0, id, time.Second)
				assert.LessOrEqual(t, len(e.failed), maxFailedWriters)
			}
			assert.Zero(t, e.leader, "a failed leader leaves the hint")
			for _, id := range tc.failed {
				assert.True(t, e.isFailed(tc.at, id), "%d failed", id)
			}
			for _, id := range tc.not {
				assert.False(t, e.isFailed(tc.at, id), "%d not failed", id)
			}
		})
	}
	t.Run("expired marks go first", func(t *testing.T) {
		e := &fwdEntry{key: "k"}
		e.markFailed(0, 1, time.Second)
		e.markFailed(2*time.Second, 2, 3*time.Second)
		assert.Len(t, e.failed, 1)
	})
}

// TestForwardedChangeIsNotForwardedAgain: a proposer that takes a
// forwarded change runs it in its own rounds even when it knows a smaller
// writer (it took the change because its sender was out of redirects, or
// it learned the smaller one after), so a change travels at most
// MaxForwardHops+1 hops and its outcome comes from the proposer its
// forwarder is waiting for.
func TestForwardedChangeIsNotForwardedAgain(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*ProposerConfig)
		warm   bool
	}{
		{"hints from the warm-up", nil, true},
		{"known writers", withWriters(writersOf(1, 2, 3), 0), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newFwdHarness(t, tc.mutate, 1, 2, 3)
			if tc.warm {
				h.warm()
			}
			before := h.stats(3)
			n := len(h.seenFwd)
			h.props[3].StepForward(h.now, Forward{
				Kind: ForwardRequest, From: 2, To: 3, Key: "k", Seq: 999,
				Hops: uint8(DefaultMaxForwardHops), Change: appendChange{tok: "x", once: true}.EncodeChange(),
			})
			h.run(h.now + time.Hour)
			s := h.stats(3)
			assert.Equal(t, before.ForwardsServed+1, s.ForwardsServed, "3 took it")
			assert.Greater(t, s.Rounds, before.Rounds, "3 ran it itself")
			var reply *Forward
			for _, f := range h.seenFwd[n:] {
				assert.False(t, f.From == 3 && f.Kind == ForwardRequest, "3 forwarded it again: %v", f)
				if f.From == 3 && f.Kind == ForwardReply && f.Seq == 999 {
					reply = &f
				}
			}
			if assert.NotNil(t, reply, "3 answered") {
				assert.Equal(t, ForwardOK, reply.Status)
			}
			assert.Equal(t, 1, count(logOf(h.read()), "x"))
		})
	}
}
