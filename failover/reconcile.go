package failover

import (
	"fmt"

	"github.com/fmnode/fmnode/progress"
	"github.com/fmnode/fmnode/quorum"
)

// ActionKind names a local action a replica executes after a state change.
type ActionKind uint8

const (
	// ActPromote: become write region at Epoch, continuing after AfterLSN,
	// with WriteQuorum. Ops above AfterLSN are set aside first (Truncate).
	// Graceful: see Action.
	ActPromote ActionKind = iota + 1
	// ActFence: stop accepting writes (graceful switchover). A fenced
	// write region resumes only at a new epoch (Decide's reopen), never by
	// unpausing within its epoch.
	ActFence
	// ActFollow: replicate from WriteRegion at Epoch. If TruncateAfter is
	// set, ops above it are false progress: move them to the conflict
	// record, then catch up the delta (or a snapshot if NeedsSnapshot).
	ActFollow
	// ActSetWriteQuorum: the write region adopts a changed write quorum.
	ActSetWriteQuorum
	// ActValidateLease: the replica may count the node's lease run
	// LeaseGen while it is the write region of Epoch. The Manager emits it
	// (Reconcile never does) once a register write it proposed within
	// that run committed with this region as write region of Epoch; until
	// then a regained lease serves no write and no strong read.
	ActValidateLease
)

func (k ActionKind) String() string {
	switch k {
	case ActPromote:
		return "promote"
	case ActFence:
		return "fence"
	case ActFollow:
		return "follow"
	case ActSetWriteQuorum:
		return "set-write-quorum"
	case ActValidateLease:
		return "validate-lease"
	}
	return fmt.Sprintf("ActionKind(%d)", uint8(k))
}

// Action is one step a replica takes to match the register's state.
type Action struct {
	Kind        ActionKind
	Epoch       Epoch
	WriteRegion Region
	AfterLSN    LSN
	WriteQuorum quorum.WriteQuorum
	// Truncate, when TruncateSet, tells the replica to set aside its ops
	// above TruncateAfter (false progress) into the conflict record.
	TruncateSet   bool
	TruncateAfter LSN
	Divergence    progress.Divergence
	// LeaseGen is the lease run ActValidateLease validates.
	LeaseGen uint64
	// Graceful (ActPromote): freshness grants of an earlier write region
	// may still run (openedGracefully): the epoch began without waiting
	// out the previous write region's lease (a completed or aborted
	// switchover, a reopen), or by a takeover right after such an epoch.
	// The replica promotes with partition's Host.PromoteGraceful, which
	// holds bounded-staleness writes for them. Any other takeover waits
	// for the lease plus the drift bound, and with it for every grant.
	Graceful bool
}

// LocalReplica is what a replica reports about itself.
type LocalReplica struct {
	Region      Region
	Epoch       Epoch
	LastLSN     LSN
	WriteRegion bool // it believes it is the write region at Epoch
	Fenced      bool
	WriteQuorum []Region
	// MinDurability is the replica's commit rule's (0: not reported).
	MinDurability int
	// Pending lists regions the write region counts in its commit rule
	// ahead of the register (prepared grows; see Decide): its commit rule
	// is the register's write quorum plus these.
	Pending []Region
}

// Reconcile returns the actions that bring a local replica in line with
// the register's state. It is pure and idempotent: calling it again after
// the actions took effect returns nothing, so drivers call it whenever the
// state or the replica changes.
func Reconcile(s State, local LocalReplica) ([]Action, error) {
	me := local.Region
	if local.Epoch > s.Epoch {
		return nil, fmt.Errorf("%w: replica %s at epoch %d is ahead of the state's epoch %d", ErrInvalidState, me, local.Epoch, s.Epoch)
	}
	if me == s.WriteRegion {
		if local.Epoch < s.Epoch || !local.WriteRegion {
			start := s.Table.Current().StartLSN
			a := Action{Kind: ActPromote, Epoch: s.Epoch, WriteRegion: me, AfterLSN: start, WriteQuorum: s.WriteQuorum,
				Graceful: openedGracefully(s)}
			if local.LastLSN > start {
				a.TruncateSet, a.TruncateAfter = true, start
			}
			acts := []Action{a}
			if s.Phase == PhaseSwitchover {
				acts = append(acts, Action{Kind: ActFence, Epoch: s.Epoch, WriteRegion: me})
			}
			return acts, nil
		}
		var acts []Action
		rule := s.WriteQuorum
		for _, r := range local.Pending {
			if rule.IsReplica(r) && !rule.IsMember(r) {
				if g, err := rule.Grow(r, true); err == nil {
					rule = g
				}
			}
		}
		if !equalRegions(local.WriteQuorum, rule.Members) || (local.MinDurability != 0 && local.MinDurability != rule.MinDurability) {
			acts = append(acts, Action{Kind: ActSetWriteQuorum, Epoch: s.Epoch, WriteRegion: me, WriteQuorum: rule})
		}
		if s.Phase == PhaseSwitchover && !local.Fenced {
			acts = append(acts, Action{Kind: ActFence, Epoch: s.Epoch, WriteRegion: me})
		}
		return acts, nil
	}
	if local.Epoch == s.Epoch && !local.WriteRegion {
		return nil, nil
	}
	// An older epoch, or a former write region: find the divergence point
	// from the progress table and follow the new write region from there.
	if local.Epoch == s.Epoch {
		return nil, fmt.Errorf("%w: replica %s claims write region of epoch %d, which belongs to %s", ErrInvalidState, me, s.Epoch, s.WriteRegion)
	}
	// The replica cannot know the lineage's end; the delta it is sent runs
	// from the common LSN to whatever the write region holds by then.
	div, err := s.Table.Diverge(local.Epoch, local.LastLSN, max(local.LastLSN, s.Table.Current().StartLSN))
	if err != nil {
		return nil, fmt.Errorf("failover: replica %s: %w", me, err)
	}
	a := Action{Kind: ActFollow, Epoch: s.Epoch, WriteRegion: s.WriteRegion, Divergence: div, AfterLSN: div.CommonLSN}
	if div.NeedsSnapshot || div.FalseProgressOps > 0 {
		a.TruncateSet, a.TruncateAfter = true, div.CommonLSN
	}
	return []Action{a}, nil
}

// openedGracefully reports whether freshness grants of an earlier write
// region may outlive the start of s's epoch: it began without waiting out
// the previous write region's lease (a completed or aborted switchover or
// a reopen: that region was paused, not failed), or by a takeover right
// after such an epoch. A takeover waits for its predecessor's lease plus
// the drift bound from the predecessor's last heartbeat, which may predate
// the pause of the region before it (a switchover target that died as the
// switchover committed), whose grants then run for up to T after the
// pause. A second takeover waits another lease: those grants, never
// longer than a lease, are over.
func openedGracefully(s State) bool {
	return pausedBefore(s, s.Epoch) || pausedBefore(s, s.Epoch-1)
}

// pausedBefore reports whether epoch e began without waiting out the
// previous write region's lease. The epoch's first transition in the
// history opened it, unless the bounded history lost it; then it counts
// as such (that costs a bounded write hold, the other way a stale read).
// The first epoch had no previous write region.
func pausedBefore(s State, e Epoch) bool {
	if e <= 1 {
		return false
	}
	for _, t := range s.History {
		if t.Epoch == e {
			return t.Kind != DecideFailover
		}
	}
	return true
}

func equalRegions(a, b []Region) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
