package partition

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runSolo advances s for d, answering every append to c and collecting
// what b is sent (b never answers), ticking at each deadline and at least
// every tick.
func runSolo(t *testing.T, s *solo, d time.Duration) (toB []Message) {
	t.Helper()
	end := s.now + d
	for s.now < end {
		for _, m := range s.drainSent() {
			switch m.To {
			case "b":
				toB = append(toB, m)
			case "c":
				s.ackAll([]Message{m})
			}
		}
		s.flush()
		next := s.now + 50*time.Millisecond
		if d, ok := s.h.NextDeadline(); ok {
			next = min(next, max(d, s.now+time.Millisecond))
		}
		s.now = min(next, end)
		s.h.Tick(s.now)
		s.flush()
	}
	return toB
}

// TestUnreachableFollowerGetsNoContact: once the driver reports b's node
// down, the write region sends b nothing (no probes, heartbeats, window
// resends or new ops) however long it stays so, while writes go on
// replicating to c; without the report b is probed at the backoff cap.
func TestUnreachableFollowerGetsNoContact(t *testing.T) {
	for _, tc := range []struct {
		name        string
		unreachable bool
		minToB      int
		maxToB      int
	}{
		{"reported down", true, 0, 0},
		{"not reported", false, 10, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newBackoffSolo(t, 4*time.Second)
			if tc.unreachable {
				require.NoError(t, s.h.SetReachable(s.now, 1, "b", false))
				require.True(t, s.h.Unreachable(1, "b"))
			}
			s.flush()
			s.drainSent() // the first write's appends went out before the report
			toB := runSolo(t, s, 10*time.Second)
			for i := 2; i <= 5; i++ {
				s.write(1, 1, ClientRef(i), "k", "v")
				toB = append(toB, runSolo(t, s, 10*time.Second)...)
			}
			require.GreaterOrEqual(t, len(toB), tc.minToB)
			require.LessOrEqual(t, len(toB), tc.maxToB)
			pr, err := s.h.Progress(1)
			require.NoError(t, err)
			require.Equal(t, LSN(5), pr.LastLSN)
			for _, f := range pr.Followers {
				if f.Region == "c" {
					require.Equal(t, LSN(5), f.Match, "c stopped getting ops")
				}
				require.Equal(t, tc.unreachable && f.Region == "b", f.Unreachable, "progress of %s", f.Region)
			}
		})
	}
}

// TestReachableAgainContactsAtOnce: reported back (by the driver, by a
// catch-up request, or by an answer of its own), an unreachable follower
// is sent its whole window at once, not at the end of a backoff.
func TestReachableAgainContactsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		back func(s *solo)
	}{
		{"driver", func(s *solo) { require.NoError(s.t, s.h.SetReachable(s.now, 1, "b", true)) }},
		{"catch up", func(s *solo) { require.NoError(s.t, s.h.CatchUp(s.now, 1, "b", 1)) }},
		{"answer", func(s *solo) {
			s.step(Message{Type: MsgAppendResp, Partition: 1, Epoch: 1, From: "b", Success: true, Match: 0})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newBackoffSolo(t, 4*time.Second)
			runSolo(t, s, 30*time.Second) // b backs off to the cap
			require.NoError(t, s.h.SetReachable(s.now, 1, "b", false))
			s.write(1, 1, 2, "k", "v2")
			require.Empty(t, runSolo(t, s, 30*time.Second))
			tc.back(s)
			s.flush()
			require.False(t, s.h.Unreachable(1, "b"))
			var first LSN
			for _, m := range s.drainSent() {
				if m.To == "b" && m.Type == MsgAppend && len(m.Entries) > 0 && first == 0 {
					first = m.Entries[0].LSN
				}
			}
			require.Equal(t, LSN(1), first, "the window was not resent to b at once")
		})
	}
}

// TestUnreachableKeptForLaterWriteRegion: a follower replica told that c is
// unreachable promotes without contacting c, and still contacts a.
func TestUnreachableKeptForLaterWriteRegion(t *testing.T) {
	s := newSolo(t, "b", nil)
	require.NoError(t, s.h.Create(0, 1, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 1}, 0))
	s.flush()
	require.NoError(t, s.h.SetReachable(s.now, 1, "c", false))
	require.NoError(t, s.h.Promote(s.now, 1, 2, 0, testQuorum("b"), 0))
	s.flush()
	s.write(1, 2, 1, "k", "v")
	s.flush()
	for i := 0; i < 50; i++ {
		s.now += 100 * time.Millisecond
		s.h.Tick(s.now)
		s.flush()
	}
	to := map[Region]int{}
	for _, m := range s.drainSent() {
		to[m.To]++
	}
	require.Zero(t, to["c"], "an unreachable follower was contacted after the promotion")
	require.NotZero(t, to["a"])
}

func TestSetReachableValidates(t *testing.T) {
	s := newSolo(t, "a", nil)
	require.NoError(t, s.h.Create(0, 1, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 1}, 0))
	require.ErrorIs(t, s.h.SetReachable(0, 1, "a", false), ErrBadRequest, "its own region")
	require.ErrorIs(t, s.h.SetReachable(0, 1, "", false), ErrBadRequest)
	require.ErrorIs(t, s.h.SetReachable(0, 1, "mars", false), ErrBadRequest, "not a replica's region")
	require.ErrorIs(t, s.h.SetReachable(0, 2, "b", false), ErrUnknownPartition)
	require.NoError(t, s.h.SetReachable(0, 1, "b", false))
	require.NoError(t, s.h.SetReachable(0, 1, "b", false), "idempotent")
	require.True(t, s.h.Unreachable(1, "b"))
	require.NoError(t, s.h.SetReachable(0, 1, "b", true))
	require.False(t, s.h.Unreachable(1, "b"))
}
