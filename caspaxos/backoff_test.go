package caspaxos

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type fixedRand float64

func (f fixedRand) Float64() float64 { return float64(f) }

func TestBackoffAdaptiveFollowsPhase2Duration(t *testing.T) {
	bo := NewBackoff(BackoffAdaptive, 100*time.Millisecond, 10*time.Second, 0.5)
	// No sample yet: the base stands in for the EMA.
	assert.Equal(t, 50*time.Millisecond, bo.Delay(1, fixedRand(0.5)))
	bo.Observe(20 * time.Millisecond)
	mean, sigma := bo.EMA()
	assert.Equal(t, 20*time.Millisecond, mean)
	assert.Equal(t, 10*time.Millisecond, sigma)
	bo.Observe(40 * time.Millisecond)
	mean, sigma = bo.EMA()
	assert.Equal(t, 30*time.Millisecond, mean, "EMA = a*D + (1-a)*EMA")
	assert.Equal(t, 15*time.Millisecond, sigma, "sigma = a*|D-EMA| + (1-a)*sigma")
	// (EMA + sigma) * U * 2^(attempt-1)
	assert.Equal(t, 45*time.Millisecond, bo.Delay(1, fixedRand(1)))
	assert.Equal(t, 180*time.Millisecond, bo.Delay(3, fixedRand(1)))
	assert.Equal(t, time.Duration(0), bo.Delay(3, fixedRand(0)))
	assert.Equal(t, 10*time.Second, bo.Delay(40, fixedRand(1)), "capped")
}

func TestBackoffKinds(t *testing.T) {
	exp := NewBackoff(BackoffExponential, 100*time.Millisecond, time.Minute, 0.2)
	exp.Observe(time.Millisecond)
	assert.Equal(t, 400*time.Millisecond, exp.Delay(3, fixedRand(1)), "the fixed base ignores samples")
	none := NewBackoff(BackoffNone, 0, 0, 0)
	assert.Zero(t, none.Delay(5, fixedRand(1)))
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 1000; i++ {
		d := exp.Delay(2, rng)
		assert.GreaterOrEqual(t, d, time.Duration(0))
		assert.Less(t, d, 200*time.Millisecond)
	}
	for _, s := range []string{"adaptive", "exponential", "none"} {
		k, err := ParseBackoffKind(s)
		require.NoError(t, err)
		assert.Equal(t, s, k.String())
	}
	_, err := ParseBackoffKind("linear")
	require.ErrorIs(t, err, ErrInvalidConfig)
}
