package routing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// fixedRand returns the same number every time.
type fixedRand float64

func (f fixedRand) Float64() float64 { return float64(f) }

func TestBackoffDelayBounds(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		b       Backoff
		attempt int
		lo, hi  time.Duration // the delays at Rand 0 and (nearly) 1
	}{
		{"equal jitter, first", Backoff{Base: 100 * ms, Max: time.Second}, 1, 50 * ms, 100 * ms},
		{"equal jitter, doubled", Backoff{Base: 100 * ms, Max: time.Second}, 3, 200 * ms, 400 * ms},
		{"equal jitter, capped", Backoff{Base: 100 * ms, Max: time.Second}, 40, 500 * ms, time.Second},
		{"a quarter's spread", Backoff{Base: 500 * ms, Max: 500 * ms, Spread: 0.25}, 7, 375 * ms, 500 * ms},
		{"spread out of range: equal jitter", Backoff{Base: 500 * ms, Max: 500 * ms, Spread: 1}, 1, 250 * ms, 500 * ms},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			b.Rand = fixedRand(0)
			assert.Equal(t, tc.lo, b.Delay(tc.attempt))
			b.Rand = fixedRand(0.999999)
			assert.InDelta(t, float64(tc.hi), float64(b.Delay(tc.attempt)), float64(ms))
			assert.LessOrEqual(t, b.Delay(tc.attempt), tc.hi)
		})
	}
}
