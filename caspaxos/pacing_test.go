package caspaxos

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/quorum"
)

func TestPacerRemembersBoundedAndForgets(t *testing.T) {
	ms := time.Millisecond
	type step struct {
		learn bool
		at    time.Duration
		key   string
		delay time.Duration // learn: the delay; wait: the expected wait
	}
	// twice learns d for key at at and at+1ms: the rivals repeated.
	twice := func(at time.Duration, key string, d time.Duration) []step {
		return []step{{true, at, key, d}, {true, at + ms, key, d}}
	}
	seq := func(parts ...[]step) []step {
		var out []step
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	cases := []struct {
		name  string
		max   int
		steps []step
		len   int
	}{
		{"unknown key goes at once", 4, []step{{false, 0, "k", 0}}, 0},
		{"one rival is a coincidence", 4, []step{{true, 0, "k", 150 * ms}, {false, time.Second, "k", 0}}, 1},
		{"repeated rivals are waited for", 4, seq(twice(0, "k", 150*ms), []step{{false, 30 * time.Second, "k", 150 * ms}}), 1},
		{"the last delay counts", 4, seq(twice(0, "k", 150*ms), []step{{true, 5 * ms, "k", 300 * ms}, {false, 6 * ms, "k", 300 * ms}}), 1},
		{"no rival forgets", 4, seq(twice(0, "k", 150*ms), []step{{true, 5 * ms, "k", 0}, {false, 6 * ms, "k", 0}, {true, 7 * ms, "k", 150 * ms}, {false, 8 * ms, "k", 0}}), 1},
		{"memory is exact", 4, seq(twice(time.Second, "k", 150*ms), []step{{false, time.Second + ms + time.Minute, "k", 150 * ms}}), 1},
		{"past the memory", 4, seq(twice(time.Second, "k", 150*ms), []step{{false, time.Second + ms + time.Minute + 1, "k", 0}}), 0},
		{"a streak does not outlive the memory", 4, seq(twice(0, "k", 150*ms), []step{{true, ms + time.Minute + 1, "k", 150 * ms}, {false, 2*ms + time.Minute, "k", 0}}), 1},
		{"least recent out first", 2, seq(twice(0, "a", 100*ms), twice(2*ms, "b", 200*ms),
			// Wait does not refresh: a stays the least recent.
			[]step{{false, 4 * ms, "a", 100 * ms}}, twice(5*ms, "c", 300*ms),
			[]step{{false, 7 * ms, "a", 0}, {false, 8 * ms, "b", 200 * ms}, {false, 9 * ms, "c", 300 * ms}}), 2},
		{"other keys untouched", 4, seq(twice(0, "a", 100*ms), []step{{true, 0, "b", 0}, {false, 2 * ms, "a", 100 * ms}}), 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPacer(time.Minute, tc.max)
			for i, s := range tc.steps {
				if s.learn {
					p.Learn(s.at, s.key, s.delay, false, nil)
					continue
				}
				assert.Equal(t, s.delay, p.Wait(s.at, s.key), "step %d", i)
			}
			assert.Equal(t, tc.len, p.Len())
		})
	}
	var off *Pacer
	assert.Zero(t, off.Wait(0, "k"), "a nil pacer (pacing off) never waits")
	off.Learn(0, "k", time.Second, false, []NodeID{2})
	assert.Zero(t, off.Len())
	assert.Zero(t, off.Rivals(0, "k"))
}

// TestPacerKeepsPaceAfterAMiss: a paced proposal that saw no rival most
// likely cut off the predecessor it waited for, so its pace stays, up to
// paceMisses such proposals in a row; an unpaced one (it went first)
// forgets at once.
func TestPacerKeepsPaceAfterAMiss(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name   string
		paced  []bool // proposals after the pace was learned twice, none of them seeing a rival
		wait   time.Duration
		rivals int
	}{
		{"went first: forgets", []bool{false}, 0, 0},
		{"one paced miss keeps the pace", []bool{true}, 150 * ms, 2},
		{"paceMisses paced misses in a row forget", []bool{true, true}, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPacer(time.Minute, 4)
			p.Learn(0, "k", 150*ms, false, []NodeID{2})
			p.Learn(30*time.Second, "k", 150*ms, true, []NodeID{3, 2})
			for i, paced := range tc.paced {
				p.Learn(time.Minute+time.Duration(i)*ms, "k", 0, paced, nil)
			}
			assert.Equal(t, tc.wait, p.Wait(time.Minute+10*ms, "k"))
			assert.Equal(t, tc.rivals, p.Rivals(time.Minute+10*ms, "k"))
		})
	}
	t.Run("a rival after a miss resets the count", func(t *testing.T) {
		p := NewPacer(time.Minute, 4)
		p.Learn(0, "k", 150*ms, false, nil)
		p.Learn(ms, "k", 150*ms, false, nil)
		p.Learn(2*ms, "k", 0, true, nil)
		p.Learn(3*ms, "k", 200*ms, true, nil)
		p.Learn(4*ms, "k", 0, true, nil)
		assert.Equal(t, 200*ms, p.Wait(5*ms, "k"))
	})
	t.Run("rivals are bounded and forgotten with the memory", func(t *testing.T) {
		p := NewPacer(time.Minute, 4)
		for i := range 2 * maxRivals {
			p.Learn(0, "k", ms, false, []NodeID{NodeID(i + 2), NodeID(i + 2)})
		}
		assert.Equal(t, maxRivals, p.Rivals(0, "k"))
		assert.Zero(t, p.Rivals(time.Minute+1, "k"))
		p.Learn(time.Minute+1, "k", ms, false, []NodeID{9})
		assert.Equal(t, 1, p.Rivals(time.Minute+1, "k"), "the rivals before the memory are dropped")
	})
}

func TestBackoffPaceGap(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name    string
		kind    BackoffKind
		samples []time.Duration
		min     time.Duration
		want    time.Duration
	}{
		{"no sample: twice the base", BackoffAdaptive, nil, 10 * ms, 200 * ms},
		{"floored", BackoffAdaptive, []time.Duration{20 * ms}, 100 * ms, 100 * ms},
		// one sample of 80 ms: EMA 80, sigma 40, 2 * 120 = 240
		{"twice EMA plus sigma", BackoffAdaptive, []time.Duration{80 * ms}, 100 * ms, 240 * ms},
		{"capped by the max", BackoffAdaptive, []time.Duration{8 * time.Second}, 100 * ms, 10 * time.Second},
		{"exponential does not pace", BackoffExponential, []time.Duration{80 * ms}, 100 * ms, 0},
		{"none does not pace", BackoffNone, nil, 100 * ms, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBackoff(tc.kind, 100*ms, 10*time.Second, 0.2)
			for _, s := range tc.samples {
				b.Observe(s)
			}
			assert.Equal(t, tc.want, b.PaceGap(tc.min))
		})
	}
}

// TestProposerPacesFirstAttemptBehindItsRival: twice (at 10 s and 40 s)
// proposer 1 proposes and proposer 2 follows 50 ms later, before 1's round
// reaches the acceptors; 2's round wins, 1 is refused and retries, having
// seen 2's ballot (dated 50 ms after its own request). Rivals twice in a
// row, so 1's next proposal waits 50 ms plus the pace gap (the 115 ms
// floor: the harness delivers instantly, so the EMA is zero) before its
// first attempt, at most one gap per rival known plus one. A paced
// proposal that sees no rival keeps the pace once; the next forgets it.
func TestProposerPacesFirstAttemptBehindItsRival(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name   string
		mutate func(*ProposerConfig)
		rival  time.Duration // when proposer 2 proposes after 10 s and 40 s (0: it does not)
		at     time.Duration // proposer 1's next proposal
		wait   time.Duration
		once   bool // the rival shows up the first time only
	}{
		{"rival seen", nil, 10050 * ms, 50 * time.Second, 165 * ms, false},
		{"rival seen once", nil, 10050 * ms, 50 * time.Second, 0, true},
		// 500 ms + the gap is past one gap per rival known (1) plus one.
		{"a late rival is capped by the chain", nil, 10500 * ms, 50 * time.Second, 230 * ms, false},
		// 1 proposes at 10 s + 400 us (see below), 2 at 10 s + 600 us, and
		// the messages move 2 ms later: 2's ballot dates it at 10 s, before
		// 1's request but in the same millisecond, which is all a ballot says.
		{"rival in the same millisecond", nil, 10*time.Second + 600*time.Microsecond, 50 * time.Second, 115 * ms, false},
		{"alone", nil, 0, 50 * time.Second, 0, false},
		{"rival before the request is no rival", nil, 9950 * ms, 50 * time.Second, 0, false},
		{"pace forgotten after PaceMemory", nil, 10050 * ms, 41*time.Second + DefaultPaceMemory, 0, false},
		{"pacing off", func(c *ProposerConfig) { c.PaceMemory = 0 }, 10050 * ms, 50 * time.Second, 0, false},
		{"exponential backoff does not pace", func(c *ProposerConfig) { c.Backoff = BackoffExponential }, 10050 * ms, 50 * time.Second, 0, false},
		{"turns replace pacing", func(c *ProposerConfig) { c.Turns, c.TurnIndex = 2, 0; c.TurnLength = time.Second }, 10050 * ms, 50 * time.Second, 0, false},
		{"a larger floor", func(c *ProposerConfig) { c.PaceGapMin = 400 * ms }, 10050 * ms, 50 * time.Second, 450 * ms, false},
		{"capped by BackoffMax", func(c *ProposerConfig) { c.BackoffMax = 120 * ms }, 10050 * ms, 50 * time.Second, 120 * ms, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3, 1, 2)
			cfg := DefaultProposerConfig(1, quorum.MajorityConfig(101, 102, 103))
			if tc.mutate != nil {
				tc.mutate(&cfg)
			}
			p, err := NewProposer(cfg, rand.New(rand.NewPCG(1, 7)))
			require.NoError(t, err)
			c.proposers[1] = p
			for i, base := range []time.Duration{0, 30 * time.Second} {
				rival := tc.rival + base
				if tc.rival == 0 || (tc.once && i > 0) {
					rival = 0
				}
				if rival > 0 && rival < base+10*time.Second {
					c.now = rival
					require.NoError(t, c.do(2, "k", Read()).Err)
				}
				c.now = base + 10*time.Second
				if rival > base+10*time.Second && rival < base+10*time.Second+ms {
					c.now += 400 * time.Microsecond
				}
				require.NoError(t, p.Propose(c.now, RequestID(i+1), "k", Read()))
				if rival >= base+10*time.Second {
					c.now = rival
					require.NoError(t, c.proposers[2].Propose(c.now, RequestID(i+1), "k", Read()))
					c.now += 2 * ms
				}
				c.run()
				require.Len(t, c.results[1], i+1)
				require.NoError(t, c.results[1][i].Err)
			}

			c.now = tc.at
			r := c.do(1, "k", Read())
			require.NoError(t, r.Err)
			assert.Equal(t, tc.wait, r.End-r.Start, "waited before the first attempt")
			assert.Equal(t, 1, r.Attempts, "waiting for the rival is not a round")
			assert.Equal(t, tc.wait > 0, p.Stats().Paced == 1)

			// Alone this time. A paced proposal that saw no rival keeps its
			// pace once (it may have cut off its predecessor); the one
			// after goes at once.
			r = c.do(1, "k", Read())
			require.NoError(t, r.Err)
			assert.Equal(t, tc.wait, r.End-r.Start, "a paced miss keeps the pace")
			r = c.do(1, "k", Read())
			require.NoError(t, r.Err)
			assert.Equal(t, r.Start, r.End)
		})
	}
}
