package partition

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pollSolo is a follower in region b of partition 9, epoch 3, whose write
// region is a.
func pollSolo(t *testing.T, mut func(*Config)) *solo {
	s := newSolo(t, "b", mut)
	require.NoError(t, s.h.Create(0, 9, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 3}, 0))
	s.flush()
	return s
}

func (s *solo) poll(ref ClientRef, e Epoch, wait time.Duration) {
	s.h.Write(s.now, &WriteRequest{Partition: 9, Epoch: e, Ref: ref, Key: []byte("k"), Value: []byte("v"), PollWait: wait})
}

func requireRedirect(t *testing.T, r Reply, reason RedirectReason, e Epoch, to Region) {
	t.Helper()
	var re *RedirectError
	require.True(t, errors.As(r.Err, &re), "want a redirect, got %v", r.Err)
	require.Equal(t, reason, re.Reason)
	require.Equal(t, e, re.Epoch)
	require.Equal(t, to, re.WriteRegion)
}

// TestPollHeldUntilPromoted: a poll at the likely failover target is held
// while nothing is new, and served in the new epoch the moment the replica
// becomes the write region: no second request.
func TestPollHeldUntilPromoted(t *testing.T) {
	s := pollSolo(t, nil)
	s.poll(1, 3, time.Second)
	s.flush()
	_, ok := s.reply(1)
	require.False(t, ok, "a poll with nothing new was answered at once")
	require.Equal(t, 1, s.h.HeldPolls())

	s.now = 300 * time.Millisecond
	require.NoError(t, s.h.Promote(s.now, 9, 4, 0, testQuorum("b"), 0))
	s.flush()
	p, _ := s.h.Progress(9)
	require.Equal(t, LSN(1), p.LastLSN, "the held poll was not assigned at the promotion")
	s.ackAll(s.drainSent())
	s.flush()
	r, ok := s.reply(1)
	require.True(t, ok, "the held poll was not answered at the promotion")
	require.NoError(t, r.Err)
	require.Equal(t, Token{Epoch: 4, LSN: 1}, r.Token, "served as the new write region's first write")
	require.Zero(t, s.h.HeldPolls())
	st := s.h.Stats()
	require.Equal(t, uint64(1), st.PollsHeld)
	require.Equal(t, uint64(1), st.PollsReleased)
}

// TestPollReleasedByNewerEpoch: a replica that learns of a newer epoch
// elsewhere answers its held polls with the new route at once.
func TestPollReleasedByNewerEpoch(t *testing.T) {
	s := pollSolo(t, nil)
	s.poll(1, 3, time.Second)
	s.flush()
	s.step(Message{Type: MsgAppend, Partition: 9, Epoch: 4, From: "c"})
	s.flush()
	r, ok := s.reply(1)
	require.True(t, ok, "the held poll was not answered when the epoch moved")
	requireRedirect(t, r, ReasonStaleEpoch, 4, "c")
}

// TestPollExpires: with nothing new, the poll gets the redirect it would
// have got at once, at the end of its wait (clamped to MaxPollWait), and
// the host asks for a tick then.
func TestPollExpires(t *testing.T) {
	s := pollSolo(t, func(c *Config) { c.MaxPollWait = 800 * time.Millisecond })
	s.now = 100 * time.Millisecond
	s.poll(1, 3, 5*time.Second)
	s.flush()
	at, ok := s.h.NextDeadline()
	require.True(t, ok)
	require.Equal(t, 900*time.Millisecond, at, "the wait is clamped to MaxPollWait")

	s.now = at - 1
	s.h.Tick(s.now)
	s.flush()
	_, ok = s.reply(1)
	require.False(t, ok, "answered before its wait ran out")

	s.now = at
	s.h.Tick(s.now)
	s.flush()
	r, ok := s.reply(1)
	require.True(t, ok, "not answered at the end of its wait")
	requireRedirect(t, r, ReasonNotWriteRegion, 3, "a")
	require.Equal(t, uint64(1), s.h.Stats().PollsExpired)
	_, ok = s.h.NextDeadline()
	require.False(t, ok, "no timer left")
}

// TestPollAnsweredAtOnce: what is not held.
func TestPollAnsweredAtOnce(t *testing.T) {
	tests := []struct {
		name   string
		region Region
		mut    func(*Config)
		epoch  Epoch
		wait   time.Duration
		check  func(t *testing.T, r Reply)
	}{
		{"not a poll", "b", nil, 3, 0, func(t *testing.T, r Reply) { requireRedirect(t, r, ReasonNotWriteRegion, 3, "a") }},
		{"holding off", "b", func(c *Config) { c.MaxPollWait = 0 }, 3, time.Second,
			func(t *testing.T, r Reply) { requireRedirect(t, r, ReasonNotWriteRegion, 3, "a") }},
		{"stale epoch: news", "b", nil, 2, time.Second, func(t *testing.T, r Reply) { requireRedirect(t, r, ReasonStaleEpoch, 3, "a") }},
		{"replica behind", "b", nil, 4, time.Second, func(t *testing.T, r Reply) { requireRedirect(t, r, ReasonReplicaBehind, 3, "a") }},
		{"at the write region", "a", nil, 3, time.Second, func(t *testing.T, r Reply) {
			require.NoError(t, r.Err)
			require.Equal(t, Token{Epoch: 3, LSN: 1}, r.Token)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSolo(t, tc.region, tc.mut)
			require.NoError(t, s.h.Create(0, 9, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 3}, 0))
			s.flush()
			s.poll(1, tc.epoch, tc.wait)
			s.flush()
			s.ackAll(s.drainSent())
			s.flush()
			r, ok := s.reply(1)
			require.True(t, ok, "not answered at once")
			tc.check(t, r)
			require.Zero(t, s.h.HeldPolls())
		})
	}
}

// TestPollsBounded: beyond MaxParkedPolls a poll is answered at once.
func TestPollsBounded(t *testing.T) {
	s := pollSolo(t, func(c *Config) { c.MaxParkedPolls = 2 })
	for ref := ClientRef(1); ref <= 3; ref++ {
		s.poll(ref, 3, time.Second)
	}
	s.flush()
	require.Equal(t, 2, s.h.HeldPolls())
	r, ok := s.reply(3)
	require.True(t, ok, "the poll beyond the bound was held")
	requireRedirect(t, r, ReasonNotWriteRegion, 3, "a")
	require.Equal(t, uint64(1), s.h.Stats().PollsNotHeld)
}

// TestPollOfClosedPartition: closing a partition answers its held polls.
func TestPollOfClosedPartition(t *testing.T) {
	s := pollSolo(t, nil)
	s.poll(1, 3, time.Second)
	s.flush()
	s.h.Close(9)
	require.True(t, s.h.HasReady())
	s.flush()
	r, ok := s.reply(1)
	require.True(t, ok, "a closed partition's held poll was never answered")
	require.ErrorIs(t, r.Err, ErrUnknownPartition)
	require.Zero(t, s.h.HeldPolls())
}

func TestPollConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		field string
		mut   func(*Config)
	}{
		{"MaxParkedPolls", func(c *Config) { c.MaxParkedPolls = -1 }},
		{"MaxParkedPolls", func(c *Config) { c.MaxParkedPolls = maxParkedPolls + 1 }},
		{"MaxPollWait", func(c *Config) { c.MaxPollWait = -time.Second }},
		{"MaxPollWait", func(c *Config) { c.MaxPollWait = maxPollWait + 1 }},
	} {
		c := testHostConfig()
		tc.mut(&c)
		err := c.Validate()
		require.ErrorContains(t, err, tc.field)
	}
}
