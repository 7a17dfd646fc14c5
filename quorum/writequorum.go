package quorum

import (
	"fmt"
	"slices"
)

// Region names a region that hosts a replica of a partition.
type Region string

// WriteQuorum is the synchronous write-quorum set of one partition: the
// data-plane counterpart of Config, in the style of Kafka's in-sync replica
// set with min.insync.replicas and PacificA's configuration.
//
// A write commits once it is durable in every member (and in at least
// MinDurability regions). Because every committed write is in every member,
// any member can take over as write region without losing a committed write;
// that is what makes shrinking safe and what CanPromote checks. Shrinking
// trades durability for availability, so it stops at MinDurability members;
// growing back requires the returning region to hold every committed write.
type WriteQuorum struct {
	Replicas      []Region // every region that hosts a replica, sorted
	WriteRegion   Region   // must be in Members
	Members       []Region // current write-quorum set, sorted, subset of Replicas, contains WriteRegion
	MinDurability int      // configured minimum number of members (>=1, <= len(Replicas))
}

// Validate reports the first broken rule, naming the field.
func (w WriteQuorum) Validate() error {
	if len(w.Replicas) == 0 {
		return fmt.Errorf("quorum: WriteQuorum.Replicas is empty: %w", ErrNoReplicas)
	}
	if err := validateRegions("WriteQuorum.Replicas", w.Replicas); err != nil {
		return err
	}
	if w.MinDurability < 1 || w.MinDurability > len(w.Replicas) {
		return fmt.Errorf("quorum: WriteQuorum.MinDurability %d not in [1, %d replicas]: %w",
			w.MinDurability, len(w.Replicas), ErrMinDurabilityRange)
	}
	if w.WriteRegion == "" {
		return fmt.Errorf("quorum: WriteQuorum.WriteRegion: %w", ErrEmptyRegion)
	}
	if !slices.Contains(w.Replicas, w.WriteRegion) {
		return fmt.Errorf("quorum: WriteQuorum.WriteRegion %q not in Replicas %s: %w",
			w.WriteRegion, formatRegions(w.Replicas), ErrNotReplica)
	}
	if err := validateRegions("WriteQuorum.Members", w.Members); err != nil {
		return err
	}
	for _, m := range w.Members {
		if !slices.Contains(w.Replicas, m) {
			return fmt.Errorf("quorum: WriteQuorum.Members region %q not in Replicas %s: %w",
				m, formatRegions(w.Replicas), ErrNotReplica)
		}
	}
	if !slices.Contains(w.Members, w.WriteRegion) {
		return fmt.Errorf("quorum: WriteQuorum.WriteRegion %q not in Members %s: %w",
			w.WriteRegion, formatRegions(w.Members), ErrNotMember)
	}
	if len(w.Members) < w.MinDurability {
		return fmt.Errorf("quorum: WriteQuorum.Members has %d regions, below MinDurability %d: %w",
			len(w.Members), w.MinDurability, ErrBelowMinDurability)
	}
	return nil
}

// validateRegions checks names are non-empty, distinct and ascending.
func validateRegions(field string, rs []Region) error {
	for i, r := range rs {
		if r == "" {
			return fmt.Errorf("quorum: %s[%d]: %w", field, i, ErrEmptyRegion)
		}
		if i == 0 {
			continue
		}
		switch prev := rs[i-1]; {
		case prev == r:
			return fmt.Errorf("quorum: %s has %q twice: %w", field, r, ErrDuplicateMember)
		case prev > r:
			return fmt.Errorf("quorum: %s not ascending: %q before %q: %w", field, prev, r, ErrUnsortedMembers)
		}
	}
	return nil
}

// IsMember reports whether r is in the write quorum.
func (w WriteQuorum) IsMember(r Region) bool {
	return slices.Contains(w.Members, r)
}

// IsReplica reports whether r hosts a replica.
func (w WriteQuorum) IsReplica(r Region) bool {
	return slices.Contains(w.Replicas, r)
}

// Commits reports whether a write durable in exactly the regions for which
// durable(r) is true is committed under strong consistency: durable in every
// member AND in at least MinDurability replica regions. For a valid quorum
// the second condition follows from the first; it is checked anyway so that
// a malformed quorum (say, Members emptied by a bug) can never commit a write
// that lives nowhere. No allocation.
func (w WriteQuorum) Commits(durable func(Region) bool) bool {
	if len(w.Members) == 0 || w.MinDurability < 1 {
		return false
	}
	for _, m := range w.Members {
		if !durable(m) {
			return false
		}
	}
	n := 0
	for _, r := range w.Replicas {
		if durable(r) {
			n++
			if n >= w.MinDurability {
				return true
			}
		}
	}
	return false
}

// Writable reports whether writes accepted now can commit, or why not:
//   - the quorum is invalid: its validation error;
//   - the write region is down: ErrWriteRegionDown (a failover is needed);
//   - fewer live members than MinDurability: *BelowMinDurabilityError
//     (writes stop rather than commit with less durability than configured;
//     growing back a caught-up region can restore them);
//   - some members are down but enough are live: *MembersDownError (a write
//     would wait for them; shrinking them out, see Steps, restores writes).
func (w WriteQuorum) Writable(live func(Region) bool) error {
	if err := w.Validate(); err != nil {
		return err
	}
	if !live(w.WriteRegion) {
		return fmt.Errorf("quorum: write region %q: %w", w.WriteRegion, ErrWriteRegionDown)
	}
	var down []Region
	for _, m := range w.Members {
		if !live(m) {
			down = append(down, m)
		}
	}
	if alive := len(w.Members) - len(down); alive < w.MinDurability {
		return &BelowMinDurabilityError{Live: alive, Min: w.MinDurability}
	}
	if len(down) > 0 {
		return &MembersDownError{Down: down}
	}
	return nil
}

// CanPromote reports whether region r may become write region under strong
// consistency without losing a committed write. r must be a member: every
// committed write is durable in all members, while a non-member may have
// missed writes committed after it was shrunk out. The current write region
// trivially qualifies.
func (w WriteQuorum) CanPromote(r Region) error {
	if err := w.Validate(); err != nil {
		return err
	}
	if r == w.WriteRegion {
		return nil
	}
	if !w.IsReplica(r) {
		return fmt.Errorf("quorum: cannot promote %q: %w", r, ErrNotReplica)
	}
	if !w.IsMember(r) {
		return fmt.Errorf("quorum: cannot promote %q: outside write quorum %s it may lack committed writes: %w",
			r, formatRegions(w.Members), ErrNotMember)
	}
	return nil
}

// Promote returns a copy with r as write region, if CanPromote allows it. The
// old write region stays a member (it holds every committed write); once it
// is down it can be shrunk out like any other member.
func (w WriteQuorum) Promote(r Region) (WriteQuorum, error) {
	if err := w.CanPromote(r); err != nil {
		return WriteQuorum{}, err
	}
	out := w.clone()
	out.WriteRegion = r
	return out, nil
}

// clone copies the slices so results never alias the receiver.
func (w WriteQuorum) clone() WriteQuorum {
	return WriteQuorum{
		Replicas:      slices.Clone(w.Replicas),
		WriteRegion:   w.WriteRegion,
		Members:       slices.Clone(w.Members),
		MinDurability: w.MinDurability,
	}
}
