package caspaxos

import "fmt"

// MsgType names a CASPaxos message. Requests go from proposers to acceptors,
// replies back. Every message carries a batch of items, one per key, so that
// one message per acceptor serves many registers at once.
type MsgType uint8

const (
	// MsgPrepare asks for a promise not to accept smaller ballots (phase 1a).
	MsgPrepare MsgType = iota + 1
	// MsgPrepareReply is the promise (phase 1b) or a reject.
	MsgPrepareReply
	// MsgAccept asks to store a value at a ballot (phase 2a). Item.Next
	// piggybacks the promise for the proposer's next round (one round trip).
	MsgAccept
	// MsgAcceptReply acknowledges (phase 2b) or rejects.
	MsgAcceptReply
	// MsgRaiseAge raises the acceptor's age floor (GC step; Age is the floor).
	MsgRaiseAge
	// MsgRaiseAgeReply confirms a durable age floor.
	MsgRaiseAgeReply
	// MsgErase removes a tombstoned register (final GC step).
	MsgErase
	// MsgEraseReply confirms the erase (or rejects it).
	MsgEraseReply
)

func (t MsgType) String() string {
	switch t {
	case MsgPrepare:
		return "Prepare"
	case MsgPrepareReply:
		return "PrepareReply"
	case MsgAccept:
		return "Accept"
	case MsgAcceptReply:
		return "AcceptReply"
	case MsgRaiseAge:
		return "RaiseAge"
	case MsgRaiseAgeReply:
		return "RaiseAgeReply"
	case MsgErase:
		return "Erase"
	case MsgEraseReply:
		return "EraseReply"
	}
	return fmt.Sprintf("MsgType(%d)", uint8(t))
}

// IsReply reports whether t travels from an acceptor to a proposer.
func (t MsgType) IsReply() bool {
	switch t {
	case MsgPrepareReply, MsgAcceptReply, MsgRaiseAgeReply, MsgEraseReply:
		return true
	}
	return false
}

// Valid reports whether t is a known message type.
func (t MsgType) Valid() bool { return t >= MsgPrepare && t <= MsgEraseReply }

// Reject says why an acceptor refused an item.
type Reject uint8

const (
	// RejectNone: the item was accepted.
	RejectNone Reject = iota
	// RejectConflict: a greater ballot was promised or accepted; Item.Conflict holds it.
	RejectConflict
	// RejectStaleAge: the proposer's age is below the acceptor's floor; Message.Age holds the floor.
	RejectStaleAge
	// RejectMalformed: the item breaks a protocol rule (for example Next <= Ballot).
	RejectMalformed
	// RejectNotTombstone: an erase found something other than the tombstone it was told of.
	RejectNotTombstone
)

func (r Reject) String() string {
	switch r {
	case RejectNone:
		return "ok"
	case RejectConflict:
		return "conflict"
	case RejectStaleAge:
		return "stale-age"
	case RejectMalformed:
		return "malformed"
	case RejectNotTombstone:
		return "not-tombstone"
	}
	return fmt.Sprintf("Reject(%d)", uint8(r))
}

// Item is the part of a message about one key.
//
//   - Prepare:       Key, Ballot.
//   - PrepareReply:  Key, Ballot (echoed), Reject; if ok Accepted and Value
//     (what the acceptor holds); if conflict, Conflict.
//   - Accept:        Key, Ballot, Value, Next (zero, or the next ballot to promise).
//   - AcceptReply:   Key, Ballot (echoed), Next (echoed, promised if ok), Reject, Conflict.
//   - Erase:         Key, Ballot (the accepted ballot of the tombstone).
//   - EraseReply:    Key, Ballot (echoed), Reject.
type Item struct {
	Key      string
	Ballot   Ballot
	Next     Ballot
	Accepted Ballot
	Value    Value
	Conflict Ballot
	Reject   Reject
}

// Message is one batch between a proposer and an acceptor.
type Message struct {
	Type MsgType
	From NodeID
	To   NodeID
	// Age: on requests the proposer's age; on replies the acceptor's age floor.
	Age   uint64
	Items []Item
}

func (m Message) String() string {
	return fmt.Sprintf("%v %d->%d age=%d items=%d", m.Type, m.From, m.To, m.Age, len(m.Items))
}
