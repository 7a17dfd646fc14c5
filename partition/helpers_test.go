package partition

import (
	"fmt"
	"math/rand/v2"
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

func newTestCluster(t testing.TB, seed uint64, mut func(*ClusterConfig)) *Cluster {
	t.Helper()
	cfg := ClusterConfig{
		Regions:  testRegions,
		Host:     testHostConfig(),
		MinDelay: time.Millisecond, MaxDelay: 3 * time.Millisecond,
		MinDisk: 500 * time.Microsecond, MaxDisk: 2 * time.Millisecond,
		Lease: time.Hour * 1000,
	}
	if mut != nil {
		mut(&cfg)
	}
	c, err := NewCluster(cfg, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
	require.NoError(t, err)
	return c
}

// waitReply runs the cluster until the reply for ref arrives (or d passes).
func waitReply(t testing.TB, c *Cluster, ref ClientRef, d time.Duration) (ClientReply, bool) {
	t.Helper()
	deadline := c.Now() + d
	var pending []ClientReply
	defer func() { c.replies = append(pending, c.replies...) }()
	for {
		for _, r := range c.Replies() {
			if r.Reply.Ref == ref {
				return r, true
			}
			pending = append(pending, r)
		}
		if c.Now() >= deadline {
			return ClientReply{}, false
		}
		if !c.Step() {
			c.RunUntil(deadline)
		} else if c.Now() > deadline {
			c.RunUntil(c.Now())
		}
	}
}

func mustWrite(t testing.TB, c *Cluster, reg Region, p ID, e Epoch, ref ClientRef, key, value string) Token {
	t.Helper()
	c.Write(reg, WriteRequest{Partition: p, Epoch: e, Ref: ref, Key: []byte(key), Value: []byte(value)})
	r, ok := waitReply(t, c, ref, 5*time.Second)
	require.True(t, ok, "no reply to write %d", ref)
	require.NoError(t, r.Reply.Err)
	return r.Reply.Token
}

func mustRead(t testing.TB, c *Cluster, reg Region, req ReadRequest) Reply {
	t.Helper()
	c.Read(reg, req)
	r, ok := waitReply(t, c, req.Ref, 5*time.Second)
	require.True(t, ok, "no reply to read %d", req.Ref)
	return r.Reply
}

func progressOf(t testing.TB, c *Cluster, reg Region, p ID) Progress {
	t.Helper()
	h := c.Host(reg)
	require.NotNil(t, h, "region %s down", reg)
	pr, err := h.Progress(p)
	require.NoError(t, err)
	return pr
}

func fmtProgress(p Progress) string {
	return fmt.Sprintf("%s e%d %s last=%d:%d commit=%d applied=%d stable=%d base=%d snap=%v",
		p.Region, p.Epoch, p.Role, p.LastEpoch, p.LastLSN, p.CommitLSN, p.AppliedLSN, p.StableLSN, p.LogBase, p.NeedSnapshot)
}

// solo drives one Host over a MemStore by hand: messages it sends are
// collected, not delivered.
type solo struct {
	t     testing.TB
	h     *Host
	st    *MemStore
	now   time.Duration
	sent  []Message
	reps  []Reply
	fetch []FetchResult
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
