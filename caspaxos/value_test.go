package caspaxos

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChangeFunctions(t *testing.T) {
	absent := Value{}
	live := Value{Version: 3, Data: []byte("x")}
	tomb := Value{Version: 4, Tombstone: true}
	cases := []struct {
		name    string
		ch      Change
		cur     Value
		want    Value
		err     error
		mutates bool
	}{
		{"read returns current", Read(), live, live, nil, false},
		{"cas on match", CAS(3, []byte("y")), live, Value{Version: 4, Data: []byte("y")}, nil, true},
		{"cas on mismatch", CAS(2, []byte("y")), live, live, ErrVersionMismatch, true},
		{"cas from absent", CAS(0, []byte("y")), absent, Value{Version: 1, Data: []byte("y")}, nil, true},
		{"cas expecting absent on tombstone", CAS(0, []byte("y")), tomb, tomb, ErrVersionMismatch, true},
		{"cas on tombstone version", CAS(4, []byte("y")), tomb, tomb, ErrVersionMismatch, true},
		{"init on absent", InitIfAbsent([]byte("i")), absent, Value{Version: 1, Data: []byte("i")}, nil, true},
		{"init on tombstone continues versions", InitIfAbsent([]byte("i")), tomb, Value{Version: 5, Data: []byte("i")}, nil, true},
		{"init on live", InitIfAbsent([]byte("i")), live, live, ErrExists, true},
		{"delete live", Delete(0), live, Value{Version: 4, Tombstone: true}, nil, true},
		{"delete at version", Delete(3), live, Value{Version: 4, Tombstone: true}, nil, true},
		{"delete at wrong version", Delete(2), live, live, ErrVersionMismatch, true},
		{"delete absent is idempotent", Delete(0), absent, absent, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.ch.Apply(tc.cur)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
			} else {
				require.NoError(t, err)
			}
			assert.True(t, tc.want.Equal(got), "got %v want %v", got, tc.want)
			assert.Equal(t, tc.mutates, tc.ch.Mutates())
			assert.NoError(t, checkChange(tc.cur, got))
		})
	}
	assert.ErrorIs(t, checkChange(live, Value{Version: 3, Data: []byte("other")}), ErrBadChange)
	assert.ErrorIs(t, checkChange(live, Value{Version: 9}), ErrBadChange)
	assert.True(t, live.Exists())
	assert.False(t, tomb.Exists())
	assert.False(t, absent.Exists())
}
