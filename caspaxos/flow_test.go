package caspaxos

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/quorum"
)

// queueWorld is a proposer and acceptors that serve items one at a time,
// each taking service: a burst of rounds queues at the acceptors, as on
// processes sharing loaded cores. Deterministic (an event heap).
type queueWorld struct {
	t         *testing.T
	now       time.Duration
	service   time.Duration
	p         *Proposer
	acceptors map[NodeID]*Acceptor
	busyUntil map[NodeID]time.Duration
	events    qwEvents
	seq       uint64
	results   []Result
	items     int // items the acceptors processed
}

type qwEvent struct {
	at  time.Duration
	seq uint64
	m   Message // to an acceptor, processed at at
}

type qwEvents []qwEvent

func (h qwEvents) Len() int { return len(h) }
func (h qwEvents) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h qwEvents) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *qwEvents) Push(x any)   { *h = append(*h, x.(qwEvent)) }
func (h *qwEvents) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func newQueueWorld(t *testing.T, acceptors int, service time.Duration, mod func(*ProposerConfig)) *queueWorld {
	w := &queueWorld{t: t, service: service, acceptors: map[NodeID]*Acceptor{}, busyUntil: map[NodeID]time.Duration{}}
	ids := make([]quorum.ID, 0, acceptors)
	for i := 1; i <= acceptors; i++ {
		id := NodeID(100 + i)
		ids = append(ids, id)
		a, err := NewAcceptor(id, State{})
		require.NoError(t, err)
		w.acceptors[id] = a
	}
	cfg := DefaultProposerConfig(1, quorum.MajorityConfig(ids...))
	cfg.Phase1Timeout, cfg.Phase2Timeout = 250*time.Millisecond, 250*time.Millisecond
	cfg.BackoffBase, cfg.BackoffMax = 25*time.Millisecond, time.Second
	if mod != nil {
		mod(&cfg)
	}
	p, err := NewProposer(cfg, rand.New(rand.NewPCG(1, 7)))
	require.NoError(t, err)
	w.p = p
	return w
}

// flush sends what the proposer has: each message queues at its acceptor.
func (w *queueWorld) flush() {
	msgs, res := w.p.Ready()
	w.results = append(w.results, res...)
	for _, m := range msgs {
		start := max(w.now, w.busyUntil[m.To])
		done := start + time.Duration(max(len(m.Items), 1))*w.service
		w.busyUntil[m.To] = done
		w.seq++
		heap.Push(&w.events, qwEvent{at: done, seq: w.seq, m: m})
	}
}

// run processes events and timers until nothing is left or until limit.
func (w *queueWorld) run(limit time.Duration) {
	for w.now <= limit {
		w.flush()
		next, ok := time.Duration(0), false
		if len(w.events) > 0 {
			next, ok = w.events[0].at, true
		}
		if d, has := w.p.NextDeadline(); has && (!ok || d < next) {
			next, ok = d, true
		}
		if !ok {
			return
		}
		w.now = max(w.now, next)
		for len(w.events) > 0 && w.events[0].at <= w.now {
			e := heap.Pop(&w.events).(qwEvent)
			a := w.acceptors[e.m.To]
			require.NoError(w.t, a.Step(e.m))
			w.items += len(e.m.Items)
			_, replies := a.Ready()
			for _, r := range replies {
				w.p.Step(w.now, r)
			}
		}
		w.p.Tick(w.now)
	}
}

func (w *queueWorld) burst(n int) {
	for i := range n {
		require.NoError(w.t, w.p.Propose(w.now, RequestID(i+1), fmt.Sprintf("p/%d", i), CAS(0, []byte("x"))))
	}
}

// TestFlowControlPreventsCongestionCollapse: 1000 proposals at once on
// acceptors that take 1 ms per item, phase timeouts 250 ms. Without flow
// control the burst queues 1000 items at every acceptor, so most rounds
// time out and are resent in full, and after five attempts many
// proposals fail (the demo's "prepare after 0 acks" at 1000 partitions).
// With the window and the adaptive timeouts every proposal commits, in
// about the time the acceptors need to serve two phases of each.
func TestFlowControlPreventsCongestionCollapse(t *testing.T) {
	const n = 1000
	run := func(flow FlowConfig) (*queueWorld, int) {
		w := newQueueWorld(t, 3, time.Millisecond, func(c *ProposerConfig) { c.Flow = flow })
		w.burst(n)
		w.run(2 * time.Minute)
		require.Len(t, w.results, n)
		failed := 0
		for _, r := range w.results {
			if r.Err != nil {
				failed++
			}
		}
		return w, failed
	}
	off, failedOff := run(FlowConfig{})
	assert.Positive(t, failedOff, "the model does not collapse without flow control: the test shows nothing")

	on, failedOn := run(DefaultFlowConfig())
	assert.Zero(t, failedOn, "proposals failed with flow control on")
	st := on.p.Stats()
	assert.Positive(t, st.WindowWaits, "the burst never waited for the window")
	assert.Zero(t, on.p.Flow().InRounds)
	assert.Zero(t, on.p.Flow().Waiting)
	// Two phases per proposal, one item per acceptor each: 2n items of
	// 1 ms at each acceptor is the least the burst can take.
	last := time.Duration(0)
	for _, r := range on.results {
		last = max(last, r.End)
	}
	assert.Less(t, last, 4*time.Duration(2*n)*time.Millisecond, "the burst took %v", last)
	t.Logf("off: %d of %d failed, %d items served; on: all committed by %v, %d items, %d timeouts, %d window waits, flow %+v",
		failedOff, n, off.items, last, on.items, st.Timeouts, st.WindowWaits, on.p.Flow())
}

func TestFlowWindowAIMD(t *testing.T) {
	c := DefaultProposerConfig(1, quorum.MajorityConfig(1, 2, 3))
	c.Flow = FlowConfig{InitialWindow: 8, MinWindow: 2, MaxWindow: 20}
	f := newFlow(c)
	assert.True(t, f.cfg.windowOn())
	f.inRounds = 8
	assert.True(t, f.full())
	f.inRounds = 7
	assert.False(t, f.full())
	// Slow start: one per commit up to the cap.
	for range 30 {
		f.committed()
	}
	assert.Equal(t, 20.0, f.cwnd, "capped by MaxWindow")
	// A timeout halves it once per period.
	f.timedOut(time.Second, 250*time.Millisecond)
	assert.Equal(t, 10.0, f.cwnd)
	f.timedOut(time.Second+100*time.Millisecond, 250*time.Millisecond)
	assert.Equal(t, 10.0, f.cwnd, "a second timeout of the same burst halved again")
	f.timedOut(time.Second+250*time.Millisecond, 250*time.Millisecond)
	assert.Equal(t, 5.0, f.cwnd)
	for range 5 {
		f.timedOut(time.Hour, time.Millisecond)
		f.quietUntil = 0
	}
	assert.Equal(t, 2.0, f.cwnd, "below MinWindow")
	// Above the threshold: about one per window of commits.
	f.ssthresh = 2
	for range 2 {
		f.committed()
	}
	assert.InDelta(t, 2.9, f.cwnd, 0.1)
	assert.Equal(t, uint64(7), f.decreases)
}

func TestFlowAdaptiveTimeout(t *testing.T) {
	c := DefaultProposerConfig(1, quorum.MajorityConfig(1, 2, 3))
	c.Phase1Timeout = 250 * time.Millisecond
	c.Flow = FlowConfig{AdaptiveTimeout: true, MaxPhaseTimeout: 2 * time.Second}
	f := newFlow(c)
	assert.Equal(t, 250*time.Millisecond, f.timeout(c.Phase1Timeout), "no sample: the configured one")
	for range 20 {
		f.sample(10 * time.Millisecond)
	}
	assert.Equal(t, 250*time.Millisecond, f.timeout(c.Phase1Timeout), "fast phases: the configured floor")
	for range 40 {
		f.sample(400 * time.Millisecond)
	}
	got := f.timeout(c.Phase1Timeout)
	assert.Greater(t, got, 400*time.Millisecond, "slow phases did not lengthen the timeout")
	assert.Less(t, got, 600*time.Millisecond)
	f.timedOut(time.Second, got)
	assert.Equal(t, got, f.timeout(c.Phase1Timeout), "a timeout (often a dropped batch) changed it")
	for range 40 {
		f.sample(5 * time.Second)
	}
	assert.Equal(t, 2*time.Second, f.timeout(c.Phase1Timeout), "capped by MaxPhaseTimeout")
	off := newFlow(DefaultProposerConfig(1, quorum.MajorityConfig(1, 2, 3)))
	off.sample(time.Second)
	assert.Equal(t, 250*time.Millisecond, off.timeout(250*time.Millisecond), "off: always the configured one")
}

func TestFlowConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		field string
		mod   func(*FlowConfig)
	}{
		{"Flow.InitialWindow", func(f *FlowConfig) { f.InitialWindow = -1 }},
		{"Flow.MinWindow", func(f *FlowConfig) { f.MinWindow = 0 }},
		{"Flow.MinWindow", func(f *FlowConfig) { f.MinWindow = f.InitialWindow + 1 }},
		{"Flow.MaxWindow", func(f *FlowConfig) { f.MaxWindow = -1 }},
		{"Flow.MaxWindow", func(f *FlowConfig) { f.MaxWindow = f.InitialWindow - 1 }},
		{"Flow.MaxPhaseTimeout", func(f *FlowConfig) { f.MaxPhaseTimeout = time.Millisecond }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			c := DefaultProposerConfig(1, quorum.MajorityConfig(1, 2, 3))
			c.Flow = DefaultFlowConfig()
			tc.mod(&c.Flow)
			err := c.Validate()
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
	c := DefaultProposerConfig(1, quorum.MajorityConfig(1, 2, 3))
	c.Flow = DefaultFlowConfig()
	require.NoError(t, c.Validate())
}
