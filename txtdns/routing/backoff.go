package routing

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Rand is the client's source of randomness (backoff jitter). The
// simulator passes a seeded one.
type Rand interface {
	// Float64 returns a number in [0, 1).
	Float64() float64
}

// lockedRand is a seeded PCG safe for concurrent use.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// NewRand returns a Rand seeded with seed, safe for concurrent use.
func NewRand(seed uint64) Rand {
	return &lockedRand{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (l *lockedRand) Float64() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}

// Backoff is capped exponential backoff with "equal jitter": the delay
// before attempt n+1 (n >= 1) is d/2 + U(0, d/2) where d = min(Max,
// Base*2^(n-1)), so it never collapses to zero and never exceeds Max.
type Backoff struct {
	Base, Max time.Duration
	Rand      Rand
	// Spread, if in (0, 1), is the random fraction of the delay instead
	// of one half: the delay is d*(1-Spread) + U(0, d*Spread).
	Spread float64
}

// Delay returns the wait after the attempt-th failure (attempt >= 1).
func (b Backoff) Delay(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := b.Max
	if attempt <= 62 {
		if x := b.Base << (attempt - 1); x > 0 && x < b.Max && x>>(attempt-1) == b.Base {
			d = x
		}
	}
	fixed := d / 2
	if b.Spread > 0 && b.Spread < 1 {
		fixed = d - time.Duration(float64(d)*b.Spread)
	}
	return fixed + time.Duration(b.Rand.Float64()*float64(d-fixed))
}
