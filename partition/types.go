package partition

import (
	"fmt"
	"strconv"

	"github.com/fmnode/fmnode/quorum"
)

// ID identifies a partition. The failover register of partition p is the
// CASPaxos key RegisterKey(p) ("p/<id>").
type ID uint32

// RegisterKey returns the failover register key of the partition: "p/<id>".
func RegisterKey(p ID) string { return "p/" + strconv.FormatUint(uint64(p), 10) }

func (p ID) String() string { return strconv.FormatUint(uint64(p), 10) }

// Epoch numbers the write-region periods of a partition. Each failover opens
// a strictly greater epoch (decided by the partition's CASPaxos register),
// and each epoch has exactly one write region. Epoch 0 means "none yet".
type Epoch uint64

// LSN is a log sequence number: a partition's operations carry dense LSNs
// 1, 2, 3, ... in its lineage. LSN 0 is "before the first operation".
type LSN uint64

// Region is a region that hosts a replica.
type Region = quorum.Region

// Op is one operation of a partition's log. Ops are immutable once created:
// the core, the stores and the transports share their byte slices.
type Op struct {
	LSN    LSN
	Epoch  Epoch // epoch of the write region that assigned the LSN
	Delete bool
	Key    []byte
	Value  []byte // nil for a delete
}

// Size is the op's payload size as bounded by Config.MaxOpBytes.
func (o *Op) Size() int { return len(o.Key) + len(o.Value) }

// wireSize approximates the op's encoded size (for batch byte bounds).
func (o *Op) wireSize() int { return o.Size() + 24 }

// Token is a session token: the position (epoch, LSN) of a write or of the
// state a read observed. Session reads are served by a replica whose applied
// position has reached the token. Epoch is the epoch in which LSN was
// assigned, so a token also names the lineage it belongs to.
type Token struct {
	Epoch Epoch
	LSN   LSN
}

// Less orders tokens of one lineage by LSN, then epoch.
func (t Token) Less(u Token) bool {
	if t.LSN != u.LSN {
		return t.LSN < u.LSN
	}
	return t.Epoch < u.Epoch
}

// Max returns the greater of two tokens.
func (t Token) Max(u Token) Token {
	if t.Less(u) {
		return u
	}
	return t
}

func (t Token) String() string { return fmt.Sprintf("%d:%d", t.Epoch, t.LSN) }

// EpochRange is one row of a replica's epoch history: the ops of Epoch have
// LSNs greater than After (and up to the next row's After). It is the
// replica-local view of the progress table (package progress): After is the
// LSN the write region inherited when it was promoted.
type EpochRange struct {
	Epoch Epoch
	After LSN
}

// Consistency is a partition's consistency level (Cosmos DB's five minus
// consistent prefix, which eventual with an ordered log already gives).
type Consistency uint8

// Consistency levels. The zero value is invalid so an unset level is caught.
const (
	Strong Consistency = iota + 1
	BoundedStaleness
	Session
	Eventual
)

func (c Consistency) String() string {
	switch c {
	case Strong:
		return "strong"
	case BoundedStaleness:
		return "bounded"
	case Session:
		return "session"
	case Eventual:
		return "eventual"
	default:
		return fmt.Sprintf("Consistency(%d)", uint8(c))
	}
}

// Valid reports whether c is one of the levels.
func (c Consistency) Valid() bool { return c >= Strong && c <= Eventual }

// ParseConsistency parses a level name as printed by String.
func ParseConsistency(s string) (Consistency, error) {
	for c := Strong; c <= Eventual; c++ {
		if c.String() == s {
			return c, nil
		}
	}
	if s == "bounded-staleness" || s == "bounded_staleness" {
		return BoundedStaleness, nil
	}
	return 0, fmt.Errorf("partition: unknown consistency %q (strong, bounded, session, eventual)", s)
}

// Role is what a replica does in its current epoch.
type Role uint8

// Roles. A Leader is the write region and accepts client writes; Paused is
// a write region fenced at its own epoch (graceful failover: it refuses new
// writes but finishes replicating the ones it has); a Follower replicates
// from the write region of its epoch (which it may not know yet).
const (
	RoleFollower Role = iota + 1
	RoleLeader
	RolePaused
)

func (r Role) String() string {
	switch r {
	case RoleFollower:
		return "follower"
	case RoleLeader:
		return "leader"
	case RolePaused:
		return "paused"
	default:
		return fmt.Sprintf("Role(%d)", uint8(r))
	}
}

func (r Role) valid() bool { return r >= RoleFollower && r <= RolePaused }

// writeRegion reports whether the role is a write region (leading or paused).
func (r Role) writeRegion() bool { return r == RoleLeader || r == RolePaused }

// KV is one key-value pair of a partition's applied state.
type KV struct {
	Key   []byte
	Value []byte
	LSN   LSN   // LSN of the op that wrote it
	Epoch Epoch // epoch of that op
}

// ClientRef identifies a client request to the driver that submitted it;
// the core hands it back in the reply and never interprets it.
type ClientRef uint64
