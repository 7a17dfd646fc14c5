package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestNodeClock(t *testing.T) {
	tests := []struct {
		name   string
		drifts []struct {
			at    time.Duration
			drift float64
		}
		v    time.Duration
		want time.Duration
	}{
		{name: "no drift", v: 10 * time.Second, want: 10 * time.Second},
		{name: "fast clock", drifts: []struct {
			at    time.Duration
			drift float64
		}{{0, 0.1}}, v: 10 * time.Second, want: 11 * time.Second},
		{name: "slow then normal", drifts: []struct {
			at    time.Duration
			drift float64
		}{{0, -0.5}, {10 * time.Second, 0}}, v: 20 * time.Second, want: 15 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newNodeClock()
			for _, d := range tt.drifts {
				c.setDrift(d.at, d.drift)
			}
			assert.Equal(t, tt.want, c.local(tt.v))
			// virtual is the earliest instant at which the clock reads the value.
			v := c.virtual(tt.want)
			assert.GreaterOrEqual(t, c.local(v), tt.want)
			assert.Less(t, c.local(v-1), tt.want)
		})
	}
}

func TestNodeClockMonotonicAcrossDriftChanges(t *testing.T) {
	c := newNodeClock()
	prev := c.local(0)
	for i, d := range []float64{0.05, -0.05, 0.01, -0.049, 0} {
		at := time.Duration(i+1) * time.Second
		before := c.local(at)
		c.setDrift(at, d)
		assert.Equal(t, before, c.local(at), "no jump at a drift change")
		assert.GreaterOrEqual(t, c.local(at), prev)
		prev = c.local(at)
	}
}
