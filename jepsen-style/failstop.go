package main

import (
	"bufio"
	"io"
	"os"
	"strings"
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
