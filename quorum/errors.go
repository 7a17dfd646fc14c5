package quorum

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error returned by this package wraps one of these
// (directly or through a typed error's Unwrap), so callers branch with
// errors.Is and never by matching message text.
var (
	// ErrEmptySet: a Set, Config or target membership has no members.
	ErrEmptySet = errors.New("no members")
	// ErrDuplicateMember: an ID (or Region) occurs more than once.
	ErrDuplicateMember = errors.New("duplicate member")
	// ErrUnsortedMembers: Members are not in ascending order. Sets are kept
	// canonical so that Equal, String and persisted configs are unambiguous.
	ErrUnsortedMembers = errors.New("members not sorted ascending")
	// ErrThresholdRange: Threshold is below 1 or above the member count.
	ErrThresholdRange = errors.New("threshold out of range")
	// ErrNoIntersection: some prepare quorum misses some accept quorum, so a
	// committed value could be overlooked.
	ErrNoIntersection = errors.New("prepare and accept quorums do not intersect")
	// ErrAlreadyMember: the ID or Region to add is already a member.
	ErrAlreadyMember = errors.New("already a member")
	// ErrNotMember: the ID or Region is not a member.
	ErrNotMember = errors.New("not a member")
	// ErrLastMember: removing the member would leave no acceptor.
	ErrLastMember = errors.New("cannot remove the last member")
	// ErrMembersDiffer: the plan needs a settled configuration whose prepare
	// and accept sets have the same members; a membership change is in flight.
	ErrMembersDiffer = errors.New("prepare and accept members differ (membership change in flight)")
	// ErrUnsafeTransition: proposers running two adjacent configurations
	// together could lose a committed value, and no rescan can fix that.
	ErrUnsafeTransition = errors.New("unsafe configuration transition")

	// ErrNoReplicas: a WriteQuorum has no replica regions.
	ErrNoReplicas = errors.New("no replicas")
	// ErrEmptyRegion: a region name is the empty string.
	ErrEmptyRegion = errors.New("empty region name")
	// ErrNotReplica: the region hosts no replica of the partition.
	ErrNotReplica = errors.New("not a replica")
	// ErrWriteRegion: the operation is not allowed on the write region.
	ErrWriteRegion = errors.New("region is the write region")
	// ErrMinDurabilityRange: MinDurability is below 1 or above the replica count.
	ErrMinDurabilityRange = errors.New("minimum durability out of range")
	// ErrBelowMinDurability: fewer write-quorum members (or live members)
	// than MinDurability. See BelowMinDurabilityError for the numbers.
	ErrBelowMinDurability = errors.New("below minimum durability")
	// ErrWriteRegionDown: the write region is not live; shrinking cannot help,
	// only a failover (promotion of another member) can.
	ErrWriteRegionDown = errors.New("write region is down")
	// ErrMemberDown: a write-quorum member is down, so no write can commit
	// until it is shrunk out. See MembersDownError for the regions.
	ErrMemberDown = errors.New("write-quorum member down")
	// ErrNotCaughtUp: a region may rejoin the write quorum only once it holds
	// every committed write.
	ErrNotCaughtUp = errors.New("region not caught up")
)

// DisjointQuorumsError reports two sets that have disjoint quorums, with a
// witness pair so that operators see why a configuration was refused.
type DisjointQuorumsError struct {
	NameA, NameB string // field names, e.g. "Config.Prepare"
	A, B         Set
	QuorumA      []ID // a quorum of A ...
	QuorumB      []ID // ... disjoint from this quorum of B
}

func (e *DisjointQuorumsError) Error() string {
	return fmt.Sprintf("quorum: %s %s and %s %s have disjoint quorums %s and %s: %v",
		e.NameA, e.A, e.NameB, e.B, formatIDs(e.QuorumA), formatIDs(e.QuorumB), ErrNoIntersection)
}

// Unwrap lets errors.Is(err, ErrNoIntersection) match.
func (e *DisjointQuorumsError) Unwrap() error { return ErrNoIntersection }

// BelowMinDurabilityError carries the numbers behind ErrBelowMinDurability.
type BelowMinDurabilityError struct {
	// Live is the number of write-quorum members that are live (Writable) or
	// that would remain after the shrink (Shrink).
	Live int
	// Min is the configured MinDurability.
	Min int
	// Shrink is the region whose removal was refused; empty for Writable.
	Shrink Region
}

func (e *BelowMinDurabilityError) Error() string {
	if e.Shrink != "" {
		return fmt.Sprintf("quorum: removing region %q would leave %d write-quorum members, below MinDurability %d: %v",
			e.Shrink, e.Live, e.Min, ErrBelowMinDurability)
	}
	return fmt.Sprintf("quorum: %d live write-quorum members, below MinDurability %d: %v",
		e.Live, e.Min, ErrBelowMinDurability)
}

// Unwrap lets errors.Is(err, ErrBelowMinDurability) match.
func (e *BelowMinDurabilityError) Unwrap() error { return ErrBelowMinDurability }

// MembersDownError lists write-quorum members that are down while enough
// members are live: writes are possible again once these are shrunk out.
type MembersDownError struct {
	Down []Region // sorted
}

func (e *MembersDownError) Error() string {
	return fmt.Sprintf("quorum: write-quorum members %s are down; shrink them out before writes can commit: %v",
		formatRegions(e.Down), ErrMemberDown)
}

// Unwrap lets errors.Is(err, ErrMemberDown) match.
func (e *MembersDownError) Unwrap() error { return ErrMemberDown }

func formatRegions(rs []Region) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(string(r))
	}
	b.WriteByte(']')
	return b.String()
}
