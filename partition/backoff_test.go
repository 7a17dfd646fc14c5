package partition

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// contact is one message the write region sent to the silent follower.
type contact struct {
	at      time.Duration
	entries int
}

// silentFollowerRun drives write region a for d with follower c answering
// everything and follower b answering nothing, and returns what b was sent
// after the first write. A member b that never answers keeps the op
// uncommitted, so the write region keeps wanting b's ack throughout.
func silentFollowerRun(t *testing.T, s *solo, d time.Duration) []contact {
	t.Helper()
	var toB []contact
	end := s.now + d
	for s.now < end {
		for _, m := range s.drainSent() {
			switch m.To {
			case "b":
				toB = append(toB, contact{at: s.now, entries: len(m.Entries)})
			case "c":
				s.ackAll([]Message{m})
			}
		}
		s.flush()
		next, ok := s.h.NextDeadline()
		require.True(t, ok, "the write region stopped contacting b at %v", s.now)
		s.now = min(max(next, s.now+time.Millisecond), end)
		s.h.Tick(s.now)
		s.flush()
	}
	return toB
}

func newBackoffSolo(t *testing.T, maxBackoff time.Duration) *solo {
	t.Helper()
	s := newSolo(t, "a", func(c *Config) {
		c.MaxContactBackoff = maxBackoff
		c.CommitTimeout = time.Hour // keep the op pending: b's ack stays wanted
	})
	require.NoError(t, s.h.Create(0, 1, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 1}, 0))
	s.flush()
	s.drainSent()
	s.write(1, 1, 1, "k", "v")
	s.flush()
	return s
}

// TestContactBackoffWhileUnanswered: a follower that answers nothing is
// contacted at doubling intervals up to the cap, only with probes once
// backed off, and at the normal heartbeat pace when backoff is disabled.
func TestContactBackoffWhileUnanswered(t *testing.T) {
	const run = 60 * time.Second
	tests := []struct {
		name       string
		maxBackoff time.Duration
		// maxContacts bounds b's messages over the run.
		minContacts, maxContacts int
	}{
		// Backoff off: a heartbeat every 100 ms plus window resends.
		{"disabled", DefaultHeartbeatInterval, 550, 1000},
		// 5 free heartbeats, 200..800 ms, then one a second.
		{"cap 1s", time.Second, 55, 75},
		// 5 free heartbeats, 200..3200 ms, then one every 4 s.
		{"cap 4s", 4 * time.Second, 15, 25},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newBackoffSolo(t, tc.maxBackoff)
			toB := silentFollowerRun(t, s, run)
			require.GreaterOrEqual(t, len(toB), tc.minContacts)
			require.LessOrEqual(t, len(toB), tc.maxContacts)
			backedOff := false
			for i := 1; i < len(toB); i++ {
				gap := toB[i].at - toB[i-1].at
				require.LessOrEqual(t, gap, max(tc.maxBackoff, s.h.cfg.RetransmitTimeout), "gap %d bounded by the cap", i)
				if gap > s.h.cfg.HeartbeatInterval {
					backedOff = true
				}
				if backedOff && tc.maxBackoff > s.h.cfg.HeartbeatInterval {
					require.Zero(t, toB[i].entries, "window resent to a backed-off follower at %v", toB[i].at)
				}
			}
			if tc.maxBackoff > s.h.cfg.HeartbeatInterval {
				// In the second half the follower is probed at the cap.
				for i := len(toB) - 1; i > 0 && toB[i].at > run/2; i-- {
					require.Equal(t, tc.maxBackoff, toB[i].at-toB[i-1].at)
				}
			}
		})
	}
}

// TestContactBackoffResetsOnAnswer: the first answer of a backed-off
// follower resends the window at once and restores the heartbeat pace.
func TestContactBackoffResetsOnAnswer(t *testing.T) {
	s := newBackoffSolo(t, 4*time.Second)
	toB := silentFollowerRun(t, s, 30*time.Second)
	require.Equal(t, 4*time.Second, toB[len(toB)-1].at-toB[len(toB)-2].at, "not backed off to the cap")
	// b comes back and answers (as a restarted follower's announcement
	// does: success, nothing verified in this epoch yet).
	s.step(Message{Type: MsgAppendResp, Partition: 1, Epoch: 1, From: "b", Success: true, Match: 0})
	s.flush()
	resent := false
	for _, m := range s.drainSent() {
		if m.To == "b" && m.Type == MsgAppend && len(m.Entries) > 0 && m.Entries[0].LSN == 1 {
			resent = true
		}
	}
	require.True(t, resent, "the window was not resent on b's answer")
	// b is silent again: the free heartbeats come at the normal pace.
	start := s.now
	again := silentFollowerRun(t, s, 600*time.Millisecond)
	require.GreaterOrEqual(t, len(again), 5)
	require.LessOrEqual(t, again[0].at-start, s.h.cfg.HeartbeatInterval)
}

// TestRestartedFollowerAnnounces: a follower recovered from its store tells
// its write region it is back, and one that learns a new write region from
// a stale reply announces itself to it.
func TestRestartedFollowerAnnounces(t *testing.T) {
	s := newSolo(t, "b", nil)
	require.NoError(t, s.h.Create(0, 1, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 1}, 0))
	s.flush()
	require.Empty(t, s.drainSent(), "a created follower sends nothing")

	h, err := NewHost(s.h.cfg)
	require.NoError(t, err)
	rec, err := s.st.Load(1)
	require.NoError(t, err)
	require.NoError(t, h.Open(s.now, rec))
	s.h = h
	s.flush()
	sent := s.drainSent()
	require.Len(t, sent, 1)
	require.Equal(t, MsgAppendResp, sent[0].Type)
	require.Equal(t, Region("a"), sent[0].To)
	require.True(t, sent[0].Success)

	// A stale reply names the new write region c of epoch 2.
	s.step(Message{Type: MsgStale, Partition: 1, Epoch: 2, From: "a", WriteRegion: "c"})
	s.flush()
	sent = s.drainSent()
	require.Len(t, sent, 1)
	require.Equal(t, Region("c"), sent[0].To)
	require.Equal(t, Epoch(2), sent[0].Epoch)
}

// TestRestartedFollowerGetsCommitAgain: a follower acknowledged the last op
// and went down before the commit position reached it (the write region's
// heartbeat was lost); it comes back with the op but an older commit
// position. Its announcement under a new boot must bring the commit
// position again: its match already equals the write region's last, so
// nothing else would ever be sent to it. (Seen in the 40,000-partition
// drill: one partition's returned replica stayed a commit behind.)
func TestRestartedFollowerGetsCommitAgain(t *testing.T) {
	tests := []struct {
		name   string
		boot   uint64 // the announcement's boot
		commit LSN    // the commit position the announcement confirms
		want   bool   // the commit position is sent again
	}{
		{"restarted", 2, 0, true},
		// A heartbeat that carried the commit can be lost without any
		// restart: until the follower confirms it, it is sent again.
		{"same incarnation, commit lost", 1, 0, true},
		{"same incarnation, commit confirmed", 1, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSolo(t, "a", nil)
			require.NoError(t, s.h.Create(0, 1, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 1}, 0))
			s.flush()
			s.drainSent()
			s.write(1, 1, 1, "k", "v")
			s.flush()
			// b acknowledges op 1 and goes down; c's ack commits it.
			for _, m := range s.drainSent() {
				if m.Type == MsgAppend {
					s.step(Message{Type: MsgAppendResp, Partition: 1, Epoch: 1, From: m.To, Success: true,
						Match: m.Prev + LSN(len(m.Entries)), ProbeBoot: 1, Probe: s.now})
				}
			}
			s.flush()
			for end := s.now + time.Second; s.now < end; {
				s.now += 10 * time.Millisecond
				s.h.Tick(s.now)
				s.flush()
				s.drainSent() // b is down: lost; c needs nothing more
			}
			pr, err := s.h.Progress(1)
			require.NoError(t, err)
			require.Equal(t, LSN(1), pr.CommitLSN)
			// b is back (its store holds op 1, commit 0) and announces itself.
			s.step(Message{Type: MsgAppendResp, Partition: 1, Epoch: 1, From: "b", Success: true, Match: 0, Commit: tc.commit, ProbeBoot: tc.boot, Probe: s.now})
			s.flush()
			s.drainSent() // what the announcement itself set off
			var commitToB LSN
			for end := s.now + time.Second; s.now < end; {
				for _, m := range s.drainSent() {
					if m.To == "b" && m.Type == MsgAppend {
						commitToB = max(commitToB, m.Commit)
					}
				}
				s.now += 10 * time.Millisecond
				s.h.Tick(s.now)
				s.flush()
			}
			if tc.want {
				require.Equal(t, LSN(1), commitToB, "the commit position was not sent again to the restarted follower")
			} else {
				require.Zero(t, commitToB, "a follower that confirmed the commit position got it again")
			}
		})
	}
}
