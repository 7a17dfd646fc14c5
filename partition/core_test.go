package partition

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/quorum"
)

// TestCommitRulePerLevel: strong acks only once every member is durable;
// the weaker levels ack once the write region alone is durable.
func TestCommitRulePerLevel(t *testing.T) {
	tests := []struct {
		level      Consistency
		ackedAlone bool
	}{
		{Strong, false},
		{BoundedStaleness, true},
		{Session, true},
		{Eventual, true},
	}
	for _, tc := range tests {
		t.Run(tc.level.String(), func(t *testing.T) {
			s := newSolo(t, "a", nil)
			require.NoError(t, s.h.Create(0, 1, Spec{Level: levelOf(tc.level), Quorum: testQuorum("a"), Epoch: 1}, 0))
			s.flush()
			s.drainSent()
			s.write(1, 1, 10, "k", "v")
			rd := s.takeReady()
			_, ok := s.reply(10)
			require.False(t, ok, "acked before anything was durable")
			require.Len(t, rd.Writes, 1)
			require.Len(t, rd.Writes[0].Append, 1)
			require.NoError(t, s.st.Commit(rd.Writes))
			s.h.Advance(&rd)
			s.sent = append(s.sent, rd.Messages...)
			s.flush()
			_, ok = s.reply(10)
			require.Equal(t, tc.ackedAlone, ok)
			// Now the followers acknowledge.
			s.ackAll(s.drainSent())
			s.flush()
			r, ok := s.reply(10)
			if !tc.ackedAlone {
				require.True(t, ok, "strong write not acked after every member is durable")
				require.NoError(t, r.Err)
				require.Equal(t, Token{Epoch: 1, LSN: 1}, r.Token)
			}
			p, _ := s.h.Progress(1)
			require.Equal(t, LSN(1), p.CommitLSN)
			require.Equal(t, LSN(1), p.AppliedLSN)
		})
	}
}

// TestStrongCommitOneMemberMissing: with one member not acknowledging,
// nothing commits; shrinking it out of the quorum commits at once.
func TestStrongCommitOneMemberMissing(t *testing.T) {
	s := newSolo(t, "a", nil)
	require.NoError(t, s.h.Create(0, 1, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 1}, 0))
	s.flush()
	s.drainSent()
	for i := 1; i <= 3; i++ {
		s.write(1, 1, ClientRef(i), "k", "v")
	}
	s.flush()
	for _, m := range s.drainSent() {
		if m.To == "b" && m.Type == MsgAppend {
			s.step(Message{Type: MsgAppendResp, Partition: 1, Epoch: 1, From: "b", Success: true, Match: m.Prev + LSN(len(m.Entries))})
		}
	}
	s.flush()
	p, _ := s.h.Progress(1)
	require.Equal(t, LSN(0), p.CommitLSN, "committed without member c")
	wq, err := testQuorum("a").Shrink("c")
	require.NoError(t, err)
	require.NoError(t, s.h.SetWriteQuorum(s.now, 1, wq, 99))
	s.flush()
	p, _ = s.h.Progress(1)
	require.Equal(t, LSN(3), p.CommitLSN)
	for i := 1; i <= 3; i++ {
		r, ok := s.reply(ClientRef(i))
		require.True(t, ok)
		require.NoError(t, r.Err)
	}
}

// strongCommitReference is the commit rule written the obvious way: the
// greatest LSN durable in every member and in at least MinDurability
// replicas.
func strongCommitReference(wq quorum.WriteQuorum, match map[Region]LSN, last LSN) LSN {
	var best LSN
	for l := LSN(1); l <= last; l++ {
		ok := true
		for _, m := range wq.Members {
			if match[m] < l {
				ok = false
			}
		}
		n := 0
		for _, r := range wq.Replicas {
			if match[r] >= l {
				n++
			}
		}
		if ok && n >= wq.MinDurability {
			best = l
		}
	}
	return best
}

// TestStrongCommitMatchesReference compares the core's commit rule with
// the reference over random quorums and positions.
func TestStrongCommitMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	all := []Region{"a", "b", "c", "d", "e"}
	for iter := 0; iter < 2000; iter++ {
		n := 1 + rng.IntN(len(all))
		replicas := all[:n]
		var members []Region
		for _, r := range replicas {
			if r == "a" || rng.IntN(2) == 0 {
				members = append(members, r)
			}
		}
		md := 1 + rng.IntN(len(members))
		wq := quorum.WriteQuorum{Replicas: replicas, WriteRegion: "a", Members: members, MinDurability: md}
		require.NoError(t, wq.Validate())
		h, err := NewHost(func() Config { c := testHostConfig(); c.Region = "a"; return c }())
		require.NoError(t, err)
		r := newReplica(h, 1)
		r.create(0, &Spec{Level: levelOf(Strong), Quorum: wq, Epoch: 1})
		last := LSN(1 + rng.IntN(20))
		r.last, r.lastEpoch = last, 1
		match := map[Region]LSN{}
		r.durable = LSN(rng.IntN(int(last) + 1))
		match["a"] = r.durable
		for i := range r.leader.followers {
			f := &r.leader.followers[i]
			f.match = LSN(rng.IntN(int(last) + 1))
			match[f.region] = f.match
		}
		want := strongCommitReference(wq, match, last)
		got := r.strongCommit()
		require.Equal(t, want, got, "quorum %+v matches %v", wq, match)
	}
}

// TestStaleEpochRejectedForEveryMessageType: a message of a lower epoch is
// never acted on, and the sender is told the current epoch and write region.
func TestStaleEpochRejectedForEveryMessageType(t *testing.T) {
	for _, typ := range []MsgType{MsgAppend, MsgAppendResp, MsgSnapshot, MsgSnapshotResp, MsgStale} {
		for _, role := range []string{"leader", "follower"} {
			t.Run(typ.String()+"/"+role, func(t *testing.T) {
				s := newSolo(t, "b", nil)
				wr := Region("a")
				if role == "leader" {
					wr = "b"
				}
				require.NoError(t, s.h.Create(0, 1, Spec{Level: levelOf(Session), Quorum: testQuorum(wr), Epoch: 5}, 0))
				s.flush()
				s.drainSent()
				before, _ := s.h.Progress(1)
				commits := s.st.Commits()
				m := Message{Type: typ, Partition: 1, Epoch: 4, From: "c", Prev: 0, Commit: 10, Stable: 10,
					Entries: []Op{{LSN: 1, Epoch: 4, Key: []byte("evil"), Value: []byte("x")}},
					KVs:     []KV{{Key: []byte("evil"), Value: []byte("x"), LSN: 1, Epoch: 4}},
					Success: true, Match: 1, Last: true, Base: 1, BaseEpoch: 4, WriteRegion: "c"}
				s.step(m)
				s.flush()
				after, _ := s.h.Progress(1)
				require.Equal(t, before, after, "state changed by a stale message")
				require.Equal(t, commits, s.st.Commits(), "a stale message caused a write")
				_, found, err := s.st.Get(1, []byte("evil"))
				require.NoError(t, err)
				require.False(t, found)
				sent := s.drainSent()
				if typ == MsgStale {
					require.Empty(t, sent)
					return
				}
				require.Len(t, sent, 1)
				require.Equal(t, MsgStale, sent[0].Type)
				require.Equal(t, Epoch(5), sent[0].Epoch)
				require.Equal(t, wr, sent[0].WriteRegion)
				require.Equal(t, Region("c"), sent[0].To)
			})
		}
	}
}

// TestHigherEpochFencesWriteRegion: a write region that hears of a newer
// epoch stops: pending writes get ErrUnknownOutcome, new writes a redirect.
func TestHigherEpochFencesWriteRegion(t *testing.T) {
	for _, typ := range []MsgType{MsgAppend, MsgStale, MsgSnapshot} {
		t.Run(typ.String(), func(t *testing.T) {
			s := newSolo(t, "a", nil)
			require.NoError(t, s.h.Create(0, 1, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 1}, 0))
			s.flush()
			s.write(1, 1, 7, "k", "v")
			s.flush()
			s.step(Message{Type: typ, Partition: 1, Epoch: 2, From: "b", WriteRegion: "b"})
			s.flush()
			r, ok := s.reply(7)
			require.True(t, ok)
			require.ErrorIs(t, r.Err, ErrUnknownOutcome)
			var uo *UnknownOutcomeError
			require.True(t, errors.As(r.Err, &uo))
			require.Equal(t, Token{Epoch: 1, LSN: 1}, uo.Token)
			s.write(1, 1, 8, "k", "v2")
			s.flush()
			r, ok = s.reply(8)
			require.True(t, ok)
			var re *RedirectError
			require.True(t, errors.As(r.Err, &re))
			require.Equal(t, ReasonStaleEpoch, re.Reason)
			require.Equal(t, Epoch(2), re.Epoch)
			require.Equal(t, Region("b"), re.WriteRegion)
			p, _ := s.h.Progress(1)
			require.Equal(t, RoleFollower, p.Role)
			// The epoch is durable: a restart stays fenced.
			rec, err := s.st.Load(1)
			require.NoError(t, err)
			require.Equal(t, Epoch(2), rec.Meta.Epoch)
			require.Equal(t, RoleFollower, rec.Meta.Role)
		})
	}
}

func TestClientWriteRedirects(t *testing.T) {
	tests := []struct {
		name     string
		region   Region
		reqEpoch Epoch
		pause    bool
		reason   RedirectReason
		sentinel error
	}{
		{"stale epoch at a follower", "b", 2, false, ReasonStaleEpoch, ErrStaleEpoch},
		{"stale epoch at a paused write region", "a", 2, true, ReasonStaleEpoch, ErrStaleEpoch},
		{"unknown epoch", "a", 0, false, ReasonStaleEpoch, ErrStaleEpoch},
		{"replica behind", "a", 4, false, ReasonReplicaBehind, ErrReplicaBehind},
		{"follower", "b", 3, false, ReasonNotWriteRegion, ErrNotWriteRegion},
		{"paused", "a", 3, true, ReasonPaused, ErrNotWriteRegion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSolo(t, tc.region, nil)
			require.NoError(t, s.h.Create(0, 9, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 3}, 0))
			if tc.pause {
				require.NoError(t, s.h.Fence(0, 9, 3, "", 0))
			}
			s.flush()
			s.write(9, tc.reqEpoch, 1, "k", "v")
			s.flush()
			r, ok := s.reply(1)
			require.True(t, ok)
			require.ErrorIs(t, r.Err, tc.sentinel)
			var re *RedirectError
			require.True(t, errors.As(r.Err, &re))
			require.Equal(t, tc.reason, re.Reason)
			require.Equal(t, Epoch(3), re.Epoch)
			require.Equal(t, Region("a"), re.WriteRegion)
			require.Equal(t, ID(9), re.Partition)
			p, _ := s.h.Progress(9)
			require.Equal(t, LSN(0), p.LastLSN, "a redirected write was assigned an LSN")
		})
	}
}

// TestOlderEpochAtWriteRegion: a write or strong read carrying an older
// epoch that reaches the leading write region of a newer one is served
// there, in the current epoch (one round trip for a client that learns of
// a failover by reaching the new write region, issue 16), and its reply
// tells the client the epoch.
func TestOlderEpochAtWriteRegion(t *testing.T) {
	s := newSolo(t, "a", nil)
	require.NoError(t, s.h.Create(0, 1, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 3}, 0))
	s.flush()
	s.drainSent()
	s.write(1, 2, 10, "k", "v")
	s.flush()
	s.ackAll(s.drainSent())
	s.flush()
	r, ok := s.reply(10)
	require.True(t, ok, "an older epoch's write at the write region got no reply")
	require.NoError(t, r.Err)
	require.Equal(t, Token{Epoch: 3, LSN: 1}, r.Token, "served in the current epoch")
	require.NoError(t, s.h.SetLease(1, time.Hour))
	s.h.Read(s.now, &ReadRequest{Partition: 1, Ref: 11, Key: []byte("k"), Consistency: Strong, Epoch: 1})
	s.flush()
	r, ok = s.reply(11)
	require.True(t, ok)
	require.NoError(t, r.Err)
	require.True(t, r.Found)
	require.Equal(t, "v", string(r.Value))
}

func TestWriteBounds(t *testing.T) {
	s := newSolo(t, "a", func(c *Config) { c.MaxPendingWrites = 3 })
	require.NoError(t, s.h.Create(0, 1, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 1}, 0))
	s.flush()
	big := string(make([]byte, s.h.cfg.MaxOpBytes))
	tests := []struct {
		key, value string
		err        error
	}{
		{"", "v", ErrBadRequest},
		{string(make([]byte, s.h.cfg.MaxKeyBytes+1)), "", ErrTooLarge},
		{"k", big, ErrTooLarge},
	}
	for i, tc := range tests {
		s.write(1, 1, ClientRef(100+i), tc.key, tc.value)
		s.flush()
		r, ok := s.reply(ClientRef(100 + i))
		require.True(t, ok)
		require.ErrorIs(t, r.Err, tc.err)
	}
	for i := 0; i < 4; i++ {
		s.write(1, 1, ClientRef(i), "k", "v")
	}
	s.flush()
	r, ok := s.reply(3)
	require.True(t, ok)
	require.ErrorIs(t, r.Err, ErrBackpressure)
	p, _ := s.h.Progress(1)
	require.Equal(t, LSN(3), p.LastLSN)
}

// TestBoundedStalenessHoldsThenRejects: with a member not acknowledging, a
// bounded-staleness write region accepts K writes, holds the next, and
// rejects it after the hold time with a StalenessError; an ack releases
// held writes.
func TestBoundedStalenessHoldsThenRejects(t *testing.T) {
	s := newSolo(t, "a", nil)
	lvl := Level{Consistency: BoundedStaleness, StalenessOps: 3, StalenessTime: time.Second, StalenessHold: 200 * time.Millisecond}
	require.NoError(t, s.h.Create(0, 1, Spec{Level: lvl, Quorum: testQuorum("a"), Epoch: 1}, 0))
	s.flush()
	for i := 1; i <= 5; i++ {
		s.write(1, 1, ClientRef(i), "k", "v")
		s.flush()
	}
	p, _ := s.h.Progress(1)
	require.Equal(t, LSN(3), p.LastLSN, "more than K ops admitted past the slowest member")
	for i := 1; i <= 3; i++ {
		r, ok := s.reply(ClientRef(i))
		require.True(t, ok)
		require.NoError(t, r.Err)
	}
	// Ack from b and c up to 1: one more write fits.
	for _, reg := range []Region{"b", "c"} {
		s.step(Message{Type: MsgAppendResp, Partition: 1, Epoch: 1, From: reg, Success: true, Match: 1})
	}
	s.flush()
	p, _ = s.h.Progress(1)
	require.Equal(t, LSN(4), p.LastLSN)
	s.now += 250 * time.Millisecond
	s.h.Tick(s.now)
	s.flush()
	r, ok := s.reply(5)
	require.True(t, ok)
	require.ErrorIs(t, r.Err, ErrStalenessBound)
	var se *StalenessError
	require.True(t, errors.As(r.Err, &se))
	require.Equal(t, uint64(3), se.LagOps)
	p, _ = s.h.Progress(1)
	require.Equal(t, LSN(4), p.LastLSN, "a rejected write was assigned")
	// Time bound: an op unacknowledged for T holds writes too.
	s.now += 2 * time.Second
	for _, reg := range []Region{"b", "c"} {
		s.step(Message{Type: MsgAppendResp, Partition: 1, Epoch: 1, From: reg, Success: true, Match: 3})
	}
	s.write(1, 1, 6, "k", "v")
	s.flush()
	_, ok = s.reply(6)
	require.False(t, ok, "write admitted although op 4 is older than T on every member")
}

// TestReadAdmission covers the read rules per level.
func TestReadAdmission(t *testing.T) {
	s := newSolo(t, "a", nil)
	require.NoError(t, s.h.Create(0, 1, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 1}, 0))
	s.flush()
	read := func(ref ClientRef, req ReadRequest) Reply {
		req.Partition, req.Ref, req.Key = 1, ref, []byte("k")
		s.h.Read(s.now, &req)
		s.flush()
		r, ok := s.reply(ref)
		require.True(t, ok)
		return r
	}
	// No lease yet.
	require.ErrorIs(t, read(1, ReadRequest{Consistency: Strong, Epoch: 1}).Err, ErrLeaseExpired)
	require.NoError(t, s.h.SetLease(1, time.Hour))
	r := read(2, ReadRequest{Consistency: Strong, Epoch: 1})
	require.NoError(t, r.Err)
	require.False(t, r.Found)
	require.ErrorIs(t, read(3, ReadRequest{Consistency: Strong, Epoch: 2}).Err, ErrReplicaBehind)
	require.ErrorIs(t, read(4, ReadRequest{Consistency: Session, Token: Token{Epoch: 1, LSN: 5}}).Err, ErrSessionUnavailable)
	require.NoError(t, read(5, ReadRequest{Consistency: Eventual}).Err)
	require.ErrorIs(t, read(6, ReadRequest{Consistency: 9}).Err, ErrBadRequest)
}

func TestFollowerBoundedReadNeedsGrant(t *testing.T) {
	s := newSolo(t, "b", nil)
	lvl := Level{Consistency: BoundedStaleness, StalenessOps: 3, StalenessTime: time.Second, StalenessHold: 200 * time.Millisecond}
	require.NoError(t, s.h.Create(0, 1, Spec{Level: lvl, Quorum: testQuorum("a"), Epoch: 1}, 0))
	s.flush()
	read := func(ref ClientRef) error {
		s.h.Read(s.now, &ReadRequest{Partition: 1, Ref: ref, Key: []byte("k")})
		s.flush()
		r, ok := s.reply(ref)
		require.True(t, ok)
		return r.Err
	}
	require.ErrorIs(t, read(1), ErrNotFresh)
	sent := s.drainSent()
	require.Len(t, sent, 1, "a non-fresh follower asks for a grant")
	require.True(t, sent[0].WantGrant)
	probe := sent[0].Probe
	// The write region echoes the probe with its last LSN 2.
	s.now += 10 * time.Millisecond
	s.step(Message{Type: MsgAppend, Partition: 1, Epoch: 1, From: "a", Entries: []Op{
		{LSN: 1, Epoch: 1, Key: []byte("k"), Value: []byte("1")}}, Commit: 1, LeaderLast: 2,
		EchoBoot: 1, Echo: probe, Grant: time.Second, Member: true})
	s.flush()
	require.ErrorIs(t, read(2), ErrNotFresh, "fresh before applying the grant's LSN")
	s.step(Message{Type: MsgAppend, Partition: 1, Epoch: 1, From: "a", Prev: 1, PrevEpoch: 1, Entries: []Op{
		{LSN: 2, Epoch: 1, Key: []byte("k"), Value: []byte("2")}}, Commit: 2, LeaderLast: 2, Member: true})
	s.flush()
	require.NoError(t, read(3))
	s.now = probe + time.Second
	require.ErrorIs(t, read(4), ErrNotFresh, "grant outlived T")
}

func TestTimeoutGivesUnknownOutcome(t *testing.T) {
	s := newSolo(t, "a", nil)
	require.NoError(t, s.h.Create(0, 1, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 1}, 0))
	s.flush()
	s.write(1, 1, 1, "k", "v")
	s.flush()
	d, ok := s.h.NextDeadline()
	require.True(t, ok)
	for s.now < s.h.cfg.CommitTimeout {
		s.now = max(d, s.now+time.Millisecond)
		s.h.Tick(s.now)
		s.flush()
		if d, ok = s.h.NextDeadline(); !ok {
			break
		}
	}
	r, found := s.reply(1)
	require.True(t, found)
	require.ErrorIs(t, r.Err, ErrUnknownOutcome)
	// Retransmissions were attempted meanwhile.
	require.NotEmpty(t, slices.DeleteFunc(s.drainSent(), func(m Message) bool { return len(m.Entries) == 0 }))
}
