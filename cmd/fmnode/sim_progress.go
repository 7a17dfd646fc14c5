package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fmnode/fmnode/sim"
)

// The progress line's pacing: nothing for a run that ends within
// progressDelay (most seeds of a sweep), then at most one redraw per
// progressEvery.
const (
	progressDelay = 2 * time.Second
	progressEvery = 250 * time.Millisecond
)

// progressLine shows how far a long `fmnode sim` has got on one line of
// stderr, rewritten in place with \r and blanked at the end. The simulator
// calls it every sim.ProgressEvery events from each sweep worker; the wall
// clock (now) is read here, in the command, never in the simulator. Safe
// for concurrent use.
type progressLine struct {
	mu    sync.Mutex
	w     io.Writer
	now   func() time.Time
	start time.Time
	// runs is the sweep's seed count, emitted how many it printed so far.
	runs, emitted uint64
	// running holds the latest report of each seed not yet emitted;
	// finished sums the events of the emitted ones.
	running  map[uint64]sim.ProgressReport
	finished uint64
	// The last redraw: when, the events then, and the line's width (to
	// blank what a shorter line leaves).
	drawn      bool
	lastDraw   time.Time
	lastEvents uint64
	width      int
}

// newProgressLine returns a progress line on w for a sweep of runs seeds.
// The command makes one only when stderr is a terminal (isTerminal), so
// piped or redirected output gets no \r noise.
func newProgressLine(w io.Writer, runs uint64, now func() time.Time) *progressLine {
	return &progressLine{w: w, now: now, start: now(), runs: runs, running: make(map[uint64]sim.ProgressReport)}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// report is the sim.Config.Progress callback.
func (p *progressLine) report(r sim.ProgressReport) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[r.Seed] = r
	t := p.now()
	if t.Sub(p.start) < progressDelay || (p.drawn && t.Sub(p.lastDraw) < progressEvery) {
		return
	}
	p.draw(t)
}

// emit prints a finished run's output (print) with the line out of the
// way; the next report draws it again.
func (p *progressLine) emit(seed, events uint64, print func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.running, seed)
	p.finished += events
	p.emitted++
	p.clearLocked()
	print()
}

// close blanks the line for good.
func (p *progressLine) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
}

func (p *progressLine) clearLocked() {
	if p.width > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
		p.width = 0
	}
}

func (p *progressLine) draw(t time.Time) {
	events := p.finished
	var cur sim.ProgressReport
	found := false
	for s, r := range p.running {
		events += r.Events
		// The oldest seed still running: the one the output waits for.
		if !found || s < cur.Seed {
			cur, found = r, true
		}
	}
	since := p.start
	if p.drawn {
		since = p.lastDraw
	}
	var rate float64
	if dt := t.Sub(since).Seconds(); dt > 0 && events >= p.lastEvents {
		rate = float64(events-p.lastEvents) / dt
	}
	line := formatProgress(cur, p.runs, p.emitted, rate)
	pad := ""
	if n := p.width - utf8.RuneCountInString(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprintf(p.w, "\r%s%s", line, pad)
	p.width = utf8.RuneCountInString(line)
	p.drawn, p.lastDraw, p.lastEvents = true, t, events
}

// formatProgress renders one progress line: the run's virtual time against
// its planned end, its stage, and the events per wall second of the whole
// sweep; a sweep of more than one seed leads with the runs done.
//
//	region-outage seed 1  sim 1234s of ≤2820s (43%)  outage  612k events/s
//
// The planned end is an upper bound (open-ended waits count at their
// bounds), hence the ≤.
func formatProgress(r sim.ProgressReport, runs, emitted uint64, rate float64) string {
	var b strings.Builder
	if runs > 1 {
		fmt.Fprintf(&b, "runs %d/%d  ", emitted, runs)
	}
	fmt.Fprintf(&b, "%s seed %d  sim %.0fs", r.Scenario, r.Seed, r.SimNow.Seconds())
	if r.Total > 0 {
		pct := 100 * r.SimNow.Seconds() / r.Total.Seconds()
		fmt.Fprintf(&b, " of ≤%.0fs (%.0f%%)", r.Total.Seconds(), min(pct, 100))
	}
	if r.Phase != "" {
		fmt.Fprintf(&b, "  %s", r.Phase)
	}
	fmt.Fprintf(&b, "  %s events/s", siCount(rate))
	return b.String()
}

// siCount renders a rate with a k or M suffix (three digits or so).
func siCount(x float64) string {
	switch {
	case x >= 10e6:
		return fmt.Sprintf("%.0fM", x/1e6)
	case x >= 1e6:
		return fmt.Sprintf("%.1fM", x/1e6)
	case x >= 10e3:
		return fmt.Sprintf("%.0fk", x/1e3)
	case x >= 1e3:
		return fmt.Sprintf("%.1fk", x/1e3)
	}
	return fmt.Sprintf("%.0f", x)
}
