package sim

import (
	"math"
	"time"
)

// nodeClock is a node's local clock: it runs at rate 1+drift relative to
// virtual time. Cores only ever see local time, so a drifting node's
// timeouts and backoffs fire early or late exactly as a real skewed clock
// would make them. The clock is piecewise linear and continuous: changing
// the drift re-anchors it, so local time never jumps and never goes back.
type nodeClock struct {
	anchorV time.Duration // virtual time of the anchor
	anchorL time.Duration // local time at the anchor
	rate    float64       // local seconds per virtual second, > 0
}

func newNodeClock() nodeClock { return nodeClock{rate: 1} }

// local converts virtual time v (>= anchorV) to local time.
func (c *nodeClock) local(v time.Duration) time.Duration {
	return c.anchorL + time.Duration(float64(v-c.anchorV)*c.rate)
}

// virtual returns the earliest virtual time at which the local clock reads
// at least l; never earlier than the anchor.
func (c *nodeClock) virtual(l time.Duration) time.Duration {
	if l <= c.anchorL {
		return c.anchorV
	}
	v := c.anchorV + time.Duration(math.Ceil(float64(l-c.anchorL)/c.rate))
	for c.local(v) < l { // float rounding: step to the first instant that qualifies
		v++
	}
	return v
}

// setDrift changes the rate at virtual time now. drift is bounded by the
// caller to (-1, 1) so the clock keeps moving forward.
func (c *nodeClock) setDrift(now time.Duration, drift float64) {
	c.anchorL = c.local(now)
	c.anchorV = now
	c.rate = 1 + drift
}

func (c *nodeClock) drift() float64 { return c.rate - 1 }
