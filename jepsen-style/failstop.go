package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Markers in an agent's log (its slog messages; the harness appends
// every incarnation's output to one agent.log).
const (
	logStarted         = "agent started"
	logAcceptorStopped = "sysreg acceptor stopped"
	logAgentFailed     = "agent failed"
)

// maxLogScan bounds what the fail-stop check reads of one agent's log.
const maxLogScan = 256 << 20

// checkFailStop reads every agent's log: a system-register acceptor that
// stopped (a store Apply failed, e.g. on the disk-full fault) answers
// nothing again until its process restarts, so the incarnation it
// stopped in must end by failing ("agent failed"), never run on with it
// stopped. The harness then restarts the agent once the disk is freed
// (the convergence check needs every agent ready), which recovers the
// acceptor from its store.
func checkFailStop(c *cluster, v *verdict) {
	for _, n := range c.nodes {
		f, err := os.Open(n.logPath)
		if err != nil {
			continue // never started: reported elsewhere
		}
		stops, ranOn := scanFailStop(io.LimitReader(f, maxLogScan))
		_ = f.Close()
		v.AcceptorStops += stops
		for _, line := range ranOn {
			v.AcceptorRanOn++
			v.violate("%s: its system-register acceptor stopped (log line %d) and the agent ran on until it was killed", n.name, line)
		}
	}
}

// scanFailStop returns how many acceptor stops a log shows and the line
// numbers of those whose incarnation did not then fail.
func scanFailStop(r io.Reader) (stops int, ranOn []int) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	pending, line := 0, 0
	end := func() {
		if pending != 0 {
			ranOn = append(ranOn, pending)
		}
		pending = 0
	}
	for sc.Scan() {
		line++
		s := sc.Text()
		switch {
		case strings.Contains(s, logStarted):
			end()
		case strings.Contains(s, logAcceptorStopped):
			stops++
			if pending == 0 {
				pending = line
			}
		case strings.Contains(s, logAgentFailed):
			pending = 0
		}
	}
	end()
	return stops, ranOn
}

// failStopWait bounds how long a failing agent may take to exit: its
// shutdown_timeout (5 s) and a margin for a loaded machine.
const failStopWait = 15 * time.Second

// restartFailed is what a supervisor (systemd's Restart=on-failure) does
// for an agent that stopped itself, e.g. on a full disk: once the current
// incarnation has logged its failure, wait for it to exit (it shuts down
// gracefully, within its shutdown_timeout) and start it again. An agent
// that is running and has not failed is left alone. It returns what it
// did ("" for nothing).
func (c *cluster) restartFailed(n *node) string {
	if c.running(n) && !c.failing(n) {
		return ""
	}
	deadline := time.Now().Add(failStopWait)
	for c.running(n) {
		if time.Now().After(deadline) {
			return fmt.Sprintf("%s logged its failure but did not exit within %v", n.name, failStopWait)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := c.start(n); err != nil {
		return err.Error()
	}
	return n.name + " had stopped itself: restarted"
}

// failing reports whether the current incarnation logged "agent failed".
func (c *cluster) failing(n *node) bool {
	n.mu.Lock()
	from := n.logStart
	n.mu.Unlock()
	f, err := os.Open(n.logPath)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return false
	}
	sc := bufio.NewScanner(io.LimitReader(f, maxLogScan))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), logAgentFailed) {
			return true
		}
	}
	return false
}
