package failover

import (
	"fmt"
	"strings"
	"time"
)

// Explain renders, for operators, a partition's state, the evidence a node
// holds and the decision it leads to: the candidate ranking with each
// region's lag and eligibility, and the policy that blocks an action if
// one does. It is pure: the admin CLI and the simulator print the same text.
func Explain(cfg Config, s State, ev Evidence) string {
	d := Decide(cfg, s, ev)
	var b strings.Builder
	fmt.Fprintf(&b, "partition %s: epoch %d, write region %s, phase %v, consistency %v\n",
		s.Partition, s.Epoch, s.WriteRegion, s.Phase, s.Consistency)
	if s.Phase == PhaseSwitchover {
		fmt.Fprintf(&b, "  switchover to %s since %s", s.Target, ago(ev.Now, s.PhaseSince))
		if s.FenceRecorded {
			fmt.Fprintf(&b, ", fenced at LSN %d", s.SwitchoverLSN)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "  write quorum %v (minimum durability %d), priority %v", s.WriteQuorum.Members, s.WriteQuorum.MinDurability, s.Priority)
	if len(s.NeverPromote) > 0 {
		fmt.Fprintf(&b, ", never promote %v", s.NeverPromote)
	}
	b.WriteString("\n")
	if s.Paused {
		fmt.Fprintf(&b, "  paused: %s\n", s.PauseReason)
	}
	if ev.GlobalPause {
		fmt.Fprintf(&b, "  globally paused: %s\n", ev.GlobalPauseReason)
	}
	if ev.Drain != nil {
		b.WriteString(ev.Drain.explain(ev.Now))
	}
	if ev.Now < s.HoldOffUntil {
		fmt.Fprintf(&b, "  hold-off for %v more (%d recent failovers)\n", s.HoldOffUntil-ev.Now, recentFailovers(cfg, s, ev.Now))
	}
	b.WriteString("  evidence:\n")
	if ev.WriteRegionFailed {
		fmt.Fprintf(&b, "    write region %s FAILED: %s\n", s.WriteRegion, ev.FailureWhy)
	} else {
		fmt.Fprintf(&b, "    write region %s not declared failed\n", s.WriteRegion)
	}
	for _, r := range ev.Replicas {
		state := "down"
		if r.Live {
			state = fmt.Sprintf("up for %v", (ev.Now - r.HealthySince).Round(time.Millisecond))
		}
		pos := "progress unknown"
		if r.Reported {
			pos = fmt.Sprintf("epoch %d LSN %d", r.Epoch, r.LastLSN)
			if r.Fenced {
				pos += " fenced"
			}
		}
		member := ""
		if s.WriteQuorum.IsMember(r.Region) {
			member = ", write-quorum member"
		}
		if r.InSync {
			member += ", in sync"
		}
		fmt.Fprintf(&b, "    %-12s %s, %s%s\n", r.Region, state, pos, member)
	}
	if len(d.Candidates) > 0 {
		b.WriteString("  candidates (best first):\n")
		for i, c := range d.Candidates {
			mark := "no "
			if c.Eligible {
				mark = "yes"
			}
			fmt.Fprintf(&b, "    %d. %-12s eligible=%s priority=%d %s\n", i+1, c.Region, mark, c.Priority, c.Why)
		}
	}
	fmt.Fprintf(&b, "  decision: %v", d.Kind)
	if d.Target != "" {
		fmt.Fprintf(&b, " -> %s", d.Target)
	}
	b.WriteString("\n")
	for _, r := range d.Reasons {
		fmt.Fprintf(&b, "    because %s\n", r)
	}
	if d.Suppressed != "" {
		fmt.Fprintf(&b, "  BLOCKED by policy: %s\n", d.Suppressed)
	}
	if d.RetryAt > ev.Now {
		fmt.Fprintf(&b, "  re-evaluated in %v\n", d.RetryAt-ev.Now)
	}
	if n := len(s.History); n > 0 {
		b.WriteString("  history (newest last):\n")
		for _, t := range s.History {
			fmt.Fprintf(&b, "    epoch %d %s: %v %s->%s by %s: %s\n", t.Epoch, ago(ev.Now, t.At), t.Kind, t.From, t.To, t.Proposer, t.Reason)
		}
	}
	return b.String()
}

// ago renders an instant of the node's clock relative to now: the clock's
// zero is the driver's (the Unix epoch in the agent, the run's start in
// the simulator), so an absolute reading means nothing to an operator.
func ago(now, t time.Duration) string {
	if t > now {
		return fmt.Sprintf("in %v", t-now)
	}
	return fmt.Sprintf("%v ago", now-t)
}
