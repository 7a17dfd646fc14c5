package partition

import (
	"fmt"
	"slices"
	"time"

	"github.com/fmnode/fmnode/quorum"
)

// Replica is one partition's replica in one region, as a pure state
// machine. Hosts own replicas and drive them; see Host. It keeps no applied
// state in memory (that lives in the store), only the ops not yet applied
// and, on a write region, a bounded tail of recent ops for replication.
type Replica struct {
	// The small fields share a word (with tens of thousands of replicas
	// per host, a struct over 512 bytes costs the next size class, 576).
	id           ID
	role         Role
	needSnapshot bool
	metaDirty    bool
	applyDirty   bool
	dirty        bool

	h     *Host
	level Level

	epoch       Epoch
	writeRegion Region
	wq          quorum.WriteQuorum
	hist        history

	logBase      LSN
	logBaseEpoch Epoch
	last         LSN
	lastEpoch    Epoch
	durable      LSN // last LSN known persisted in the current log generation
	gen          uint64
	commit       LSN
	applied      LSN
	appliedEpoch Epoch
	stable       LSN // durable on every replica (known)
	verified     LSN // follower: log equals the write region's up to here (this epoch)
	undoFloor    LSN
	readableFrom LSN
	readBarrier  LSN // strong reads wait until commit reaches it

	// tail holds the ops (tailBase, last]; tailBase <= applied.
	tail     []Op
	tailAt   []time.Duration // write region: assignment time of each tail op
	tailBase LSN

	leader      *leaderState
	leaderSince time.Duration
	fol         followerState
	// unreachable marks, by index into wq.Replicas, the regions whose
	// replica the driver reported unreachable (SetReachable): kept
	// outside leaderState so that a write region this replica becomes
	// later starts out knowing it (setQuorum keeps the marks by region).
	unreachable uint64

	leaseUntil time.Duration
	// leaseGen and leaseEpoch: the node lease run and the epoch the
	// failover manager validated this replica's lease for (see
	// Host.ValidateLease); they count only while the host gates leases.
	leaseGen   uint64
	leaseEpoch Epoch

	cur     *Write
	sealed  []Write
	done    []Reply
	timerAt time.Duration
}

// followerState is what a follower keeps beyond the shared fields.
type followerState struct {
	// Freshness for bounded-staleness reads: a grant (p, need, d) becomes
	// valid once applied >= need, until p + min(d, T) (shortened by the
	// drift margin; see grantEnd).
	grantP     time.Duration
	grantNeed  LSN
	grantFor   time.Duration
	freshUntil time.Duration
	lastProbe  time.Duration
	snapIn     *snapIn
	hasGrant   bool
	member     bool
	// heardLeader: a message of the write region of this epoch arrived
	// (it surely took the epoch; see inheritGrants).
	heardLeader bool
	wantGrant   bool
	// announce: tell the write region this replica is here (an answer it
	// did not ask for). Set when the replica learns its write region other
	// than from that region's own message (a restart, a fence, a stale
	// reply), so that a write region that backed off from it while it was
	// gone resumes replication now rather than at its next probe.
	announce bool
}

type snapIn struct {
	nextSeq   uint32
	base      LSN
	baseEpoch Epoch
}

// Spec describes a new partition replica (Host.Create).
type Spec struct {
	Level Level
	// Quorum is the partition's write quorum; its WriteRegion leads at Epoch.
	Quorum quorum.WriteQuorum
	// Epoch is the first epoch (>= 1).
	Epoch Epoch
}

// Progress is what the failover and recovery code reads from a replica.
type Progress struct {
	Partition   ID
	Region      Region
	Epoch       Epoch
	Role        Role
	WriteRegion Region
	LastLSN     LSN
	// DurableLSN is the end of the log as the store holds it (at most
	// LastLSN): what the replica still has after a crash. A promotion
	// must start at or below it, or a crash makes the replica lack its
	// own epoch's start.
	DurableLSN   LSN
	LastEpoch    Epoch
	CommitLSN    LSN
	AppliedLSN   LSN
	StableLSN    LSN
	LogBase      LSN
	NeedSnapshot bool
	History      []EpochRange
	Level        Level
	Quorum       quorum.WriteQuorum
	// Followers is the write region's view of each follower.
	Followers []FollowerProgress
}

// FollowerProgress is the write region's view of one follower.
type FollowerProgress struct {
	Region      Region
	Match, Next LSN
	Snapshot    bool // a snapshot transfer is in progress
	// Unreachable: the driver reported the follower's node down
	// (SetReachable), so the write region sends it nothing for now.
	Unreachable bool
}

// Position returns the progress as a session token of the last op.
func (p Progress) Position() Token { return Token{Epoch: p.LastEpoch, LSN: p.LastLSN} }

func newReplica(h *Host, id ID) *Replica {
	return &Replica{id: id, h: h}
}

// recover rebuilds a replica from what its store made durable.
func (r *Replica) recover(now time.Duration, rec *Recovered) error {
	m := &rec.Meta
	if err := m.check(); err != nil {
		return fmt.Errorf("partition %d: %w", r.id, err)
	}
	r.level = m.Level
	r.epoch, r.role, r.writeRegion = m.Epoch, m.Role, m.WriteRegion
	r.setQuorum(m.Quorum)
	r.hist = history(m.History).clone()
	r.logBase, r.logBaseEpoch = m.LogBase, m.LogBaseEpoch
	r.needSnapshot = m.NeedSnapshot
	r.readableFrom = m.ReadableFrom
	r.last, r.lastEpoch = rec.Last, rec.LastEpoch
	if r.last > r.logBase && !r.needSnapshot {
		if e, ok := r.hist.epochAt(r.last); ok && e != r.lastEpoch {
			return fmt.Errorf("partition %d: %w", r.id, corruptf("epoch history says op %d is of epoch %d, the log says %d",
				r.last, e, r.lastEpoch))
		}
	}
	r.durable = rec.Last
	r.applied, r.appliedEpoch = rec.Apply.Applied, rec.Apply.AppliedEpoch
	r.undoFloor = rec.Apply.UndoFloor
	r.commit = r.applied
	r.stable = 0
	r.tailBase = r.applied
	if len(rec.Tail) > 0 {
		if rec.Tail[0].LSN != r.applied+1 || rec.Tail[len(rec.Tail)-1].LSN != r.last {
			return fmt.Errorf("partition %d: %w", r.id, corruptf("recovered tail (%d..%d) does not cover (%d, %d]",
				rec.Tail[0].LSN, rec.Tail[len(rec.Tail)-1].LSN, r.applied, r.last))
		}
		r.tail = rec.Tail
	} else if !r.needSnapshot && r.last != r.applied {
		return fmt.Errorf("partition %d: %w", r.id, corruptf("recovered no tail for (%d, %d]", r.applied, r.last))
	}
	if !r.role.writeRegion() {
		r.fol.announce = true
	}
	if r.role.writeRegion() {
		r.tailAt = make([]time.Duration, len(r.tail))
		for i := range r.tailAt {
			r.tailAt[i] = now
		}
		r.becomeWriteRegion(now)
		r.assumeGranted(now)
		// Acknowledged writes are in the log; strong reads wait until
		// everything recovered is committed and applied again.
		r.readBarrier = r.last
		if r.level.Consistency != Strong {
			r.commit = r.last
		}
	}
	return nil
}

// create initialises a new replica from spec.
func (r *Replica) create(now time.Duration, spec *Spec) {
	r.level = spec.Level
	r.epoch = spec.Epoch
	r.setQuorum(spec.Quorum)
	r.writeRegion = spec.Quorum.WriteRegion
	r.role = RoleFollower
	if spec.Quorum.WriteRegion == r.h.cfg.Region {
		r.role = RoleLeader
		r.hist = history{{Epoch: spec.Epoch, After: 0}}
		r.becomeWriteRegion(now)
	}
	r.metaDirty = true
	r.applyDirty = true
	r.markDirty()
}

func (r *Replica) region() Region { return r.h.cfg.Region }

// ----- invariants -----

func (r *Replica) fail(format string, args ...any) {
	err := fmt.Errorf("%w: partition %d region %s: %s", ErrInvariant, r.id, r.region(), fmt.Sprintf(format, args...))
	r.h.fail(err)
}

// check asserts the position invariants after every step.
func (r *Replica) check() {
	if r.needSnapshot {
		return
	}
	switch {
	case r.applied > r.last:
		r.fail("applied %d beyond last %d", r.applied, r.last)
	case r.logBase > r.last:
		r.fail("log base %d beyond last %d", r.logBase, r.last)
	case r.tailBase > r.applied:
		r.fail("tail base %d above applied %d (unapplied ops not in memory)", r.tailBase, r.applied)
	case LSN(len(r.tail)) != r.last-r.tailBase:
		r.fail("tail holds %d ops for (%d, %d]", len(r.tail), r.tailBase, r.last)
	case r.lastEpoch > r.epoch:
		r.fail("last op epoch %d above replica epoch %d", r.lastEpoch, r.epoch)
	}
	if r.last > r.logBase {
		if e, ok := r.hist.epochAt(r.last); ok && e != r.lastEpoch {
			r.fail("history says op %d is of epoch %d, the log says %d", r.last, e, r.lastEpoch)
		}
	}
}

// ----- persistence -----

// w returns the write under construction, creating it.
func (r *Replica) w() *Write {
	if r.cur == nil {
		if r.h != nil && r.h.spareWrite != nil {
			r.cur, r.h.spareWrite = r.h.spareWrite, nil
			r.cur.Partition = r.id
		} else {
			r.cur = &Write{Partition: r.id}
		}
	}
	r.markDirty()
	return r.cur
}

// seal closes the write under construction so that later writes (a
// truncation, a reset) run after it.
func (r *Replica) seal() {
	if w := r.sealCur(); w != nil {
		r.sealed = append(r.sealed, *w)
		r.recycleCur()
	}
}

// sealCur marks the write under construction closed and returns it (nil
// if none); the caller copies it out, then calls recycleCur.
func (r *Replica) sealCur() *Write {
	if r.cur == nil {
		return nil
	}
	r.cur.mark = writeMark{gen: r.gen, last: r.last}
	return r.cur
}

// recycleCur ends the write under construction, whose value the caller
// copied out, and hands its zeroed struct to the host for the next one.
func (r *Replica) recycleCur() {
	if r.cur == nil {
		return
	}
	*r.cur = Write{}
	if r.h != nil {
		r.h.spareWrite = r.cur
	}
	r.cur = nil
}

func (r *Replica) meta() *Meta {
	return &Meta{
		Epoch:        r.epoch,
		Role:         r.role,
		WriteRegion:  r.writeRegion,
		Level:        r.level,
		Quorum:       r.wq,
		History:      r.hist.clone(),
		LogBase:      r.logBase,
		LogBaseEpoch: r.logBaseEpoch,
		NeedSnapshot: r.needSnapshot,
		ReadableFrom: r.readableFrom,
	}
}

// persisted is called when a write of this replica is durable.
func (r *Replica) persisted(m writeMark) {
	if m.gen != r.gen || m.last <= r.durable {
		return
	}
	if m.last > r.last {
		r.fail("durable mark %d beyond last %d", m.last, r.last)
		return
	}
	r.durable = m.last
	if r.leader != nil {
		r.advanceCommit()
	}
}

func (r *Replica) markDirty() {
	if !r.dirty {
		r.dirty = true
		r.h.dirty = append(r.h.dirty, r)
	}
}

// ----- log -----

// epochAt returns the epoch of the op at lsn, if the replica knows it.
func (r *Replica) epochAt(lsn LSN) (Epoch, bool) {
	switch {
	case lsn == r.logBase:
		return r.logBaseEpoch, true
	case lsn == r.last:
		return r.lastEpoch, true
	case lsn > r.last:
		return 0, false
	}
	return r.hist.epochAt(lsn)
}

// appendOp adds op at the end of the log (memory and the write).
func (r *Replica) appendOp(op Op, at time.Duration) {
	if op.LSN != r.last+1 {
		r.fail("append of LSN %d after %d", op.LSN, r.last)
		return
	}
	if op.Epoch < r.lastEpoch || op.Epoch > r.epoch {
		r.fail("append of op epoch %d after epoch %d (replica epoch %d)", op.Epoch, r.lastEpoch, r.epoch)
		return
	}
	// Rows of epochs that got no ops here (a promotion that wrote nothing)
	// say nothing about the ops to come; the stored history must lose them
	// too, or a restart would misread the epochs of the ops appended now.
	if n := len(r.hist); n > 0 && r.hist[n-1].After >= r.last {
		r.hist = r.hist.truncate(r.last)
		r.metaDirty = true
	}
	if n := len(r.hist); n == 0 || r.hist[n-1].Epoch != op.Epoch {
		if n > 0 && r.hist[n-1].Epoch > op.Epoch {
			r.fail("op epoch %d below history epoch %d", op.Epoch, r.hist[n-1].Epoch)
			return
		}
		r.hist = r.hist.push(op.Epoch, r.last).trim(r.logBase, r.h.cfg.MaxEpochHistory)
		r.metaDirty = true
	}
	r.last, r.lastEpoch = op.LSN, op.Epoch
	r.tail = append(r.tail, op)
	if r.leader != nil {
		r.tailAt = append(r.tailAt, at)
	}
	w := r.w()
	w.Append = append(w.Append, op)
}

// op returns the in-memory op at lsn.
func (r *Replica) op(lsn LSN) *Op {
	if lsn <= r.tailBase || lsn > r.last {
		return nil
	}
	return &r.tail[lsn-r.tailBase-1]
}

// truncateLog removes the ops above after (to conflict records) and undoes
// the applied ones. It reports false if that is impossible (ops compacted,
// or applied ops without undo records); the caller then needs a snapshot.
func (r *Replica) truncateLog(after LSN, reason ConflictReason) bool {
	if after >= r.last {
		return true
	}
	if after < r.logBase || (r.applied > after && after < r.undoFloor) {
		return false
	}
	if r.level.Consistency == Strong && after < r.commit {
		r.fail("truncation after %d removes committed ops (commit %d)", after, r.commit)
	}
	afterEpoch, ok := r.epochAt(after)
	if !ok {
		return false
	}
	r.h.logger().Info("partition: truncating log", "partition", r.id, "region", r.region(), "after", after,
		"last", r.last, "applied", r.applied, "epoch", r.epoch, "reason", reason.String())
	r.seal()
	w := r.w()
	w.Truncate = &Truncation{After: after, Applied: r.applied, RemovedAt: r.epoch, Reason: reason}
	r.gen++
	r.last, r.lastEpoch = after, afterEpoch
	r.hist = r.hist.truncate(after)
	if after < r.tailBase {
		r.tail, r.tailAt, r.tailBase = nil, nil, after
	} else {
		// Copy: messages already sent may share the old array.
		r.tail = slices.Clone(r.tail[:after-r.tailBase])
		if r.tailAt != nil {
			r.tailAt = slices.Clone(r.tailAt[:after-r.tailBase])
		}
	}
	if r.applied > after {
		r.applied, r.appliedEpoch = after, afterEpoch
		r.applyDirty = true
	}
	r.commit = min(r.commit, after)
	r.durable = min(r.durable, after)
	r.verified = min(r.verified, after)
	r.stable = min(r.stable, after)
	r.metaDirty = true
	return true
}

// enterNeedSnapshot gives up on the log: every op goes to the conflict
// records (by a Reset with an empty lineage) and the replica waits for a
// snapshot from the write region. Nothing is dropped silently.
func (r *Replica) enterNeedSnapshot(why string) {
	r.h.logger().Warn("partition: replica needs a snapshot", "partition", r.id, "region", r.region(), "why", why,
		"last", r.last, "applied", r.applied, "epoch", r.epoch)
	r.seal()
	w := r.w()
	w.Reset = &Reset{RemovedAt: r.epoch}
	r.resetVolatile()
	r.needSnapshot = true
	r.metaDirty = true
}

// resetVolatile forgets the log and the state (a Reset is being written).
func (r *Replica) resetVolatile() {
	r.gen++
	r.tail, r.tailAt, r.tailBase = nil, nil, 0
	r.last, r.lastEpoch, r.logBase, r.logBaseEpoch = 0, 0, 0, 0
	r.applied, r.appliedEpoch, r.commit, r.durable, r.verified, r.stable = 0, 0, 0, 0, 0, 0
	r.undoFloor, r.readableFrom = 0, 0
	r.hist = nil
	r.applyDirty = true
}

// ----- flush: turn state into writes and messages -----

// flush runs when the host builds a Ready: replication sends (write
// region), applying committed ops, compaction, and the meta records.
func (r *Replica) flush(now time.Duration) {
	if r.leader != nil {
		r.flushLeader(now)
	} else {
		r.flushFollower(now)
	}
	r.applyCommitted()
	r.trimTail()
	r.compact()
	if r.metaDirty {
		r.w().Meta = r.meta()
		r.metaDirty = false
	}
	if r.applyDirty {
		r.w().ApplyState = &ApplyState{Applied: r.applied, AppliedEpoch: r.appliedEpoch, UndoFloor: r.undoFloor}
		r.applyDirty = false
	}
	r.check()
}

// undoAbove is the LSN above which applied ops need undo records: a strong
// partition never truncates committed ops; the weaker levels commit on the
// write region alone, so a failover may truncate anything not yet durable
// on every replica (stable), except below a fuzzy snapshot's consistency
// point where undo records could not be right.
func (r *Replica) undoAbove() LSN {
	if r.level.Consistency == Strong {
		return ^LSN(0)
	}
	return max(r.stable, r.readableFrom)
}

// applyCommitted applies the committed ops held in memory.
func (r *Replica) applyCommitted() {
	if r.needSnapshot {
		return
	}
	to := min(r.commit, r.last)
	if to <= r.applied {
		return
	}
	w := r.w()
	u := r.undoAbove()
	if len(w.Apply) == 0 {
		w.UndoAbove = u
	} else {
		u = w.UndoAbove
	}
	for lsn := r.applied + 1; lsn <= to; lsn++ {
		op := r.op(lsn)
		if op == nil {
			r.fail("op %d to apply not in memory (tail (%d, %d])", lsn, r.tailBase, r.last)
			return
		}
		if op.Epoch > r.epoch {
			r.fail("applying op %d of epoch %d above replica epoch %d", lsn, op.Epoch, r.epoch)
			return
		}
		w.Apply = append(w.Apply, *op)
		r.applied, r.appliedEpoch = lsn, op.Epoch
	}
	r.undoFloor = max(r.undoFloor, min(u, r.applied))
	r.applyDirty = true
	r.onApplied()
}

// onApplied makes a pending freshness grant valid once its LSN is applied.
func (r *Replica) onApplied() {
	f := &r.fol
	if f.hasGrant && r.applied >= f.grantNeed {
		f.freshUntil = max(f.freshUntil, r.grantEnd())
		f.hasGrant = false
	}
}

// grantEnd is when the pending freshness grant stops letting this follower
// serve bounded-staleness reads: its probe time plus the grant's length
// (at most T; less when the write region's lease ends sooner), shortened
// by the drift margin since the length was measured on another clock.
func (r *Replica) grantEnd() time.Duration {
	f := &r.fol
	d := min(f.grantFor, r.level.StalenessTime)
	return f.grantP + time.Duration(float64(d)*(1-r.h.cfg.DriftMargin))
}

// trimTail drops in-memory ops no longer needed: applied and (on a write
// region) acknowledged by every follower or beyond MaxTailOps.
func (r *Replica) trimTail() {
	keep := r.applied
	if r.leader != nil {
		for i := range r.leader.followers {
			keep = min(keep, r.leader.followers[i].match)
		}
		if r.applied > r.tailBase && int(r.applied-r.tailBase) > r.h.cfg.MaxTailOps {
			keep = max(keep, r.applied-LSN(r.h.cfg.MaxTailOps))
		}
	}
	if keep <= r.tailBase {
		return
	}
	n := int(keep - r.tailBase)
	if n >= len(r.tail) {
		r.tail, r.tailAt = nil, nil // release memory when idle
	} else {
		r.tail = slices.Clone(r.tail[n:])
		if r.tailAt != nil {
			r.tailAt = slices.Clone(r.tailAt[n:])
		}
	}
	r.tailBase = keep
}

// compact drops log ops that every replica has and that are applied,
// keeping RetainLogOps for delta catch-up; beyond MaxLogOps it compacts
// anyway (a lagging replica will get a snapshot).
func (r *Replica) compact() {
	if r.needSnapshot {
		return
	}
	cfg := &r.h.cfg
	floor := min(r.applied, r.stable)
	var target LSN
	if floor > LSN(cfg.RetainLogOps) {
		target = floor - LSN(cfg.RetainLogOps)
	}
	if r.last-r.logBase > LSN(cfg.MaxLogOps) {
		target = max(target, min(r.applied, r.last-LSN(cfg.MaxLogOps)))
	}
	if r.leader != nil {
		// A snapshot transfer pins the log from its base, within MaxLogOps:
		// beyond that the transfer restarts from a newer base.
		for i := range r.leader.followers {
			f := &r.leader.followers[i]
			if s := f.snap; s != nil && s.base < target {
				if r.last-s.base > LSN(cfg.MaxLogOps) {
					f.snap, f.needSnap = nil, true
					continue
				}
				target = s.base
			}
		}
	}
	if target < r.logBase+LSN(cfg.CompactStepOps) {
		return
	}
	e, ok := r.epochAt(target)
	if !ok {
		return
	}
	w := r.w()
	w.CompactTo = target
	if r.level.Consistency != Strong && r.undoFloor < target {
		// Undo records at or below the log base are useless: truncation
		// below the log base needs a snapshot anyway.
		r.undoFloor = target
		r.applyDirty = true
	}
	if r.undoFloor > 0 && r.level.Consistency != Strong {
		// Undo records at or below the floor can never be used (a
		// truncation that far needs a snapshot), so they go too; this is
		// what bounds them when a replica stays down.
		w.PruneUndoTo = r.undoFloor
	}
	r.logBase, r.logBaseEpoch = target, e
	r.hist = r.hist.trim(r.logBase, cfg.MaxEpochHistory)
	r.metaDirty = true
}

// ----- timers -----

// nextDeadline returns when the replica next needs a Tick (0: never).
func (r *Replica) nextDeadline(now time.Duration) time.Duration {
	if r.leader == nil {
		return 0
	}
	return r.leaderDeadline(now)
}

// tick handles timers.
func (r *Replica) tick(now time.Duration) {
	if r.leader != nil {
		r.tickLeader(now)
	}
}

// ----- progress -----

func (r *Replica) progress() Progress { return r.progressWith(true, nil) }

// progressWith reports r's progress, with the epoch history if history,
// and the followers appended to followers[:0] (a new array if nil).
func (r *Replica) progressWith(history bool, followers []FollowerProgress) Progress {
	p := Progress{
		Partition: r.id, Region: r.region(), Epoch: r.epoch, Role: r.role, WriteRegion: r.writeRegion,
		LastLSN: r.last, DurableLSN: r.durable, LastEpoch: r.lastEpoch, CommitLSN: r.commit, AppliedLSN: r.applied,
		StableLSN: r.stable, LogBase: r.logBase, NeedSnapshot: r.needSnapshot,
		Level: r.level, Quorum: r.wq,
	}
	if history {
		p.History = r.hist.clone()
	}
	if r.leader != nil {
		p.Followers = followers[:0]
		if followers == nil {
			p.Followers = make([]FollowerProgress, 0, len(r.leader.followers))
		}
		for i := range r.leader.followers {
			f := &r.leader.followers[i]
			p.Followers = append(p.Followers, FollowerProgress{Region: f.region, Match: f.match, Next: f.next, Snapshot: f.snap != nil,
				Unreachable: f.unreachable})
		}
	}
	return p
}
