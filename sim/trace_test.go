package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestTrace(t *testing.T) {
	fold := func(f func(*Trace)) uint64 { tr := NewTrace(); f(&tr); return tr.Sum() }
	tests := []struct {
		name string
		a, b func(*Trace)
		same bool
	}{
		{"equal inputs", func(t *Trace) { t.Begin(1, time.Second); t.Str("k") }, func(t *Trace) { t.Begin(1, time.Second); t.Str("k") }, true},
		{"time matters", func(t *Trace) { t.Begin(1, time.Second) }, func(t *Trace) { t.Begin(1, 2*time.Second) }, false},
		{"kind matters", func(t *Trace) { t.Begin(1, 0) }, func(t *Trace) { t.Begin(2, 0) }, false},
		{"strings are length-prefixed", func(t *Trace) { t.Str("ab"); t.Str("c") }, func(t *Trace) { t.Str("a"); t.Str("bc") }, false},
		{"order matters", func(t *Trace) { t.U64(1); t.U64(2) }, func(t *Trace) { t.U64(2); t.U64(1) }, false},
		{"bytes like strings", func(t *Trace) { t.Bytes([]byte("xy")) }, func(t *Trace) { t.Str("xy") }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.same, fold(tt.a) == fold(tt.b))
		})
	}
	tr := NewTrace()
	assert.Equal(t, "cbf29ce484222325", tr.String(), "FNV-64a offset basis")
}

func TestRandStreams(t *testing.T) {
	a, b := NewRand(1, StreamNetwork), NewRand(1, StreamNetwork)
	assert.Equal(t, a.Uint64(), b.Uint64(), "same seed and stream, same numbers")
	c, d := NewRand(1, StreamNetwork), NewRand(1, StreamNemesis)
	assert.NotEqual(t, c.Uint64(), d.Uint64(), "streams are independent")
	e, f := NewRand(1, StreamNetwork), NewRand(2, StreamNetwork)
	assert.NotEqual(t, e.Uint64(), f.Uint64(), "seeds differ")
	g, h := SubRand(1, StreamProposer, 0), SubRand(1, StreamProposer, 1)
	assert.NotEqual(t, g.Uint64(), h.Uint64())
}
