package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestRequestService: the burst's drain time per write acknowledged in it,
// bounded; nothing acknowledged (or no time) models no queue.
func TestRequestService(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		name   string
		b0, b1 burstSample
		want   time.Duration
	}{
		{"1000 writes in 0.4 s", burstSample{t0, 50}, burstSample{t0.Add(400 * time.Millisecond), 1050}, 400 * time.Microsecond},
		{"steady writes count too", burstSample{t0, 0}, burstSample{t0.Add(500 * time.Millisecond), 1250}, 400 * time.Microsecond},
		{"nothing acknowledged", burstSample{t0, 7}, burstSample{t0.Add(time.Second), 7}, 0},
		{"no time", burstSample{t0, 0}, burstSample{t0, 10}, 0},
		{"bounded", burstSample{t0, 0}, burstSample{t0.Add(time.Minute), 2}, demoMaxRequestService},
	} {
		assert.Equal(t, c.want, requestService(c.b0, c.b1), c.name)
	}
}
