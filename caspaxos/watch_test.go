package caspaxos

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func v(n uint64) Value { return Value{Version: n, Data: []byte{byte(n)}} }

func TestWatchDeliversInVersionOrderAndDropsOld(t *testing.T) {
	w, err := NewWatch(4, 100)
	require.NoError(t, err)
	all := w.Subscribe("", 0)
	one := w.Subscribe("a", 0)
	assert.True(t, w.Observe("a", v(1)))
	assert.True(t, w.Observe("b", v(1)))
	assert.True(t, w.Observe("a", v(2)))
	assert.False(t, w.Observe("a", v(2)), "a repeated version is dropped")
	assert.False(t, w.Observe("a", v(1)), "an older version is dropped")
	assert.True(t, w.Observe("a", v(4)))

	ev, err := w.Drain(one)
	require.NoError(t, err)
	require.Len(t, ev, 3)
	assert.Equal(t, []uint64{1, 2, 4}, []uint64{ev[0].Value.Version, ev[1].Value.Version, ev[2].Value.Version})
	assert.Equal(t, []bool{false, false, true}, []bool{ev[0].Gap, ev[1].Gap, ev[2].Gap}, "version 3 was never observed")
	ev, err = w.Drain(all)
	require.NoError(t, err)
	assert.Len(t, ev, 4)
	latest, ok := w.Latest("a")
	require.True(t, ok)
	assert.Equal(t, uint64(4), latest.Version)
}

func TestWatchResumeFromVersion(t *testing.T) {
	w, err := NewWatch(3, 100)
	require.NoError(t, err)
	for i := uint64(1); i <= 5; i++ {
		w.Observe("a", v(i))
	}
	// History keeps 3..5.
	s := w.Subscribe("a", 3)
	ev, err := w.Drain(s)
	require.NoError(t, err)
	require.Len(t, ev, 2)
	assert.Equal(t, uint64(4), ev[0].Value.Version)
	assert.False(t, ev[0].Gap)

	s = w.Subscribe("a", 1)
	ev, err = w.Drain(s)
	require.NoError(t, err)
	require.Len(t, ev, 3)
	assert.True(t, ev[0].Gap, "version 2 was compacted out of the history")

	s = w.Subscribe("a", 5)
	ev, err = w.Drain(s)
	require.NoError(t, err)
	assert.Empty(t, ev)
	w.Observe("a", v(6))
	ev, err = w.Drain(s)
	require.NoError(t, err)
	require.Len(t, ev, 1)
	assert.False(t, ev[0].Gap)
}

func TestWatchOverflowForcesResubscribe(t *testing.T) {
	w, err := NewWatch(8, 2)
	require.NoError(t, err)
	s := w.Subscribe("", 0)
	w.Observe("a", v(1))
	w.Observe("a", v(2))
	w.Observe("a", v(3))
	_, err = w.Drain(s)
	require.ErrorIs(t, err, ErrWatchOverflow)
	_, err = w.Drain(s)
	require.Error(t, err, "the overflowed subscription is gone")
	w.Unsubscribe(s)
	_, err = NewWatch(0, 1)
	require.ErrorIs(t, err, ErrInvalidConfig)
}
