package caspaxos

import (
	"fmt"
	"math"
	"time"
)

// BackoffKind selects how a proposer waits after a NAK or a timeout.
type BackoffKind uint8

const (
	// BackoffAdaptive is the paper's EMA-adaptive backoff:
	// (EMA + sigma) * U(0, 2^(attempt-1)), where EMA tracks the phase-2
	// duration D = T(phase 2b end) - T(phase 2a start) and sigma its deviation.
	// It scales with the real round trip instead of a guessed constant.
	// Unlike the paper, it also paces first attempts on keys where rivals
	// reacted to the same event (pacing.go, ProposerConfig.PaceMemory).
	BackoffAdaptive BackoffKind = iota
	// BackoffExponential is base * U(0, 2^(attempt-1)) with a fixed base
	// (100 ms by default), kept for comparison.
	BackoffExponential
	// BackoffNone retries at once (for comparison; livelocks under contention).
	BackoffNone
)

func (k BackoffKind) String() string {
	switch k {
	case BackoffAdaptive:
		return "adaptive"
	case BackoffExponential:
		return "exponential"
	case BackoffNone:
		return "none"
	}
	return fmt.Sprintf("BackoffKind(%d)", uint8(k))
}

// ParseBackoffKind parses "adaptive", "exponential" or "none".
func ParseBackoffKind(s string) (BackoffKind, error) {
	switch s {
	case "adaptive", "ema":
		return BackoffAdaptive, nil
	case "exponential", "exp":
		return BackoffExponential, nil
	case "none":
		return BackoffNone, nil
	}
	return 0, fmt.Errorf("%w: unknown backoff %q (adaptive, exponential, none)", ErrInvalidConfig, s)
}

// Rand is the randomness a proposer draws from. Drivers inject it (the
// simulator seeds it) so runs replay; *math/rand/v2.Rand satisfies it.
type Rand interface {
	Float64() float64
}

// Backoff computes retry delays. It is a pure value updated by samples.
type Backoff struct {
	kind  BackoffKind
	base  time.Duration
	max   time.Duration
	alpha float64

	ema     float64 // nanoseconds
	dev     float64 // nanoseconds
	samples uint64
}

// NewBackoff returns a backoff; alpha is the EMA weight of a new sample.
func NewBackoff(kind BackoffKind, base, max time.Duration, alpha float64) Backoff {
	return Backoff{kind: kind, base: base, max: max, alpha: alpha}
}

// PaceGap returns how long after a rival's round started this proposer's
// first attempt should start so that it does not cut that round off: the
// rival's accept must reach its acceptors before this prepare does, which
// takes about one round trip, the phase-2 estimate EMA + sigma; and at
// least min, because the rival may be slower than this proposer and its
// rounds are not observed. Before any sample the base stands in for the
// EMA, as in Delay. Only the adaptive kind paces; the others return zero.
func (b *Backoff) PaceGap(min time.Duration) time.Duration {
	if b.kind != BackoffAdaptive {
		return 0
	}
	unit := float64(b.base)
	if b.samples > 0 {
		unit = b.ema + b.dev
	}
	g := time.Duration(2 * unit)
	if g < min {
		g = min
	}
	if g > b.max {
		g = b.max
	}
	return g
}

// Observe records one phase-2 duration.
func (b *Backoff) Observe(d time.Duration) {
	x := float64(d)
	if b.samples == 0 {
		b.ema = x
		b.dev = x / 2
	} else {
		diff := math.Abs(x - b.ema)
		b.ema = b.alpha*x + (1-b.alpha)*b.ema
		b.dev = b.alpha*diff + (1-b.alpha)*b.dev
	}
	b.samples++
}

// EMA returns the current estimate of the phase-2 duration and its deviation.
func (b *Backoff) EMA() (mean, sigma time.Duration) {
	return time.Duration(b.ema), time.Duration(b.dev)
}

// Delay returns how long to wait before attempt number attempt+1, given
// that attempt (1-based) just failed.
func (b *Backoff) Delay(attempt int, rng Rand) time.Duration {
	var unit float64
	switch b.kind {
	case BackoffNone:
		return 0
	case BackoffExponential:
		unit = float64(b.base)
	case BackoffAdaptive:
		if b.samples == 0 {
			unit = float64(b.base)
		} else {
			unit = b.ema + b.dev
		}
	}
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 30 {
		attempt = 30
	}
	d := unit * rng.Float64() * float64(uint64(1)<<(attempt-1))
	if d > float64(b.max) {
		d = float64(b.max)
	}
	return time.Duration(d)
}
