package partition

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRecycleReusesReadySlices: a Ready handed back is reused for the next
// one, emptied; one with an oversized slice is not kept.
func TestRecycleReusesReadySlices(t *testing.T) {
	s := newSolo(t, "a", nil)
	require.NoError(t, s.h.Create(0, 1, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 1}, 0))
	s.flush()
	s.write(1, 1, 1, "k", "v1")
	rd := s.h.Ready(s.now)
	require.NotEmpty(t, rd.Messages)
	first := &rd.Messages[:1][0]
	require.NoError(t, s.st.Commit(rd.Writes))
	s.h.Advance(&rd)
	s.h.Recycle(&rd)
	require.Nil(t, rd.Messages, "the driver's copy must be cleared")

	s.write(1, 1, 2, "k", "v2")
	s.ackAll(nil)
	rd2 := s.h.Ready(s.now)
	require.NotEmpty(t, rd2.Messages)
	require.Same(t, first, &rd2.Messages[0], "the recycled slice was not reused")
	for _, m := range rd2.Messages {
		require.Equal(t, MsgAppend, m.Type)
	}

	s.h.Recycle(&rd2)
	s.h.rd.Messages = nil
	big := Ready{Messages: make([]Message, 0, maxSpareReadyCap+1)}
	s.h.Recycle(&big)
	require.Nil(t, s.h.rd.Messages, "an oversized slice was kept")
	for _, sp := range s.h.spare {
		require.LessOrEqual(t, cap(sp.Messages), maxSpareReadyCap, "an oversized slice was kept")
	}
}

// TestTimerHeapMatchesSort: the typed timer heap pops in (time, partition)
// order over random pushes and pops, against a sorted reference.
func TestTimerHeapMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	reps := make([]*Replica, 50)
	for i := range reps {
		reps[i] = &Replica{id: ID(i + 1)}
	}
	var h timerHeap
	var ref []timerEntry
	for range 5000 {
		if rng.IntN(3) > 0 || len(ref) == 0 {
			r := reps[rng.IntN(len(reps))]
			e := timerEntry{at: time.Duration(rng.IntN(100)), id: r.id, r: r}
			h.push(e)
			ref = append(ref, e)
			continue
		}
		slices.SortFunc(ref, func(a, b timerEntry) int {
			return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.r.id, b.r.id))
		})
		got := h.pop()
		require.Equal(t, ref[0].at, got.at)
		require.Equal(t, ref[0].r.id, got.r.id)
		ref = ref[1:]
		require.Equal(t, len(ref), h.Len())
	}
}

// TestProgressWithoutHistory: the same positions as Progress, no history.
func TestProgressWithoutHistory(t *testing.T) {
	s := newSolo(t, "a", nil)
	require.NoError(t, s.h.Create(0, 1, Spec{Level: levelOf(Strong), Quorum: testQuorum("a"), Epoch: 1}, 0))
	s.write(1, 1, 1, "k", "v")
	s.flush()
	full, err := s.h.Progress(1)
	require.NoError(t, err)
	require.NotEmpty(t, full.History)
	brief, err := s.h.ProgressWithoutHistory(1, nil)
	require.NoError(t, err)
	require.Nil(t, brief.History)
	full.History = nil
	require.Equal(t, full, brief)
	_, err = s.h.ProgressWithoutHistory(2, nil)
	require.Error(t, err)
}
