package txtdns

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestManualClock(t *testing.T) {
	c := NewManualClock(time.Unix(100, 0))
	require.NoError(t, c.Sleep(context.Background(), 2*time.Second))
	c.Advance(time.Second)
	c.Advance(-time.Hour)
	assert.Equal(t, time.Unix(103, 0), c.Now())
	assert.Equal(t, 2*time.Second, c.Slept())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, c.Sleep(ctx, time.Second), context.Canceled)
	assert.Equal(t, time.Unix(103, 0), c.Now(), "a cancelled sleep does not advance")
}

func TestCoarseClock(t *testing.T) {
	_, err := NewCoarseClock(time.Nanosecond)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	c, err := NewCoarseClock(0)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), c.Now(), time.Second, "falls back to the system clock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	require.Eventually(t, func() bool { return c.nowNanos.Load() != 0 }, time.Second, time.Millisecond)
	first := c.Now()
	require.Eventually(t, func() bool { return c.Now().After(first) }, time.Second, time.Millisecond)
	assert.WithinDuration(t, time.Now(), c.Now(), 100*time.Millisecond)
	cancel()
	<-done
	assert.Zero(t, c.nowNanos.Load())
	assert.NoError(t, c.Sleep(context.Background(), time.Millisecond))
}
