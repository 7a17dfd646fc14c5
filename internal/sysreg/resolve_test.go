package sysreg

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
)

// TestResolve: a refusal after one of the write's own accepts is reported
// as a refusal only when it rules the write out (the register is at or
// below the version the write would have made, and the change function
// did not recognise the value there as its own).
func TestResolve(t *testing.T) {
	exists := func(ver uint64, data string) error {
		return fmt.Errorf("%w: %w", caspaxos.ErrExists, &AlreadyInitializedError{Value: []byte(data), Version: ver})
	}
	mismatch := func(cur uint64, data string) error {
		return fmt.Errorf("%w: %w", caspaxos.ErrVersionMismatch, &ConflictError{Expected: 4, Current: cur, Value: []byte(data)})
	}
	unknown := func(err error) error { return fmt.Errorf("%w: %w", caspaxos.ErrUnknownOutcome, err) }
	noQuorum := fmt.Errorf("%w: key after 4 attempts: %w", caspaxos.ErrNoQuorum, caspaxos.ErrConflict)
	cases := []struct {
		name string
		err  error
		want uint64
		is   []error
		not  []error
	}{
		{"init refused", exists(1, "theirs"), 1, []error{ErrAlreadyInitialized}, []error{ErrUnknownOutcome}},
		{"init unknown, other value at 1", unknown(exists(1, "theirs")), 1, []error{ErrAlreadyInitialized}, []error{ErrUnknownOutcome}},
		{"init unknown, register moved on", unknown(exists(3, "theirs")), 1, []error{ErrUnknownOutcome}, []error{ErrAlreadyInitialized}},
		{"cas refused", mismatch(7, "theirs"), 5, []error{ErrConflict}, []error{ErrUnknownOutcome}},
		{"cas unknown, other value at ours", unknown(mismatch(5, "theirs")), 5, []error{ErrConflict}, []error{ErrUnknownOutcome}},
		{"cas unknown, register below ours", unknown(mismatch(3, "theirs")), 5, []error{ErrConflict}, []error{ErrUnknownOutcome}},
		{"cas unknown, register moved on", unknown(mismatch(6, "theirs")), 5, []error{ErrUnknownOutcome}, []error{ErrConflict}},
		{"contention", noQuorum, 5, []error{ErrNoQuorum}, []error{ErrUnknownOutcome}},
		{"contention after an accept", unknown(noQuorum), 5, []error{ErrNoQuorum, ErrUnknownOutcome}, nil},
		{"other unknown", unknown(caspaxos.ErrStaleAge), 5, []error{ErrUnknownOutcome}, []error{ErrNoQuorum}},
		{"other", caspaxos.ErrBallotOverflow, 5, []error{caspaxos.ErrBallotOverflow}, []error{ErrUnknownOutcome, ErrNoQuorum}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := resolve(tc.err, tc.want)
			require.Error(t, got)
			for _, e := range tc.is {
				assert.ErrorIs(t, got, e)
			}
			for _, e := range tc.not {
				assert.NotErrorIs(t, got, e)
			}
			var ae *AlreadyInitializedError
			var ce *ConflictError
			if errors.Is(got, ErrUnknownOutcome) {
				assert.False(t, errors.As(got, &ae) || errors.As(got, &ce), "an unknown outcome carries a refusal: %v", got)
			}
		})
	}
}

// TestChanges: Init's and CAS's change functions, including finding their
// own write (by its tag) where they would have put it.
func TestChanges(t *testing.T) {
	ours := writeTag{writer: 9, seq: 4}
	mine := func(ver uint64) caspaxos.Value {
		return caspaxos.Value{Version: ver, Data: encodeValue(ours, []byte("ours"))}
	}
	theirs := func(ver uint64) caspaxos.Value {
		return caspaxos.Value{Version: ver, Data: encodeValue(writeTag{writer: 8, seq: 4}, []byte("theirs"))}
	}
	initCh := initChange{tag: ours, data: encodeValue(ours, []byte("ours"))}
	casCh := casChange{expected: 3, tag: ours, data: encodeValue(ours, []byte("ours"))}
	cases := []struct {
		name    string
		ch      caspaxos.Change
		cur     caspaxos.Value
		want    caspaxos.Value
		wantErr error
		current uint64
	}{
		{"init on empty", initCh, caspaxos.Value{}, mine(1), nil, 0},
		{"init finds its own", initCh, mine(1), mine(1), nil, 0},
		{"init finds another", initCh, theirs(1), theirs(1), ErrAlreadyInitialized, 1},
		{"init finds its own moved on", initCh, mine(2), mine(2), ErrAlreadyInitialized, 2},
		{"init on corrupt", initCh, caspaxos.Value{Version: 1, Data: []byte("junk")}, caspaxos.Value{Version: 1, Data: []byte("junk")}, caspaxos.ErrCorrupt, 0},
		{"cas at expected", casCh, theirs(3), mine(4), nil, 0},
		{"cas finds its own", casCh, mine(4), mine(4), nil, 0},
		{"cas finds another", casCh, theirs(4), theirs(4), ErrConflict, 4},
		{"cas below", casCh, theirs(2), theirs(2), ErrConflict, 2},
		{"cas on empty", casCh, caspaxos.Value{}, caspaxos.Value{}, ErrConflict, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.ch.Apply(tc.cur)
			assert.True(t, tc.want.Equal(got), "got %v, want %v", got, tc.want)
			if tc.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.wantErr)
			var ae *AlreadyInitializedError
			var ce *ConflictError
			switch {
			case errors.As(err, &ae):
				assert.Equal(t, tc.current, ae.Version)
				_, spec, _ := decodeValue(tc.cur.Data)
				assert.Equal(t, spec, ae.Value, "the refusal carries the spec, without the tag")
				require.ErrorIs(t, err, caspaxos.ErrExists, "the proposer must see ErrExists to flag an unknown outcome")
			case errors.As(err, &ce):
				assert.Equal(t, tc.current, ce.Current)
				require.ErrorIs(t, err, caspaxos.ErrVersionMismatch, "the proposer must see ErrVersionMismatch to flag an unknown outcome")
			}
		})
	}
}

func TestValueCodec(t *testing.T) {
	good := encodeValue(writeTag{writer: 300, seq: 2}, []byte("spec"))
	tag, spec, err := decodeValue(good)
	require.NoError(t, err)
	assert.Equal(t, writeTag{writer: 300, seq: 2}, tag)
	assert.Equal(t, "spec", string(spec))
	cases := map[string][]byte{
		"empty":           nil,
		"unknown format":  {2, 1, 1, 'x'},
		"truncated":       {1, 0x80},
		"long uvarint":    {1, 0x81, 0x00, 1, 'x'},
		"zero writer":     {1, 0, 1, 'x'},
		"zero seq":        {1, 1, 0, 'x'},
		"no spec":         {1, 1, 1},
		"spec over bound": encodeValue(writeTag{writer: 1, seq: 1}, make([]byte, MaxValueBytes+1)),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := decodeValue(data)
			require.ErrorIs(t, err, caspaxos.ErrCorrupt)
		})
	}
}
