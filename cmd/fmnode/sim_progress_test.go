package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/sim"
)

// fakeClock is the progress line's wall clock in tests: it moves only when
// told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestFormatProgress(t *testing.T) {
	r := sim.ProgressReport{Seed: 1, Scenario: "region-outage", SimNow: 1234 * time.Second,
		Total: 2820 * time.Second, Phase: "outage", Events: 9_000_000}
	assert.Equal(t, "region-outage seed 1  sim 1234s of ≤2820s (44%)  outage  612k events/s",
		formatProgress(r, 1, 0, 612_345))
	// A sweep leads with the runs done; no stage, no plan: just the time.
	r = sim.ProgressReport{Seed: 7, Scenario: "replication", SimNow: 12 * time.Second}
	assert.Equal(t, "runs 3/10  replication seed 7  sim 12s  1.5M events/s", formatProgress(r, 10, 3, 1_500_000))
	// A script's extra wait can pass the planned end: the share stops at 100%.
	r = sim.ProgressReport{Seed: 2, Scenario: "failback", SimNow: 900 * time.Second, Total: 800 * time.Second, Phase: "recovery"}
	assert.Contains(t, formatProgress(r, 1, 0, 950), "sim 900s of ≤800s (100%)  recovery  950 events/s")
}

func TestSiCount(t *testing.T) {
	for x, want := range map[float64]string{0: "0", 999: "999", 1500: "1.5k", 25_400: "25k", 3_210_000: "3.2M", 42_000_000: "42M"} {
		assert.Equal(t, want, siCount(x), "%v", x)
	}
}

// TestProgressLinePacing: quiet for the first two seconds, then at most
// one redraw per progressEvery, each rewriting the line with \r and
// blanking what a longer one left; emitted output gets a blank line first,
// and close blanks it for good. The clock is injected.
func TestProgressLinePacing(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	var out bytes.Buffer
	p := newProgressLine(&out, 1, clk.now)
	rep := func(sec int, phase string, events uint64) {
		p.report(sim.ProgressReport{Seed: 1, Scenario: "region-outage", SimNow: time.Duration(sec) * time.Second,
			Total: 2820 * time.Second, Phase: phase, Events: events})
	}
	for i := 0; i < 19; i++ {
		rep(10*i, "warm-up", uint64(i)*100_000)
		clk.advance(100 * time.Millisecond)
	}
	assert.Empty(t, out.String(), "nothing within the first two seconds")

	clk.t = time.Unix(1002, 0)
	rep(300, "outage", 4_000_000) // 4M events in 2 s
	first := "\rregion-outage seed 1  sim 300s of ≤2820s (11%)  outage  2.0M events/s"
	assert.Equal(t, first, out.String())

	// Within progressEvery of the last redraw: no new one.
	clk.advance(progressEvery - time.Millisecond)
	rep(310, "outage", 4_100_000)
	assert.Equal(t, first, out.String())

	// Then the next; the rate is over the time since the last redraw.
	clk.advance(time.Millisecond)
	rep(320, "outage", 4_500_000)
	second := "\rregion-outage seed 1  sim 320s of ≤2820s (11%)  outage  2.0M events/s"
	assert.Equal(t, first+second, out.String())

	// A shorter line blanks the rest of the longer one.
	out.Reset()
	clk.advance(time.Second)
	rep(2000, "check", 4_500_000)
	line := "region-outage seed 1  sim 2000s of ≤2820s (71%)  check  0 events/s"
	width := len([]rune(strings.TrimPrefix(second, "\r")))
	require.Less(t, len([]rune(line)), width)
	assert.Equal(t, "\r"+line+strings.Repeat(" ", width-len([]rune(line))), out.String())

	// Emitting a run's output blanks the line first (the padding is blank
	// already); close after that has nothing left to blank.
	out.Reset()
	p.emit(1, 4_500_000, func() { out.WriteString("TABLE\n") })
	blank := "\r" + strings.Repeat(" ", len([]rune(line))) + "\r"
	assert.Equal(t, blank+"TABLE\n", out.String())
	out.Reset()
	p.close()
	assert.Empty(t, out.String())
}

// TestProgressLineSweep: a sweep shows the runs printed so far and the
// oldest seed still running; events per second count every seed.
func TestProgressLineSweep(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	var out bytes.Buffer
	p := newProgressLine(&out, 4, clk.now)
	clk.advance(3 * time.Second)
	p.emit(1, 1_000_000, func() {})
	p.report(sim.ProgressReport{Seed: 3, Scenario: "register", SimNow: 5 * time.Second, Total: 82 * time.Second, Phase: "liveness", Events: 1_000_000})
	p.report(sim.ProgressReport{Seed: 2, Scenario: "register", SimNow: 9 * time.Second, Total: 82 * time.Second, Phase: "safety", Events: 1_000_000})
	// The first report drew (seed 3 alone running); the second is within
	// progressEvery.
	assert.Equal(t, "\rruns 1/4  register seed 3  sim 5s of ≤82s (6%)  liveness  667k events/s", out.String())
	out.Reset()
	clk.advance(time.Second)
	p.report(sim.ProgressReport{Seed: 2, Scenario: "register", SimNow: 20 * time.Second, Total: 82 * time.Second, Phase: "liveness", Events: 1_500_000})
	assert.Equal(t, "\rruns 1/4  register seed 2  sim 20s of ≤82s (24%)  liveness  1.5M events/s", out.String())
}
