package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func put(client int, key, val string, inv, done int64) histOp {
	return histOp{Client: client, Kind: kindPut, Key: key, Value: val, Invoke: inv, Complete: done, Result: resOK}
}

func get(kind string, client int, key, val string, inv, done int64) histOp {
	return histOp{Client: client, Kind: kind, Key: key, Value: val, Found: val != "", Invoke: inv, Complete: done, Result: resOK}
}

func TestCheckLinearizable(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []histOp
		want string
	}{
		{"read after put", []histOp{put(1, "k", "a", 0, 10), get(kindStrong, 2, "k", "a", 20, 30)}, "ok"},
		{"stale strong read", []histOp{put(1, "k", "a", 0, 10), put(1, "k", "b", 20, 30), get(kindStrong, 2, "k", "a", 40, 50)}, "illegal"},
		{"absent after an acked put", []histOp{put(1, "k", "a", 0, 10), get(kindStrong, 2, "k", "", 20, 30)}, "illegal"},
		{"unknown put may land late", []histOp{{Client: 1, Kind: kindPut, Key: "k", Value: "a", Invoke: 0, Complete: -1, Result: resUnknown},
			get(kindStrong, 2, "k", "", 20, 30), get(kindStrong, 2, "k", "a", 40, 50)}, "ok"},
		{"a failed put is not applied", []histOp{{Client: 1, Kind: kindPut, Key: "k", Value: "a", Invoke: 0, Complete: 10, Result: resFail},
			get(kindStrong, 2, "k", "a", 20, 30)}, "illegal"},
		{"session reads are not checked here", []histOp{put(1, "k", "a", 0, 10), get(kindSession, 2, "k", "", 20, 30)}, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &verdict{}
			checkLinearizable(tc.ops, 10*time.Second, t.TempDir(), v)
			assert.Equal(t, tc.want, v.Linearizable)
			if tc.want != "ok" {
				assert.FileExists(t, v.VizPath)
			}
		})
	}
}

func TestCheckLostWrites(t *testing.T) {
	ops := []histOp{put(1, "k", "a", 0, 10), put(1, "k", "b", 20, 30)}
	for _, tc := range []struct {
		name  string
		final histOp
		lost  int
		viol  int
	}{
		{"latest survives", get(kindFinal, 0, "k", "b", 100, 110), 0, 0},
		{"an older value", get(kindFinal, 0, "k", "a", 100, 110), 1, 1},
		{"absent", get(kindFinal, 0, "k", "", 100, 110), 2, 2},
		{"a value nobody wrote", get(kindFinal, 0, "k", "zz", 100, 110), 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &verdict{}
			checkLostWrites(ops, map[string]histOp{"k": tc.final}, []string{"k"}, v)
			assert.Equal(t, tc.lost, v.LostAckedWrites)
			assert.Len(t, v.Violations, tc.viol)
		})
	}
}

func TestCheckSessions(t *testing.T) {
	base := []histOp{put(2, "k", "a", 0, 10), put(1, "k", "b", 20, 30)}
	for _, tc := range []struct {
		name string
		read histOp
		want int
	}{
		{"reads its own write", get(kindSession, 1, "k", "b", 40, 50), 0},
		{"an older value than its write", get(kindSession, 1, "k", "a", 40, 50), 1},
		{"absent after its write", get(kindSession, 1, "k", "", 40, 50), 1},
		{"another session may lag", get(kindSession, 3, "k", "a", 40, 50), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &verdict{}
			checkSessions(append(append([]histOp(nil), base...), tc.read), v)
			assert.Equal(t, tc.want, v.SessionViolations)
		})
	}
	// Monotonic reads: after reading b, a session must not read a.
	v := &verdict{}
	checkSessions([]histOp{put(2, "k", "a", 0, 10), put(2, "k", "b", 20, 30),
		get(kindSession, 1, "k", "b", 40, 50), get(kindSession, 1, "k", "a", 60, 70)}, v)
	assert.Equal(t, 1, v.SessionViolations)
}

func TestCheckStaleness(t *testing.T) {
	sec := int64(time.Second)
	ops := []histOp{put(1, "k", "a", 0, 10), put(1, "k", "b", 20, 30)}
	v := &verdict{}
	checkStaleness(append(ops, get(kindBounded, 2, "k", "a", 30+sec/2, sec)), time.Second, v)
	assert.Equal(t, 0, v.StalenessViol, "within the bound")
	v = &verdict{}
	checkStaleness(append(ops, get(kindBounded, 2, "k", "a", 3*sec, 3*sec+10)), time.Second, v)
	assert.Equal(t, 1, v.StalenessViol, "superseded 3 s before, bound 1 s")
}

func TestScheduleIsSeeded(t *testing.T) {
	cfg := scheduleConfig{Seed: 42, Duration: 60 * time.Second, Nodes: 9, Partitions: 6, Kinds: nemesisKinds,
		Drift: 250 * time.Millisecond, Lease: 2 * time.Second}
	a, b := schedule(cfg), schedule(cfg)
	assert.Equal(t, a, b, "the same seed must give the same schedule (the replay)")
	cfg.Seed = 43
	assert.NotEqual(t, a, schedule(cfg))
	// Over a few seeds every kind is drawn, and every fault ends before
	// the run does.
	seen := map[string]bool{}
	for s := uint64(0); s < 40; s++ {
		cfg.Seed = s
		for _, f := range schedule(cfg) {
			seen[f.Kind] = true
			assert.LessOrEqual(t, f.At+f.For, cfg.Duration, "seed %d: %s", s, f)
			if f.Kind == fClockSkew {
				assert.Less(t, f.Offset.Abs(), cfg.Drift, "a within-bound skew")
			}
		}
	}
	for _, k := range append(append([]string(nil), nemesisKinds...), operatorKinds...) {
		assert.True(t, seen[k], "kind %s never drawn", k)
	}
	cfg.ClockBeyond = true
	var beyond bool
	cuts := 0
	for _, f := range schedule(cfg) {
		switch f.Kind {
		case fClockBeyond:
			beyond = true
			drift := time.Duration(float64(cfg.Lease) * (1 - f.Rate))
			assert.Greater(t, drift, cfg.Drift, "a drift over one lease beyond the bound")
			assert.Greater(t, time.Duration(float64(cfg.Lease)/f.Rate), cfg.Lease+cfg.Drift+2*time.Second,
				"the drifted lease outlives the takeover delay by a margin")
		case fPartOne:
			cuts++
			assert.Equal(t, []int{1}, f.Groups[0], "the drifting node is the one cut off")
		default:
			t.Errorf("a beyond-the-bound run draws %s", f.Kind)
		}
	}
	assert.True(t, beyond)
	assert.GreaterOrEqual(t, cuts, 3)
}

func TestScanFailStop(t *testing.T) {
	for _, tc := range []struct {
		name  string
		log   string
		stops int
		ranOn []int
	}{
		{"no failure", "agent started\nserving\n", 0, nil},
		{"stopped then failed", "agent started\nsysreg acceptor stopped\nagent failed\nagent started\n", 1, nil},
		{"stopped and ran on until killed", "agent started\nsysreg acceptor stopped\nserving\nagent started\n", 1, []int{2}},
		{"stopped and ran on to the end", "agent started\nx\nsysreg acceptor stopped\nsysreg acceptor stopped\n", 2, []int{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stops, ranOn := scanFailStop(strings.NewReader(tc.log))
			assert.Equal(t, tc.stops, stops)
			assert.Equal(t, tc.ranOn, ranOn)
		})
	}
}

// TestFailingReadsTheCurrentIncarnation: the supervisor's restart after
// a full disk acts on the current incarnation's failure only (seed 3012:
// an agent still shutting down from its failure at the heal was never
// restarted, and the run did not converge).
func TestFailingReadsTheCurrentIncarnation(t *testing.T) {
	dir := t.TempDir()
	n := &node{logPath: dir + "/agent.log"}
	c := &cluster{}
	old := "agent started\nsysreg acceptor stopped\nagent failed\n"
	assert.NoError(t, os.WriteFile(n.logPath, []byte(old), 0o644))
	assert.True(t, c.failing(n))
	n.logStart = int64(len(old))
	assert.NoError(t, os.WriteFile(n.logPath, []byte(old+"agent started\nserving\n"), 0o644))
	assert.False(t, c.failing(n), "an earlier incarnation's failure")
	assert.NoError(t, os.WriteFile(n.logPath, []byte(old+"agent started\nagent failed\n"), 0o644))
	assert.True(t, c.failing(n))
}
