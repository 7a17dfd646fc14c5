package routing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBreakerLifecycle(t *testing.T) {
	type step struct {
		at     time.Duration
		do     string // allow, ok, fail, release
		allow  bool   // for allow
		state  BreakerState
		reason string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"opens after threshold", []step{
			{0, "fail", false, Closed, "1st failure"},
			{0, "fail", false, Closed, "2nd failure"},
			{0, "fail", false, Open, "3rd failure opens"},
			{time.Second, "allow", false, Open, "open window"},
		}},
		{"success resets the count", []step{
			{0, "fail", false, Closed, ""},
			{0, "fail", false, Closed, ""},
			{0, "ok", false, Closed, "reset"},
			{0, "fail", false, Closed, "count restarted"},
			{0, "fail", false, Closed, ""},
		}},
		{"half-open probe success closes", []step{
			{0, "fail", false, Closed, ""}, {0, "fail", false, Closed, ""}, {0, "fail", false, Open, ""},
			{5 * time.Second, "allow", true, HalfOpen, "window over: the probe"},
			{5 * time.Second, "allow", false, HalfOpen, "one probe at a time"},
			{6 * time.Second, "ok", false, Closed, "probe succeeded"},
			{6 * time.Second, "allow", true, Closed, ""},
		}},
		{"half-open probe failure reopens", []step{
			{0, "fail", false, Closed, ""}, {0, "fail", false, Closed, ""}, {0, "fail", false, Open, ""},
			{5 * time.Second, "allow", true, HalfOpen, ""},
			{6 * time.Second, "fail", false, Open, "probe failed"},
			{10 * time.Second, "allow", false, Open, "new window from 6 s"},
			{11 * time.Second, "allow", true, HalfOpen, ""},
		}},
		{"lost probe", []step{
			{0, "fail", false, Closed, ""}, {0, "fail", false, Closed, ""}, {0, "fail", false, Open, ""},
			{5 * time.Second, "allow", true, HalfOpen, ""},
			{14 * time.Second, "allow", false, HalfOpen, "probe still out"},
			{15 * time.Second, "allow", true, HalfOpen, "probe timed out: another"},
			{15 * time.Second, "release", false, HalfOpen, "caller gave up"},
			{15 * time.Second, "allow", true, HalfOpen, "released: another"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var transitions []BreakerState
			b, err := NewBreakers(BreakerConfig{OnTransition: func(_ uint32, _ string, _, to BreakerState) {
				transitions = append(transitions, to)
			}})
			require.NoError(t, err)
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				switch s.do {
				case "allow":
					assert.Equal(t, s.allow, b.Allow(1, "eastus", now), "step %d %s", i, s.reason)
				case "ok":
					b.Success(1, "eastus")
				case "fail":
					b.Failure(1, "eastus", now)
				case "release":
					b.Release(1, "eastus")
				}
				assert.Equal(t, s.state, b.State(1, "eastus"), "step %d %s", i, s.reason)
				assert.True(t, b.Allow(2, "eastus", now), "other partitions unaffected")
				assert.True(t, b.Allow(1, "westus", now), "other regions unaffected")
			}
			_, open, half := b.Counts()
			st := b.State(1, "eastus")
			assert.Equal(t, st == Open, open == 1)
			assert.Equal(t, st == HalfOpen, half == 1)
		})
	}
}

func TestBreakerBound(t *testing.T) {
	b, err := NewBreakers(BreakerConfig{MaxBreakers: 2, FailureThreshold: 1})
	require.NoError(t, err)
	b.Failure(1, "a", t0)
	b.Failure(2, "a", t0)
	b.Failure(3, "a", t0) // full of open breakers: not tracked
	assert.Equal(t, Open, b.State(1, "a"))
	assert.Equal(t, Closed, b.State(3, "a"))
	_, err = NewBreakers(BreakerConfig{FailureThreshold: -1})
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "BreakerFailureThreshold")
}
