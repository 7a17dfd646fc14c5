package partition

import (
	"time"
)

// snapOut is a snapshot transfer from the write region to one follower.
// Chunks are read from the store one at a time at increasing applied
// positions (a fuzzy snapshot); the follower's state is consistent once it
// has applied the ops up to the last chunk's position (ConsistentAt), which
// it gets by normal replication from Base on. Blind puts and deletes make
// re-applying those ops on top of newer values converge.
type snapOut struct {
	base         LSN
	baseEpoch    Epoch
	seq          uint32
	after        []byte
	chunk        *Message // sent, not yet acknowledged (resent identically)
	sentAt       time.Duration
	consistentAt LSN
	fetching     bool
}

func (r *Replica) flushSnapshot(now time.Duration, f *follower) {
	if f.snap == nil {
		if !f.needSnap {
			return
		}
		be, ok := r.epochAt(r.applied)
		if !ok {
			r.fail("no epoch for applied LSN %d", r.applied)
			return
		}
		f.snap = &snapOut{base: r.applied, baseEpoch: be, consistentAt: r.applied, sentAt: now}
		f.needSnap = false
		f.fetching = false
		r.h.logger().Info("partition: sending snapshot", "partition", r.id, "to", f.region, "base", r.applied,
			"follower_next", f.next, "log_base", r.logBase)
		r.h.stats.SnapshotsStarted++
	}
	s := f.snap
	if s.chunk == nil && !s.fetching {
		s.fetching = true
		r.h.fetch(Fetch{Kind: FetchState, Partition: r.id, To: f.region, After: s.after, Seq: s.seq,
			MaxBytes: r.h.cfg.SnapshotChunkBytes, Epoch: r.epoch})
	}
}

func (r *Replica) onFetchState(now time.Duration, res *FetchResult) {
	f := r.follower(res.Fetch.To)
	if f == nil || f.snap == nil || f.snap.seq != res.Fetch.Seq || !f.snap.fetching {
		return
	}
	s := f.snap
	s.fetching = false
	s.sentAt = now
	if res.Err != nil {
		r.h.logger().Error("partition: snapshot read failed", "partition", r.id, "to", f.region, "err", res.Err)
		return // retried on the retransmit timer
	}
	s.consistentAt = max(s.consistentAt, res.Applied)
	m := Message{
		Type: MsgSnapshot, Partition: r.id, Epoch: r.epoch, From: r.region(), To: f.region,
		Seq: s.seq, Last: !res.More, Base: s.base, BaseEpoch: s.baseEpoch, ConsistentAt: s.consistentAt,
		KVs: res.KVs, LeaderLast: r.last,
	}
	if s.seq == 0 || m.Last {
		m.History = r.hist.clone()
	}
	s.chunk = &m
	r.h.send(m)
}

func (r *Replica) onSnapshotResp(now time.Duration, m *Message) {
	f := r.follower(m.From)
	if f == nil || f.snap == nil {
		return
	}
	r.heard(f) // the snapshot's own timer resends chunks; only the silence ends
	s := f.snap
	if s.chunk == nil || m.Seq != s.seq {
		return
	}
	if s.chunk.Last {
		r.h.logger().Info("partition: snapshot sent", "partition", r.id, "to", f.region, "base", s.base, "chunks", s.seq+1)
		f.match = max(f.match, s.base)
		f.next = f.match + 1
		f.lastAck, f.lastReset = now, now
		f.snap = nil
		r.h.stats.SnapshotsDone++
		r.advanceCommit()
		r.markDirty()
		return
	}
	if n := len(s.chunk.KVs); n > 0 {
		s.after = s.chunk.KVs[n-1].Key
	}
	s.seq++
	s.chunk = nil
	r.markDirty()
}

func (r *Replica) tickSnapshot(now time.Duration, f *follower) {
	s := f.snap
	if now-s.sentAt < r.h.cfg.RetransmitTimeout {
		return
	}
	s.sentAt = now
	if s.chunk != nil {
		r.h.send(*s.chunk)
		return
	}
	if !s.fetching {
		r.markDirty() // flush fetches the chunk again
	}
}
