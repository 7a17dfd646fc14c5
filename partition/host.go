package partition

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/fmnode/fmnode/guard"
	"github.com/fmnode/fmnode/quorum"
)

// Host is the pure core of one region's node: the replicas of many
// partitions, multiplexed so that their writes share one store commit and
// their messages one transport send per Ready. It has no goroutines, clock,
// randomness, network or disk; it is not safe for concurrent use.
//
// Driving it: feed Step (messages), Write and Read (clients), the control
// operations, StepFetch (store reads it asked for) and Tick (time, when
// NextDeadline says); then, when HasReady, take Ready and:
//
//  1. persist rd.Writes atomically and durably, in order (Store.Commit);
//  2. run rd.Reads and rd.Fetches against the store (ExecReads does both);
//     reads must run before the next Ready's writes are applied;
//  3. call Finish(now, rd, replies, fetched) with ExecReads' results: it
//     advances the host, steps the fetch results and returns the replies
//     to deliver now (the reads' and rd.Done);
//  4. send rd.Messages and deliver those replies.
//
// rd.Replies may be delivered at once: they depend only on state that was
// durable before the Ready. Several Readys may be in flight as long as they
// are persisted and advanced in order. Every driver runs steps 2 and 3
// through ExecReads and Finish: internal/node (the node that the daemon
// and the simulator drive), partition/node and partitiontest.
type Host struct {
	// now is the latest time a call gave the host: Advance takes none, and
	// the commit it moves is checked against the lease at this time (at
	// most a fsync old, which the drift margin a takeover waits covers).
	now    time.Duration
	cfg    Config
	log    *slog.Logger
	guards guard.Counter
	reps   map[ID]*Replica
	// byID mirrors reps for IDs below hostDenseIDs: the lookup for every
	// request, message and Ready is then one index, not a map probe.
	byID []*Replica

	dirty  []*Replica
	timers timerHeap
	rd     Ready
	// spareWrite is a write under construction a replica sealed, zeroed
	// for the next replica to build on: a Write per Ready per replica was
	// the host's largest allocation.
	spareWrite *Write

	quorums   map[string]quorum.WriteQuorum // interned, shared read-only
	violation error
	stats     HostStats
	// parked are the polls followers hold (poll.go), at most
	// Config.MaxParkedPolls.
	parked []parkedPoll

	// leaseGen is the node's current lease run; with leaseGated set a
	// replica counts its lease only when validated for that run (see
	// SetLeaseGen).
	leaseGen   uint64
	leaseGated bool
	// spare holds emptied Readys the driver handed back (Recycle), so that
	// a busy host stops allocating its output slices anew per Ready.
	spare []Ready
}

// Bounds of Ready recycling: how many spare Readys a host keeps, and the
// largest slice it keeps (a burst must not pin a large array for good).
const (
	maxSpareReadys   = 16
	maxSpareReadyCap = 1024
)

// HostStats counts what a host did; counters only grow.
type HostStats struct {
	Readys           uint64
	Writes           uint64 // partition writes handed to the store
	Messages         uint64
	StaleRejected    uint64 // messages rejected for a stale epoch
	SnapshotsStarted uint64
	SnapshotsDone    uint64
	ReadsShed        uint64 // reads refused because MaxPendingReads was reached
	Retransmits      uint64 // follower windows reset by the retransmit timer
	Mismatches       uint64 // append responses reporting a log mismatch
	Heartbeats       uint64 // appends sent without ops by the timer
	AcksWithheld     uint64 // write acks turned into unknown outcomes: the lease had lapsed
	PollsHeld        uint64 // polls a follower held for its route to move (poll.go)
	PollsReleased    uint64 // held polls answered because the route moved
	PollsExpired     uint64 // held polls answered at the end of their wait
	PollsNotHeld     uint64 // polls answered at once: MaxParkedPolls were held
}

// Ready is what a Host hands its driver. See Host for the contract.
type Ready struct {
	Writes   []Write
	Reads    []Read
	Fetches  []Fetch
	Messages []Message
	Replies  []Reply // deliver at once
	Done     []Reply // deliver after Writes are durable
}

// Empty reports whether the Ready holds nothing.
func (rd *Ready) Empty() bool {
	return len(rd.Writes) == 0 && len(rd.Reads) == 0 && len(rd.Fetches) == 0 &&
		len(rd.Messages) == 0 && len(rd.Replies) == 0 && len(rd.Done) == 0
}

// NewHost validates cfg and returns an empty host.
func NewHost(cfg Config) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Host{cfg: cfg, log: log, guards: guard.Or(cfg.Guards), reps: make(map[ID]*Replica), quorums: make(map[string]quorum.WriteQuorum)}, nil
}

// Region returns the host's region.
func (h *Host) Region() Region { return h.cfg.Region }

// Config returns the host's configuration.
func (h *Host) Config() Config { return h.cfg }

// Len returns the number of hosted partitions.
func (h *Host) Len() int { return len(h.reps) }

// Stats returns the counters.
func (h *Host) Stats() HostStats { return h.stats }

// Violation returns the first broken invariant, if any. Drivers treat it as
// fatal (the simulator fails the seed).
func (h *Host) Violation() error { return h.violation }

func (h *Host) fail(err error) {
	if h.violation == nil {
		h.violation = err
		h.log.Error("partition: invariant violated", "err", err)
	}
}

func (h *Host) logger() *slog.Logger { return h.log }

// Partitions returns the hosted partition ids, ascending.
func (h *Host) Partitions() []ID {
	ids := make([]ID, 0, len(h.reps))
	for id := range h.reps {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// internQuorum returns q with slices shared among replicas that have the
// same quorum, so that an idle partition costs a few words for it.
func (h *Host) internQuorum(q quorum.WriteQuorum) quorum.WriteQuorum {
	var b strings.Builder
	for _, r := range q.Replicas {
		b.WriteString(string(r))
		b.WriteByte(0)
	}
	b.WriteByte(1)
	for _, r := range q.Members {
		b.WriteString(string(r))
		b.WriteByte(0)
	}
	k := b.String()
	if s, ok := h.quorums[k]; ok {
		return quorum.WriteQuorum{Replicas: s.Replicas, Members: s.Members, WriteRegion: q.WriteRegion, MinDurability: q.MinDurability}
	}
	if len(h.quorums) < 4096 {
		h.quorums[k] = quorum.WriteQuorum{Replicas: slices.Clip(slices.Clone(q.Replicas)), Members: slices.Clip(slices.Clone(q.Members))}
		return h.internQuorum(q)
	}
	return quorum.WriteQuorum{Replicas: slices.Clone(q.Replicas), Members: slices.Clone(q.Members), WriteRegion: q.WriteRegion, MinDurability: q.MinDurability}
}

// Create adds a new partition replica; its records are written by the next
// Ready, and ref is answered in Ready.Done once they are durable.
func (h *Host) Create(now time.Duration, p ID, spec Spec, ref ClientRef) error {
	if _, ok := h.reps[p]; ok {
		return fmt.Errorf("partition %d: create: %w", p, ErrExists)
	}
	if err := spec.Level.Validate(); err != nil {
		return fmt.Errorf("partition %d: create: %w", p, err)
	}
	if err := spec.Quorum.Validate(); err != nil {
		return fmt.Errorf("partition %d: create: %w: %w", p, ErrBadRequest, err)
	}
	if !spec.Quorum.IsReplica(h.cfg.Region) {
		return fmt.Errorf("partition %d: create in %s, not a replica region of %v: %w", p, h.cfg.Region, spec.Quorum.Replicas, ErrBadRequest)
	}
	if len(spec.Quorum.Replicas) > maxReplicas {
		return fmt.Errorf("partition %d: create: %d replicas exceed %d: %w", p, len(spec.Quorum.Replicas), maxReplicas, ErrBadRequest)
	}
	if spec.Epoch == 0 {
		return fmt.Errorf("partition %d: create: epoch must be at least 1: %w", p, ErrBadRequest)
	}
	r := newReplica(h, p)
	r.create(now, &spec)
	h.add(p, r)
	r.doneReply(ref, nil)
	h.schedule(now, r)
	return nil
}

// Open adds a partition recovered from the store.
func (h *Host) Open(now time.Duration, rec Recovered) error {
	if _, ok := h.reps[rec.Partition]; ok {
		return fmt.Errorf("partition %d: open: %w", rec.Partition, ErrExists)
	}
	r := newReplica(h, rec.Partition)
	if err := r.recover(now, &rec); err != nil {
		return err
	}
	h.add(rec.Partition, r)
	if r.leader != nil || r.fol.announce {
		r.markDirty()
	}
	h.schedule(now, r)
	return nil
}

// Close drops a partition from the host (its durable state stays in the store).
func (h *Host) Close(p ID) {
	if r, ok := h.reps[p]; ok {
		r.dropWriteRegion()
		delete(h.reps, p)
		if int(p) < len(h.byID) {
			h.byID[p] = nil
		}
		r.h = nil
		h.dirty = slices.DeleteFunc(h.dirty, func(x *Replica) bool { return x == r })
		h.releasePolls(h.now, false) // its held polls: the partition is gone
	}
}

// hostDenseIDs bounds the partition IDs Host.byID indexes.
const hostDenseIDs = 1 << 20

// add registers replica r of partition p.
func (h *Host) add(p ID, r *Replica) {
	h.reps[p] = r
	if p < hostDenseIDs {
		if int(p) >= len(h.byID) {
			h.byID = slices.Grow(h.byID, int(p)+1-len(h.byID))[:p+1]
		}
		h.byID[p] = r
	}
}

// lookup returns the replica of partition p.
func (h *Host) lookup(p ID) (*Replica, bool) {
	if p < hostDenseIDs {
		if int(p) < len(h.byID) && h.byID[p] != nil {
			return h.byID[p], true
		}
		return nil, false
	}
	r, ok := h.reps[p]
	return r, ok
}

func (h *Host) replica(p ID) (*Replica, error) {
	r, ok := h.lookup(p)
	if !ok {
		return nil, fmt.Errorf("partition %d in %s: %w", p, h.cfg.Region, ErrUnknownPartition)
	}
	return r, nil
}

// Step handles a message from another replica. Messages for unknown
// partitions and malformed messages are dropped with an error (drivers
// count them); the protocol tolerates loss.
func (h *Host) Step(now time.Duration, m *Message) error {
	h.seen(now)
	if !m.Type.Valid() {
		return fmt.Errorf("partition %d: message type %d: %w", m.Partition, m.Type, ErrBadRequest)
	}
	if m.To != h.cfg.Region {
		return fmt.Errorf("partition %d: message for %q delivered to %q: %w", m.Partition, m.To, h.cfg.Region, ErrBadRequest)
	}
	r, err := h.replica(m.Partition)
	if err != nil {
		return err
	}
	r.step(now, m)
	h.schedule(now, r)
	return nil
}

// Write handles a client write; the reply comes in a Ready.
func (h *Host) Write(now time.Duration, req *WriteRequest) {
	h.seen(now)
	r, err := h.replica(req.Partition)
	if err != nil {
		h.reply(Reply{Kind: ReplyWrite, Partition: req.Partition, Ref: req.Ref, Err: err})
		return
	}
	r.clientWrite(now, req)
	h.schedule(now, r)
}

// Read handles a client read; the reply comes from the driver executing
// Ready.Reads, or in Ready.Replies if the read is refused.
func (h *Host) Read(now time.Duration, req *ReadRequest) {
	h.seen(now)
	r, err := h.replica(req.Partition)
	if err != nil {
		h.reply(Reply{Kind: ReplyRead, Partition: req.Partition, Ref: req.Ref, Err: err})
		return
	}
	if len(h.rd.Reads) >= h.cfg.MaxPendingReads {
		h.stats.ReadsShed++
		h.reply(Reply{Kind: ReplyRead, Partition: req.Partition, Ref: req.Ref,
			Err: fmt.Errorf("partition %d: %d reads queued: %w", req.Partition, len(h.rd.Reads), ErrBackpressure)})
		return
	}
	r.clientRead(now, req)
}

// StepFetch hands back the result of a Fetch.
func (h *Host) StepFetch(now time.Duration, res *FetchResult) {
	h.seen(now)
	r, ok := h.lookup(res.Fetch.Partition)
	if !ok || r.epoch != res.Fetch.Epoch || r.leader == nil {
		return
	}
	switch res.Fetch.Kind {
	case FetchLog:
		r.onFetchLog(now, res)
	case FetchState:
		r.onFetchState(now, res)
	case FetchKey:
		r.onFetchKey(now, res)
	}
	h.schedule(now, r)
}

// Fence stops writes of partition p at epoch e (see Replica semantics in
// doc.go). ref is answered in Ready.Done once durable.
func (h *Host) Fence(now time.Duration, p ID, e Epoch, writeRegion Region, ref ClientRef) error {
	r, err := h.replica(p)
	if err != nil {
		return err
	}
	if err := r.fence(e, writeRegion); err != nil {
		return err
	}
	r.doneReply(ref, nil)
	h.schedule(now, r)
	return nil
}

// Promote makes this host's replica of p the write region of epoch e,
// starting after LSN startAfter, with write quorum wq. It is for an epoch
// that began after the previous write region's lease plus the drift bound
// (a takeover): no freshness grant of that region can still run.
func (h *Host) Promote(now time.Duration, p ID, e Epoch, startAfter LSN, wq quorum.WriteQuorum, ref ClientRef) error {
	return h.promote(now, p, e, startAfter, wq, false, ref)
}

// PromoteGraceful is Promote for an epoch that began without waiting out
// the previous write region's lease (a graceful switchover, its abort, a
// reopen after a fence), or by a takeover right after one of those
// (failover.Action.Graceful). Followers may still hold freshness grants an
// earlier write region issued before it was paused, so under bounded
// staleness the new write region counts each follower's lag (but the
// previous write region's) against K, holding writes as for a member,
// until it answers in the new epoch or T plus the drift margin has passed.
func (h *Host) PromoteGraceful(now time.Duration, p ID, e Epoch, startAfter LSN, wq quorum.WriteQuorum, ref ClientRef) error {
	return h.promote(now, p, e, startAfter, wq, true, ref)
}

func (h *Host) promote(now time.Duration, p ID, e Epoch, startAfter LSN, wq quorum.WriteQuorum, graceful bool, ref ClientRef) error {
	r, err := h.replica(p)
	if err != nil {
		return err
	}
	if err := r.promote(now, e, startAfter, wq, graceful); err != nil {
		return err
	}
	r.doneReply(ref, nil)
	h.schedule(now, r)
	return nil
}

// Truncate removes p's log above after into the conflict records (undoing
// applied ops). If the replica cannot undo that far it records every op as
// a conflict and waits for a snapshot (Progress.NeedSnapshot).
func (h *Host) Truncate(now time.Duration, p ID, after LSN, ref ClientRef) error {
	r, err := h.replica(p)
	if err != nil {
		return err
	}
	if err := r.truncate(after); err != nil {
		return err
	}
	r.doneReply(ref, nil)
	h.schedule(now, r)
	return nil
}

// SetWriteQuorum changes p's write quorum (on its write region).
func (h *Host) SetWriteQuorum(now time.Duration, p ID, wq quorum.WriteQuorum, ref ClientRef) error {
	r, err := h.replica(p)
	if err != nil {
		return err
	}
	if err := r.setWriteQuorum(now, wq); err != nil {
		return err
	}
	r.doneReply(ref, nil)
	h.schedule(now, r)
	return nil
}

// SetLease sets the write-region lease of p until the given time (a
// stand-in until the failover issue supplies real leases). Strong reads are
// served only while now < until.
func (h *Host) SetLease(p ID, until time.Duration) error {
	r, err := h.replica(p)
	if err != nil {
		return err
	}
	r.leaseUntil = until
	r.resumeCommit()
	return nil
}

// SetLeaseAll sets the lease of every hosted partition.
func (h *Host) SetLeaseAll(until time.Duration) {
	for _, r := range h.reps {
		r.leaseUntil = until
		r.resumeCommit()
	}
}

// CatchUp makes p's write region stream its log to region reg from LSN
// from (delta), or send a snapshot if its log no longer reaches back.
func (h *Host) CatchUp(now time.Duration, p ID, reg Region, from LSN) error {
	r, err := h.replica(p)
	if err != nil {
		return err
	}
	if err := r.catchUp(now, reg, from); err != nil {
		return err
	}
	h.schedule(now, r)
	return nil
}

// LeaseErr is nil when p's replica may act on its lease at now (serve
// strong reads, acknowledge writes), and otherwise says why not, wrapping
// ErrLeaseExpired: the lease ended, or its run was not yet validated at
// the replica's epoch. The replica's own paths apply the same rule; this
// is for checkers and diagnostics.
func (h *Host) LeaseErr(p ID, now time.Duration) error {
	r, err := h.replica(p)
	if err != nil {
		return err
	}
	return r.leaseErr(now)
}

// ServeErr is nil when p's replica would serve a strong read at its own
// epoch at now by its role and its lease: it is the leading write region
// (not a follower, not paused for a switchover) and may act on its lease
// (LeaseErr). Otherwise it is the redirect or the lease error such a read
// would get. The read path applies this very rule (no guard counts
// here); checkers ask it whether a replica "serves on its lease" instead
// of keeping their own copy.
func (h *Host) ServeErr(p ID, now time.Duration) error {
	r, err := h.replica(p)
	if err != nil {
		return err
	}
	return r.serveErr(now)
}

// Progress reports p's positions.
func (h *Host) Progress(p ID) (Progress, error) {
	r, err := h.replica(p)
	if err != nil {
		return Progress{}, err
	}
	return r.progress(), nil
}

// ProgressWithoutHistory is Progress with History left nil: for drivers
// that read a replica's positions after every change it makes and have no
// use for the epoch history, which Progress copies each time. Followers
// are appended to followers[:0], which such a driver reuses.
func (h *Host) ProgressWithoutHistory(p ID, followers []FollowerProgress) (Progress, error) {
	r, err := h.replica(p)
	if err != nil {
		return Progress{}, err
	}
	return r.progressWith(false, followers), nil
}

// Tick fires the timers due at now.
func (h *Host) Tick(now time.Duration) {
	h.seen(now)
	for h.timers.Len() > 0 && h.timers[0].at <= now {
		e := h.timers.pop()
		r := e.r
		if r.h == nil || r.timerAt != e.at {
			continue // stale entry
		}
		r.timerAt = 0
		r.tick(now)
		h.schedule(now, r)
	}
	h.releasePolls(now, true)
}

// NextDeadline returns the earliest timer, if any: a replica's or the end
// of a held poll's wait.
func (h *Host) NextDeadline() (time.Duration, bool) {
	pd, pok := h.pollDeadline()
	for h.timers.Len() > 0 {
		e := h.timers[0]
		if e.r.h != nil && e.r.timerAt == e.at {
			if pok {
				return min(e.at, pd), true
			}
			return e.at, true
		}
		h.timers.pop()
	}
	return pd, pok
}

// schedule (re)arms r's timer after r changed.
func (h *Host) schedule(now time.Duration, r *Replica) {
	d := r.nextDeadline(now)
	if d == 0 || (r.timerAt != 0 && r.timerAt <= d) {
		return
	}
	r.timerAt = d
	h.timers.push(timerEntry{at: d, id: r.id, r: r})
}

// HasReady reports whether Ready would return anything.
func (h *Host) HasReady() bool { return len(h.dirty) > 0 || !h.rd.Empty() }

// Ready flushes every replica that changed and returns what the driver
// must do. now stamps the messages' send times.
func (h *Host) Ready(now time.Duration) Ready {
	h.seen(now)
	// Before the flush: a held poll served by a replica that just became
	// the write region goes out with this Ready's writes. Only a dirty
	// replica can have moved (every change of epoch, role or write region
	// marks it; Close releases on its own), so an idle Ready skips the scan.
	if len(h.dirty) > 0 {
		h.releasePolls(now, false)
	}
	for i := 0; i < len(h.dirty); i++ { // flush may dirty more replicas
		r := h.dirty[i]
		r.flush(now)
	}
	for _, r := range h.dirty {
		r.dirty = false
		if r.h == nil {
			continue
		}
		if len(r.sealed) == 0 {
			// The usual case, one write under construction and none sealed
			// before it: r.seal's result, without the sealed slice.
			if w := r.sealCur(); w != nil && !w.empty() {
				h.rd.Writes = append(h.rd.Writes, *w)
			}
			r.recycleCur()
		} else {
			r.seal()
			for i := range r.sealed {
				if !r.sealed[i].empty() {
					h.rd.Writes = append(h.rd.Writes, r.sealed[i])
				}
			}
			r.sealed = nil
		}
		if len(r.done) > 0 {
			h.rd.Done = append(h.rd.Done, r.done...)
			r.done = nil
		}
		h.schedule(now, r)
	}
	clear(h.dirty)
	h.dirty = h.dirty[:0]
	for i := range h.rd.Reads {
		rd := &h.rd.Reads[i]
		if r, ok := h.lookup(rd.Partition); ok {
			rd.Token, rd.Epoch = r.position(), r.epoch
		}
	}
	if h.cfg.LeaseGatesWrites {
		h.withholdAcksWithoutLease(now)
	}
	rd := h.rd
	h.rd = Ready{}
	if n := len(h.spare); n > 0 {
		h.rd = h.spare[n-1]
		h.spare[n-1] = Ready{}
		h.spare = h.spare[:n-1]
	}
	h.stats.Readys++
	h.stats.Writes += uint64(len(rd.Writes))
	h.stats.Messages += uint64(len(rd.Messages))
	return rd
}

// seen records the time of a call (it never goes back).
func (h *Host) seen(now time.Duration) { h.now = max(h.now, now) }

// withholdAcksWithoutLease turns write acknowledgements of a write region
// whose lease has lapsed into unknown outcomes: the write is durable in the
// write quorum, but a takeover that began after the lease may start its
// lineage before it. The drift bound the takeover waits on top of the lease
// covers the fsync between this check and the reply leaving.
func (h *Host) withholdAcksWithoutLease(now time.Duration) {
	for i := range h.rd.Replies {
		rp := &h.rd.Replies[i]
		if rp.Kind != ReplyWrite || rp.Err != nil {
			continue
		}
		r, ok := h.lookup(rp.Partition)
		if !ok || r.leased(now) {
			continue
		}
		rp.Err = fmt.Errorf("%w: %w", ErrLeaseExpired, r.unknownOutcome(rp.Token.LSN))
		rp.Token = Token{}
		h.stats.AcksWithheld++
	}
}

// Recycle hands back a Ready the driver is completely done with (writes
// committed, reads run, messages sent: nothing of it is referenced any
// more) so that the host reuses its slices. Optional: a driver that never
// calls it only allocates more.
func (h *Host) Recycle(rd *Ready) {
	// The next Ready's output is being collected already: slices it has
	// not started are adopted at once, the rest wait as a spare.
	sp := Ready{
		Writes:   adopt(&h.rd.Writes, recycled(rd.Writes)),
		Reads:    adopt(&h.rd.Reads, recycled(rd.Reads)),
		Fetches:  adopt(&h.rd.Fetches, recycled(rd.Fetches)),
		Messages: adopt(&h.rd.Messages, recycled(rd.Messages)),
		Replies:  adopt(&h.rd.Replies, recycled(rd.Replies)),
		Done:     adopt(&h.rd.Done, recycled(rd.Done)),
	}
	*rd = Ready{}
	if len(h.spare) < maxSpareReadys && (sp.Writes != nil || sp.Messages != nil || sp.Replies != nil) {
		h.spare = append(h.spare, sp)
	}
}

// adopt installs s as *dst if *dst has no array yet and reports nil;
// otherwise it returns s.
func adopt[T any](dst *[]T, s []T) []T {
	if cap(*dst) == 0 && s != nil {
		*dst = s
		return nil
	}
	return s
}

// recycled empties s for reuse (dropping what its elements reference), or
// returns nil if it is too large to keep.
func recycled[T any](s []T) []T {
	if cap(s) > maxSpareReadyCap {
		return nil
	}
	clear(s)
	return s[:0]
}

// Finish is step 3 of the Ready contract (see Host): rd's writes are
// durable and ExecReads ran its reads and fetches. It advances the host,
// hands it the fetch results and returns the replies to deliver now, in
// order: the reads' and then rd.Done.
func (h *Host) Finish(now time.Duration, rd *Ready, replies []Reply, fetched []FetchResult) []Reply {
	h.Advance(rd)
	for i := range fetched {
		h.StepFetch(now, &fetched[i])
	}
	if len(rd.Done) == 0 {
		return replies
	}
	return append(replies, rd.Done...)
}

// Advance tells the host that rd's writes are durable (Finish does it;
// call Advance alone only for a Ready with no reads, fetches or Done).
func (h *Host) Advance(rd *Ready) {
	for i := range rd.Writes {
		w := &rd.Writes[i]
		if r, ok := h.lookup(w.Partition); ok {
			r.persisted(w.mark)
		}
	}
}

// ----- outputs -----

func (h *Host) send(m Message)    { h.rd.Messages = append(h.rd.Messages, m) }
func (h *Host) reply(r Reply)     { h.rd.Replies = append(h.rd.Replies, r) }
func (h *Host) fetch(f Fetch)     { h.rd.Fetches = append(h.rd.Fetches, f) }
func (h *Host) queueRead(rd Read) { h.rd.Reads = append(h.rd.Reads, rd) }

// checkOp enforces the op bounds.
func (h *Host) checkOp(req *WriteRequest) error {
	switch {
	case len(req.Key) == 0:
		return fmt.Errorf("partition %d: empty key: %w", req.Partition, ErrBadRequest)
	case len(req.Key) > h.cfg.MaxKeyBytes:
		return fmt.Errorf("partition %d: key of %d bytes exceeds MaxKeyBytes %d: %w", req.Partition, len(req.Key), h.cfg.MaxKeyBytes, ErrTooLarge)
	case len(req.Key)+len(req.Value) > h.cfg.MaxOpBytes:
		return fmt.Errorf("partition %d: op of %d bytes exceeds MaxOpBytes %d: %w", req.Partition, len(req.Key)+len(req.Value), h.cfg.MaxOpBytes, ErrTooLarge)
	case req.Delete && len(req.Value) > 0:
		return fmt.Errorf("partition %d: delete with a value: %w", req.Partition, ErrBadRequest)
	case req.If != nil && !req.If.Valid():
		return fmt.Errorf("partition %d: a condition sets exactly one of Version and Absent: %w", req.Partition, ErrBadRequest)
	}
	return nil
}

// ----- timer heap -----

type timerEntry struct {
	at time.Duration
	id ID // r.id, kept here: ties (thousands of replicas share a deadline) compare without loading r
	r  *Replica
}

// timerHeap is a binary min-heap by (time, partition), typed so that
// pushing and popping box nothing (container/heap's interface did, once
// per timer armed).
type timerHeap []timerEntry

func (t timerHeap) Len() int { return len(t) }

func (a *timerEntry) before(b *timerEntry) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.id < b.id
}

func (t *timerHeap) push(e timerEntry) {
	*t = append(*t, e)
	h := *t
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !e.before(&h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
}

func (t *timerHeap) pop() timerEntry {
	h := *t
	top := h[0]
	n := len(h) - 1
	x := h[n]
	h[n] = timerEntry{}
	h = h[:n]
	*t = h
	if n == 0 {
		return top
	}
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && h[r].before(&h[l]) {
			c = r
		}
		if !h[c].before(&x) {
			break
		}
		h[i] = h[c]
		i = c
	}
	h[i] = x
	return top
}
