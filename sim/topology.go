package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// ErrTopology reports an invalid topology.
var ErrTopology = errors.New("sim: invalid topology")

// Topology is where the simulated nodes live and how far apart they are.
// Latencies are round trips per pair of regions; a message takes half the
// round trip plus an exponential tail (Jitter * half round trip on
// average), capped, because WAN latency is a floor set by distance with
// queueing on top, never below the floor.
type Topology struct {
	Regions []string
	// RTT[i][j] is the round trip between regions i and j (symmetric);
	// RTT[i][i] is the round trip inside region i.
	RTT [][]time.Duration
	// Loopback is the round trip between two processes of one node.
	Loopback time.Duration
	// Jitter is the mean extra one-way delay as a fraction of the base.
	Jitter float64
	// MaxJitterFactor caps the extra delay at this multiple of the base.
	MaxJitterFactor float64
}

// DefaultWAN is three regions with roughly 20, 70 and 150 ms round trips
// between them and 1 ms inside each: the shape of a US/EU deployment.
func DefaultWAN() Topology {
	ms := time.Millisecond
	return Topology{
		Regions: []string{"west", "central", "east"},
		RTT: [][]time.Duration{
			{1 * ms, 20 * ms, 70 * ms},
			{20 * ms, 1 * ms, 150 * ms},
			{70 * ms, 150 * ms, 1 * ms},
		},
		Loopback:        50 * time.Microsecond,
		Jitter:          0.1,
		MaxJitterFactor: 4,
	}
}

// Validate checks shapes and ranges.
func (t Topology) Validate() error {
	n := len(t.Regions)
	if n == 0 || n > MaxRegions {
		return fmt.Errorf("%w: %d regions (1..%d)", ErrTopology, n, MaxRegions)
	}
	if len(t.RTT) != n {
		return fmt.Errorf("%w: RTT has %d rows for %d regions", ErrTopology, len(t.RTT), n)
	}
	for i := range t.RTT {
		if len(t.RTT[i]) != n {
			return fmt.Errorf("%w: RTT row %d has %d entries", ErrTopology, i, len(t.RTT[i]))
		}
		for j := range t.RTT[i] {
			if t.RTT[i][j] <= 0 || t.RTT[i][j] != t.RTT[j][i] {
				return fmt.Errorf("%w: RTT[%d][%d]=%v must be positive and symmetric", ErrTopology, i, j, t.RTT[i][j])
			}
		}
	}
	if t.Loopback <= 0 || t.Jitter < 0 || t.MaxJitterFactor < 0 {
		return fmt.Errorf("%w: loopback %v jitter %v cap %v", ErrTopology, t.Loopback, t.Jitter, t.MaxJitterFactor)
	}
	return nil
}

// Bounds on a simulated world.
const (
	MaxRegions = 16
	MaxNodes   = 1024
)

// oneWay draws the one-way delay of a message between regions a and b
// (same node when loop is true).
func (t *Topology) oneWay(r *rand.Rand, a, b int, loop bool) time.Duration {
	base := t.Loopback / 2
	if !loop {
		base = t.RTT[a][b] / 2
	}
	extra := t.Jitter * r.ExpFloat64()
	if extra > t.MaxJitterFactor {
		extra = t.MaxJitterFactor
	}
	return base + time.Duration(float64(base)*extra)
}
