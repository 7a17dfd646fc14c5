package partition_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/fmnode/fmnode/partition/replcheck"
)

// TestReplicationSoak runs FMNODE_SOAK seeds (skipped unless set).
func TestReplicationSoak(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FMNODE_SOAK"))
	if n == 0 {
		t.Skip("set FMNODE_SOAK=<seeds> to soak")
	}
	start, _ := strconv.Atoi(os.Getenv("FMNODE_SOAK_START"))
	failed := 0
	for s := start; s < start+n; s++ {
		cfg := replcheck.DefaultConfig(uint64(s))
		cfg.Duration = time.Duration(5+s%20) * time.Second
		cfg.Heal = 5 * time.Second
		switch s % 5 {
		case 0:
			cfg.LossRate = 0.15
		case 1:
			cfg.CrashEvery = 400 * time.Millisecond
		case 2:
			cfg.CutEvery = 200 * time.Millisecond
		case 3:
			cfg.CrashAfterCommitRate = 0.03
		case 4:
			cfg.LossRate, cfg.CrashEvery, cfg.CutEvery, cfg.CrashAfterCommitRate = 0.05, time.Second, time.Second, 0.01
		}
		if s%3 == 0 {
			cfg.FailoverEvery = time.Duration(1+s%4) * time.Second
		}
		if s%7 == 0 {
			// Tiny logs: returning replicas need snapshots.
			cfg.Host.MaxPendingWrites, cfg.Host.MaxInflightOps, cfg.Host.MaxBatchOps = 32, 32, 16
			cfg.Host.MaxLogOps, cfg.Host.RetainLogOps, cfg.Host.CompactStepOps = 80, 16, 8
			cfg.Host.MaxTailOps = 16
			cfg.Downtime = 3 * time.Second
		}
		rep, err := replcheck.Run(cfg)
		if err != nil {
			failed++
			t.Errorf("seed %d: %v\n%s", s, err, rep.String())
			if failed > 3 {
				return
			}
		}
	}
}
