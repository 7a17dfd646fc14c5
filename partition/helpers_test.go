package partition

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/quorum"
)

var testRegions = []Region{"a", "b", "c"}

func testHostConfig() Config {
	cfg := DefaultConfig("x", 1)
	cfg.MaxTailOps = 16
	cfg.RetainLogOps = 8
	cfg.CompactStepOps = 4
	cfg.MaxLogOps = 4096
	cfg.MaxBatchOps = 8
	cfg.MaxInflightOps = 32
	cfg.MaxPendingWrites = 64
	cfg.SnapshotChunkBytes = DefaultMaxOpBytes + 64
	return cfg
}

func testQuorum(write Region, members ...Region) quorum.WriteQuorum {
	if len(members) == 0 {
		members = testRegions
	}
	return quorum.WriteQuorum{Replicas: testRegions, WriteRegion: write, Members: members, MinDurability: 1}
}

func levelOf(c Consistency) Level {
	l := Level{Consistency: c}
	if c == BoundedStaleness {
		l.StalenessOps, l.StalenessTime, l.StalenessHold = 20, 500*time.Millisecond, 300*time.Millisecond
	}
	return l
}

// solo drives one Host over a MemStore by hand: messages it sends are
// collected, not delivered.
type solo struct {
	t    testing.TB
	h    *Host
	st   *MemStore
	now  time.Duration
	sent []Message
	reps []Reply
}

func newSolo(t testing.TB, region Region, mut func(*Config)) *solo {
	t.Helper()
	cfg := testHostConfig()
	cfg.Region = region
	if mut != nil {
		mut(&cfg)
	}
	h, err := NewHost(cfg)
	require.NoError(t, err)
	return &solo{t: t, h: h, st: NewMemStore()}
}

// flush runs every Ready to completion (persist, reads, advance).
func (s *solo) flush() {
	s.t.Helper()
	for i := 0; i < 100 && s.h.HasReady(); i++ {
		rd := s.h.Ready(s.now)
		s.reps = append(s.reps, rd.Replies...)
		require.NoError(s.t, s.st.Commit(rd.Writes))
		replies, fetched := ExecReads(s.st, &rd)
		s.h.Advance(&rd)
		for i := range fetched {
			s.h.StepFetch(s.now, &fetched[i])
		}
		s.reps = append(s.reps, replies...)
		s.reps = append(s.reps, rd.Done...)
		s.sent = append(s.sent, rd.Messages...)
	}
	require.NoError(s.t, s.h.Violation())
}

// takeReady returns the next Ready without persisting it.
func (s *solo) takeReady() Ready {
	rd := s.h.Ready(s.now)
	s.reps = append(s.reps, rd.Replies...)
	return rd
}

func (s *solo) step(m Message) {
	s.t.Helper()
	m.To = s.h.Region()
	require.NoError(s.t, s.h.Step(s.now, &m))
}

func (s *solo) drainSent() []Message {
	out := s.sent
	s.sent = nil
	return out
}

func (s *solo) reply(ref ClientRef) (Reply, bool) {
	for i, r := range s.reps {
		if r.Ref == ref {
			s.reps = append(s.reps[:i], s.reps[i+1:]...)
			return r, true
		}
	}
	return Reply{}, false
}

func (s *solo) write(p ID, e Epoch, ref ClientRef, key, value string) {
	s.h.Write(s.now, &WriteRequest{Partition: p, Epoch: e, Ref: ref, Key: []byte(key), Value: []byte(value)})
}

// ackAll answers every append s sent with a success from its recipient.
func (s *solo) ackAll(msgs []Message) {
	for _, m := range msgs {
		if m.Type != MsgAppend {
			continue
		}
		s.step(Message{Type: MsgAppendResp, Partition: m.Partition, Epoch: m.Epoch, From: m.To, Success: true,
			Match: m.Prev + LSN(len(m.Entries))})
	}
}
