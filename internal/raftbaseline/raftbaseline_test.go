package raftbaseline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/failover"
)

var testRegions = []failover.Region{"east", "north", "west"}

func startTest(t *testing.T) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := StartLoopback(ctx, ClusterConfig{Regions: testRegions, Dir: t.TempDir(), Voter: Config{Failover: failover.FastConfig()}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

func states(t *testing.T, n int, write failover.Region) []failover.State {
	var out []failover.State
	for i := range n {
		s, err := failover.NewState(fmt.Sprintf("p/%d", i+1), write, testRegions, failover.Strong, 2)
		require.NoError(t, err)
		out = append(out, s)
	}
	return out
}

// A leader is elected; when it stops, one of the others takes over
// within a few election timeouts.
func TestLeaderElection(t *testing.T) {
	c := startTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := c.Leader(ctx)
	require.NoError(t, err)
	leaders := 0
	for _, v := range c.Voters {
		if v.IsLeader() {
			leaders++
		}
	}
	require.Equal(t, 1, leaders)
	killed := time.Now()
	require.NoError(t, l.Close())
	l2, err := c.Leader(ctx)
	require.NoError(t, err)
	require.NotSame(t, l, l2)
	t.Logf("new leader %s after %v", l2.Region(), time.Since(killed))
}

// Every region's replica reports reach the leader's map, including the
// followers', which forward them.
func TestHeartbeatsThroughLeader(t *testing.T) {
	c := startTest(t)
	ctx := context.Background()
	require.NoError(t, c.Create(ctx, states(t, 20, "east"), 8))
	l, err := c.Leader(ctx)
	require.NoError(t, err)
	assert.Eventually(t, func() bool {
		for _, r := range testRegions {
			for i := range 20 {
				if _, _, ok := l.FSM().Heard(fmt.Sprintf("p/%d", i+1), r); !ok {
					return false
				}
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond)
	var forwarded uint64
	for _, v := range c.Voters {
		st := v.Stats()
		if v != l {
			forwarded += st.HeartbeatCmds
		}
	}
	require.Positive(t, forwarded, "followers' heartbeats go through the leader")
	// Heartbeats are the steady state's writes: they keep coming.
	before := l.FSM().Stats().HeartbeatRecords
	time.Sleep(3 * failover.FastConfig().HeartbeatInterval)
	require.Greater(t, l.FSM().Stats().HeartbeatRecords, before)
}

// The region holding the leader and every partition's write region is
// lost: a new leader decides, with failover.Decide, one failover per
// partition to a surviving region, and then nothing more.
func TestFailoverDecision(t *testing.T) {
	c := startTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.Leader(ctx)
	require.NoError(t, err)
	const n = 30
	require.NoError(t, c.Create(ctx, states(t, n, l.Region()), 8))
	// Steady state: no decisions while every region heartbeats.
	time.Sleep(2 * failover.FastConfig().TakeoverDelay())
	for _, v := range c.Voters {
		require.Zero(t, v.Stats().Decisions, "voter %s decided in steady state", v.Region())
	}
	lost := l.Region()
	killed := time.Now()
	require.NoError(t, l.Close())
	var rest []*Voter
	for _, v := range c.Voters {
		if v != l {
			rest = append(rest, v)
		}
	}
	done := func() bool {
		for _, v := range rest {
			for i := range n {
				s, _, ok := v.FSM().State(fmt.Sprintf("p/%d", i+1))
				if !ok || s.Epoch != 2 || s.WriteRegion == lost {
					return false
				}
			}
		}
		return true
	}
	if !assert.Eventually(t, done, 20*time.Second, 10*time.Millisecond) {
		for _, v := range rest {
			t.Fatalf("not failed over; voter %s stats %+v", v.Region(), v.Stats())
		}
	}
	took := time.Since(killed)
	prof := failover.FastConfig()
	require.GreaterOrEqual(t, took, prof.TakeoverDelay(), "failed over before the takeover delay")
	t.Logf("%d partitions failed over %v after the leader's region was lost", n, took)
	s, _, _ := rest[0].FSM().State("p/1")
	require.Equal(t, failover.DecideFailover, s.History[len(s.History)-1].Kind)
	require.Contains(t, s.History[len(s.History)-1].Reason, "raft leader")
	// No decision loops: one put per partition, then quiet.
	time.Sleep(2 * prof.HeartbeatInterval)
	var decisions uint64
	for _, v := range rest {
		decisions += v.Stats().Decisions
	}
	require.Equal(t, uint64(n), decisions)
}

// A put against a version the map no longer holds is refused.
func TestFSMVersionCheck(t *testing.T) {
	f := newFSM(func() time.Duration { return 0 }, nil)
	s := states(t, 1, "east")[0]
	put := func(expect uint64) applyResult {
		b, err := encodePut(PutState{Key: s.Partition, Expect: expect, State: s})
		require.NoError(t, err)
		return f.Apply(&raft.Log{Type: raft.LogCommand, Data: b}).(applyResult)
	}
	require.NoError(t, put(0).Err)
	require.Equal(t, uint64(2), put(1).Version)
	r := put(1)
	require.ErrorIs(t, r.Err, ErrVersionMismatch)
	require.Equal(t, uint64(2), r.Version)
	require.Equal(t, uint64(1), f.Stats().Mismatches)
}

func TestCommandRoundTrip(t *testing.T) {
	h := Heartbeats{Region: "west", Replicas: []ReplicaStatus{{Key: "p/1", Epoch: 3, LastLSN: 99, Fenced: true}, {Key: "p/2"}}}
	b, err := encodeHeartbeats(h)
	require.NoError(t, err)
	got, err := decodeCommand(b)
	require.NoError(t, err)
	require.Equal(t, &h, got)
	for _, bad := range [][]byte{nil, {9}, b[:len(b)-1], append(append([]byte{}, b...), 0)} {
		_, err := decodeCommand(bad)
		require.ErrorIs(t, err, ErrBadCommand)
	}
	_, err = encodeHeartbeats(Heartbeats{Region: "west", Replicas: make([]ReplicaStatus, MaxHeartbeatEntries+1)})
	require.ErrorIs(t, err, ErrBadCommand)
}

func TestConfigNamesField(t *testing.T) {
	for field, c := range map[string]Config{
		"ID":               {Region: "east", Dir: "x", Failover: failover.FastConfig()},
		"Region":           {ID: "a", Dir: "x", Failover: failover.FastConfig()},
		"Dir":              {ID: "a", Region: "east", Failover: failover.FastConfig()},
		"Failover":         {ID: "a", Region: "east", Dir: "x"},
		"RaftLeaderLease":  {ID: "a", Region: "east", Dir: "x", Failover: failover.FastConfig(), RaftLeaderLease: time.Hour},
		"HeartbeatBatch":   {ID: "a", Region: "east", Dir: "x", Failover: failover.FastConfig(), HeartbeatBatch: MaxHeartbeatEntries + 1},
		"RaftElectionTime": {ID: "a", Region: "east", Dir: "x", Failover: failover.FastConfig(), RaftElectionTimeout: time.Millisecond},
	} {
		_, err := c.withDefaults()
		require.ErrorIs(t, err, ErrInvalidConfig, field)
		require.Contains(t, err.Error(), field)
	}
}

func FuzzDecodeCommand(f *testing.F) {
	s, _ := failover.NewState("p/1", "east", testRegions, failover.Strong, 2)
	b, _ := encodePut(PutState{Key: "p/1", Expect: 4, State: s})
	f.Add(b)
	h, _ := encodeHeartbeats(Heartbeats{Region: "west", Replicas: []ReplicaStatus{{Key: "p/1", Epoch: 1}}})
	f.Add(h)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCommand(b)
		if err != nil {
			return
		}
		var again []byte
		switch c := c.(type) {
		case *PutState:
			again, err = encodePut(*c)
		case *Heartbeats:
			again, err = encodeHeartbeats(*c)
		}
		require.NoError(t, err)
		_, err = decodeCommand(again)
		require.NoError(t, err)
	})
}

// A new leader counts a record it inherited as heard at its election,
// never earlier: it cannot know the record's age by its own clock.
func TestHeardAtNeverBeforeElection(t *testing.T) {
	tm := &term{since: 10 * time.Second}
	for name, c := range map[string]struct {
		at   time.Duration
		ok   bool
		want time.Duration
	}{
		"inherited":       {at: 3 * time.Second, ok: true, want: 10 * time.Second},
		"heard this term": {at: 12 * time.Second, ok: true, want: 12 * time.Second},
		"never heard":     {ok: false, want: 10 * time.Second},
	} {
		assert.Equal(t, c.want, tm.heardAt(c.at, c.ok), name)
	}
}
