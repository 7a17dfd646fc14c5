package sim

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder handler: remembers the args it fired with, in order.
type firedLog struct{ args []uint64 }

func (f *firedLog) Fire(_ time.Duration, arg uint64) { f.args = append(f.args, arg) }

func drain(s *Scheduler) []uint64 {
	var out []uint64
	for {
		_, _, h, arg, ok := s.Pop()
		if !ok {
			return out
		}
		h.Fire(s.Now(), arg)
		out = append(out, arg)
	}
}

func TestSchedulerOrder(t *testing.T) {
	type ev struct {
		at  time.Duration
		arg uint64
	}
	tests := []struct {
		name string
		evs  []ev
		want []uint64
	}{
		{"by time", []ev{{30, 3}, {10, 1}, {20, 2}}, []uint64{1, 2, 3}},
		{"ties fire in scheduling order", []ev{{10, 1}, {10, 2}, {5, 0}, {10, 3}}, []uint64{0, 1, 2, 3}},
		{"empty", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewScheduler(100)
			h := &firedLog{}
			for _, e := range tt.evs {
				s.At(e.at, NoNode, h, e.arg)
			}
			assert.Equal(t, tt.want, drain(s))
			assert.Equal(t, tt.want, h.args)
		})
	}
}

func TestSchedulerCancelReschedule(t *testing.T) {
	s := NewScheduler(100)
	h := &firedLog{}
	a := s.At(10, NoNode, h, 1)
	b := s.At(20, NoNode, h, 2)
	c := s.At(30, NoNode, h, 3)
	require.True(t, s.Pending(b))
	assert.True(t, s.Cancel(b))
	assert.False(t, s.Cancel(b), "cancelling twice")
	assert.False(t, s.Pending(b))
	c = s.Reschedule(c, 5, NoNode, h, 3)
	assert.True(t, s.Pending(c))
	_ = a
	assert.Equal(t, []uint64{3, 1}, drain(s))
	assert.False(t, s.Cancel(a), "an id of a fired event is void")
	// A void id reschedules as a new event.
	d := s.Reschedule(a, 40, NoNode, h, 4)
	assert.True(t, s.Pending(d))
	assert.Equal(t, []uint64{4}, drain(s))
	assert.Equal(t, 40*time.Nanosecond, s.Now())
}

func TestSchedulerPastClampsToNow(t *testing.T) {
	s := NewScheduler(10)
	h := &firedLog{}
	s.At(100, NoNode, h, 1)
	drain(s)
	s.At(50, NoNode, h, 2)
	at, ok := s.PeekTime()
	require.True(t, ok)
	assert.Equal(t, time.Duration(100), at, "virtual time never goes back")
}

func TestSchedulerBound(t *testing.T) {
	s := NewScheduler(2)
	h := &firedLog{}
	assert.True(t, s.At(1, NoNode, h, 1).Valid())
	assert.True(t, s.At(2, NoNode, h, 2).Valid())
	assert.False(t, s.At(3, NoNode, h, 3).Valid())
	assert.ErrorIs(t, s.Err(), ErrSchedulerFull)
	assert.Equal(t, 2, s.Len())
}

// TestSchedulerMatchesReference checks the heap against a sort over random
// schedules with cancellations and reschedules.
func TestSchedulerMatchesReference(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		s := NewScheduler(10000)
		h := &firedLog{}
		type ref struct {
			at  time.Duration
			seq int
			arg uint64
		}
		live := map[uint64]ref{}
		ids := map[uint64]EventID{}
		seq := 0
		for i := uint64(0); i < 500; i++ {
			at := time.Duration(r.IntN(100))
			seq++
			ids[i] = s.At(at, NoNode, h, i)
			live[i] = ref{at, seq, i}
			if r.IntN(4) == 0 {
				j := uint64(r.IntN(int(i) + 1))
				if _, ok := live[j]; ok {
					require.True(t, s.Cancel(ids[j]))
					delete(live, j)
				}
			}
			if r.IntN(4) == 0 {
				j := uint64(r.IntN(int(i) + 1))
				if _, ok := live[j]; ok {
					at := time.Duration(r.IntN(100))
					seq++
					ids[j] = s.Reschedule(ids[j], at, NoNode, h, j)
					live[j] = ref{at, seq, j}
				}
			}
		}
		want := make([]ref, 0, len(live))
		for _, v := range live {
			want = append(want, v)
		}
		slices.SortFunc(want, func(a, b ref) int {
			return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq))
		})
		var wantArgs []uint64
		for _, v := range want {
			wantArgs = append(wantArgs, v.arg)
		}
		require.Equal(t, wantArgs, drain(s), "seed %d", seed)
	}
}

type nopHandler struct{}

func (nopHandler) Fire(time.Duration, uint64) {}

// BenchmarkSchedulerEvent schedules and fires one event against a queue of
// 4096 pending ones: O(log n) and no allocation once the slab is warm.
func BenchmarkSchedulerEvent(b *testing.B) {
	s := NewScheduler(1 << 20)
	h := nopHandler{}
	var hh Handler = h
	for i := 0; i < 4096; i++ {
		s.At(time.Duration(i)*time.Millisecond, NoNode, hh, 0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, _, ev, arg, _ := s.Pop()
		ev.Fire(s.Now(), arg)
		s.After(4096*time.Millisecond, NoNode, hh, arg)
	}
}

func TestSchedulerEventAllocatesNothing(t *testing.T) {
	s := NewScheduler(1 << 10)
	var h Handler = nopHandler{}
	for i := 0; i < 100; i++ {
		s.At(time.Duration(i), NoNode, h, 0)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		_, _, ev, arg, _ := s.Pop()
		ev.Fire(s.Now(), arg)
		s.After(100, NoNode, h, arg)
	})
	assert.Zero(t, allocs)
}

// BenchmarkSchedulerRandom is the drill's shape: 65,536 pending events at
// random times (client timeouts, messages, DNS), each fired event
// scheduling one more at a random delay.
func BenchmarkSchedulerRandom(b *testing.B) {
	s := NewScheduler(1 << 20)
	var h Handler = nopHandler{}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 1<<16; i++ {
		s.At(time.Duration(r.Int64N(int64(time.Second))), NoNode, h, 0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, _, ev, arg, _ := s.Pop()
		ev.Fire(s.Now(), arg)
		s.After(time.Duration(r.Int64N(int64(time.Second))), NoNode, h, arg)
	}
}
