package caspaxos

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/quorum"
)

func TestProposerCommitsAndTakesFastPath(t *testing.T) {
	c := newCluster(t, 3, 1)
	r := c.do(1, "k", CAS(0, []byte("a")))
	require.NoError(t, r.Err)
	assert.Equal(t, Value{Version: 1, Data: []byte("a")}, r.Value)
	assert.False(t, r.FastPath)
	assert.Equal(t, 3, countType(c.sent, MsgPrepare), "first change runs phase 1")

	c.sent = nil
	r = c.do(1, "k", CAS(1, []byte("b")))
	require.NoError(t, r.Err)
	assert.True(t, r.FastPath)
	assert.Equal(t, Value{Version: 2, Data: []byte("b")}, r.Value)
	assert.Equal(t, 0, countType(c.sent, MsgPrepare), "cached promise skips phase 1")
	assert.Equal(t, 3, countType(c.sent, MsgAccept))

	r = c.do(1, "k", Read())
	require.NoError(t, r.Err)
	assert.Equal(t, uint64(2), r.Value.Version)
	st := c.proposers[1].Stats()
	assert.Equal(t, uint64(3), st.Commits)
	assert.Equal(t, uint64(2), st.FastPath)
}

func TestProposerRefusedChangeReportsCommittedValue(t *testing.T) {
	c := newCluster(t, 3, 1)
	require.NoError(t, c.do(1, "k", CAS(0, []byte("a"))).Err)
	r := c.do(1, "k", CAS(7, []byte("z")))
	var mm *VersionMismatchError
	require.ErrorAs(t, r.Err, &mm)
	assert.ErrorIs(t, r.Err, ErrVersionMismatch)
	assert.Equal(t, uint64(7), mm.Expected)
	assert.Equal(t, Value{Version: 1, Data: []byte("a")}, mm.Current)
	assert.Equal(t, mm.Current, r.Value)

	r = c.do(1, "k", InitIfAbsent([]byte("b")))
	assert.ErrorIs(t, r.Err, ErrExists)
}

func TestProposerCompetingProposersStaySafe(t *testing.T) {
	c := newCluster(t, 3, 1, 2)
	require.NoError(t, c.do(1, "k", CAS(0, []byte("p1"))).Err)
	// p2 overtakes with a higher ballot; p1's cached promise is now stale.
	require.NoError(t, c.do(2, "k", CAS(1, []byte("p2"))).Err)
	r := c.do(1, "k", CAS(1, []byte("p1-again")))
	// p1's refused fast-path accept might have landed on a minority, so
	// the mismatch it then finds is reported as an unknown outcome.
	require.ErrorIs(t, r.Err, ErrVersionMismatch, "p1 must see p2's write, not its own cache")
	require.ErrorIs(t, r.Err, ErrUnknownOutcome)
	r = c.do(1, "k", Read())
	assert.Equal(t, []byte("p2"), r.Value.Data)
	assert.GreaterOrEqual(t, c.proposers[1].Stats().NAKs, uint64(1))
	r = c.do(1, "k", CAS(2, []byte("p1-3")))
	require.NoError(t, r.Err)
	assert.Equal(t, uint64(3), r.Value.Version)
}

func TestProposerGivesUpWithoutQuorum(t *testing.T) {
	c := newCluster(t, 3, 1)
	c.drop = func(m Message) bool { return m.To != 101 && m.From != 101 } // only one acceptor reachable
	r := c.do(1, "k", Read())
	require.ErrorIs(t, r.Err, ErrNoQuorum)
	assert.ErrorIs(t, r.Err, ErrTimeout)
	assert.NotErrorIs(t, r.Err, ErrUnknownOutcome, "a read never has an unknown outcome")
	assert.Equal(t, DefaultMaxAttempts, r.Attempts)
	assert.Equal(t, uint64(DefaultMaxAttempts), c.proposers[1].Stats().Timeouts)
}

func TestProposerUnknownOutcomeWhenAcceptMayHaveLanded(t *testing.T) {
	c := newCluster(t, 3, 1)
	// Accepts reach every acceptor but no accept reply comes back.
	c.drop = func(m Message) bool { return m.Type == MsgAcceptReply }
	r := c.do(1, "k", CAS(0, []byte("a")))
	require.ErrorIs(t, r.Err, ErrUnknownOutcome)
	assert.Equal(t, uint64(1), c.proposers[1].Stats().Unknown)
	c.drop = nil
	r = c.do(1, "k", Read())
	require.NoError(t, r.Err)
	assert.Equal(t, []byte("a"), r.Value.Data, "the write did land")
}

func TestProposerRecoversItsOwnValueInsteadOfReapplying(t *testing.T) {
	c := newCluster(t, 3, 1)
	// The first accept round lands but its replies are lost once; the retry
	// finds its own ballot's value and finishes committing it, instead of
	// reporting a version mismatch against its own write.
	lost := false
	c.drop = func(m Message) bool {
		if m.Type == MsgAcceptReply && !lost {
			if m.From == 103 {
				lost = true
			}
			return true
		}
		return false
	}
	r := c.do(1, "k", CAS(0, []byte("a")))
	require.NoError(t, r.Err)
	assert.Equal(t, Value{Version: 1, Data: []byte("a")}, r.Value)
	assert.Equal(t, 2, r.Attempts)
}

func TestProposerBounds(t *testing.T) {
	c := newCluster(t, 3)
	cfg := DefaultProposerConfig(1, quorum.MajorityConfig(101, 102, 103))
	cfg.MaxQueuePerKey = 1
	cfg.MaxInFlight = 2
	p, err := NewProposer(cfg, rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	c.proposers[1] = p
	require.NoError(t, p.Propose(0, 1, "a", Read()))
	require.NoError(t, p.Propose(0, 2, "a", Read()), "one may queue")
	require.ErrorIs(t, p.Propose(0, 3, "a", Read()), ErrKeyBusy)
	require.NoError(t, p.Propose(0, 4, "b", Read()))
	require.ErrorIs(t, p.Propose(0, 5, "c", Read()), ErrOverloaded)
	require.ErrorIs(t, p.Propose(0, 6, string(make([]byte, MaxKeyBytes+1)), Read()), ErrKeyTooLarge)
	c.run()
	require.Len(t, c.results[1], 3)
	for _, r := range c.results[1] {
		require.NoError(t, r.Err)
	}
	assert.Equal(t, 0, p.InFlight())
	big := ChangeFunc(func(cur Value) (Value, error) { return cur.Next(make([]byte, MaxValueBytes+1)), nil })
	r := c.do(1, "a", big)
	assert.ErrorIs(t, r.Err, ErrValueTooLarge)
	bad := ChangeFunc(func(cur Value) (Value, error) { return Value{Version: cur.Version + 5}, nil })
	assert.ErrorIs(t, c.do(1, "a", bad).Err, ErrBadChange)
}

func TestProposerBatchesKeysPerAcceptor(t *testing.T) {
	cfg := DefaultProposerConfig(1, quorum.MajorityConfig(101, 102, 103))
	cfg.MaxBatchItems = 40
	p, err := NewProposer(cfg, rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	for i := 0; i < 100; i++ {
		require.NoError(t, p.Propose(0, RequestID(i), fmt.Sprintf("k%03d", i), InitIfAbsent([]byte("x"))))
	}
	msgs, _ := p.Ready()
	require.Len(t, msgs, 9, "3 acceptors x ceil(100/40) prepare batches")
	for _, m := range msgs {
		assert.Equal(t, MsgPrepare, m.Type)
		assert.LessOrEqual(t, len(m.Items), 40)
	}
}

func TestProposerFencedByAgeAdoptsAndRetries(t *testing.T) {
	c := newCluster(t, 3, 1)
	for _, id := range sortedIDs(c.acceptors) {
		require.NoError(t, c.acceptors[id].Step(Message{Type: MsgRaiseAge, From: 9, To: id, Age: 4}))
		batch, _ := c.acceptors[id].Ready()
		require.NoError(t, c.stores[id].Apply(batch))
	}
	r := c.do(1, "k", CAS(0, []byte("a")))
	require.NoError(t, r.Err)
	assert.Equal(t, uint64(4), c.proposers[1].Age())
	assert.Equal(t, 2, r.Attempts)
	assert.Equal(t, uint64(1), c.proposers[1].Stats().Fenced)
}

func TestEraseLifecycle(t *testing.T) {
	c := newCluster(t, 3, 1, 2)
	require.NoError(t, c.do(1, "k", CAS(0, []byte("a"))).Err)
	require.NoError(t, c.do(2, "k", Read()).Err) // p2 now caches a promise for k
	require.ErrorIs(t, c.do(1, "k", Erase0()).Err, ErrExists, "a live register is not erased")

	require.NoError(t, c.do(1, "k", Delete(0)).Err)
	r := c.do(1, "k", Erase0())
	require.NoError(t, r.Err)
	for _, id := range sortedIDs(c.acceptors) {
		_, ok := c.acceptors[id].Get("k")
		assert.False(t, ok, "acceptor %d still holds k", id)
		assert.Equal(t, c.proposers[1].Age(), c.acceptors[id].AgeFloor())
	}
	// Erase is idempotent.
	require.NoError(t, c.do(1, "k", Erase0()).Err)

	// p2's cached promise predates the erase: it is fenced, falls back to
	// two phases and sees an absent register.
	r = c.do(2, "k", Read())
	require.NoError(t, r.Err)
	assert.False(t, r.Value.Exists())
	assert.Equal(t, uint64(0), r.Value.Version)
	r = c.do(2, "k", InitIfAbsent([]byte("new")))
	require.NoError(t, r.Err)
	assert.Equal(t, uint64(1), r.Value.Version)
}

// Erase0 adapts Proposer.Erase to the harness's change-based do().
func Erase0() Change { return eraseMarker{} }

type eraseMarker struct{ readChange }

func TestProposerConfigValidation(t *testing.T) {
	good := DefaultProposerConfig(1, quorum.MajorityConfig(1, 2, 3))
	require.NoError(t, good.Validate())
	cases := map[string]func(*ProposerConfig){
		"ID":            func(c *ProposerConfig) { c.ID = 0 },
		"Phase1Timeout": func(c *ProposerConfig) { c.Phase1Timeout = 0 },
		"Phase2Timeout": func(c *ProposerConfig) { c.Phase2Timeout = -1 },
		"MaxAttempts":   func(c *ProposerConfig) { c.MaxAttempts = 0 },
		"BackoffBase":   func(c *ProposerConfig) { c.BackoffBase = 0 },
		"BackoffMax":    func(c *ProposerConfig) { c.BackoffMax = time.Millisecond },
		"EMAAlpha":      func(c *ProposerConfig) { c.EMAAlpha = 1.5 },
		"MaxInFlight":   func(c *ProposerConfig) { c.MaxInFlight = 0 },
		"MaxBatchItems": func(c *ProposerConfig) { c.MaxBatchItems = 0 },
		"Quorum":        func(c *ProposerConfig) { c.Quorum = quorum.Config{} },
		"MaxValueBytes": func(c *ProposerConfig) { c.MaxValueBytes = MaxValueBytes + 1 },
		"FastPathRisk":  func(c *ProposerConfig) { c.FastPathRisk = 0 },
		"Turns":         func(c *ProposerConfig) { c.Turns = -1 },
		"TurnIndex":     func(c *ProposerConfig) { c.Turns, c.TurnIndex = 3, 3 },
		"TurnLength":    func(c *ProposerConfig) { c.Turns, c.TurnLength = 3, 0 },
		"TurnMemory":    func(c *ProposerConfig) { c.Turns, c.TurnMemory = 3, 0 },
		"PaceMemory":    func(c *ProposerConfig) { c.PaceMemory = -1 },
		"PaceGapMin":    func(c *ProposerConfig) { c.PaceGapMin = 0 },
		"MaxPacedKeys":  func(c *ProposerConfig) { c.MaxPacedKeys = 0 },
	}
	for field, mutate := range cases {
		t.Run(field, func(t *testing.T) {
			cfg := good
			mutate(&cfg)
			err := cfg.Validate()
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), field)
		})
	}
	_, err := NewProposer(good, nil)
	require.ErrorIs(t, err, ErrInvalidConfig)
}

func TestSetQuorumDropsFastPath(t *testing.T) {
	c := newCluster(t, 3, 1)
	require.NoError(t, c.do(1, "k", CAS(0, []byte("a"))).Err)
	require.NoError(t, c.proposers[1].SetQuorum(quorum.MajorityConfig(101, 102, 103)))
	r := c.do(1, "k", CAS(1, []byte("b")))
	require.NoError(t, r.Err)
	assert.False(t, r.FastPath, "a new configuration needs a fresh prepare quorum")
	require.Error(t, c.proposers[1].SetQuorum(quorum.Config{}))
}

// A refused accept round stays a doubt: a minority acceptor may hold its
// value and another proposer may adopt and commit it (found by the
// simulator, register seed 1).
func TestRefusedMutatingRoundStaysUnknown(t *testing.T) {
	c := newCluster(t, 3, 1, 2)
	cfg := DefaultProposerConfig(1, quorum.MajorityConfig(101, 102, 103))
	cfg.MaxAttempts = 1
	p1, err := NewProposer(cfg, rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	c.proposers[1] = p1
	require.NoError(t, c.do(1, "k", CAS(0, []byte("a"))).Err)
	// p2 only gets promises from 102 and 103 (its accepts are lost); 101
	// still holds p1's promise.
	c.drop = func(m Message) bool { return m.From == 2 && (m.To == 101 || m.Type == MsgAccept) }
	require.ErrorIs(t, c.do(2, "k", Read()).Err, ErrNoQuorum)
	c.drop = nil
	// p1's fast-path accept lands on 101 alone; the others refuse.
	r := c.do(1, "k", CAS(1, []byte("b")))
	require.ErrorIs(t, r.Err, ErrUnknownOutcome)
	// p2's next round may adopt the minority value: it did happen.
	c.drop = func(m Message) bool { return m.From == 103 || m.To == 103 }
	r = c.do(2, "k", Read())
	require.NoError(t, r.Err)
	assert.Equal(t, []byte("b"), r.Value.Data, "the write reported unknown took effect")
}

// Timers of a dropped key state must not fire for its successor (found by
// the simulator, membership seed 147).
func TestStaleTimerDoesNotFireForRecreatedKey(t *testing.T) {
	c := newCluster(t, 3)
	cfg := DefaultProposerConfig(1, quorum.MajorityConfig(101, 102, 103))
	cfg.DisableFastPath = true // the key state is dropped when idle
	p, err := NewProposer(cfg, rand.New(rand.NewPCG(1, 1)))
	require.NoError(t, err)
	c.proposers[1] = p
	require.NoError(t, c.do(1, "k", Read()).Err) // leaves timers at 500 ms and 1 s
	c.drop = func(m Message) bool { return m.Type.IsReply() }
	require.NoError(t, p.Propose(600*time.Millisecond, 7, "k", Read()))
	c.now = 600 * time.Millisecond
	c.run() // quiesces at the new prepare deadline, 1.1 s
	require.Len(t, c.results[1], 2)
	r := c.results[1][1]
	require.ErrorIs(t, r.Err, ErrNoQuorum)
	assert.GreaterOrEqual(t, r.End-r.Start, time.Duration(DefaultMaxAttempts-1)*DefaultPhase1Timeout,
		"every attempt ran its full phase timeout")
	assert.Equal(t, uint64(DefaultMaxAttempts), p.Stats().Timeouts)
}

// The fast path is a bet that no other proposer ran a round on the key
// since the cache was filled; a lost bet is a NAK. The proposer takes it
// only while the cache is young compared with how long the key was quiet
// before (what the acceptors' ballots showed of other proposers).
func TestProposerBetsOnCacheOnlyWhenOthersAreQuiet(t *testing.T) {
	sec := time.Second
	cases := []struct {
		name string
		// other: when proposer 2 writes (negative: never); then proposer
		// 1 writes at first and again at second.
		other, first, second time.Duration
		fast                 bool
	}{
		{"alone", -1, 0, sec, true},
		{"alone, cache past the TTL", -1, 0, DefaultFastPathTTL + sec, false},
		{"other wrote just before", 10 * sec, 10*sec + 100*time.Millisecond, 11 * sec, false},
		{"other wrote long before", 10 * sec, 110 * sec, 111 * sec, true},
		{"other wrote long before, cache too old for the quiet", 10 * sec, 30 * sec, 32 * sec, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3, 1, 2)
			if tc.other >= 0 {
				c.now = tc.other
				require.NoError(t, c.do(2, "k", Read()).Err)
			}
			c.now = tc.first
			require.NoError(t, c.do(1, "k", Read()).Err)
			c.now = tc.second
			r := c.do(1, "k", Read())
			require.NoError(t, r.Err)
			assert.Equal(t, tc.fast, r.FastPath)
			assert.Equal(t, uint64(0), c.proposers[1].Stats().NAKs, "no stale bet, no NAK")
		})
	}
}

// With turns on, a proposer that saw another proposer on the key starts a
// new proposal only inside its own turn; alone, or long after the other
// proposer, it starts at once. The harness delivers instantly, so a
// result's End is when its round started.
func TestProposerTakesTurnsOnContendedKeys(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name   string
		turns  int
		other  bool          // proposer 2 writes at 10 s, proposer 1 reads at 10.5 s
		at     time.Duration // proposer 1 proposes
		starts time.Duration
	}{
		{"turns off", 0, true, 20150 * ms, 20150 * ms},
		{"alone", 3, false, 20150 * ms, 20150 * ms},
		{"before its turn", 3, true, 20150 * ms, 20200 * ms},
		{"inside its turn", 3, true, 20250 * ms, 20250 * ms},
		{"after its turn", 3, true, 20000 * ms, 20200 * ms},
		{"other proposer long gone", 3, true, 10500*ms + DefaultTurnMemory + 150*ms, 10500*ms + DefaultTurnMemory + 150*ms},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3, 1, 2)
			cfg := DefaultProposerConfig(1, quorum.MajorityConfig(101, 102, 103))
			// Cycle of 300 ms; proposer 1's turn is [100, 200) ms of it.
			cfg.Turns, cfg.TurnIndex, cfg.TurnLength = tc.turns, 1, 100*ms
			p, err := NewProposer(cfg, rand.New(rand.NewPCG(1, 7)))
			require.NoError(t, err)
			c.proposers[1] = p
			if tc.other {
				c.now = 10 * time.Second
				require.NoError(t, c.do(2, "k", Read()).Err)
				c.now = 10500 * ms
				require.NoError(t, c.do(1, "k", Read()).Err)
			}
			c.now = tc.at
			r := c.do(1, "k", Read())
			require.NoError(t, r.Err)
			assert.Equal(t, tc.at, r.Start)
			assert.Equal(t, tc.starts, r.End)
			assert.Equal(t, 1, r.Attempts, "waiting for a turn is not a round")
		})
	}
}

// A proposer remembers its ballots for a key in the key's state, which it
// drops when the key goes idle without a cached promise (fast path off, a
// failed proposal, an evicted or fenced cache). The next round on the key
// must still start above every ballot the proposer sent on it before: the
// clock alone does not keep two rounds within one millisecond apart, nor a
// round from one whose counter a conflict pushed past the clock. A reused
// ballot carrying another value let a change report success without being
// applied, or two values commit at one version.
func TestProposerNeverReusesABallotOnAKey(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name   string
		config func(*ProposerConfig)
		// before runs on the fresh cluster and leaves proposer 1 without
		// state for key k; second is then proposed at secondAt.
		before   func(t *testing.T, c *cluster)
		secondAt time.Duration
		second   Change
		drop     func(m Message) bool // during second
		want     []byte               // what a final read must find
	}{
		{
			name:   "fast path off, two changes in one millisecond",
			config: func(cfg *ProposerConfig) { cfg.DisableFastPath = true },
			before: func(t *testing.T, c *cluster) {
				require.NoError(t, c.do(1, "k", CAS(0, []byte("a"))).Err)
			},
			second: CAS(1, []byte("b")),
			want:   []byte("b"),
		},
		{
			name:   "cache evicted, change in the same millisecond",
			config: func(cfg *ProposerConfig) { cfg.MaxCachedKeys = 1 },
			before: func(t *testing.T, c *cluster) {
				require.NoError(t, c.do(1, "k", CAS(0, []byte("a"))).Err)
				require.NoError(t, c.do(1, "j", CAS(0, []byte("x"))).Err) // evicts k
			},
			second: CAS(1, []byte("b")),
			want:   []byte("b"),
		},
		{
			// Another proposer's clock is 5 s ahead: its ballot pushes
			// proposer 1's counter to 5001, the accept lands on 101
			// alone and the proposal fails; 5 s later proposer 1's clock
			// reaches 5001 ms.
			name:   "failed proposal with a counter past the clock",
			config: func(cfg *ProposerConfig) { cfg.MaxAttempts = 2 },
			before: func(t *testing.T, c *cluster) {
				for _, id := range []NodeID{102, 103} {
					require.NoError(t, c.acceptors[id].Step(Message{Type: MsgPrepare, From: 9, To: id, Items: []Item{{Key: "k", Ballot: b(5000, 9)}}}))
					batch, _ := c.acceptors[id].Ready()
					require.NoError(t, c.stores[id].Apply(batch))
				}
				c.drop = func(m Message) bool { return m.Type == MsgAccept && m.To != 101 }
				r := c.do(1, "k", CAS(0, []byte("a")))
				require.ErrorIs(t, r.Err, ErrUnknownOutcome)
				c.drop = nil
			},
			secondAt: 5001 * ms,
			second:   CAS(0, []byte("b")),
			// 101's promise is late: 102 and 103 form the quorum.
			drop: func(m Message) bool { return m.Type == MsgPrepareReply && m.From == 101 },
			want: []byte("b"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3)
			cfg := DefaultProposerConfig(1, quorum.MajorityConfig(101, 102, 103))
			tc.config(&cfg)
			p, err := NewProposer(cfg, rand.New(rand.NewPCG(1, 1)))
			require.NoError(t, err)
			c.proposers[1] = p
			p2, err := NewProposer(DefaultProposerConfig(2, cfg.Quorum), rand.New(rand.NewPCG(2, 2)))
			require.NoError(t, err)
			c.proposers[2] = p2
			tc.before(t, c)
			var used Ballot // the greatest ballot (or promised next) sent on k
			for _, m := range c.sent {
				if m.From != 1 {
					continue
				}
				for _, it := range m.Items {
					if it.Key == "k" {
						used = used.Max(it.Ballot).Max(it.Next)
					}
				}
			}
			require.False(t, used.IsZero())

			c.sent = nil
			c.now = max(c.now, tc.secondAt)
			c.drop = tc.drop
			r := c.do(1, "k", tc.second)
			c.drop = nil
			var first Ballot
			for _, m := range c.sent {
				if m.From == 1 && m.Type == MsgPrepare && len(m.Items) > 0 {
					first = m.Items[0].Ballot
					break
				}
			}
			require.False(t, first.IsZero(), "the second change starts with phase 1")
			assert.True(t, used.Less(first), "second round's ballot %v is not above %v sent before", first, used)
			require.NoError(t, r.Err)
			assert.Equal(t, tc.want, r.Value.Data, "the change took effect")
			// Another proposer reads from 101 and 102 (it holds no cache).
			c.drop = func(m Message) bool { return m.From == 103 || m.To == 103 }
			read := c.do(2, "k", Read())
			require.NoError(t, read.Err)
			assert.Equal(t, r.Value, read.Value, "a read finds the committed value")
		})
	}
}
