package caspaxos

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func b(c uint64, p NodeID) Ballot { return Ballot{Counter: c, Proposer: p} }

// stepOne sends a one-item request and returns the reply item and the batch.
func stepOne(t *testing.T, a *Acceptor, typ MsgType, from NodeID, age uint64, it Item) (Item, Batch, Message) {
	t.Helper()
	require.NoError(t, a.Step(Message{Type: typ, From: from, To: a.ID(), Age: age, Items: []Item{it}}))
	batch, out := a.Ready()
	require.Len(t, out, 1)
	require.Equal(t, typ+1, out[0].Type)
	require.Len(t, out[0].Items, 1)
	require.NoError(t, a.Violation())
	return out[0].Items[0], batch, out[0]
}

func TestAcceptorRules(t *testing.T) {
	val := Value{Version: 1, Data: []byte("x")}
	// Each case starts from a record (nil = absent) and sends one request.
	cases := []struct {
		name       string
		rec        *Record
		typ        MsgType
		from       NodeID
		item       Item
		reject     Reject
		conflict   Ballot
		wantRecord *Record // nil = no write expected
		// reused: the request sent a second value at an accepted ballot,
		// which BallotReuse reports (not Violation: the state is intact).
		reused bool
	}{
		{name: "prepare on empty promises", typ: MsgPrepare, from: 1, item: Item{Key: "k", Ballot: b(1, 1)},
			wantRecord: &Record{Key: "k", Promised: b(1, 1)}},
		{name: "prepare below promise conflicts", rec: &Record{Key: "k", Promised: b(5, 2)}, typ: MsgPrepare, from: 1,
			item: Item{Key: "k", Ballot: b(5, 1)}, reject: RejectConflict, conflict: b(5, 2)},
		{name: "prepare equal to promise is idempotent", rec: &Record{Key: "k", Promised: b(5, 1)}, typ: MsgPrepare, from: 1,
			item: Item{Key: "k", Ballot: b(5, 1)}},
		{name: "prepare below accepted conflicts", rec: &Record{Key: "k", Promised: b(7, 3), Accepted: b(7, 3), Value: val},
			typ: MsgPrepare, from: 9, item: Item{Key: "k", Ballot: b(6, 9)}, reject: RejectConflict, conflict: b(7, 3)},
		{name: "prepare with foreign ballot is malformed", typ: MsgPrepare, from: 1, item: Item{Key: "k", Ballot: b(1, 2)},
			reject: RejectMalformed},
		{name: "prepare with zero ballot is malformed", typ: MsgPrepare, from: 1, item: Item{Key: "k"}, reject: RejectMalformed},
		{name: "empty key is malformed", typ: MsgPrepare, from: 1, item: Item{Key: "", Ballot: b(1, 1)}, reject: RejectMalformed},
		{name: "accept at promise stores and promises next", rec: &Record{Key: "k", Promised: b(2, 1)}, typ: MsgAccept, from: 1,
			item:       Item{Key: "k", Ballot: b(2, 1), Next: b(3, 1), Value: val},
			wantRecord: &Record{Key: "k", Promised: b(3, 1), Accepted: b(2, 1), Value: val}},
		{name: "accept without next keeps promise at ballot", typ: MsgAccept, from: 1,
			item:       Item{Key: "k", Ballot: b(2, 1), Value: val},
			wantRecord: &Record{Key: "k", Promised: b(2, 1), Accepted: b(2, 1), Value: val}},
		{name: "accept below promise conflicts", rec: &Record{Key: "k", Promised: b(4, 2)}, typ: MsgAccept, from: 1,
			item: Item{Key: "k", Ballot: b(4, 1), Value: val}, reject: RejectConflict, conflict: b(4, 2)},
		{name: "accept with next not above ballot is malformed", typ: MsgAccept, from: 1,
			item: Item{Key: "k", Ballot: b(2, 1), Next: b(2, 1), Value: val}, reject: RejectMalformed},
		{name: "accept with next of another proposer is malformed", typ: MsgAccept, from: 1,
			item: Item{Key: "k", Ballot: b(2, 1), Next: b(3, 2), Value: val}, reject: RejectMalformed},
		{name: "accept of a second value at one ballot is malformed",
			rec: &Record{Key: "k", Promised: b(2, 1), Accepted: b(2, 1), Value: val}, typ: MsgAccept, from: 1,
			item: Item{Key: "k", Ballot: b(2, 1), Value: Value{Version: 1, Data: []byte("y")}}, reject: RejectMalformed, reused: true},
		{name: "duplicate accept is idempotent", rec: &Record{Key: "k", Promised: b(2, 1), Accepted: b(2, 1), Value: val},
			typ: MsgAccept, from: 1, item: Item{Key: "k", Ballot: b(2, 1), Value: val}},
		{name: "erase of a live value is refused", rec: &Record{Key: "k", Promised: b(2, 1), Accepted: b(2, 1), Value: val},
			typ: MsgErase, from: 1, item: Item{Key: "k", Ballot: b(2, 1)}, reject: RejectNotTombstone, conflict: b(2, 1)},
		{name: "erase of a tombstone at another ballot is refused",
			rec: &Record{Key: "k", Promised: b(3, 1), Accepted: b(3, 1), Value: Value{Version: 2, Tombstone: true}},
			typ: MsgErase, from: 1, item: Item{Key: "k", Ballot: b(2, 1)}, reject: RejectNotTombstone, conflict: b(3, 1)},
		{name: "erase of an absent key succeeds", typ: MsgErase, from: 1, item: Item{Key: "k", Ballot: b(2, 1)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := State{}
			if tc.rec != nil {
				st.Records = []Record{*tc.rec}
			}
			a, err := NewAcceptor(9, st)
			require.NoError(t, err)
			got, batch, _ := stepOne(t, a, tc.typ, tc.from, 0, tc.item)
			assert.Equal(t, tc.reject, got.Reject)
			assert.Equal(t, tc.conflict, got.Conflict)
			assert.Equal(t, tc.item.Key, got.Key)
			assert.Equal(t, tc.item.Ballot, got.Ballot, "reply echoes the ballot")
			n, reuse := a.BallotReuse()
			if tc.reused {
				assert.Equal(t, uint64(1), n)
				require.Error(t, reuse)
				assert.Contains(t, reuse.Error(), "proposer 1 reused ballot 2.1")
			} else {
				assert.Zero(t, n)
				assert.NoError(t, reuse)
			}
			if tc.wantRecord == nil {
				assert.Empty(t, batch.Put, "no write expected")
				return
			}
			require.Len(t, batch.Put, 1)
			assert.Equal(t, *tc.wantRecord, batch.Put[0])
			r, ok := a.Get(tc.item.Key)
			require.True(t, ok)
			assert.Equal(t, *tc.wantRecord, r)
		})
	}
}

func TestAcceptorPrepareReturnsAccepted(t *testing.T) {
	val := Value{Version: 3, Data: []byte("v3")}
	a, err := NewAcceptor(9, State{Records: []Record{{Key: "k", Promised: b(4, 2), Accepted: b(4, 2), Value: val}}})
	require.NoError(t, err)
	got, batch, _ := stepOne(t, a, MsgPrepare, 1, 0, Item{Key: "k", Ballot: b(5, 1)})
	assert.Equal(t, RejectNone, got.Reject)
	assert.Equal(t, b(4, 2), got.Accepted)
	assert.Equal(t, val, got.Value)
	require.Len(t, batch.Put, 1)
	assert.Equal(t, b(5, 1), batch.Put[0].Promised)
}

func TestAcceptorAgeFencing(t *testing.T) {
	a, err := NewAcceptor(9, State{AgeFloor: 3})
	require.NoError(t, err)
	got, batch, msg := stepOne(t, a, MsgPrepare, 1, 2, Item{Key: "k", Ballot: b(1, 1)})
	assert.Equal(t, RejectStaleAge, got.Reject)
	assert.Equal(t, uint64(3), msg.Age, "reply carries the floor")
	assert.True(t, batch.Empty())

	// Raising the floor persists it; lowering is ignored.
	require.NoError(t, a.Step(Message{Type: MsgRaiseAge, From: 1, To: 9, Age: 5}))
	batch, out := a.Ready()
	assert.Equal(t, uint64(5), batch.AgeFloor)
	assert.Equal(t, uint64(5), out[0].Age)
	require.NoError(t, a.Step(Message{Type: MsgRaiseAge, From: 1, To: 9, Age: 4}))
	batch, out = a.Ready()
	assert.True(t, batch.Empty())
	assert.Equal(t, uint64(5), out[0].Age)

	got, _, _ = stepOne(t, a, MsgAccept, 1, 5, Item{Key: "k", Ballot: b(1, 1), Value: Value{Version: 1}})
	assert.Equal(t, RejectNone, got.Reject)
}

func TestAcceptorEraseFloorFencesAbsentKeys(t *testing.T) {
	tomb := Value{Version: 4, Tombstone: true}
	a, err := NewAcceptor(9, State{Records: []Record{{Key: "k", Promised: b(8, 2), Accepted: b(8, 2), Value: tomb}}})
	require.NoError(t, err)
	got, batch, _ := stepOne(t, a, MsgErase, 2, 0, Item{Key: "k", Ballot: b(8, 2)})
	require.Equal(t, RejectNone, got.Reject)
	assert.Equal(t, []string{"k"}, batch.Delete)
	require.Len(t, batch.Put, 1, "the erase floor is persisted")
	assert.Equal(t, Record{Key: eraseFloorKey, Promised: b(8, 2)}, batch.Put[0])
	_, ok := a.Get("k")
	assert.False(t, ok)
	assert.Equal(t, b(8, 2), a.EraseFloor())

	// A proposer that cached a promise below the erase floor cannot resurrect
	// the register, on any absent key.
	got, _, _ = stepOne(t, a, MsgAccept, 1, 0, Item{Key: "k", Ballot: b(7, 1), Value: Value{Version: 2, Data: []byte("stale")}})
	assert.Equal(t, RejectConflict, got.Reject)
	assert.Equal(t, b(8, 2), got.Conflict)
	got, _, _ = stepOne(t, a, MsgPrepare, 1, 0, Item{Key: "other", Ballot: b(8, 1)})
	assert.Equal(t, RejectConflict, got.Reject)
	got, _, _ = stepOne(t, a, MsgPrepare, 1, 0, Item{Key: "k", Ballot: b(9, 1)})
	assert.Equal(t, RejectNone, got.Reject)

	// The floor survives a restart.
	st := State{Records: []Record{{Key: eraseFloorKey, Promised: b(8, 2)}}}
	a2, err := NewAcceptor(9, st)
	require.NoError(t, err)
	assert.Equal(t, b(8, 2), a2.EraseFloor())
	assert.Equal(t, 0, a2.Len())
	assert.Empty(t, a2.Keys())
}

func TestAcceptorGroupsWritesPerBatch(t *testing.T) {
	a, err := NewAcceptor(9, State{})
	require.NoError(t, err)
	require.NoError(t, a.Step(Message{Type: MsgPrepare, From: 1, To: 9, Items: []Item{{Key: "a", Ballot: b(1, 1)}, {Key: "b", Ballot: b(1, 1)}}}))
	require.NoError(t, a.Step(Message{Type: MsgAccept, From: 1, To: 9, Items: []Item{{Key: "a", Ballot: b(1, 1), Next: b(2, 1), Value: Value{Version: 1}}}}))
	require.True(t, a.HasReady())
	batch, out := a.Ready()
	assert.Len(t, out, 2)
	require.Len(t, batch.Put, 2, "key a is written once per batch, with its latest record")
	assert.Equal(t, Record{Key: "a", Promised: b(2, 1), Accepted: b(1, 1), Value: Value{Version: 1}}, batch.Put[0])
	assert.False(t, a.HasReady())
}

func TestAcceptorRejectsBadInput(t *testing.T) {
	_, err := NewAcceptor(9, State{Records: []Record{{Key: "k", Promised: b(1, 1), Accepted: b(2, 1)}}})
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = NewAcceptor(9, State{Records: []Record{{Key: "k"}, {Key: "k"}}})
	require.ErrorIs(t, err, ErrCorrupt)
	a, err := NewAcceptor(9, State{})
	require.NoError(t, err)
	require.ErrorIs(t, a.Step(Message{Type: MsgPrepareReply}), ErrCorrupt)
	require.ErrorIs(t, a.Step(Message{Type: 99}), ErrCorrupt)
}
