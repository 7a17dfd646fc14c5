package partition_test

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/partitiontest"
	"github.com/fmnode/fmnode/partition/replcheck"
)

func TestReplicationScenarioSeeds(t *testing.T) {
	seeds := 6
	if testing.Short() {
		seeds = 2
	}
	for s := 1; s <= seeds; s++ {
		cfg := replcheck.DefaultConfig(uint64(s))
		cfg.Duration = 10 * time.Second
		cfg.Heal = 5 * time.Second
		rep, err := replcheck.Run(cfg)
		t.Log(rep.String())
		require.NoError(t, err)
		require.Positive(t, rep.WritesOK)
		require.Positive(t, rep.StrongOps)
	}
}

// TestReplicationCanaries proves the checks catch violations: clients read
// at eventual consistency from any region while the checks expect the
// partition's level. Each level's check must fail on some seed.
func TestReplicationCanaries(t *testing.T) {
	for _, lvl := range []int{0, 1, 2} { // strong, bounded, session
		caught := false
		for s := uint64(1); s <= 10 && !caught; s++ {
			cfg := replcheck.DefaultConfig(s)
			cfg.Levels = cfg.Levels[lvl : lvl+1]
			cfg.Duration, cfg.Heal = 5*time.Second, 2*time.Second
			cfg.CanaryReadLevel = partition.Eventual
			_, err := replcheck.Run(cfg)
			if err != nil {
				t.Logf("level %v seed %d caught: %.200v", cfg.Levels[0].Consistency, s, err)
				caught = true
			}
		}
		require.True(t, caught, "canary for level index %d was never caught", lvl)
	}
}

func TestCheckLinearizableCatchesStaleRead(t *testing.T) {
	ops := []porcupine.Operation{
		replcheck.PutOp(0, "k", "v1", 0, 10),
		replcheck.PutOp(0, "k", "v2", 20, 30),
		replcheck.GetOp(1, "k", "v1", 40, 50),
	}
	require.Equal(t, porcupine.Illegal, replcheck.CheckLinearizable(ops, time.Second))
	ops[2] = replcheck.GetOp(1, "k", "v2", 40, 50)
	require.Equal(t, porcupine.Ok, replcheck.CheckLinearizable(ops, time.Second))
}

// TestReplicationManySeeds is the swarm: short runs over many seeds.
func TestReplicationManySeeds(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 5
	}
	for s := 100; s < 100+seeds; s++ {
		cfg := replcheck.DefaultConfig(uint64(s))
		cfg.Duration = 6 * time.Second
		cfg.Heal = 4 * time.Second
		// Swarm: each seed draws its own fault mix.
		switch s % 4 {
		case 0:
			cfg.LossRate = 0.1
		case 1:
			cfg.CrashEvery = 500 * time.Millisecond
		case 2:
			cfg.CutEvery = 300 * time.Millisecond
		case 3:
			cfg.CrashAfterCommitRate = 0.02
		}
		rep, err := replcheck.Run(cfg)
		if err != nil {
			t.Log(rep.String())
		}
		require.NoError(t, err)
	}
}

// TestReplicationWithFailovers moves the write region every couple of
// seconds through the failover core (takeovers decided by failover.Decide
// after the lease plus drift, graceful switchovers by
// failover.RequestSwitchover, carried out by Reconcile and node.Do) on top
// of the faults: strong stays linearizable and loses no acknowledged
// write; session guarantees hold for what the lineage kept. Every run
// moves a write region; moves the failover rules decline are counted, not
// failures.
func TestReplicationWithFailovers(t *testing.T) {
	seeds := 12
	if testing.Short() {
		seeds = 3
	}
	takeovers, switchovers := 0, 0
	for s := 200; s < 200+seeds; s++ {
		cfg := replcheck.DefaultConfig(uint64(s))
		cfg.Duration, cfg.Heal = 8*time.Second, 5*time.Second
		cfg.FailoverEvery = 1500 * time.Millisecond
		rep, err := replcheck.Run(cfg)
		t.Log(rep.String())
		require.NoError(t, err)
		require.Positive(t, rep.Failovers, "seed %d moved no write region", s)
		require.Equal(t, rep.Failovers, rep.Takeovers+rep.Switchovers)
		require.Equal(t, rep.Takeovers, rep.Transitions["failover"])
		takeovers += rep.Takeovers
		switchovers += rep.Switchovers
	}
	require.Positive(t, takeovers, "no takeover")
	require.Positive(t, switchovers, "no completed switchover")
}

// TestReplicationSnapshots keeps so little log that replicas coming back
// from a crash or a cut often need a snapshot (fuzzy, chunked), under the
// same faults and failovers.
func TestReplicationSnapshots(t *testing.T) {
	seeds := 30
	if testing.Short() {
		seeds = 3
	}
	snaps := uint64(0)
	moves := 0 // the first move may fall after a short run's fault phase
	for s := 300; s < 300+seeds; s++ {
		cfg := replcheck.DefaultConfig(uint64(s))
		cfg.Duration, cfg.Heal = 6*time.Second, 6*time.Second
		cfg.Host.MaxPendingWrites, cfg.Host.MaxInflightOps, cfg.Host.MaxBatchOps = 32, 32, 16
		cfg.Host.MaxLogOps, cfg.Host.RetainLogOps, cfg.Host.CompactStepOps = 80, 16, 8
		cfg.Host.MaxTailOps = 16
		cfg.Host.SnapshotChunkBytes = partition.DefaultMaxOpBytes + 64
		cfg.CrashEvery, cfg.CutEvery = 300*time.Millisecond, 500*time.Millisecond
		cfg.Downtime = 3 * time.Second
		// Session and eventual keep writing while a replica is away (strong
		// and bounded hold writes back), so their logs outrun it.
		cfg.Levels = []partition.Level{{Consistency: partition.Session}, {Consistency: partition.Eventual}, cfg.Levels[0]}
		cfg.Think = 5 * time.Millisecond
		if s%2 == 0 {
			cfg.FailoverEvery = 2 * time.Second
		}
		var started uint64
		cfg.Observe = func(ev partitiontest.ObservedEvent) {
			if ev.Message != nil && ev.Message.Type == partition.MsgSnapshot && ev.Message.Seq == 0 {
				started++
			}
		}
		rep, err := replcheck.Run(cfg)
		if err != nil {
			t.Log(rep.String())
		}
		require.NoError(t, err)
		moves += rep.Failovers
		snaps += started
	}
	require.Positive(t, snaps, "no snapshot was ever sent")
	require.Positive(t, moves, "no write region ever moved")
	t.Logf("%d snapshot transfers started", snaps)
}
