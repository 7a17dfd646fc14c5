package caspaxos

import (
	"time"
)

// Flow control of a proposer's rounds (issue 16): an adaptive bound on the
// rounds in flight and phase timeouts derived from the observed phase
// durations.
//
// Without it a proposer that is handed many proposals at once (a region
// outage: every surviving node proposes the failover of every partition it
// hosts) sends every round at once, and when the acceptors (processes on
// loaded cores) answer a burst of them more slowly than the fixed phase
// timeout, every round times out and is sent again in full: the retries
// keep the acceptors' queues as long as the first burst, so nothing
// commits (a congestion collapse, "prepare after 0 acks"). Two mechanisms,
// as TCP's:
//
//   - A window of rounds in flight (AIMD): a round starts only while
//     fewer than the window are in phase 1 or 2; the others wait, in the
//     order they came, and start as rounds end. Every commit grows the
//     window (by one below the slow-start threshold, by 1/window above);
//     a phase timeout halves it, at most once per phase timeout (the
//     rounds of one overloaded burst time out together and are one
//     congestion signal). NAKs (another proposer's ballot) are contention,
//     not congestion, and leave it alone.
//   - Phase timeouts from the observed phase durations: SRTT + 4·RTTVAR
//     (RFC 6298) over the durations of phases that reached their quorum,
//     never below the configured Phase1Timeout/Phase2Timeout and capped by
//     MaxPhaseTimeout. A round whose acceptors are merely slow then
//     completes instead of being abandoned and resent. Unlike RFC 6298 a
//     timeout does not double it: the node transport drops new batches
//     when a peer's send queue is full, so under a burst a timeout is as
//     often a lost batch as a slow acceptor, and a doubled timeout
//     lengthened every such stall (measured: the demo's 1000-partition
//     failover trickled over 40 s with doubling up to 8x, issue 16).
//
// Everything is driven by the proposer's injected clock: deterministic.

// FlowConfig configures the proposer's flow control. The zero value turns
// it off (every round starts at once, fixed phase timeouts).
type FlowConfig struct {
	// InitialWindow, when positive, turns the window of rounds in flight
	// on and is its starting size.
	InitialWindow int
	// MinWindow is the least the window shrinks to (at least 1).
	MinWindow int
	// MaxWindow caps the window; 0 means MaxInFlight.
	MaxWindow int
	// AdaptiveTimeout derives the phase timeouts from the observed phase
	// durations (the configured ones are the floor).
	AdaptiveTimeout bool
	// MaxPhaseTimeout caps an adaptive phase timeout (at least
	// Phase2Timeout).
	MaxPhaseTimeout time.Duration
}

// Flow control defaults (DefaultFlowConfig).
const (
	DefaultInitialWindow   = 256
	DefaultMinWindow       = 32
	DefaultMaxPhaseTimeout = 2 * time.Second
)

// DefaultFlowConfig is flow control on, with the defaults above.
func DefaultFlowConfig() FlowConfig {
	return FlowConfig{InitialWindow: DefaultInitialWindow, MinWindow: DefaultMinWindow,
		AdaptiveTimeout: true, MaxPhaseTimeout: DefaultMaxPhaseTimeout}
}

func (f FlowConfig) windowOn() bool { return f.InitialWindow > 0 }

// validate checks f against the proposer's config c.
func (f FlowConfig) validate(c ProposerConfig) error {
	switch {
	case f.InitialWindow < 0:
		return configErr("Flow.InitialWindow", "must not be negative, got %d", f.InitialWindow)
	case f.windowOn() && f.MinWindow < 1:
		return configErr("Flow.MinWindow", "must be at least 1 with the window on, got %d", f.MinWindow)
	case f.windowOn() && f.MinWindow > f.InitialWindow:
		return configErr("Flow.MinWindow", "%d is above Flow.InitialWindow %d", f.MinWindow, f.InitialWindow)
	case f.MaxWindow < 0:
		return configErr("Flow.MaxWindow", "must not be negative, got %d", f.MaxWindow)
	case f.windowOn() && f.MaxWindow > 0 && f.MaxWindow < f.InitialWindow:
		return configErr("Flow.MaxWindow", "%d is below Flow.InitialWindow %d", f.MaxWindow, f.InitialWindow)
	case f.AdaptiveTimeout && f.MaxPhaseTimeout < max(c.Phase1Timeout, c.Phase2Timeout):
		return configErr("Flow.MaxPhaseTimeout", "%v is below the phase timeouts (%v, %v)", f.MaxPhaseTimeout, c.Phase1Timeout, c.Phase2Timeout)
	}
	return nil
}

// FlowStats is what the flow control is doing (Proposer.Flow).
type FlowStats struct {
	Window    int           // the window of rounds in flight now (0: off)
	InRounds  int           // rounds in phase 1 or 2 (or a GC phase)
	Waiting   int           // proposals waiting for the window
	Decreases uint64        // times the window was halved
	SRTT      time.Duration // smoothed phase duration (0: no sample yet)
	RTTVar    time.Duration
	Phase1    time.Duration // the phase timeouts a round started now gets
	Phase2    time.Duration
}

// flow is the proposer's flow-control state.
type flow struct {
	cfg      FlowConfig
	maxWin   float64
	cwnd     float64
	ssthresh float64
	inRounds int
	// waiting: keys whose round waits for the window, oldest first.
	waiting []*keyState
	// quietUntil: no further decrease (window or timeout doubling) before
	// then; the rounds of one burst time out together.
	quietUntil time.Duration
	decreases  uint64
	// Phase duration estimator (RFC 6298), in nanoseconds.
	srtt, rttvar float64
	sampled      bool
}

func newFlow(c ProposerConfig) flow {
	f := flow{cfg: c.Flow}
	if f.cfg.windowOn() {
		f.maxWin = float64(c.MaxInFlight)
		if f.cfg.MaxWindow > 0 {
			f.maxWin = min(f.maxWin, float64(f.cfg.MaxWindow))
		}
		f.cwnd = min(float64(f.cfg.InitialWindow), f.maxWin)
		f.ssthresh = f.maxWin
	}
	return f
}

// full reports whether a new round must wait for the window.
func (f *flow) full() bool {
	return f.cfg.windowOn() && f.inRounds >= max(int(f.cwnd), 1)
}

// sample feeds the duration of a phase that reached its quorum.
func (f *flow) sample(d time.Duration) {
	if !f.cfg.AdaptiveTimeout || d < 0 {
		return
	}
	x := float64(d)
	if !f.sampled {
		f.srtt, f.rttvar, f.sampled = x, x/2, true
	} else {
		diff := f.srtt - x
		if diff < 0 {
			diff = -diff
		}
		f.rttvar = 0.75*f.rttvar + 0.25*diff
		f.srtt = 0.875*f.srtt + 0.125*x
	}
}

// committed grows the window by one commit's worth.
func (f *flow) committed() {
	if !f.cfg.windowOn() {
		return
	}
	if f.cwnd < f.ssthresh {
		f.cwnd++
	} else {
		f.cwnd += 1 / f.cwnd
	}
	f.cwnd = min(f.cwnd, f.maxWin)
}

// timedOut takes a phase timeout as a congestion signal: at most one per
// period (the phase timeout it fired with), so a burst counts once.
func (f *flow) timedOut(now, period time.Duration) {
	if now < f.quietUntil || !f.cfg.windowOn() {
		return
	}
	f.quietUntil = now + period
	f.ssthresh = max(f.cwnd/2, float64(f.cfg.MinWindow))
	f.cwnd = f.ssthresh
	f.decreases++
}

// timeout returns the timeout of a phase whose configured one is base.
func (f *flow) timeout(base time.Duration) time.Duration {
	if !f.cfg.AdaptiveTimeout {
		return base
	}
	t := base
	if f.sampled {
		t = max(t, time.Duration(f.srtt+4*f.rttvar))
	}
	return min(t, f.cfg.MaxPhaseTimeout)
}

// ----- the proposer's side -----

// Flow reports the flow control's state.
func (p *Proposer) Flow() FlowStats {
	f := &p.flow
	s := FlowStats{InRounds: f.inRounds, Waiting: len(f.waiting), Decreases: f.decreases,
		SRTT: time.Duration(f.srtt), RTTVar: time.Duration(f.rttvar),
		Phase1: f.timeout(p.cfg.Phase1Timeout), Phase2: f.timeout(p.cfg.Phase2Timeout)}
	if f.cfg.windowOn() {
		s.Window = max(int(f.cwnd), 1)
	}
	return s
}

// admit reports whether ks's next round may start now; if not, ks waits
// for the window (no timer runs meanwhile) and starts when a round ends.
func (p *Proposer) admit(ks *keyState) bool {
	if ks.inRound {
		return true // its round already counts (a GC step, a queued retry)
	}
	if p.flow.full() {
		if !ks.windowWait {
			ks.windowWait = true
			ks.phase = phaseBackoff
			ks.timerGen = 0 // no timer of the key is live while it waits
			p.flow.waiting = append(p.flow.waiting, ks)
			p.stats.WindowWaits++
		}
		return false
	}
	ks.inRound = true
	p.flow.inRounds++
	return true
}

// roundEnded releases ks's place in the window and starts the rounds
// that wait for it.
func (p *Proposer) roundEnded(now time.Duration, ks *keyState) {
	if !ks.inRound {
		return
	}
	ks.inRound = false
	p.flow.inRounds--
	p.admitWaiting(now)
}

// admitWaiting starts waiting rounds while the window has room.
func (p *Proposer) admitWaiting(now time.Duration) {
	f := &p.flow
	for len(f.waiting) > 0 && !f.full() {
		ks := f.waiting[0]
		f.waiting[0] = nil
		f.waiting = f.waiting[1:]
		ks.windowWait = false
		if ks.cur == nil || p.keys[ks.key] != ks {
			continue // finished or dropped meanwhile
		}
		p.startRound(now, ks)
	}
	if len(f.waiting) == 0 {
		f.waiting = nil // let the backing array go after a burst
	}
}

// phaseTimeout is the timeout of a phase whose configured one is base.
func (p *Proposer) phaseTimeout(base time.Duration) time.Duration { return p.flow.timeout(base) }
