package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// demoProgress tells a person on stderr what the demo does: each phase
// as it starts, and during a wait its countdown and what it waits for,
// redrawn every second on a terminal and printed every 5 s elsewhere.
type demoProgress struct {
	w       io.Writer
	tty     bool
	onPhase func(string)
	n       int
	total   int // phases the drill announces
	start   time.Time
	mu      sync.Mutex
}

// demoPhases is how many phases a drill announces: 11, and the burst's
// when it calibrates the prediction (the count read 12/11 in session 12).
func demoPhases(burst bool) int {
	if burst {
		return 12
	}
	return 11
}

// errCountdownOver: a countdown ran out before its condition held.
var errCountdownOver = errors.New("time is up")

func newDemoProgress(w io.Writer, onPhase func(string), total int) *demoProgress {
	return &demoProgress{w: w, tty: isTerminal(w), onPhase: onPhase, total: total, start: time.Now()}
}

func (p *demoProgress) phase(name, what string) {
	p.mu.Lock()
	p.n++
	fmt.Fprintf(p.w, "[%5.1fs] %d/%d %s: %s\n", time.Since(p.start).Seconds(), p.n, p.total, name, what)
	p.mu.Unlock()
	if p.onPhase != nil {
		p.onPhase(name)
	}
}

func (p *demoProgress) note(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "         "+format+"\n", args...)
}

// countdown waits until done reports true (checked every 100 ms; nil:
// never), d passes (errCountdownOver when done was given) or ctx ends,
// showing the time left and status.
func (p *demoProgress) countdown(ctx context.Context, label string, d time.Duration, status func() string, done func() bool) error {
	start := time.Now()
	deadline := start.Add(d)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var lastShown time.Time
	every := 5 * time.Second
	if p.tty {
		every = time.Second
	}
	show := func(final bool) {
		left := max(0, time.Until(deadline))
		line := fmt.Sprintf("%s: %4.1f s elapsed, %3.0f s left", label, time.Since(start).Seconds(), left.Seconds())
		if status != nil {
			line += ", " + status()
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		switch {
		case p.tty && final:
			fmt.Fprintf(p.w, "\r\033[K         %s\n", line)
		case p.tty:
			fmt.Fprintf(p.w, "\r\033[K         %s", line)
		default:
			fmt.Fprintf(p.w, "         %s\n", line)
		}
	}
	for {
		if done != nil && done() {
			show(true)
			return nil
		}
		now := time.Now()
		if !now.Before(deadline) {
			show(true)
			if done != nil {
				return errCountdownOver
			}
			return nil
		}
		if now.Sub(lastShown) >= every {
			lastShown = now
			show(false)
		}
		select {
		case <-ctx.Done():
			if p.tty {
				fmt.Fprintln(p.w)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}
