package sim

import (
	"time"

	"github.com/fmnode/fmnode/caspaxos"
)

// pendingSync is one Ready of an acceptor waiting for its fsync: the batch
// to make durable and the replies that may leave only after it.
type pendingSync struct {
	batch caspaxos.Batch
	msgs  []caspaxos.Message
}

// maxPendingSyncs bounds an acceptor's fsync queue; beyond it requests are
// dropped as an overloaded process would shed them.
const maxPendingSyncs = 1 << 14

// acceptorProc hosts a real caspaxos.Acceptor on a node, with its disk.
// It follows the Ready contract: a batch is made durable (after a simulated
// fsync) before its replies are sent, and batches complete in order, so no
// reply of a later Ready overtakes an earlier batch.
type acceptorProc struct {
	c    *Cluster
	id   caspaxos.NodeID
	node int32
	disk *Disk
	acc  *caspaxos.Acceptor // nil while crashed
	inc  uint32

	syncs    []pendingSync
	head     int
	lastSync time.Duration
	reported bool
	// reuse is the acceptor's first ballot reuse, once reported.
	reuse error
}

func (a *acceptorProc) boot() error {
	acc, err := a.c.cfg.Factory(a.id, a.disk.State())
	if err != nil {
		return err
	}
	a.acc = acc
	return nil
}

func (a *acceptorProc) pendingSyncs() int { return len(a.syncs) - a.head }

func (a *acceptorProc) deliver(now time.Duration, m caspaxos.Message) {
	if a.acc == nil {
		return
	}
	if err := a.acc.Step(m); err != nil {
		a.c.viol.add(now, ViolationProtocol, "acceptor %d: %v", a.id, err)
		return
	}
	a.checkInvariants(now)
	if !a.acc.HasReady() {
		return
	}
	b, msgs := a.acc.Ready()
	if b.Empty() && a.pendingSyncs() == 0 {
		a.sendAll(msgs) // nothing to persist and nothing ahead of it
		return
	}
	if a.pendingSyncs() >= maxPendingSyncs {
		return
	}
	at := now + a.c.fsyncDelay()
	if at < a.lastSync {
		at = a.lastSync // one device: fsyncs complete in order
	}
	a.lastSync = at
	a.syncs = append(a.syncs, pendingSync{batch: b, msgs: msgs})
	a.c.w.Sched.At(at, a.node, a, uint64(a.inc))
}

func (a *acceptorProc) checkInvariants(now time.Duration) {
	if v := a.acc.Violation(); v != nil && !a.reported {
		a.reported = true
		a.c.viol.add(now, ViolationInvariant, "acceptor %d: %v", a.id, v)
	}
	// Every proposer here is the real core: a reused ballot is its bug.
	if _, err := a.acc.BallotReuse(); err != nil && err != a.reuse {
		a.reuse = err
		a.c.viol.add(now, ViolationInvariant, "%v", err)
	}
}

// Fire completes the oldest fsync of incarnation arg.
func (a *acceptorProc) Fire(now time.Duration, arg uint64) {
	if uint32(arg) != a.inc || a.acc == nil || a.pendingSyncs() == 0 {
		return // the incarnation that asked for it crashed: its batch is lost
	}
	s := a.syncs[a.head]
	a.syncs[a.head] = pendingSync{}
	a.head++
	if a.head == len(a.syncs) {
		a.syncs, a.head = a.syncs[:0], 0
	}
	if !s.batch.Empty() {
		if err := a.disk.Apply(s.batch); err != nil {
			// The store refused what the acceptor asked it to persist: the
			// replies promise state that is not durable, so none may leave.
			a.c.viol.add(now, ViolationInvariant, "acceptor %d: store refused its batch: %v", a.id, err)
			return
		}
		w := &a.c.w.Trace
		w.Begin(traceFsync, now)
		w.U64(uint64(a.id))
		w.U64(uint64(len(s.batch.Put)))
	}
	if a.c.w.Live(a.node) {
		a.sendAll(s.msgs)
	}
}

func (a *acceptorProc) sendAll(msgs []caspaxos.Message) {
	for _, m := range msgs {
		a.c.send(a.node, m)
	}
}

// Crash drops the acceptor's memory and every fsync still in progress.
func (a *acceptorProc) Crash(now time.Duration) {
	a.acc = nil
	a.inc++
	a.c.lostSyncs += uint64(a.pendingSyncs())
	clear(a.syncs)
	a.syncs, a.head = a.syncs[:0], 0
	a.lastSync = now
}

// Restart recovers the acceptor from its disk alone.
func (a *acceptorProc) Restart(now time.Duration) {
	if err := a.boot(); err != nil {
		a.c.viol.add(now, ViolationRecovery, "acceptor %d: %v", a.id, err)
	}
}
