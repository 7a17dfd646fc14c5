// Drain pacing: the rate limit on switchover starts (a GCRA bucket,
// rebuilt from the registers when a drain is asked for again after a
// restart), the count of switchovers a drain has running, and DrainWait,
// what a partition queued for a drain waits on. The drain loop itself is
// in manager_drain.go.

package failover

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Drain rate limit bounds.
const (
	// NoDrainRateLimit as ManagerConfig.DrainRate turns the drain's rate
	// limit off (+Inf does too).
	NoDrainRateLimit = math.MaxFloat64
	// MaxDrainRate is the greatest finite DrainRate: starts a microsecond
	// apart.
	MaxDrainRate = 1e6
)

// fillDrainRate applies the drain rate defaults and validates them (after
// DrainConcurrency).
func (c *ManagerConfig) fillDrainRate() error {
	if c.DrainRate == 0 {
		c.DrainRate = DefaultDrainRate
	}
	if c.DrainBurst == 0 {
		c.DrainBurst = min(DefaultDrainBurst, c.DrainConcurrency)
	}
	switch {
	case math.IsNaN(c.DrainRate) || c.DrainRate < 0:
		return configErr("DrainRate", "must be positive (per second) or NoDrainRateLimit, got %v", c.DrainRate)
	case c.DrainRate > MaxDrainRate && c.DrainRate != NoDrainRateLimit && !math.IsInf(c.DrainRate, 1):
		return configErr("DrainRate", "%v per second is beyond %v (use NoDrainRateLimit for none)", c.DrainRate, MaxDrainRate)
	case c.DrainBurst < 1:
		return configErr("DrainBurst", "must be positive, got %d", c.DrainBurst)
	case c.DrainBurst > c.DrainConcurrency:
		return configErr("DrainBurst", "%d exceeds DrainConcurrency %d: starts beyond it cannot run at once", c.DrainBurst, c.DrainConcurrency)
	}
	return nil
}

// drainPace is a drain's rate limit kept as GCRA (the generic cell rate
// algorithm: a token bucket held as one time, the theoretical arrival
// time tat). A start is allowed at now if now >= tat - (burst-1) x
// interval, and moves tat to max(tat, now) + interval: DrainBurst starts
// at once from a full bucket, then one per interval.
type drainPace struct {
	tat time.Duration
}

// drainInterval is the time between starts at DrainRate (0: no limit).
func (c *ManagerConfig) drainInterval() time.Duration {
	if c.DrainRate > MaxDrainRate {
		return 0
	}
	return time.Duration(float64(time.Second) / c.DrainRate)
}

// allowedAt returns the earliest time pc allows a start.
func (pc *drainPace) allowedAt(iv time.Duration, burst int) time.Duration {
	return pc.tat - time.Duration(burst-1)*iv
}

// take records a start at now.
func (pc *drainPace) take(now, iv time.Duration) { pc.tat = max(pc.tat, now) + iv }

// drainPaceOf returns region r's drain pace, rebuilding it from the
// registers when the drain has none (it was just asked for, or this node
// restarted). Every switchover start out of r is recorded in its
// partition's register history with its time, so the starts of the last
// drainMemory are replayed through the bucket, which is taken as empty
// before them: at the window's start the real bucket's tat was at most
// burst intervals past its last start, so the rebuilt tat is never below
// the real one, and a restarted driver asked to resume does not start a
// fresh burst on top of the one it just spent. Other starts out of r
// (operator switchovers) count too, which only slows the drain. Register
// times are compared with this node's clock as the switchover deadline
// (PhaseSince) already is; a start timed after now counts as now.
func (m *Manager) drainPaceOf(r Region, now time.Duration) *drainPace {
	if pc := m.drainPaces[r]; pc != nil {
		return pc
	}
	if m.drainPaces == nil {
		m.drainPaces = make(map[Region]*drainPace)
	}
	iv := m.cfg.drainInterval()
	window := drainMemory * time.Duration(m.cfg.DrainBurst) * iv
	pc := &drainPace{tat: now - window + time.Duration(m.cfg.DrainBurst)*iv}
	if iv > 0 {
		var starts []time.Duration
		for _, name := range m.names {
			p := m.parts[name]
			if !p.have {
				continue
			}
			for _, t := range p.state.History {
				if at := min(t.At, now); t.Kind == DecideStartSwitchover && t.From == r && at >= now-window {
					starts = append(starts, at)
				}
			}
		}
		slices.Sort(starts)
		for _, at := range starts {
			pc.take(at, iv)
		}
	}
	m.drainPaces[r] = pc
	return pc
}

// drainMemory is how many bucket-refill times (burst x interval) of
// register history a rebuilt drain pace replays: one suffices to be safe;
// more makes the rebuilt bucket closer to the real one.
const drainMemory = 4

// drainRunning counts the switchovers the drain of r has running: those
// out of r, and the switchover starts in flight.
func (m *Manager) drainRunning(r Region) int {
	running := 0
	for _, name := range m.names {
		p := m.parts[name]
		if p.have && (p.state.Phase == PhaseSwitchover && p.state.WriteRegion == r || p.inflight && p.inflightK == DecideStartSwitchover) {
			running++
		}
	}
	return running
}

// DrainWait is what a drain waits on before it moves a queued partition:
// the answer to "why hasn't this partition moved yet?".
type DrainWait struct {
	Region Region
	Reason string
	// Ahead counts the partitions the drain starts first (it goes in
	// partition name order).
	Ahead int
	// Running switchovers of the drain, and its cap.
	Running, Concurrency int
	// RatePerS and Burst are the rate limit (RatePerS 0: none).
	RatePerS float64
	Burst    int
	// NextStartAt is when the rate allows the drain's next start, and
	// StartAt the earliest this partition's can be, at the rate, after
	// the ones ahead of it (both at most Now when nothing holds them;
	// they do not count completions the concurrency cap waits for).
	// Unknown until the rate limit is rebuilt from the registers
	// (Paced false: the node does not know every register value yet).
	Paced                bool
	NextStartAt, StartAt time.Duration
}

// drainWait returns what the drain of p's write region that this node
// runs waits on before it moves p, or nil if p is not queued for one.
func (m *Manager) drainWait(now time.Duration, p *partition) *DrainWait {
	r := p.state.WriteRegion
	reason, ok := m.draining[r]
	if !ok || !p.have || p.state.Phase != PhaseSteady {
		return nil
	}
	w := &DrainWait{Region: r, Reason: reason, Running: m.drainRunning(r), Concurrency: m.cfg.DrainConcurrency, Burst: m.cfg.DrainBurst}
	for _, name := range m.names {
		if name == p.name {
			break
		}
		q := m.parts[name]
		if q.have && !q.inflight && q.state.WriteRegion == r && q.state.Phase == PhaseSteady {
			w.Ahead++
		}
	}
	iv := m.cfg.drainInterval()
	if iv > 0 {
		w.RatePerS = m.cfg.DrainRate
	}
	pace := m.drainPaces[r]
	if pace == nil {
		return w
	}
	w.Paced = true
	w.NextStartAt, w.StartAt = now, now
	if iv > 0 {
		w.NextStartAt = max(now, pace.allowedAt(iv, m.cfg.DrainBurst))
		w.StartAt = max(now, pace.allowedAt(iv, m.cfg.DrainBurst)+time.Duration(w.Ahead)*iv)
	}
	return w
}

// explain renders w for Explain.
func (w *DrainWait) explain(now time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  queued for the drain of %s (%s): %d partitions ahead; %d of %d switchovers running",
		w.Region, w.Reason, w.Ahead, w.Running, w.Concurrency)
	if w.Running >= w.Concurrency {
		b.WriteString(" (waiting for one to finish: DrainConcurrency)")
	}
	b.WriteString("\n")
	switch {
	case w.RatePerS == 0:
		b.WriteString("    no rate limit\n")
	case !w.Paced:
		fmt.Fprintf(&b, "    rate %g/s, burst %d: rebuilt from the registers once every value is known\n", w.RatePerS, w.Burst)
	default:
		fmt.Fprintf(&b, "    rate %g/s, burst %d: ", w.RatePerS, w.Burst)
		if w.NextStartAt > now {
			fmt.Fprintf(&b, "next start allowed in %v (DrainRate)", w.NextStartAt-now)
		} else {
			b.WriteString("a start is allowed now")
		}
		if w.StartAt > now {
			fmt.Fprintf(&b, "; this partition's not before %v from now", w.StartAt-now)
		}
		b.WriteString("\n")
	}
	return b.String()
}
