package failover

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReconcile(t *testing.T) {
	cfg := DefaultConfig()
	s1 := newTestState(t, Strong)
	d := Decide(cfg, s1, failed(healthy(time.Minute, "west", map[Region]LSN{"west": 40})))
	s2 := *d.Next // west is write region at epoch 2 from LSN 40

	all := []Region{"east", "north", "west"}
	withEast := s2.WriteQuorum
	withEast.Members = all
	cases := []struct {
		name  string
		s     State
		local LocalReplica
		want  []Action
	}{
		{"write region in sync does nothing", s1,
			LocalReplica{Region: "east", Epoch: 1, LastLSN: 5, WriteRegion: true, WriteQuorum: all}, nil},
		{"follower in sync does nothing", s1,
			LocalReplica{Region: "west", Epoch: 1, LastLSN: 5}, nil},
		{"new write region promotes", s2,
			LocalReplica{Region: "west", Epoch: 1, LastLSN: 40},
			[]Action{{Kind: ActPromote, Epoch: 2, WriteRegion: "west", AfterLSN: 40, WriteQuorum: s2.WriteQuorum}}},
		{"old write region returns with false progress", s2,
			LocalReplica{Region: "east", Epoch: 1, LastLSN: 47, WriteRegion: true},
			nil},
		{"lagging follower catches up without truncation", s2,
			LocalReplica{Region: "north", Epoch: 1, LastLSN: 30},
			nil},
		{"write quorum change reaches the write region", s2,
			LocalReplica{Region: "west", Epoch: 2, LastLSN: 41, WriteRegion: true, WriteQuorum: all},
			[]Action{{Kind: ActSetWriteQuorum, Epoch: 2, WriteRegion: "west", WriteQuorum: s2.WriteQuorum}}},
		{"a prepared grow joins the commit rule before the register", s2,
			LocalReplica{Region: "west", Epoch: 2, LastLSN: 41, WriteRegion: true, WriteQuorum: s2.WriteQuorum.Members, Pending: []Region{"east"}},
			[]Action{{Kind: ActSetWriteQuorum, Epoch: 2, WriteRegion: "west", WriteQuorum: withEast}}},
		{"a prepared grow already in the rule does nothing", s2,
			LocalReplica{Region: "west", Epoch: 2, LastLSN: 41, WriteRegion: true, WriteQuorum: all, Pending: []Region{"east"}},
			nil},
		{"a dropped prepared grow leaves the commit rule", s2,
			LocalReplica{Region: "west", Epoch: 2, LastLSN: 41, WriteRegion: true, WriteQuorum: all},
			[]Action{{Kind: ActSetWriteQuorum, Epoch: 2, WriteRegion: "west", WriteQuorum: s2.WriteQuorum}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Reconcile(tc.s, tc.local)
			require.NoError(t, err)
			switch tc.name {
			case "old write region returns with false progress":
				require.Len(t, got, 1)
				a := got[0]
				assert.Equal(t, ActFollow, a.Kind)
				assert.Equal(t, Region("west"), a.WriteRegion)
				assert.True(t, a.TruncateSet)
				assert.Equal(t, LSN(40), a.TruncateAfter)
				assert.Equal(t, uint64(7), a.Divergence.FalseProgressOps, "ops 41..47 never reached the new lineage")
			case "lagging follower catches up without truncation":
				require.Len(t, got, 1)
				assert.Equal(t, ActFollow, got[0].Kind)
				assert.False(t, got[0].TruncateSet)
				assert.Equal(t, LSN(30), got[0].AfterLSN)
			default:
				assert.Equal(t, tc.want, got)
			}
		})
	}
	_, err := Reconcile(s1, LocalReplica{Region: "west", Epoch: 3})
	require.ErrorIs(t, err, ErrInvalidState, "a replica ahead of the register is an invariant violation")
}

func TestReconcileSwitchoverFences(t *testing.T) {
	cfg := DefaultConfig()
	s := newTestState(t, Strong)
	d, err := RequestSwitchover(cfg, s, healthy(0, "east", nil), "west", "x")
	require.NoError(t, err)
	all := []Region{"east", "north", "west"}
	acts, err := Reconcile(*d.Next, LocalReplica{Region: "east", Epoch: 1, WriteRegion: true, WriteQuorum: all})
	require.NoError(t, err)
	require.Equal(t, []Action{{Kind: ActFence, Epoch: 1, WriteRegion: "east"}}, acts)
	// A fenced write region in a steady state is not unpaused locally:
	// Decide reopens it at a new epoch instead.
	acts, err = Reconcile(s, LocalReplica{Region: "east", Epoch: 1, WriteRegion: true, Fenced: true, WriteQuorum: all})
	require.NoError(t, err)
	require.Empty(t, acts)
}

// A promotion is graceful (failover.Action.Graceful, partition's
// PromoteGraceful) when its epoch began without waiting out the previous
// write region's lease: freshness grants that region issued before its
// fence may still run. A takeover waits for the lease and so for them.
func TestReconcilePromoteGraceful(t *testing.T) {
	cfg := DefaultConfig()
	s1 := newTestState(t, BoundedStaleness)

	failedOver := *Decide(cfg, s1, failed(healthy(time.Minute, "west", map[Region]LSN{"west": 40}))).Next

	d, err := RequestSwitchover(cfg, s1, healthy(time.Minute, "east", nil), "west", "planned")
	require.NoError(t, err)
	switching := *d.Next
	ev := healthy(time.Minute, "east", map[Region]LSN{"east": 50})
	ev.Replicas[0].Fenced = true
	d = Decide(cfg, switching, ev)
	require.Equal(t, DecideSwitchoverFenced, d.Kind)
	fenced := *d.Next
	d = Decide(cfg, fenced, healthy(time.Minute+time.Second, "west", map[Region]LSN{"west": 50}))
	require.Equal(t, DecideCompleteSwitchover, d.Kind)
	switched := *d.Next
	d = Decide(cfg, fenced, healthy(time.Minute+cfg.GracefulTimeout, "north", nil))
	require.Equal(t, DecideAbortSwitchover, d.Kind)
	aborted := *d.Next

	ev = healthy(time.Minute, "east", map[Region]LSN{"east": 33})
	ev.Replicas[0].Fenced = true
	d = Decide(cfg, s1, ev)
	require.Equal(t, DecideReopen, d.Kind)
	reopened := *d.Next

	// Takeovers right after a switchover and right after a takeover.
	down := func(now time.Duration, s State, lsn LSN) Evidence {
		ev := failed(healthy(now, "north", nil))
		for i := range ev.Replicas {
			if ev.Replicas[i].Region == "north" {
				ev.Replicas[i].Reported, ev.Replicas[i].Epoch, ev.Replicas[i].LastLSN = true, s.Epoch, lsn
			}
		}
		return withDown(ev, s.WriteRegion)
	}
	d = Decide(cfg, switched, down(2*time.Minute, switched, 60))
	require.Equal(t, DecideFailover, d.Kind, d.Reasons)
	takeoverAfterSwitch := *d.Next
	d = Decide(cfg, failedOver, down(10*time.Minute, failedOver, 60))
	require.Equal(t, DecideFailover, d.Kind, d.Reasons)
	takeoverAfterTakeover := *d.Next

	// A shrink after a takeover stays a takeover's epoch.
	shrunk := failedOver.Clone()
	shrunk.record(cfg, Transition{Epoch: shrunk.Epoch, Kind: DecideShrinkQuorum, From: "north"})
	// The bounded history lost how the epoch began.
	forgotten := failedOver.Clone()
	forgotten.History = nil

	tests := []struct {
		name   string
		s      State
		region Region
		want   bool
	}{
		{"takeover", failedOver, "west", false},
		{"takeover, then a quorum change", shrunk, "west", false},
		// Its predecessor may have died before the switchover committed:
		// its lease may end before the paused region's grants.
		{"takeover right after a switchover", takeoverAfterSwitch, "north", true},
		{"takeover right after a takeover", takeoverAfterTakeover, "north", false},
		{"completed switchover", switched, "west", true},
		{"aborted switchover reopens the fenced region", aborted, "east", true},
		{"reopen after a fence", reopened, "east", true},
		{"opening lost from the history", forgotten, "west", true},
		{"first epoch", s1, "east", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acts, err := Reconcile(tt.s, LocalReplica{Region: tt.region, Epoch: 1, LastLSN: 30})
			require.NoError(t, err)
			require.NotEmpty(t, acts)
			require.Equal(t, ActPromote, acts[0].Kind)
			assert.Equal(t, tt.want, acts[0].Graceful)
		})
	}
}
