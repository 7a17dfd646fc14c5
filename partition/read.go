package partition

import (
	"fmt"
	"time"

	"github.com/fmnode/fmnode/guard"
)

// clientRead admits a read by its consistency level; admitted reads are
// executed by the driver after the Ready's writes (Ready.Reads).
func (r *Replica) clientRead(now time.Duration, req *ReadRequest) {
	if err := r.admitRead(now, req); err != nil {
		r.h.reply(Reply{Kind: ReplyRead, Partition: r.id, Ref: req.Ref, Err: err})
		return
	}
	r.h.queueRead(Read{Partition: r.id, Ref: req.Ref, Key: append([]byte(nil), req.Key...)})
	r.markDirty()
}

func (r *Replica) admitRead(now time.Duration, req *ReadRequest) error {
	if len(req.Key) == 0 || len(req.Key) > r.h.cfg.MaxKeyBytes {
		return fmt.Errorf("partition %d: read key of %d bytes (bound %d): %w", r.id, len(req.Key), r.h.cfg.MaxKeyBytes, ErrTooLarge)
	}
	c := req.Consistency
	if c == 0 {
		c = r.level.Consistency
	}
	if !c.Valid() {
		return fmt.Errorf("partition %d: read consistency %d: %w", r.id, c, ErrBadRequest)
	}
	if r.needSnapshot || r.fol.snapIn != nil {
		return fmt.Errorf("partition %d region %s: installing a snapshot: %w", r.id, r.region(), ErrNotReady)
	}
	// What the Ready will have applied when the read runs.
	target := min(r.commit, r.last)
	if target < r.readableFrom {
		return fmt.Errorf("partition %d region %s: state consistent from LSN %d, applied %d: %w",
			r.id, r.region(), r.readableFrom, target, ErrNotReady)
	}
	switch c {
	case Strong:
		// A paused write region serves no strong read either (redirect,
		// ReasonPaused): the switchover it paused for may already have
		// committed and its successor acknowledged writes, and nothing
		// tells it in time; its lease does not rule that out.
		if err := r.redirect(req.Epoch); err != nil {
			return err
		}
		if err := r.leaseErr(now); err != nil {
			r.h.guards.Fire(guard.LeaseGateRead)
			return err
		}
		if r.commit < r.readBarrier {
			return fmt.Errorf("partition %d region %s: recovered ops up to %d not committed yet (commit %d): %w",
				r.id, r.region(), r.readBarrier, r.commit, ErrNotReady)
		}
	case BoundedStaleness:
		if r.role == RoleLeader {
			// The write region is within any bound of itself, as long as
			// it still is the write region: its lease says so.
			if err := r.leaseErr(now); err != nil {
				r.h.guards.Fire(guard.LeaseGateRead)
				return err
			}
			return nil
		}
		if r.role == RolePaused {
			// Not so a paused one: its successor may be writing already
			// (see Strong).
			return fmt.Errorf("partition %d region %s: paused for a switchover that may have completed: %w",
				r.id, r.region(), ErrNotFresh)
		}
		if r.level.StalenessTime == 0 {
			return fmt.Errorf("partition %d: bounded-staleness read of a %v partition (no bounds configured) at a follower: %w",
				r.id, r.level.Consistency, ErrBadRequest)
		}
		if !r.fresh(now, target) {
			r.fol.wantGrant = true
			r.markDirty()
			return fmt.Errorf("partition %d region %s: no valid freshness grant (fresh until %v, now %v, member %v): %w",
				r.id, r.region(), r.fol.freshUntil, now, r.fol.member, ErrNotFresh)
		}
	case Session:
		t := req.Token
		if t.LSN > target {
			return fmt.Errorf("partition %d region %s: session at %v, replica at %d: %w", r.id, r.region(), t, target, ErrSessionUnavailable)
		}
		if t.LSN > 0 {
			if e, ok := r.epochAt(t.LSN); ok && e != t.Epoch {
				return fmt.Errorf("partition %d region %s: session at %v but this replica's op %d is of epoch %d: %w",
					r.id, r.region(), t, t.LSN, e, ErrSessionUnavailable)
			}
		}
	case Eventual:
	}
	return nil
}

// fresh reports whether a follower may serve a bounded-staleness read: it
// is in the write quorum and holds a grant valid now, with the grant's LSN
// applied by the time the read runs.
func (r *Replica) fresh(now time.Duration, target LSN) bool {
	f := &r.fol
	if !f.member || r.writeRegion == "" {
		return false
	}
	if f.hasGrant && target >= f.grantNeed && now < r.grantEnd() {
		return true
	}
	return now < f.freshUntil
}

// position returns the replica's applied position as a session token.
func (r *Replica) position() Token { return Token{Epoch: r.appliedEpoch, LSN: r.applied} }
