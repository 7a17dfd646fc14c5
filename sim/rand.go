package sim

import "math/rand/v2"

// Stream names one independent random stream of a run. Every component
// draws from its own stream, all derived from the run's seed, so that a
// change in how often one component draws (say the nemesis gains a fault
// kind) does not shift the numbers every other component sees: a seed's
// workload stays comparable across fault mixes.
type Stream uint64

// Streams of a run. Their values are part of what a seed means.
const (
	StreamSwarm Stream = iota + 1
	StreamNetwork
	StreamNemesis
	StreamWorkload
	StreamDisk
	StreamProposer
	StreamClock
	StreamScenario
)

// splitmix64 is the finaliser of SplitMix64: a bijective mixer that turns
// correlated inputs (seed, seed+1) into unrelated outputs.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// NewRand returns the PCG stream s of seed. Same (seed, s), same numbers.
func NewRand(seed uint64, s Stream) *rand.Rand {
	return rand.New(rand.NewPCG(splitmix64(seed^splitmix64(uint64(s))), splitmix64(uint64(s)+seed*0x2545f4914f6cdd1d)))
}

// SubRand returns the sub-stream i of stream s, for per-node or
// per-proposer generators (the proposer's backoff jitter, for instance).
func SubRand(seed uint64, s Stream, i uint64) *rand.Rand {
	return NewRand(splitmix64(seed+i*0x9e3779b97f4a7c15), s)
}

// uniform returns a duration in [lo, hi).
func uniform(r *rand.Rand, lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	return lo + r.Int64N(hi-lo)
}
