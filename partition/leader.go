package partition

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fmnode/fmnode/guard"
)

// leaderState is what a write region keeps beyond the shared fields.
type leaderState struct {
	// commitHeld: advanceCommit found no lease and committed nothing; the
	// lease's return commits what is durable (resumeCommit).
	commitHeld bool
	followers  []follower
	pending    []pendingWrite // assigned, not yet committed; ascending LSN
	held       []heldWrite    // bounded staleness: not yet assigned
	// departed: followers that left the replica set while they may still
	// hold a freshness grant (see keepDeparted); their lag holds writes
	// until it has surely ended. Sorted by nothing; a handful at most.
	departed []departedGrant
	// casWait: compare-and-sets waiting for the key's state from the
	// store (FetchKey, by seq); casDue: failed conditions waiting for the
	// commit of what they compared against (see cas.go).
	casWait []casWaiting
	casDue  []casDue
	casSeq  uint32
}

// departedGrant is what the write region keeps of a follower it no longer
// replicates to: the follower hears nothing more, and may serve bounded
// reads at match until its grant ends.
type departedGrant struct {
	region Region
	match  LSN
	grantState
}

// grantState says until when a follower may hold a freshness grant.
type grantState struct {
	// grantSentAt is when a freshness grant was last sent (the follower may
	// serve bounded reads for about T after it), granted whether one was.
	grantSentAt time.Duration
	granted     bool
	// priorGrantUntil: after a graceful promotion, the previous write
	// region may have left this follower a freshness grant that runs until
	// about then (see inheritGrants); 0 once the follower answered in this
	// epoch, since adopting it dropped any grant of an older one.
	priorGrantUntil time.Duration
}

// mayHold reports whether the follower may still serve reads on a grant:
// window is the grant window (Replica.grantWindow).
func (g *grantState) mayHold(now, window time.Duration) bool {
	return now <= g.priorGrantUntil || (g.granted && now-g.grantSentAt <= window)
}

type pendingWrite struct {
	lsn LSN
	ref ClientRef
	at  time.Duration
}

type heldWrite struct {
	req WriteRequest
	at  time.Duration
}

// follower is the write region's view of one follower.
type follower struct {
	region Region
	next   LSN // next LSN to send
	match  LSN // the follower's log equals ours up to here (this epoch)
	// floor is where optimistic sending started (our last at promotion, or
	// where a mismatch was resolved): the follower is presumed to have the
	// ops below it until it says otherwise, so retransmissions and
	// heartbeats start there rather than at a match of 0.
	floor LSN

	lastSend  time.Duration
	lastAck   time.Duration // last time match advanced (or ops started flowing)
	lastReset time.Duration

	sentCommit LSN
	sentStable LSN
	// ackCommit is the commit position the follower confirmed (its answers
	// carry it): a heartbeat that carried a commit can be lost like any
	// message, and only the follower's word says it arrived. Until then
	// heartbeats go on (the follower otherwise never applies the last
	// writes of a burst: found by the background-fault sweep).
	ackCommit LSN

	probeBoot uint64
	probe     time.Duration
	probeNew  bool
	wantGrant bool
	grantState

	fetching bool
	needSnap bool
	snap     *snapOut

	// silent counts the contacts that asked this follower for an answer
	// (heartbeats wanting an ack, window retransmissions) since it last
	// answered anything; it saturates. It drives contactBackoff.
	silent uint8
	// unreachable: the driver's node liveness says the follower's node is
	// down (SetReachable); it gets no timer-driven contact and no new ops
	// until it is reported back or answers (see reachable.go).
	unreachable bool
}

// contactBackoff is the spacing of timer-driven contacts with a follower
// that stopped answering: 0 while it answers, and for the first
// RetransmitTimeout's worth of heartbeats after it falls silent (a WAN
// round trip plus a lost message or two must not slow replication); then
// HeartbeatInterval doubled per further unanswered contact, capped at
// MaxContactBackoff. A dead region thus costs each partition a probe per
// cap instead of ten heartbeats and two window resends a second.
func (f *follower) contactBackoff(cfg *Config) time.Duration {
	if cfg.MaxContactBackoff <= cfg.HeartbeatInterval {
		return 0
	}
	free := max(1, int(cfg.RetransmitTimeout/cfg.HeartbeatInterval))
	n := int(f.silent) - free
	if n <= 0 {
		return 0
	}
	if n >= 32 || cfg.HeartbeatInterval<<n >= cfg.MaxContactBackoff {
		return cfg.MaxContactBackoff
	}
	return cfg.HeartbeatInterval << n
}

// contacted records a contact that asks f for an answer.
func (f *follower) contacted() {
	if f.silent < math.MaxUint8 {
		f.silent++
	}
}

// heard ends f's silence. It reports whether f was backed off: what was
// sent meanwhile was most likely lost, so the caller resends the window
// at once instead of a RetransmitTimeout later.
func (r *Replica) heard(f *follower) bool {
	backedOff := f.contactBackoff(&r.h.cfg) > 0 || f.unreachable
	f.silent = 0
	if f.unreachable {
		r.markReachable(f.region) // an answer outweighs the liveness verdict
		f.unreachable = false
	}
	return backedOff
}

// resendWindow rewinds f to resend every op not known to have arrived
// (go-back-N from the acknowledged or presumed position).
func (r *Replica) resendWindow(now time.Duration, f *follower) {
	f.next = max(f.match+1, min(f.floor, f.next))
	r.h.stats.Retransmits++
	f.lastReset = now
	f.fetching = false
	r.markDirty()
}

// heartbeatPrev is the position a heartbeat checks: the known match, or the
// presumed one while nothing is acknowledged yet. The replication window
// and retransmissions count from it too.
func (f *follower) heartbeatPrev() LSN {
	return max(f.match, min(f.floor, f.next)-1)
}

// inflight is the number of ops sent and not known to have arrived.
func (f *follower) inflight() int { return int(f.next - 1 - f.heartbeatPrev()) }

// becomeWriteRegion sets up the write-region state for the current quorum.
func (r *Replica) becomeWriteRegion(now time.Duration) {
	l := &leaderState{}
	for _, reg := range r.wq.Replicas {
		if reg == r.region() {
			continue
		}
		l.followers = append(l.followers, r.newFollower(now, reg))
	}
	r.leader = l
	r.leaderSince = now
	if len(r.tailAt) != len(r.tail) {
		r.tailAt = make([]time.Duration, len(r.tail))
		for i := range r.tailAt {
			r.tailAt[i] = now
		}
	}
}

// dropWriteRegion ends the write-region state: committed-or-not writes get
// ErrUnknownOutcome, held writes (never assigned) a redirect.
func (r *Replica) dropWriteRegion() {
	l := r.leader
	if l == nil {
		return
	}
	for _, p := range l.pending {
		r.h.reply(Reply{Kind: ReplyWrite, Partition: r.id, Ref: p.ref, Err: r.unknownOutcome(p.lsn)})
	}
	for _, hw := range l.held {
		err := r.redirect(hw.req.Epoch)
		if err == nil { // still leading that epoch (the host is closing it)
			err = &RedirectError{Partition: r.id, Epoch: r.epoch, WriteRegion: r.writeRegion, Reason: ReasonNotWriteRegion, RequestEpoch: hw.req.Epoch}
		}
		r.h.reply(Reply{Kind: ReplyWrite, Partition: r.id, Ref: hw.req.Ref, Err: err})
	}
	r.dropCAS()
	r.leader = nil
	r.tailAt = nil
}

func (r *Replica) unknownOutcome(lsn LSN) error {
	return &UnknownOutcomeError{Partition: r.id, Token: Token{Epoch: r.lastEpochOf(lsn), LSN: lsn}, Epoch: r.epoch, WriteRegion: r.writeRegion}
}

func (r *Replica) lastEpochOf(lsn LSN) Epoch {
	if e, ok := r.epochAt(lsn); ok {
		return e
	}
	return r.epoch
}

func (r *Replica) follower(reg Region) *follower {
	if r.leader == nil {
		return nil
	}
	for i := range r.leader.followers {
		if r.leader.followers[i].region == reg {
			return &r.leader.followers[i]
		}
	}
	return nil
}

// redirect returns the redirect for a request carrying reqEpoch, or nil if
// this replica is the leading write region of that epoch or of a later one.
//
// A request of an older (known, non-zero) epoch that reaches the leading
// write region of a newer one is served here, in the current epoch: a 421
// would only send the client to this very replica again with the current
// epoch, and nothing in a write or a strong read depends on the epoch the
// client knew (the client's epoch routes; fencing is the replicas' epoch
// and the lease, which it does not touch). The reply carries the current
// epoch and write region (the write's token, Fm-Epoch), from which the
// client learns the route. After a failover this halves the requests of
// every client that reaches the new write region with its old route: at
// 1000 partitions that burst is what saturated the agents (issue 16).
// An unknown epoch (0) is still redirected: such a client has no route.
func (r *Replica) redirect(reqEpoch Epoch) error {
	e := r.redirectOf(reqEpoch)
	if e == nil {
		return nil
	}
	r.h.guards.Fire(redirectGuard(e.Reason))
	return e
}

// redirectOf is redirect's rule without counting its guard (serveErr
// asks it for checkers): nil when this replica serves a request of
// reqEpoch.
func (r *Replica) redirectOf(reqEpoch Epoch) *RedirectError {
	e := &RedirectError{Partition: r.id, Epoch: r.epoch, WriteRegion: r.writeRegion, RequestEpoch: reqEpoch}
	switch {
	case reqEpoch < r.epoch && reqEpoch != 0 && r.role == RoleLeader:
		return nil
	case reqEpoch < r.epoch:
		e.Reason = ReasonStaleEpoch
	case reqEpoch > r.epoch:
		e.Reason = ReasonReplicaBehind
	case r.role == RolePaused:
		e.Reason = ReasonPaused
	case r.role != RoleLeader:
		e.Reason = ReasonNotWriteRegion
	default:
		return nil
	}
	return e
}

// serveErr is the rule a strong read at the replica's own epoch is
// admitted by, as far as its role and lease go (admitRead: the redirect,
// then the lease): nil when it would serve one at now. Whether its state
// is readable yet (a snapshot, a read barrier) is left out: a replica
// waiting for that still serves on its lease a moment later.
func (r *Replica) serveErr(now time.Duration) error {
	if e := r.redirectOf(r.epoch); e != nil {
		return e
	}
	return r.leaseErr(now)
}

// redirectGuard names the guard a redirect of reason why fires.
func redirectGuard(why RedirectReason) guard.Name {
	switch why {
	case ReasonStaleEpoch:
		return guard.ReplicaStaleRoute
	case ReasonReplicaBehind:
		return guard.ReplicaBehindRedirect
	case ReasonPaused:
		return guard.ReplicaPausedRedirect
	}
	return guard.ReplicaNotWriteRegion
}

// ----- client writes -----

func (r *Replica) clientWrite(now time.Duration, req *WriteRequest) {
	if err := r.h.checkOp(req); err != nil {
		r.h.reply(Reply{Kind: ReplyWrite, Partition: r.id, Ref: req.Ref, Err: err})
		return
	}
	if req.PollWait > 0 && r.redirectOf(req.Epoch) != nil && r.park(now, req) {
		return // a poll with nothing new to tell yet (poll.go)
	}
	if err := r.redirect(req.Epoch); err != nil {
		r.h.reply(Reply{Kind: ReplyWrite, Partition: r.id, Ref: req.Ref, Err: err})
		return
	}
	if r.h.cfg.LeaseGatesWrites && !r.leased(now) {
		r.h.guards.Fire(guard.LeaseGateWrite)
		r.h.reply(Reply{Kind: ReplyWrite, Partition: r.id, Ref: req.Ref, Err: fmt.Errorf("write refused: %w", r.leaseErr(now))})
		return
	}
	l := r.leader
	if n := int(r.last-r.commit) + len(l.held) + l.casQueued(); n >= r.h.cfg.MaxPendingWrites {
		r.h.reply(Reply{Kind: ReplyWrite, Partition: r.id, Ref: req.Ref,
			Err: backpressureErr(r.id, n, r.h.cfg.MaxPendingWrites)})
		return
	}
	if r.level.Consistency == BoundedStaleness && (len(l.held) > 0 || !r.admitBounded(now)) {
		l.held = append(l.held, heldWrite{req: cloneWrite(req), at: now})
		return
	}
	r.assign(now, req)
}

func cloneWrite(req *WriteRequest) WriteRequest {
	c := *req
	c.Key = append([]byte(nil), req.Key...)
	if req.Value != nil {
		c.Value = append([]byte(nil), req.Value...)
	}
	if req.If != nil {
		cond := *req.If
		c.If = &cond
	}
	return c
}

// assign gives the write the next LSN and queues it for persistence and
// replication; it is acknowledged once the commit rule holds. A
// compare-and-set is decided first (assignCAS).
func (r *Replica) assign(now time.Duration, req *WriteRequest) {
	if req.If != nil {
		r.assignCAS(now, req)
		return
	}
	r.assignOp(now, req)
}

// assignOp appends the write's op to the log.
func (r *Replica) assignOp(now time.Duration, req *WriteRequest) {
	op := Op{LSN: r.last + 1, Epoch: r.epoch, Delete: req.Delete, Key: req.Key}
	if !req.Delete {
		op.Value = req.Value
		if op.Value == nil {
			op.Value = []byte{}
		}
	}
	r.appendOp(op, now)
	r.leader.pending = append(r.leader.pending, pendingWrite{lsn: op.LSN, ref: req.Ref, at: now})
}

// ----- bounded staleness -----

// boundedFollower reports whether f's lag limits writes: members, and any
// follower that may still hold a freshness grant (it may serve reads),
// ours or, after a graceful promotion, the previous write region's.
func (r *Replica) boundedFollower(now time.Duration, f *follower) bool {
	return r.wq.IsMember(f.region) || f.mayHold(now, r.grantWindow())
}

// keepDeparted remembers the grant of a follower that leaves the replica
// set (a quorum change, or a promotion whose quorum leaves it out): it
// hears nothing more, not even that it left, so it may serve bounded reads
// at its last known match until its grant ends, and its lag must go on
// holding writes until then (lag). A write quorum shrink needs none of
// this: the follower stays in l.followers, its grant state with it.
func (r *Replica) keepDeparted(now time.Duration, d departedGrant) {
	if !d.mayHold(now, r.grantWindow()) {
		return
	}
	for i := range r.leader.departed {
		if o := &r.leader.departed[i]; o.region == d.region {
			// Keep the worst of both: the older match, the later end.
			o.match = min(o.match, d.match)
			o.priorGrantUntil = max(o.priorGrantUntil, d.priorGrantUntil)
			if d.granted && (!o.granted || d.grantSentAt > o.grantSentAt) {
				o.granted, o.grantSentAt = true, d.grantSentAt
			}
			return
		}
	}
	r.leader.departed = append(r.leader.departed, d)
}

// rejoin moves the departed grant of reg, if any, back into its follower
// state f (reg rejoined the replica set): its lag counts from match 0
// until it answers, and the grant until it ends.
func (r *Replica) rejoin(f *follower) {
	l := r.leader
	for i := range l.departed {
		if d := &l.departed[i]; d.region == f.region {
			f.grantState = d.grantState
			l.departed = slices.Delete(l.departed, i, i+1)
			return
		}
	}
}

// pruneDeparted forgets departed followers whose grants have surely ended.
func (r *Replica) pruneDeparted(now time.Duration) {
	w := r.grantWindow()
	r.leader.departed = slices.DeleteFunc(r.leader.departed, func(d departedGrant) bool { return !d.mayHold(now, w) })
}

// grantWindow is how long after a grant left (on this clock) the follower
// may still serve reads on it: T, lengthened by the drift margin.
func (r *Replica) grantWindow() time.Duration {
	return time.Duration(float64(r.level.StalenessTime) * (1 + r.h.cfg.DriftMargin))
}

// inheritGrants counts every follower but prev as one that may hold a
// freshness grant of an earlier write region until now plus the grant
// window. A graceful promotion needs it: the previous write region was
// paused, not waited out, and its grants (issued before the pause, so
// before now) may run for up to T after it; while one does, the follower
// serves reads, so the K-ops hold must count its lag, of which this write
// region knows nothing yet (match 0: the worst case). A follower's first
// answer in this epoch ends it (onAppendResp). prev, the write region of
// the epoch just before if it surely took that epoch (the promoted replica
// heard it lead), holds no grant: it dropped its grants when it took that
// epoch and heard no other region since; a region merely named write
// region (a switchover target cut off before it promoted) may still hold
// one. An ordinary takeover waits for the old lease plus the drift bound,
// and grants never outlive the lease, so it needs none of this.
func (r *Replica) inheritGrants(now time.Duration, prev Region) {
	until := now + r.grantWindow()
	for i := range r.leader.followers {
		if f := &r.leader.followers[i]; f.region != prev {
			f.priorGrantUntil = until
		}
	}
}

// assumeGranted counts every follower as granted just now: a write
// region recovered from its store forgot which followers it granted
// freshness before the restart, and a grant of its own epoch survives
// the follower's answers, so only time ends it (boundedFollower).
func (r *Replica) assumeGranted(now time.Duration) {
	for i := range r.leader.followers {
		f := &r.leader.followers[i]
		f.granted, f.grantSentAt = true, now
	}
}

// grantFor returns how long a freshness grant echoed now may last from the
// follower's probe: T, cut to what remains of this write region's lease;
// 0 (no grant) unless it leads its epoch under a lease that holds and is
// validated for the epoch. A grant promises that the echoed last LSN
// covered every op of the partition when the echo left; only the lease
// rules out another write region (a takeover waits for the lease plus the
// drift bound), and a paused write region may already have been succeeded
// by the switchover it paused for.
func (r *Replica) grantFor(now time.Duration) time.Duration {
	if r.role != RoleLeader {
		return 0
	}
	if r.leaseErr(now) != nil {
		r.h.guards.Fire(guard.LeaseGateGrant)
		return 0
	}
	return min(r.level.StalenessTime, r.leaseUntil-now)
}

// lag returns the worst replication lag among bounded followers: ops
// behind, and the age of the oldest op they lack.
func (r *Replica) lag(now time.Duration) (ops uint64, age time.Duration) {
	for i := range r.leader.followers {
		f := &r.leader.followers[i]
		if r.boundedFollower(now, f) {
			ops, age = r.lagOf(now, f.match, ops, age)
		}
	}
	w := r.grantWindow()
	for i := range r.leader.departed {
		if d := &r.leader.departed[i]; d.mayHold(now, w) {
			ops, age = r.lagOf(now, d.match, ops, age)
		}
	}
	return ops, age
}

// lagOf folds the lag of a follower at match into ops and age.
func (r *Replica) lagOf(now time.Duration, match LSN, ops uint64, age time.Duration) (uint64, time.Duration) {
	if match >= r.last {
		return ops, age
	}
	ops = max(ops, uint64(r.last-match))
	if at, ok := r.assignedAt(match + 1); ok {
		age = max(age, now-at)
	} else if match+1 <= r.tailBase {
		// Older than the in-memory tail: assume the worst.
		age = max(age, r.level.StalenessTime)
	} else {
		// Assigned by an earlier write region: no later than our promotion.
		age = max(age, now-r.leaderSince)
	}
	return ops, age
}

func (r *Replica) assignedAt(lsn LSN) (time.Duration, bool) {
	if lsn <= r.tailBase || lsn > r.last || r.tailAt == nil {
		return 0, false
	}
	return r.tailAt[lsn-r.tailBase-1], true
}

// admitBounded reports whether one more write keeps every bounded follower
// within K ops, and none has an op older than T outstanding.
func (r *Replica) admitBounded(now time.Duration) bool {
	ops, age := r.lag(now)
	return ops+1 <= r.level.StalenessOps && age < r.level.StalenessTime
}

// releaseHeld admits held writes that fit now and rejects those held too long.
func (r *Replica) releaseHeld(now time.Duration) {
	l := r.leader
	for len(l.held) > 0 {
		hw := &l.held[0]
		if r.admitBounded(now) {
			if int(r.last-r.commit) >= r.h.cfg.MaxPendingWrites {
				return
			}
			req := hw.req
			l.held = l.held[1:]
			r.assign(now, &req)
			continue
		}
		if now-hw.at < r.level.StalenessHold {
			return
		}
		ops, age := r.lag(now)
		r.h.reply(Reply{Kind: ReplyWrite, Partition: r.id, Ref: hw.req.Ref, Err: &StalenessError{
			Partition: r.id, LagOps: ops, LagTime: age, MaxOps: r.level.StalenessOps,
			MaxTime: r.level.StalenessTime, Held: now - hw.at}})
		l.held = l.held[1:]
	}
	if len(l.held) == 0 {
		l.held = nil
	}
}

// ----- commit -----

// advanceCommit recomputes the commit position by the level's rule and
// acknowledges the writes it covers.
func (r *Replica) advanceCommit() {
	if r.h.cfg.LeaseGatesWrites && !r.leased(r.h.now) {
		// Nothing commits without the lease: a takeover of a write region
		// whose lease lapsed may start its epoch below any op it still
		// replicates, and a committed op can never be set aside (under
		// strong consistency it is applied without undo everywhere, so
		// the new write region could not promote: the background-fault
		// sweep wedged partitions that way). The writes waiting for a
		// commit get an unknown outcome now instead of never.
		if r.last > r.commit {
			r.h.guards.Fire(guard.LeaseGateAck)
		}
		r.withholdPending()
		r.leader.commitHeld = true
		return
	}
	r.leader.commitHeld = false
	var c LSN
	if r.level.Consistency == Strong {
		c = r.strongCommit()
	} else {
		c = r.durable
	}
	r.setStable()
	if c <= r.commit {
		return
	}
	if c > r.last {
		r.fail("commit %d beyond last %d", c, r.last)
		return
	}
	r.commit = c
	r.markDirty()
	l := r.leader
	if len(l.casDue) > 0 {
		r.releaseCASDue(r.h.now)
	}
	n := 0
	for n < len(l.pending) && l.pending[n].lsn <= c {
		p := &l.pending[n]
		e, _ := r.epochAt(p.lsn)
		r.h.reply(Reply{Kind: ReplyWrite, Partition: r.id, Ref: p.ref, Token: Token{Epoch: e, LSN: p.lsn}})
		n++
	}
	if n > 0 {
		l.pending = append(l.pending[:0], l.pending[n:]...)
		if len(l.pending) == 0 {
			l.pending = nil
		}
	}
}

// withholdPending answers every write waiting for its commit with an
// unknown outcome (it may still commit, if the lease comes back first).
func (r *Replica) withholdPending() {
	l := r.leader
	if l == nil || len(l.pending) == 0 {
		return
	}
	for i := range l.pending {
		p := &l.pending[i]
		r.h.reply(Reply{Kind: ReplyWrite, Partition: r.id, Ref: p.ref,
			Err: fmt.Errorf("%w: %w", ErrLeaseExpired, r.unknownOutcome(p.lsn))})
		r.h.stats.AcksWithheld++
	}
	l.pending = nil
}

// matchOf returns how far region reg's log is known to equal ours.
func (r *Replica) matchOf(reg Region) LSN {
	if reg == r.region() {
		return r.durable
	}
	if f := r.follower(reg); f != nil {
		return f.match
	}
	return 0
}

// strongCommit is the strong commit rule: the greatest LSN durable in every
// member of the write quorum and in at least MinDurability replicas
// (quorum.WriteQuorum.Commits), among the candidate positions.
func (r *Replica) strongCommit() LSN {
	best := r.commit
	consider := func(c LSN) {
		if c <= best {
			return
		}
		if r.wq.Commits(func(reg Region) bool { return r.matchOf(reg) >= c }) {
			best = c
		} else if r.oneMemberShort(c) {
			r.h.guards.Fire(guard.StrongCommitMemberMissing)
		}
	}
	consider(r.durable)
	for i := range r.leader.followers {
		consider(r.leader.followers[i].match)
	}
	return best
}

// oneMemberShort reports whether c waits for exactly one member of a
// write quorum of three or more while the minimum durability holds it
// (a majority rule would have committed it: the strong rule must not).
func (r *Replica) oneMemberShort(c LSN) bool {
	if len(r.wq.Members) < 3 {
		return false
	}
	short, held := 0, 0
	for _, m := range r.wq.Members {
		if r.matchOf(m) < c {
			short++
		} else {
			held++
		}
	}
	return short == 1 && held >= r.wq.MinDurability
}

// setStable sets stable to the position durable on every replica.
func (r *Replica) setStable() {
	s := r.durable
	for i := range r.leader.followers {
		s = min(s, r.leader.followers[i].match)
	}
	if s > r.stable {
		r.stable = s
	}
}

// ----- replication -----

func (r *Replica) flushLeader(now time.Duration) {
	l := r.leader
	if len(l.held) > 0 {
		r.releaseHeld(now)
	}
	for i := range l.followers {
		f := &l.followers[i]
		if f.unreachable {
			continue // its window is resent when it is back
		}
		if f.snap != nil || f.needSnap {
			r.flushSnapshot(now, f)
			continue
		}
		sent := r.sendEntries(now, f)
		if !sent && f.wantGrant {
			if r.grantFor(now) > 0 {
				r.sendAppend(now, f, f.heartbeatPrev(), nil)
			} else {
				// Nothing to grant; the follower asks again on its next
				// refused read.
				f.wantGrant = false
			}
		}
	}
}

// sendEntries sends ops from f.next within the window. It reports whether
// it sent anything.
func (r *Replica) sendEntries(now time.Duration, f *follower) bool {
	cfg := &r.h.cfg
	sent := false
	if f.inflight() == 0 && f.next <= r.last {
		// The retransmit timer measures from the first op in flight.
		f.lastAck = now
	}
	for f.next <= r.last && f.inflight() < cfg.MaxInflightOps {
		prev := f.next - 1
		if prev < r.logBase {
			f.needSnap = true
			r.flushSnapshot(now, f)
			return sent
		}
		if f.next <= r.tailBase {
			if !f.fetching {
				f.fetching = true
				room := cfg.MaxInflightOps - f.inflight()
				r.h.fetch(Fetch{Kind: FetchLog, Partition: r.id, To: f.region, From: f.next,
					MaxOps: min(cfg.MaxBatchOps, room), MaxBytes: cfg.MaxBatchBytes, Epoch: r.epoch})
			}
			return sent
		}
		end := min(r.last, f.next+LSN(cfg.MaxBatchOps)-1, f.heartbeatPrev()+LSN(cfg.MaxInflightOps))
		size := 0
		n := LSN(0)
		for lsn := f.next; lsn <= end; lsn++ {
			s := r.op(lsn).wireSize()
			if n > 0 && size+s > cfg.MaxBatchBytes {
				break
			}
			size += s
			n++
		}
		from := f.next - r.tailBase - 1
		entries := r.tail[from : from+n : from+n]
		r.sendAppend(now, f, prev, entries)
		f.next += n
		sent = true
	}
	return sent
}

// sendAppend sends one MsgAppend (entries may be empty: a heartbeat).
func (r *Replica) sendAppend(now time.Duration, f *follower, prev LSN, entries []Op) {
	pe, ok := r.epochAt(prev)
	if !ok {
		f.needSnap = true
		return
	}
	commit := r.sentCommitPos()
	m := Message{
		Type: MsgAppend, Partition: r.id, Epoch: r.epoch, From: r.region(), To: f.region,
		Prev: prev, PrevEpoch: pe, Entries: entries, Commit: commit, Stable: r.stable,
		LeaderLast: r.last, Member: r.wq.IsMember(f.region), WantAck: r.wantAck(f, prev, commit),
	}
	// Grants go to members only: only they serve bounded reads (fresh),
	// and a grant sent makes the follower's lag hold writes for T.
	if f.probeNew && m.Member {
		if g := r.grantFor(now); g > 0 {
			m.EchoBoot, m.Echo, m.Grant = f.probeBoot, f.probe, g
			f.probeNew = false
			f.grantSentAt, f.granted = now, true
		}
	}
	f.wantGrant = false
	f.sentCommit, f.sentStable = max(r.commit, commit), r.stable
	f.lastSend = now
	r.h.send(m)
}

// sentCommitPos is the commit position a message to a follower carries.
// Messages leave only after the Ready's writes are durable, so under the
// weaker levels (commit = durable in the write region) every op assigned
// so far is committed by the time one arrives.
func (r *Replica) sentCommitPos() LSN {
	if r.level.Consistency != Strong {
		return r.last
	}
	return r.commit
}

// unconfirmed reports whether f has not confirmed the commit position.
func (r *Replica) unconfirmed(f *follower) bool { return f.ackCommit < r.sentCommitPos() }

// wantAck: a message to f must be answered, because the write region does
// not know that f matches up to prev and to its last op, or that f has the
// commit position it carries.
func (r *Replica) wantAck(f *follower, prev, commit LSN) bool {
	return f.match < prev || f.match < r.last || f.ackCommit < commit
}

// onFetchLog sends ops read from the store to the follower that needed them.
func (r *Replica) onFetchLog(now time.Duration, res *FetchResult) {
	f := r.follower(res.Fetch.To)
	if f == nil {
		return
	}
	f.fetching = false
	r.markDirty()
	if res.Err != nil {
		r.h.logger().Error("partition: log fetch failed", "partition", r.id, "follower", f.region, "err", res.Err)
		return
	}
	if res.Fetch.From != f.next || len(res.Ops) == 0 {
		if len(res.Ops) == 0 && f.next-1 < r.logBase {
			f.needSnap = true
		}
		return // the follower moved on (or the ops were compacted); flush retries
	}
	ops := res.Ops
	if last := ops[len(ops)-1].LSN; last > r.last {
		// Cannot happen: the store holds no ops past our log end.
		r.fail("fetched op %d beyond last %d", last, r.last)
		return
	}
	r.sendAppend(now, f, f.next-1, ops)
	f.next += LSN(len(ops))
}

func (r *Replica) onAppendResp(now time.Duration, m *Message) {
	f := r.follower(m.From)
	if f == nil {
		return
	}
	backedOff := r.heard(f)
	// It answers in our epoch: it adopted it, and so holds no grant of an
	// older one.
	f.priorGrantUntil = 0
	if m.ProbeBoot != 0 && f.probeBoot != 0 && m.ProbeBoot != f.probeBoot {
		// The follower restarted: it holds what it made durable, which
		// is every op it acknowledged but not every commit and stable
		// position sent to it (the last may have been lost while it was
		// down). Send them again: its match may already equal our last,
		// and nothing else would.
		f.sentCommit, f.sentStable, f.ackCommit = 0, 0, 0
		r.markDirty()
	}
	if m.ProbeBoot != 0 && (m.ProbeBoot != f.probeBoot || m.Probe > f.probe) {
		f.probeBoot, f.probe, f.probeNew = m.ProbeBoot, m.Probe, true
	}
	if m.WantGrant {
		f.wantGrant = true
		r.markDirty()
	}
	if m.NeedSnapshot {
		if f.snap == nil {
			f.needSnap = true
		} else if f.snap.seq > 0 || f.snap.chunk != nil {
			f.snap = nil // the follower lost the install: start over
			f.needSnap = true
		}
		r.markDirty()
		return
	}
	if m.Success {
		f.ackCommit = max(f.ackCommit, min(m.Commit, r.commit))
		if m.Match > r.last {
			r.fail("follower %s claims match %d beyond last %d in epoch %d", f.region, m.Match, r.last, r.epoch)
			return
		}
		if m.Match > f.match {
			f.match = m.Match
			f.lastAck = now
			r.markDirty()
		}
		if f.next <= f.match {
			f.next = f.match + 1
		}
		if backedOff && f.snap == nil && f.inflight() > 0 {
			r.resendWindow(now, f)
		}
		r.advanceCommit()
		if len(r.leader.held) > 0 {
			r.markDirty()
		}
		return
	}
	r.h.stats.Mismatches++
	// Mismatch: the follower's log diverges at or before Prev. Its hint is
	// a position (LSN, epoch there) in its log; our log can equal its log at
	// most up to the end of that epoch in our history.
	h := min(m.Hint, r.last)
	next := min(h, r.hist.endOf(m.HintEpoch, r.last)) + 1
	if m.Hint <= r.last {
		e, ok := r.epochAt(m.Hint)
		if ok && e == m.HintEpoch {
			next = m.Hint + 1
		} else if ok && e > m.HintEpoch && next == h+1 && h == m.Hint {
			// Our history claims ops of epochs <= HintEpoch up to h, yet
			// our op at h is of another epoch: resending would loop.
			r.fail("epoch history inconsistent at LSN %d (epoch %d here, follower %s has %d)", h, e, f.region, m.HintEpoch)
			return
		}
	}
	if next <= f.match {
		next = f.match + 1
	}
	if next < f.next {
		f.next = next
		f.floor = min(f.floor, next)
		f.lastReset = now
		r.markDirty()
	}
	if backedOff && f.snap == nil && f.inflight() > 0 {
		r.resendWindow(now, f)
	}
}

func (r *Replica) tickLeader(now time.Duration) {
	cfg := &r.h.cfg
	l := r.leader
	for i := range l.followers {
		f := &l.followers[i]
		if f.unreachable {
			continue
		}
		if f.snap != nil {
			r.tickSnapshot(now, f)
			continue
		}
		// A backed-off follower gets probes only: resending a window
		// nobody acknowledges is the cost the backoff exists to avoid, and
		// its first answer rewinds the window anyway (heard).
		backoff := f.contactBackoff(cfg)
		if backoff == 0 && f.inflight() > 0 && now-f.lastAck >= cfg.RetransmitTimeout && now-f.lastReset >= cfg.RetransmitTimeout {
			r.resendWindow(now, f)
			f.contacted()
		}
		// Heartbeats carry commit positions, and keep contacting a follower
		// not known to be caught up (it may not know this epoch yet).
		if now-f.lastSend >= max(cfg.HeartbeatInterval, backoff) && (r.unconfirmed(f) || f.sentStable < r.stable || f.match < r.last) {
			prev := f.heartbeatPrev()
			r.sendAppend(now, f, prev, nil)
			if r.wantAck(f, prev, r.sentCommitPos()) { // the heartbeat asks for an answer (WantAck)
				f.contacted()
			}
			r.h.stats.Heartbeats++
			r.markDirty()
		}
	}
	// Commit timeouts: the op stays in the log; the client learns the
	// outcome is unknown.
	n := 0
	for n < len(l.pending) && now-l.pending[n].at >= cfg.CommitTimeout {
		r.h.reply(Reply{Kind: ReplyWrite, Partition: r.id, Ref: l.pending[n].ref, Err: r.unknownOutcome(l.pending[n].lsn)})
		n++
	}
	if n > 0 {
		l.pending = append(l.pending[:0], l.pending[n:]...)
	}
	r.pruneDeparted(now)
	if len(l.held) > 0 {
		r.markDirty()
	}
}

// leaderDeadline returns the next time tickLeader has work.
func (r *Replica) leaderDeadline(now time.Duration) time.Duration {
	cfg := &r.h.cfg
	l := r.leader
	var d time.Duration
	at := func(t time.Duration) {
		if t > 0 && (d == 0 || t < d) {
			d = t
		}
	}
	for i := range l.followers {
		f := &l.followers[i]
		if f.unreachable {
			continue
		}
		if f.snap != nil {
			at(f.snap.sentAt + cfg.RetransmitTimeout)
			continue
		}
		backoff := f.contactBackoff(cfg)
		if f.inflight() > 0 && backoff == 0 {
			at(max(f.lastAck, f.lastReset) + cfg.RetransmitTimeout)
		}
		if r.unconfirmed(f) || f.sentStable < r.stable || f.match < r.last {
			at(f.lastSend + max(cfg.HeartbeatInterval, backoff))
		}
	}
	if len(l.pending) > 0 {
		at(l.pending[0].at + cfg.CommitTimeout)
	}
	if len(l.held) > 0 {
		// Re-check admission often enough to notice grants expiring, and
		// reject at the hold deadline.
		at(min(l.held[0].at+r.level.StalenessHold, now+cfg.HeartbeatInterval))
	}
	if d == 0 {
		return 0
	}
	return max(d, now+1)
}
