package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServiceQueue: requests that arrive together leave one service time
// apart per slot, in arrival order; an idle queue serves at once.
func TestServiceQueue(t *testing.T) {
	assert.Nil(t, newServiceQueue(0, time.Millisecond), "no slots: not modelled")
	assert.Nil(t, newServiceQueue(2, 0), "no cost: not modelled")

	q := newServiceQueue(1, time.Millisecond)
	for i := 1; i <= 5; i++ {
		assert.Equal(t, time.Duration(i)*time.Millisecond, q.serve(0, q.cost), "request %d of a burst", i)
	}
	assert.Equal(t, time.Second+time.Millisecond, q.serve(time.Second, q.cost), "the queue drained meanwhile")

	q = newServiceQueue(2, time.Millisecond)
	got := []time.Duration{q.serve(0, q.cost), q.serve(0, q.cost), q.serve(0, q.cost), q.serve(0, q.cost)}
	assert.Equal(t, []time.Duration{time.Millisecond, time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond}, got, "two slots drain twice as fast")
}

// TestFailoverLayoutServiceQueue: a queue the nodes share delays the burst
// of writes after the commit, so the reroute grows with its service time
// (the no-queue run is the control), and the run replays from its
// command; half a layout's service model is refused naming the field.
func TestFailoverLayoutServiceQueue(t *testing.T) {
	run := func(slots int, cost time.Duration) *Result {
		t.Helper()
		lay := &FailoverLayout{Regions: 3, NodesPerRegion: 3, FirstRegionWrites: true, MinDurability: 2, RTT: time.Millisecond,
			ProcessKill: true, ServiceSlots: slots, RequestService: cost}
		res, err := Run(Config{Scenario: "region-outage", Seed: 5, Partitions: 200, FailoverProfile: "fast", Outage: time.Minute,
			Duration: 30 * time.Second, Layout: lay})
		require.NoError(t, err)
		require.Empty(t, res.Violations)
		require.NotNil(t, res.FailoverReport)
		assert.Zero(t, res.NotFailedOver)
		return &res
	}
	none, queued := run(0, 0), run(1, 10*time.Millisecond)
	assert.NotContains(t, none.Replay, "--service-slots")
	assert.Contains(t, queued.Replay, "--service-slots 1 --request-service 10ms")
	// 200 writers at 10 ms each drain in 2 s, four poll intervals: the
	// slowest reroutes wait for most of it.
	assert.Greater(t, queued.ClientReroute.Max, none.ClientReroute.Max+1, "the burst queues")
	assert.Greater(t, queued.ClientReroute.P50, none.ClientReroute.P50, "the median writer queues too")
	assertSameDetection(t, none.Detection, queued.Detection, "the queue serves clients, not the failover")

	for _, bad := range []FailoverLayout{
		{ServiceSlots: 1},
		{RequestService: time.Millisecond},
		{ServiceSlots: -1, RequestService: time.Millisecond},
		{ServiceSlots: 1, RequestService: time.Second},
		{ServiceSlots: 1, RequestService: time.Millisecond, HeldPollService: 2 * time.Millisecond},
		{ServiceSlots: 1, RequestService: time.Millisecond, HeldPollService: -time.Millisecond},
		{HeldPollService: time.Millisecond},
	} {
		bad.Regions, bad.NodesPerRegion, bad.MinDurability, bad.RTT = 3, 1, 1, time.Millisecond
		err := bad.validate()
		require.ErrorIs(t, err, ErrConfig, "%+v", bad)
		assert.Regexp(t, "ServiceSlots|RequestService|HeldPollService", err.Error())
	}
}

// TestFailoverLayoutHeldPollService: a held poll's answer costs what the
// layout charges for it, not a fresh request's service: at half of it the
// burst of answers after the commit drains in half the time, the writers
// that did not poll pay the whole, and the replay carries it.
func TestFailoverLayoutHeldPollService(t *testing.T) {
	run := func(held time.Duration) *Result {
		t.Helper()
		lay := &FailoverLayout{Regions: 3, NodesPerRegion: 3, FirstRegionWrites: true, MinDurability: 2, RTT: time.Millisecond,
			ProcessKill: true, ServiceSlots: 1, RequestService: 4 * time.Millisecond, HeldPollService: held}
		res, err := Run(Config{Scenario: "region-outage", Seed: 5, Partitions: 200, FailoverProfile: "fast", Outage: time.Minute,
			Duration: 30 * time.Second, Layout: lay})
		require.NoError(t, err)
		require.Empty(t, res.Violations)
		require.NotNil(t, res.FailoverReport)
		assert.Zero(t, res.NotFailedOver)
		return &res
	}
	whole, half := run(0), run(2*time.Millisecond)
	assert.NotContains(t, whole.Replay, "--held-poll-service")
	assert.Contains(t, half.Replay, "--request-service 4ms --held-poll-service 2ms")
	// 200 answers at 4 ms drain in 0.8 s, at 2 ms in 0.4 s.
	assert.InDelta(t, whole.ClientReroute.Max/2, half.ClientReroute.Max, 0.1, "the answers' burst drains at the held poll's cost")
	assert.Less(t, half.ClientReroute.P50, whole.ClientReroute.P50*0.7)
	assertSameDetection(t, whole.Detection, half.Detection, "the queue serves clients, not the failover")
}

// TestFailoverLayoutHeldPolls: with the replicas holding the clients'
// polls (partition/poll.go), the commit reaches the polling writers at
// once instead of at their next poll, 375-500 ms apart: the reroute's
// median drops by most of a poll interval's half; without them
// (--no-poll-wait) it is what it was. Nothing else of the failover moves.
func TestFailoverLayoutHeldPolls(t *testing.T) {
	run := func(noWait bool) *Result {
		t.Helper()
		lay := &FailoverLayout{Regions: 3, NodesPerRegion: 3, FirstRegionWrites: true, MinDurability: 2, RTT: time.Millisecond,
			ProcessKill: true, NoPollWait: noWait}
		res, err := Run(Config{Scenario: "region-outage", Seed: 5, Partitions: 200, FailoverProfile: "fast", Outage: time.Minute,
			Duration: 30 * time.Second, Layout: lay})
		require.NoError(t, err)
		require.Empty(t, res.Violations)
		require.Equal(t, LinOK, res.Linearizable)
		require.NotNil(t, res.FailoverReport)
		assert.Zero(t, res.NotFailedOver)
		return &res
	}
	held, polled := run(false), run(true)
	assert.NotContains(t, held.Replay, "--no-poll-wait")
	assert.Contains(t, polled.Replay, "--no-poll-wait")
	assert.Less(t, held.ClientReroute.P50, polled.ClientReroute.P50-0.1, "held polls: the median writer hears of the commit at once")
	assert.Less(t, held.ClientReroute.P50, 0.05, "a round trip or two, not a poll interval")
	assert.Less(t, held.ClientReroute.Max, polled.ClientReroute.Max)
	assertSameDetection(t, polled.Detection, held.Detection, "polls do not move the failover")
}

// assertSameDetection: client traffic moves detection only by the order
// of events on the nodes it shares (microseconds, which the staggered
// boots of a layout make visible), never by a heartbeat.
func assertSameDetection(t *testing.T, want, got Dist, msg string) {
	t.Helper()
	assert.Equal(t, want.N, got.N, msg)
	assert.InDelta(t, want.P50, got.P50, 0.001, msg)
	assert.InDelta(t, want.Max, got.Max, 0.001, msg)
}
