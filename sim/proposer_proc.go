package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
)

// ErrProposerDown is returned when an operation is submitted to a proposer
// whose node is down.
var ErrProposerDown = errors.New("sim: proposer down")

// opOwner is whoever submitted an operation (a client, the membership
// coordinator, the liveness checker).
type opOwner interface {
	// opDone delivers the proposer's result.
	opDone(tag uint64, res caspaxos.Result)
	// opLost reports that the proposer crashed with the operation pending.
	opLost(tag uint64)
}

type pendingOp struct {
	owner opOwner
	tag   uint64
}

// proposerProc hosts a real caspaxos.Proposer on a node. It feeds the
// proposer the node's local (drifting) time, sends what Ready returns, and
// keeps one scheduler event armed at the proposer's next deadline.
type proposerProc struct {
	c    *Cluster
	slot int
	node int32
	inc  uint32
	id   caspaxos.NodeID
	p    *caspaxos.Proposer // nil while crashed

	timer   EventID
	nextReq caspaxos.RequestID
	pending map[caspaxos.RequestID]pendingOp
	past    caspaxos.ProposerStats // counters of crashed incarnations
}

func (pp *proposerProc) boot() error {
	c := pp.c
	// A proposer keeps nothing on disk, so a restarted one must not reuse
	// its old id: it could pick a ballot it already used, with another value.
	pp.id = caspaxos.NodeID(proposerIDBase + uint64(pp.inc)*proposerIDStride + uint64(pp.slot))
	cfg := c.cfg.Proposer
	cfg.ID = pp.id
	cfg.Quorum = c.quorum
	if cfg.Turns > 0 {
		cfg.TurnIndex = pp.slot % cfg.Turns
	}
	c.writerIDs[pp.slot] = pp.id
	if c.cfg.KnownWriters && cfg.Forward {
		cfg.ForwardWriters = c.writers
	}
	rng := SubRand(c.w.Seed, StreamProposer, uint64(pp.slot)*proposerIDStride+uint64(pp.inc))
	p, err := caspaxos.NewProposer(cfg, rng)
	if err != nil {
		return fmt.Errorf("sim: proposer slot %d: %w", pp.slot, err)
	}
	pp.p = p
	c.byID[pp.id] = pp
	return nil
}

// submit starts an operation; the result comes back through owner.
func (pp *proposerProc) submit(owner opOwner, tag uint64, key string, ch caspaxos.Change) error {
	if pp.p == nil || !pp.c.w.Up(pp.node) {
		return ErrProposerDown
	}
	pp.nextReq++
	id := pp.nextReq
	if err := pp.p.Propose(pp.c.w.Local(pp.node), id, key, ch); err != nil {
		return fmt.Errorf("sim: propose on %d: %w", pp.id, err)
	}
	pp.pending[id] = pendingOp{owner: owner, tag: tag}
	pp.flush()
	return nil
}

func (pp *proposerProc) deliver(now time.Duration, m caspaxos.Message) {
	pp.p.Step(pp.c.w.Local(pp.node), m)
	pp.flush()
}

// Fire is the proposer's timer; arg is the incarnation that armed it.
func (pp *proposerProc) Fire(now time.Duration, arg uint64) {
	if uint32(arg) != pp.inc || pp.p == nil || !pp.c.w.Live(pp.node) {
		return
	}
	pp.p.Tick(pp.c.w.Local(pp.node))
	pp.flush()
}

// flush sends what the proposer wants sent, hands results to their owners
// and re-arms the timer.
func (pp *proposerProc) flush() {
	if pp.p == nil {
		return
	}
	msgs, results := pp.p.Ready()
	for _, m := range msgs {
		pp.c.send(pp.node, m)
	}
	for _, f := range pp.p.ReadyForwards() {
		pp.c.sendForward(pp.node, f)
	}
	for _, r := range results {
		op, ok := pp.pending[r.ID]
		if !ok {
			continue
		}
		delete(pp.pending, r.ID)
		op.owner.opDone(op.tag, r)
	}
	if pp.p == nil {
		return // an owner's callback crashed us? never, but stay safe
	}
	if d, ok := pp.p.NextDeadline(); ok {
		at := pp.c.w.VirtualAt(pp.node, d)
		pp.timer = pp.c.w.Sched.Reschedule(pp.timer, at, pp.node, pp, uint64(pp.inc))
	} else {
		pp.c.w.Sched.Cancel(pp.timer)
	}
}

func (pp *proposerProc) totalStats() caspaxos.ProposerStats {
	s := pp.past
	if pp.p != nil {
		add(&s, pp.p.Stats())
	}
	return s
}

func add(t *caspaxos.ProposerStats, s caspaxos.ProposerStats) {
	t.Proposals += s.Proposals
	t.Commits += s.Commits
	t.Failures += s.Failures
	t.Unknown += s.Unknown
	t.Rounds += s.Rounds
	t.NAKs += s.NAKs
	t.FirstNAKs += s.FirstNAKs
	t.FirstRounds += s.FirstRounds
	t.Paced += s.Paced
	t.Forwards += s.Forwards
	t.ForwardsServed += s.ForwardsServed
	t.ForwardTimeouts += s.ForwardTimeouts
	t.ForwardFallbacks += s.ForwardFallbacks
	t.ForwardRedirects += s.ForwardRedirects
	t.Timeouts += s.Timeouts
	t.FastPath += s.FastPath
	t.Fenced += s.Fenced
}

// Crash loses the proposer and everything pending on it; owners hear of
// each lost operation in request order.
func (pp *proposerProc) Crash(now time.Duration) {
	if pp.p == nil {
		return
	}
	add(&pp.past, pp.p.Stats())
	pp.p = nil
	pp.c.w.Sched.Cancel(pp.timer)
	delete(pp.c.byID, pp.id)
	ids := make([]caspaxos.RequestID, 0, len(pp.pending))
	for id := range pp.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		op := pp.pending[id]
		delete(pp.pending, id)
		op.owner.opLost(op.tag)
	}
	pp.inc++
}

// Restart boots a fresh proposer under a new id.
func (pp *proposerProc) Restart(now time.Duration) {
	if err := pp.boot(); err != nil {
		pp.c.viol.add(now, ViolationRecovery, "%v", err)
	}
}

// Resume re-arms the timer whose event may have been dropped while paused.
func (pp *proposerProc) Resume(now time.Duration) { pp.flush() }
