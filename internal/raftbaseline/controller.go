package raftbaseline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fmnode/fmnode/failover"
)

// controllerStats counts what a voter's controller did while it led.
type controllerStats struct {
	terms       atomic.Uint64
	evaluations atomic.Uint64
	decisions   atomic.Uint64 // decisions with a state to write
	applied     atomic.Uint64
	failed      atomic.Uint64
}

// Stats is what a voter did: its controller's work while it led, its
// heartbeater's, and its state machine's.
type Stats struct {
	Terms          uint64 `json:"terms"`
	Evaluations    uint64 `json:"evaluations"`
	Decisions      uint64 `json:"decisions"`
	Applied        uint64 `json:"applied"`
	ApplyFailed    uint64 `json:"apply_failed"`
	HeartbeatCmds  uint64 `json:"heartbeat_cmds"`
	HeartbeatRecs  uint64 `json:"heartbeat_records"`
	HeartbeatErrs  uint64 `json:"heartbeat_errors"`
	HeartbeatRound uint64 `json:"heartbeat_rounds"`
	FSM            FSMStats
}

// Stats returns the voter's counters.
func (v *Voter) Stats() Stats {
	return Stats{
		Terms: v.ctrl.terms.Load(), Evaluations: v.ctrl.evaluations.Load(), Decisions: v.ctrl.decisions.Load(),
		Applied: v.ctrl.applied.Load(), ApplyFailed: v.ctrl.failed.Load(),
		HeartbeatCmds: v.hbs.cmds.Load(), HeartbeatRecs: v.hbs.records.Load(), HeartbeatErrs: v.hbs.errors.Load(),
		HeartbeatRound: v.hbs.rounds.Load(), FSM: v.fsm.Stats(),
	}
}

// term is the controller's view during one leadership.
type term struct {
	since   time.Duration
	regions []failover.Region
	// live is each region's liveness at the last tick, liveSince when it
	// last became live.
	live      map[failover.Region]bool
	liveSince map[failover.Region]time.Duration
	parts     map[string]*partView
	done      chan applyDone
}

// partView is what the controller last decided a partition from.
type partView struct {
	version  uint64
	mask     uint32
	retryAt  time.Duration
	inflight bool
	seen     bool
}

type applyDone struct {
	key string
	err error
}

// runController decides failovers while this voter leads.
func (v *Voter) runController(ctx context.Context) {
	t := time.NewTicker(max(v.cfg.Failover.HeartbeatInterval/5, 10*time.Millisecond))
	defer t.Stop()
	sem := make(chan struct{}, v.cfg.MaxInflight)
	var tm *term
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r := v.raftNode()
		if r == nil {
			return
		}
		if r.State() != raft.Leader {
			tm = nil
			continue
		}
		if tm == nil {
			// The state machine must hold every entry committed before
			// this term before anything is decided from it.
			if err := r.Barrier(v.cfg.ApplyTimeout).Error(); err != nil {
				continue
			}
			tm = v.newTerm()
			v.ctrl.terms.Add(1)
		}
		v.evaluate(ctx, r, tm, sem)
	}
}

func (v *Voter) newTerm() *term {
	now := v.cfg.Clock()
	tm := &term{since: now, live: map[failover.Region]bool{}, liveSince: map[failover.Region]time.Duration{},
		parts: map[string]*partView{}, done: make(chan applyDone, v.cfg.MaxInflight)}
	v.mu.Lock()
	for _, p := range v.peers {
		tm.regions = append(tm.regions, p.Region)
	}
	v.mu.Unlock()
	slices.Sort(tm.regions)
	for _, r := range tm.regions {
		tm.live[r], tm.liveSince[r] = true, now
	}
	return tm
}

// heardAt is when this leader counts a record as heard: when its state
// machine applied it, but never before its own election (it cannot know
// how old inherited records are; see the package doc).
func (tm *term) heardAt(at time.Duration, ok bool) time.Duration {
	if !ok || at < tm.since {
		return tm.since
	}
	return at
}

// evaluate runs Decide for every partition whose evidence changed and
// applies the decisions that write.
func (v *Voter) evaluate(ctx context.Context, r *raft.Raft, tm *term, sem chan struct{}) {
	for drained := false; !drained; {
		select {
		case d := <-tm.done:
			pv := tm.parts[d.key]
			pv.inflight = false
			if d.err != nil {
				pv.seen = false // decide again from the fresh state
			}
		default:
			drained = true
		}
	}
	now := v.cfg.Clock()
	delay := v.cfg.Failover.TakeoverDelay()
	for _, reg := range tm.regions {
		at, ok := v.fsm.RegionHeard(reg)
		live := now-tm.heardAt(at, ok) <= delay
		if live && !tm.live[reg] {
			tm.liveSince[reg] = now
		}
		tm.live[reg] = live
	}
	for _, key := range v.fsm.Keys() {
		pv := tm.parts[key]
		if pv == nil {
			pv = &partView{}
			tm.parts[key] = pv
		}
		if pv.inflight {
			continue
		}
		s, ver, ok := v.fsm.State(key)
		if !ok {
			continue
		}
		ev, mask := v.evidence(tm, key, s, now, delay)
		if pv.seen && pv.version == ver && pv.mask == mask && (pv.retryAt == 0 || now < pv.retryAt) {
			continue
		}
		v.ctrl.evaluations.Add(1)
		d := failover.Decide(v.cfg.Failover, s, ev)
		pv.seen, pv.version, pv.mask, pv.retryAt = true, ver, mask, d.RetryAt
		if d.Next == nil {
			continue
		}
		cmd, err := encodePut(PutState{Key: key, Expect: ver, State: *d.Next})
		if err != nil {
			v.ctrl.failed.Add(1)
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		v.ctrl.decisions.Add(1)
		pv.inflight = true
		go func() {
			_, err := v.applyLocal(r, cmd)
			<-sem
			if err != nil {
				v.ctrl.failed.Add(1)
			} else {
				v.ctrl.applied.Add(1)
			}
			tm.done <- applyDone{key: key, err: err}
		}()
	}
}

// evidence assembles what Decide looks at for one partition from the
// heartbeat records, and a mask of its replicas' liveness (a change of it
// is what makes the partition worth deciding again).
func (v *Voter) evidence(tm *term, key string, s failover.State, now, delay time.Duration) (failover.Evidence, uint32) {
	ev := failover.Evidence{Now: now, Proposer: v.cfg.Region}
	var mask uint32
	for i, reg := range s.WriteQuorum.Replicas {
		st, at, ok := v.fsm.Heard(key, reg)
		heard := tm.heardAt(at, ok)
		live := now-heard <= delay
		x := failover.ReplicaEvidence{Region: reg, Live: live, Reported: ok && live}
		if x.Reported {
			x.Epoch, x.LastLSN, x.Fenced = st.Epoch, st.LastLSN, st.Fenced
		}
		if live {
			mask |= 1 << i
			x.HealthySince = max(tm.liveSince[reg], tm.since)
		}
		if reg == s.WriteRegion && !live {
			ev.WriteRegionFailed = true
			ev.FailureWhy = fmt.Sprintf("raft leader %s heard no heartbeat of %s for %v (> %v)",
				v.cfg.Region, reg, (now - heard).Round(time.Millisecond), delay)
		}
		ev.Replicas = append(ev.Replicas, x)
	}
	return ev, mask
}

// IsMismatch reports whether err is a put refused for its version.
func IsMismatch(err error) bool { return errors.Is(err, ErrVersionMismatch) }
