package partition

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// Compare-and-set: a WriteRequest with If set is applied only if the key's
// current state satisfies the condition. The write region decides, in the
// order it assigns LSNs, so the decision and the op are one step of the
// log: the op it appends is a plain put or delete, every replica applies
// it as such, and nothing replica-specific (a fuzzy snapshot's state, an
// undo) can make replicas disagree about it.
//
// The key's current state is the newest op on it in the log: the in-memory
// tail (tailBase, last] if it holds one, else the store's applied state
// (every op at or below tailBase is applied). For the store the core asks
// the driver (a FetchKey, like the log and state fetches) and decides when
// the result comes back, looking at the tail again: an op assigned meanwhile
// is newer than what was read, and if the tail was trimmed past the
// position the fetch was asked at, the read may predate an op it no longer
// sees, so it fetches again.
//
// A condition that holds assigns the op as any write: acknowledged at
// commit, unknown outcome if the write region is lost first. A condition
// that fails is a read of the key: it is answered once the op it compared
// against is committed (and any recovered ops, as for a strong read), with
// the lease valid, so it never reports a state that a failover could undo;
// if the write region is lost first it is answered with a redirect (nothing
// was assigned, so "not applied" is certain).

// Condition is a compare-and-set's precondition on the key's current state.
// Exactly one of Version and Absent is set.
type Condition struct {
	// Version: the key holds a value written by the op at this position
	// (the Version a read returned).
	Version Token
	// Absent: the key holds no value.
	Absent bool
}

// Valid reports whether exactly one of the condition's fields is set.
func (c *Condition) Valid() bool { return c.Absent != (c.Version != Token{}) }

func (c *Condition) String() string {
	if c.Absent {
		return "absent"
	}
	return "version " + c.Version.String()
}

// ErrConditionFailed: a compare-and-set's condition did not hold; the write
// was not applied (ConditionFailedError carries the key's state).
var ErrConditionFailed = errors.New("partition: condition failed")

// ConditionFailedError is a compare-and-set refused because the key's state
// did not satisfy its condition. Found and Version are the key's state the
// write region compared against (committed when the reply leaves).
type ConditionFailedError struct {
	Partition ID
	Cond      Condition
	Found     bool
	Version   Token // zero when !Found
}

func (e *ConditionFailedError) Error() string {
	cur := "absent"
	if e.Found {
		cur = "version " + e.Version.String()
	}
	return fmt.Sprintf("partition %d: condition %s, key is %s: %v", e.Partition, e.Cond.String(), cur, ErrConditionFailed)
}

// Unwrap lets errors.Is(err, ErrConditionFailed) match.
func (e *ConditionFailedError) Unwrap() error { return ErrConditionFailed }

// keyState is what the core knows of a key's newest op.
type keyState struct {
	found   bool  // the newest op put a value
	version Token // of the newest op (zero if the key has none)
}

// casWaiting is a compare-and-set waiting for a FetchKey.
type casWaiting struct {
	seq    uint32
	req    WriteRequest // cloned
	issued LSN          // r.last when the fetch was asked
	at     time.Duration
}

// casDue is a failed condition waiting for the commit of what it compared
// against.
type casDue struct {
	ref  ClientRef
	wait LSN
	err  error
}

// casQueued counts the compare-and-sets a write region holds that are not
// in its log (for the MaxPendingWrites bound).
func (l *leaderState) casQueued() int { return len(l.casWait) + len(l.casDue) }

// tailState returns the state of key from the newest op on it in the tail.
func (r *Replica) tailState(key []byte) (keyState, bool) {
	for i := len(r.tail) - 1; i >= 0; i-- {
		op := &r.tail[i]
		if bytes.Equal(op.Key, key) {
			return keyState{found: !op.Delete, version: Token{Epoch: op.Epoch, LSN: op.LSN}}, true
		}
	}
	return keyState{}, false
}

// assignCAS decides a compare-and-set from the tail, or asks the store.
func (r *Replica) assignCAS(now time.Duration, req *WriteRequest) {
	if st, ok := r.tailState(req.Key); ok {
		r.decideCAS(now, req, st)
		return
	}
	l := r.leader
	l.casSeq++
	c := cloneWrite(req)
	l.casWait = append(l.casWait, casWaiting{seq: l.casSeq, req: c, issued: r.last, at: now})
	r.h.fetch(Fetch{Kind: FetchKey, Partition: r.id, Key: c.Key, Seq: l.casSeq, Epoch: r.epoch})
	r.markDirty()
}

// decideCAS assigns the write if its condition holds, else answers (or
// queues the answer to) the failure.
func (r *Replica) decideCAS(now time.Duration, req *WriteRequest, st keyState) {
	cond := req.If
	if (cond.Absent && !st.found) || (!cond.Absent && st.found && st.version == cond.Version) {
		r.assignOp(now, req)
		return
	}
	err := &ConditionFailedError{Partition: r.id, Cond: *cond, Found: st.found}
	if st.found {
		err.Version = st.version
	}
	wait := max(st.version.LSN, r.readBarrier)
	if wait <= r.commit {
		r.answerCAS(now, req.Ref, err)
		return
	}
	r.leader.casDue = append(r.leader.casDue, casDue{ref: req.Ref, wait: wait, err: err})
}

// answerCAS answers a failed condition whose compared state is committed:
// with it, if the lease still rules out another write region.
func (r *Replica) answerCAS(now time.Duration, ref ClientRef, err error) {
	if lerr := r.leaseErr(now); lerr != nil {
		err = fmt.Errorf("condition failed, not confirmed: %w", lerr)
	}
	r.h.reply(Reply{Kind: ReplyWrite, Partition: r.id, Ref: ref, Epoch: r.epoch, Err: err})
}

// releaseCASDue answers the failed conditions the commit now covers.
func (r *Replica) releaseCASDue(now time.Duration) {
	l := r.leader
	n := 0
	for _, d := range l.casDue {
		if d.wait <= r.commit {
			r.answerCAS(now, d.ref, d.err)
			continue
		}
		l.casDue[n] = d
		n++
	}
	clear(l.casDue[n:])
	l.casDue = l.casDue[:n]
	if n == 0 {
		l.casDue = nil
	}
}

// onFetchKey decides the compare-and-set that asked for the key.
func (r *Replica) onFetchKey(now time.Duration, res *FetchResult) {
	l := r.leader
	i := 0
	for i < len(l.casWait) && l.casWait[i].seq != res.Fetch.Seq {
		i++
	}
	if i == len(l.casWait) {
		return
	}
	w := l.casWait[i]
	l.casWait = append(l.casWait[:i], l.casWait[i+1:]...)
	if len(l.casWait) == 0 {
		l.casWait = nil
	}
	r.markDirty()
	req := &w.req
	if res.Err != nil {
		r.h.reply(Reply{Kind: ReplyWrite, Partition: r.id, Ref: req.Ref,
			Err: fmt.Errorf("partition %d: read the key for a compare-and-set: %w: %w", r.id, ErrNotReady, res.Err)})
		return
	}
	if err := r.redirect(req.Epoch); err != nil {
		r.h.reply(Reply{Kind: ReplyWrite, Partition: r.id, Ref: req.Ref, Err: err})
		return
	}
	if r.h.cfg.LeaseGatesWrites && !r.leased(now) {
		r.h.reply(Reply{Kind: ReplyWrite, Partition: r.id, Ref: req.Ref, Err: fmt.Errorf("write refused: %w", r.leaseErr(now))})
		return
	}
	if st, ok := r.tailState(req.Key); ok {
		r.decideCAS(now, req, st)
		return
	}
	if r.tailBase > w.issued {
		// An op on the key may have been assigned, applied and trimmed
		// after the fetch was asked, and the read may predate it.
		r.assignCAS(now, req)
		return
	}
	var st keyState
	if len(res.KVs) == 1 {
		kv := &res.KVs[0]
		st = keyState{found: true, version: Token{Epoch: kv.Epoch, LSN: kv.LSN}}
	}
	r.decideCAS(now, req, st)
}

// dropCAS answers the compare-and-sets of a write region that ends: none
// was assigned, so each gets a redirect (not applied).
func (r *Replica) dropCAS() {
	l := r.leader
	for _, w := range l.casWait {
		r.h.reply(Reply{Kind: ReplyWrite, Partition: r.id, Ref: w.req.Ref, Err: r.notLeadingErr(w.req.Epoch)})
	}
	for _, d := range l.casDue {
		r.h.reply(Reply{Kind: ReplyWrite, Partition: r.id, Ref: d.ref, Err: r.notLeadingErr(0)})
	}
	l.casWait, l.casDue = nil, nil
}

// notLeadingErr is the redirect for a request this write region can no
// longer serve.
func (r *Replica) notLeadingErr(reqEpoch Epoch) error {
	if err := r.redirect(reqEpoch); err != nil && reqEpoch != 0 {
		return err
	}
	return &RedirectError{Partition: r.id, Epoch: r.epoch, WriteRegion: r.writeRegion, Reason: ReasonNotWriteRegion, RequestEpoch: reqEpoch}
}
