package clusterspec

import (
	"fmt"
	"strconv"
	"time"

	"github.com/fmnode/fmnode/failover"
)

// Profile names.
const (
	ProfilePaper  = "paper"
	ProfileFast   = "fast"
	ProfileCustom = "custom"
)

// Bounds of the non-duration overrides (failover checks their lower
// bounds and the relations).
const (
	maxGrayMinErrors = 1 << 20
	maxCatchUpLagOps = 1 << 40
)

// Profile is the failover timing. "paper" and "fast" are failover's
// profiles exactly: a name that promises a profile must deliver it, so
// they take no overrides. "custom" starts from Base ("paper" or "fast",
// "" for paper) and applies every override that is set; nil leaves the
// base's value. FailoverConfig is the result.
type Profile struct {
	Name string `json:"name"`
	Base string `json:"base,omitempty"`

	HeartbeatInterval    *Duration `json:"heartbeat_interval,omitempty"`
	SuspectProbeInterval *Duration `json:"suspect_probe_interval,omitempty"`
	LeaseDuration        *Duration `json:"lease_duration,omitempty"`
	MaxClockDrift        *Duration `json:"max_clock_drift,omitempty"`
	GracefulTimeout      *Duration `json:"graceful_timeout,omitempty"`
	ProposeStagger       *Duration `json:"propose_stagger,omitempty"`
	BackupAfter          *Duration `json:"backup_after,omitempty"`
	HoldOffBase          *Duration `json:"hold_off_base,omitempty"`
	HoldOffMax           *Duration `json:"hold_off_max,omitempty"`
	FlapWindow           *Duration `json:"flap_window,omitempty"`
	GrowHoldOffBase      *Duration `json:"grow_hold_off_base,omitempty"`
	GrowHoldOffMax       *Duration `json:"grow_hold_off_max,omitempty"`
	FailbackAfter        *Duration `json:"failback_after,omitempty"`
	GrayStall            *Duration `json:"gray_stall,omitempty"`
	CatchUpLagOps        *uint64   `json:"catch_up_lag_ops,omitempty"`
	GrayMinErrors        *int      `json:"gray_min_errors,omitempty"`
	HistoryLen           *int      `json:"history_len,omitempty"`
	AutoFailback         *bool     `json:"auto_failback,omitempty"`
}

// override is one optional field of a custom profile: its key below
// "profile.", how to read, set, bound-check and apply it.
type override struct {
	key, usage string
	isSet      func(p *Profile) bool
	get        func(p *Profile) string
	// set parses a value; "" unsets.
	set func(p *Profile, v string) error
	// check returns a problem with the value set, or "".
	check func(p *Profile) string
	apply func(p *Profile, c *failover.Config)
	// clone gives p a copy of the value of its own.
	clone func(p *Profile)
}

// ptrClone points *f at a copy of its value.
func ptrClone[T any](f **T) {
	if *f != nil {
		v := **f
		*f = &v
	}
}

func durOverride(key, usage string, f func(*Profile) **Duration, c func(*failover.Config) *time.Duration) override {
	return override{
		key: key, usage: usage,
		isSet: func(p *Profile) bool { return *f(p) != nil },
		get: func(p *Profile) string {
			if d := *f(p); d != nil {
				return d.String()
			}
			return ""
		},
		set: func(p *Profile, v string) error {
			if v == "" {
				*f(p) = nil
				return nil
			}
			d, err := parseDuration(v)
			if err != nil {
				return err
			}
			dd := Duration(d)
			*f(p) = &dd
			return nil
		},
		check: func(p *Profile) string {
			if d := *f(p); d != nil && (*d < 0 || d.D() > MaxOverride) {
				return fmt.Sprintf("must be in 0s..%v, got %v", MaxOverride, d)
			}
			return ""
		},
		apply: func(p *Profile, cfg *failover.Config) {
			if d := *f(p); d != nil {
				*c(cfg) = d.D()
			}
		},
		clone: func(p *Profile) { ptrClone(f(p)) },
	}
}

func intOverride[T int | uint64](key, usage string, max T, f func(*Profile) **T, c func(*failover.Config) *T) override {
	return override{
		key: key, usage: usage,
		isSet: func(p *Profile) bool { return *f(p) != nil },
		get: func(p *Profile) string {
			if v := *f(p); v != nil {
				return fmt.Sprint(*v)
			}
			return ""
		},
		set: func(p *Profile, v string) error {
			if v == "" {
				*f(p) = nil
				return nil
			}
			var n T
			if _, err := fmt.Sscan(v, &n); err != nil || fmt.Sprint(n) != v {
				return fmt.Errorf("%s is not a whole number", show(v))
			}
			*f(p) = &n
			return nil
		},
		check: func(p *Profile) string {
			if v := *f(p); v != nil && (*v < 0 || *v > max) {
				return fmt.Sprintf("must be in 0..%d, got %d", max, *v)
			}
			return ""
		},
		apply: func(p *Profile, cfg *failover.Config) {
			if v := *f(p); v != nil {
				*c(cfg) = *v
			}
		},
		clone: func(p *Profile) { ptrClone(f(p)) },
	}
}

func boolOverride(key, usage string, f func(*Profile) **bool, c func(*failover.Config) *bool) override {
	return override{
		key: key, usage: usage,
		isSet: func(p *Profile) bool { return *f(p) != nil },
		get: func(p *Profile) string {
			if v := *f(p); v != nil {
				return strconv.FormatBool(*v)
			}
			return ""
		},
		set: func(p *Profile, v string) error {
			if v == "" {
				*f(p) = nil
				return nil
			}
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s is not true or false", show(v))
			}
			*f(p) = &b
			return nil
		},
		check: func(*Profile) string { return "" },
		apply: func(p *Profile, cfg *failover.Config) {
			if v := *f(p); v != nil {
				*c(cfg) = *v
			}
		},
		clone: func(p *Profile) { ptrClone(f(p)) },
	}
}

// overrides lists every override in Profile order (a test checks that
// none is missing).
func overrides() []override {
	type P = Profile
	type C = failover.Config
	return []override{
		durOverride("heartbeat_interval", "how often a node heartbeats every other node", func(p *P) **Duration { return &p.HeartbeatInterval }, func(c *C) *time.Duration { return &c.HeartbeatInterval }),
		durOverride("suspect_probe_interval", "how often a suspected node is probed (at most heartbeat_interval)", func(p *P) **Duration { return &p.SuspectProbeInterval }, func(c *C) *time.Duration { return &c.SuspectProbeInterval }),
		durOverride("lease_duration", "write-region lease (above heartbeat_interval + max_clock_drift)", func(p *P) **Duration { return &p.LeaseDuration }, func(c *C) *time.Duration { return &c.LeaseDuration }),
		durOverride("max_clock_drift", "bound on two nodes' clock disagreement over a lease", func(p *P) **Duration { return &p.MaxClockDrift }, func(c *C) *time.Duration { return &c.MaxClockDrift }),
		durOverride("graceful_timeout", "bound on a graceful switchover", func(p *P) **Duration { return &p.GracefulTimeout }, func(c *C) *time.Duration { return &c.GracefulTimeout }),
		durOverride("propose_stagger", "delay between ranked backup proposers", func(p *P) **Duration { return &p.ProposeStagger }, func(c *C) *time.Duration { return &c.ProposeStagger }),
		durOverride("backup_after", "wait, per rank, before acting for a silent preferred proposer", func(p *P) **Duration { return &p.BackupAfter }, func(c *C) *time.Duration { return &c.BackupAfter }),
		durOverride("hold_off_base", "first failover hold-off within flap_window (doubles)", func(p *P) **Duration { return &p.HoldOffBase }, func(c *C) *time.Duration { return &c.HoldOffBase }),
		durOverride("hold_off_max", "cap of the failover hold-off", func(p *P) **Duration { return &p.HoldOffMax }, func(c *C) *time.Duration { return &c.HoldOffMax }),
		durOverride("flap_window", "window in which failovers and quorum shrinks count as flapping", func(p *P) **Duration { return &p.FlapWindow }, func(c *C) *time.Duration { return &c.FlapWindow }),
		durOverride("grow_hold_off_base", "first write-quorum regrow hold-off (doubles)", func(p *P) **Duration { return &p.GrowHoldOffBase }, func(c *C) *time.Duration { return &c.GrowHoldOffBase }),
		durOverride("grow_hold_off_max", "cap of the regrow hold-off (at most flap_window)", func(p *P) **Duration { return &p.GrowHoldOffMax }, func(c *C) *time.Duration { return &c.GrowHoldOffMax }),
		durOverride("failback_after", "health the preferred region needs before failback", func(p *P) **Duration { return &p.FailbackAfter }, func(c *C) *time.Duration { return &c.FailbackAfter }),
		durOverride("gray_stall", "commit stall that, with client errors, marks the write region gray-failed", func(p *P) **Duration { return &p.GrayStall }, func(c *C) *time.Duration { return &c.GrayStall }),
		intOverride("catch_up_lag_ops", "ops a replica may lag and count as caught up", uint64(maxCatchUpLagOps), func(p *P) **uint64 { return &p.CatchUpLagOps }, func(c *C) *uint64 { return &c.CatchUpLagOps }),
		intOverride("gray_min_errors", "client errors within gray_stall that mark a gray failure", maxGrayMinErrors, func(p *P) **int { return &p.GrayMinErrors }, func(c *C) *int { return &c.GrayMinErrors }),
		intOverride("history_len", "transitions kept in each partition's register", failover.MaxHistory, func(p *P) **int { return &p.HistoryLen }, func(c *C) *int { return &c.HistoryLen }),
		boolOverride("auto_failback", "return to the preferred region once healthy (true|false)", func(p *P) **bool { return &p.AutoFailback }, func(c *C) *bool { return &c.AutoFailback }),
	}
}
