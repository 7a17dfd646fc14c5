package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fmnode/fmnode/internal/agent"
)

// Fault kinds.
const (
	fPartOne     = "partition-one"
	fPartRegion  = "partition-region"
	fPartMajor   = "partition-majority"
	fPartRing    = "partition-ring"
	fPartBridge  = "partition-bridge"
	fPartOneWay  = "partition-oneway"
	fClientCut   = "client-cut"
	fDelay       = "link-delay"
	fDrop        = "link-drop"
	fSlow        = "link-slow"
	fKill        = "kill"
	fKillAll     = "kill-all"
	fPause       = "pause"
	fClockSkew   = "clock-skew"
	fClockBeyond = "clock-skew-beyond-bound"
	fDiskFull    = "disk-full"
	fSwitchover  = "op-switchover"
	fDrain       = "op-drain"
	fOpPause     = "op-pause"
)

// nemesisKinds are the faults a normal run draws from (the beyond-bound
// clock skew only with --clock-beyond; disk-full only with a tmpfs).
var nemesisKinds = []string{fPartOne, fPartRegion, fPartMajor, fPartRing, fPartBridge, fPartOneWay, fClientCut,
	fDelay, fDrop, fSlow, fKill, fKillAll, fPause, fClockSkew, fDiskFull}

var operatorKinds = []string{fSwitchover, fDrain, fOpPause}

// fault is one scheduled fault: applied at At (from the workload's
// start), healed For later (operator actions: For is how long a pause
// or drain lasts).
type fault struct {
	At     time.Duration `json:"at"`
	For    time.Duration `json:"for"`
	Kind   string        `json:"kind"`
	Nodes  []int         `json:"nodes,omitempty"`
	Groups [][]int       `json:"groups,omitempty"` // partitions: who still talks to whom
	Rule   *linkRule     `json:"rule,omitempty"`
	Offset time.Duration `json:"clock_offset,omitempty"`
	Rate   float64       `json:"clock_rate,omitempty"`
	Region string        `json:"region,omitempty"`
	Part   uint32        `json:"partition,omitempty"`
	Note   string        `json:"note,omitempty"` // what happened when applied
}

func (f fault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "t=%5.1fs +%4.1fs %-24s", f.At.Seconds(), f.For.Seconds(), f.Kind)
	if len(f.Nodes) > 0 {
		fmt.Fprintf(&b, " nodes=%v", f.Nodes)
	}
	if len(f.Groups) > 0 {
		fmt.Fprintf(&b, " groups=%v", f.Groups)
	}
	if f.Rule != nil {
		fmt.Fprintf(&b, " rule=%+v", *f.Rule)
	}
	if f.Offset != 0 {
		fmt.Fprintf(&b, " offset=%v", f.Offset)
	}
	if f.Rate != 0 {
		fmt.Fprintf(&b, " rate=%v", f.Rate)
	}
	if f.Region != "" {
		fmt.Fprintf(&b, " region=%s", f.Region)
	}
	if f.Part != 0 {
		fmt.Fprintf(&b, " partition=%d", f.Part)
	}
	if f.Note != "" {
		fmt.Fprintf(&b, " (%s)", f.Note)
	}
	return b.String()
}

type scheduleConfig struct {
	Seed        uint64
	Duration    time.Duration
	Nodes       int
	Partitions  int
	Kinds       []string
	KillAll     bool // the negative control: make sure every agent dies at least once together
	Drift       time.Duration
	Lease       time.Duration
	ClockBeyond bool
}

// schedule draws the faults from the seed alone: the same seed, duration
// and cluster size give the same schedule (the replay command).
func schedule(cfg scheduleConfig) []fault {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6a09e667f3bcc908))
	var out []fault
	kinds := cfg.Kinds
	end := cfg.Duration - 3*time.Second
	t := 3 * time.Second
	if cfg.KillAll {
		out = append(out, fault{At: cfg.Duration / 3, For: 3 * time.Second, Kind: fKillAll, Nodes: allNodes(cfg.Nodes)})
		t = cfg.Duration/3 + 6*time.Second
	}
	for t < end && len(kinds) > 0 {
		d := time.Duration(3000+rng.IntN(5000)) * time.Millisecond
		if t+d > end {
			d = end - t
		}
		if d < time.Second {
			break
		}
		f := drawFault(rng, kinds[rng.IntN(len(kinds))], cfg)
		f.At, f.For = t, d
		out = append(out, f)
		t += d + time.Duration(1000+rng.IntN(2000))*time.Millisecond
	}
	if cfg.ClockBeyond {
		return beyondSchedule(rng, cfg)
	}
	// Operator actions at random moments, overlapping the faults.
	for t := 4 * time.Second; t < end; t += time.Duration(4000+rng.IntN(6000)) * time.Millisecond {
		f := fault{At: t, Kind: operatorKinds[rng.IntN(len(operatorKinds))], For: time.Duration(1000+rng.IntN(2000)) * time.Millisecond}
		switch f.Kind {
		case fSwitchover:
			f.Part = uint32(1 + rng.IntN(cfg.Partitions))
			f.Region = regions[rng.IntN(len(regions))]
		case fDrain:
			f.Region = regions[rng.IntN(len(regions))]
		}
		out = append(out, f)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

// beyondRate is the beyond-the-bound fault's clock rate: over one lease
// the node's clock falls behind by 1-beyondRate of it, far beyond the
// drift bound (a lease of 2 s lasts 10 s of real time, the takeover
// comes after 2.25 s).
const beyondRate = 0.2

// beyondSchedule is the --clock-beyond run: node 1 (of the first region,
// a write region's host) runs its clock at beyondRate from 3 s to the
// end, and is cut from every other node (not from the clients) for 6-9 s
// at a time, longer than the takeover delay and shorter than its drifted
// lease: the other regions take over while it still serves strong reads
// and grants freshness on its lease. No other fault, no operator action:
// what the checker finds is the drift's doing.
func beyondSchedule(rng *rand.Rand, cfg scheduleConfig) []fault {
	out := []fault{{At: 2 * time.Second, For: cfg.Duration - 4*time.Second, Kind: fClockBeyond, Nodes: []int{1}, Rate: beyondRate}}
	others := allNodes(cfg.Nodes)[1:]
	end := cfg.Duration - 3*time.Second
	for t := 8 * time.Second; ; {
		d := time.Duration(6000+rng.IntN(3000)) * time.Millisecond
		if t+d > end {
			break
		}
		out = append(out, fault{At: t, For: d, Kind: fPartOne, Groups: [][]int{{1}, others}, Note: "the drifting node"})
		t += d + time.Duration(3000+rng.IntN(2000))*time.Millisecond
	}
	return out
}

func allNodes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func drawFault(rng *rand.Rand, kind string, cfg scheduleConfig) fault {
	n := cfg.Nodes
	perm := func() []int {
		p := allNodes(n)
		rng.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
		return p
	}
	f := fault{Kind: kind}
	switch kind {
	case fPartOne:
		p := perm()
		f.Groups = [][]int{p[:1], sorted(p[1:])}
	case fPartRegion:
		r := rng.IntN(len(regions))
		var in, out []int
		for i := 1; i <= n; i++ {
			if (i-1)%len(regions) == r {
				in = append(in, i)
			} else {
				out = append(out, i)
			}
		}
		f.Region, f.Groups = regions[r], [][]int{in, out}
	case fPartMajor:
		p := perm()
		f.Groups = [][]int{sorted(p[:n/2+1]), sorted(p[n/2+1:])}
	case fPartRing:
		f.Nodes = perm() // the ring's order; each node talks to its neighbours within a majority
	case fPartBridge:
		p := perm()
		h := (n - 1) / 2
		f.Nodes = p[:1] // the bridge
		f.Groups = [][]int{sorted(p[1 : 1+h]), sorted(p[1+h:])}
	case fPartOneWay:
		p := perm()
		k := 1 + rng.IntN(n/2)
		f.Groups = [][]int{sorted(p[:k]), sorted(p[k:])} // the first can no longer send to the second
	case fClientCut:
		f.Nodes = []int{1 + rng.IntN(n)}
	case fDelay:
		f.Rule = &linkRule{Delay: time.Duration(20+rng.IntN(130)) * time.Millisecond, Jitter: time.Duration(rng.IntN(50)) * time.Millisecond}
	case fDrop:
		f.Rule = &linkRule{DropRate: 0.05 + 0.25*rng.Float64()}
	case fSlow:
		f.Nodes = []int{1 + rng.IntN(n)}
		f.Rule = &linkRule{BandwidthBps: 16<<10 + rng.IntN(48<<10)}
	case fKill, fPause:
		f.Nodes = []int{1 + rng.IntN(n)}
	case fDiskFull:
		f.Nodes = []int{n} // the node whose data dir is the tmpfs
	case fKillAll:
		f.Nodes = allNodes(n)
	case fClockSkew:
		f.Nodes = []int{1 + rng.IntN(n)}
		// Within the bound: no two nodes more than max_clock_drift apart
		// (only one node is skewed at a time, by less than the bound).
		off := time.Duration(rng.Int64N(int64(cfg.Drift)*8/10)) - cfg.Drift*4/10
		f.Offset = off
	}
	return f
}

func sorted(s []int) []int {
	s = append([]int(nil), s...)
	sort.Ints(s)
	return s
}

// nemesis applies a schedule to a cluster.
type nemesis struct {
	c       *cluster
	start   time.Time
	mu      sync.Mutex
	counts  map[string]int
	applied []fault
	wg      sync.WaitGroup
}

func (nm *nemesis) count(kind string) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	nm.counts[kind]++
}

func isOperator(kind string) bool { return kind == fSwitchover || kind == fDrain || kind == fOpPause }

func (nm *nemesis) node(i int) *node { return nm.c.nodes[i-1] }

// run applies every fault at its time and heals it after its span, until
// ctx ends; it heals whatever is still in place before returning.
func (nm *nemesis) run(ctx context.Context, faults []fault, log func(string)) {
	type ev struct {
		at   time.Duration
		heal bool
		i    int
	}
	var evs []ev
	for i, f := range faults {
		evs = append(evs, ev{f.At, false, i}, ev{f.At + f.For, true, i})
	}
	sort.SliceStable(evs, func(a, b int) bool { return evs[a].at < evs[b].at })
	active := map[int]bool{}
	for _, e := range evs {
		if d := time.Until(nm.start.Add(e.at)); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		f := &faults[e.i]
		if isOperator(f.Kind) {
			// An operator's call may take seconds (a drain waits): it
			// must not hold the faults back.
			nm.wg.Add(1)
			go func(heal bool) {
				defer nm.wg.Done()
				if !heal {
					f.Note = nm.apply(ctx, f)
					nm.count(f.Kind)
					log("nemesis: " + f.String())
				} else {
					log(fmt.Sprintf("nemesis: heal %s %s", f.Kind, nm.heal(context.Background(), f)))
				}
			}(e.heal)
			continue
		}
		if !e.heal {
			f.Note = nm.apply(ctx, f)
			active[e.i] = true
			nm.count(f.Kind)
			log("nemesis: " + f.String())
		} else if active[e.i] {
			note := nm.heal(ctx, f)
			delete(active, e.i)
			log(fmt.Sprintf("nemesis: heal %s %s", f.Kind, note))
		}
	}
	for i := range active {
		nm.heal(context.Background(), &faults[i])
	}
	nm.wg.Wait()
	nm.applied = faults
}

// cutBetween cuts every link (both ways) between nodes that may not talk.
func (nm *nemesis) cutWhere(talk func(a, b int) bool) {
	n := len(nm.c.nodes)
	for a := 1; a <= n; a++ {
		for b := 1; b <= n; b++ {
			if a != b && !talk(a, b) {
				nm.c.links.set(a, b, linkRule{Cut: true})
			}
		}
	}
}

func groupOf(groups [][]int, i int) int {
	for g, ns := range groups {
		for _, x := range ns {
			if x == i {
				return g
			}
		}
	}
	return -1
}

func (nm *nemesis) apply(ctx context.Context, f *fault) string {
	c := nm.c
	n := len(c.nodes)
	switch f.Kind {
	case fPartOne, fPartRegion, fPartMajor, fPartRing, fPartBridge, fPartOneWay:
		// One rule for what a partition cuts (cutsPair), shared with the
		// evidence that gossip saw it.
		nm.cutWhere(func(a, b int) bool { return !cutsPair(*f, n, a, b) })
	case fClientCut:
		c.links.set(0, f.Nodes[0], linkRule{Cut: true})
		c.links.set(f.Nodes[0], 0, linkRule{Cut: true})
	case fDelay, fDrop:
		for a := 0; a <= n; a++ {
			for b := 0; b <= n; b++ {
				if a != b {
					c.links.set(a, b, *f.Rule)
				}
			}
		}
	case fSlow:
		x := f.Nodes[0]
		for a := 0; a <= n; a++ {
			if a != x {
				c.links.set(a, x, *f.Rule)
				c.links.set(x, a, *f.Rule)
			}
		}
	case fKill, fKillAll:
		var errs []string
		for _, i := range f.Nodes {
			if err := c.kill(nm.node(i)); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if len(errs) > 0 {
			return strings.Join(errs, "; ")
		}
	case fPause:
		if err := c.signal(nm.node(f.Nodes[0]), syscall.SIGSTOP); err != nil {
			return err.Error()
		}
	case fClockSkew, fClockBeyond:
		return nm.restartWithClock(nm.node(f.Nodes[0]), f.Offset, f.Rate)
	case fDiskFull:
		if err := fillDisk(nm.node(f.Nodes[0])); err != nil {
			return "skipped: " + err.Error()
		}
		return "filled"
	case fSwitchover:
		req := agent.SwitchoverRequest{Partition: f.Part, To: f.Region, Reason: "jepsen nemesis"}
		return nm.operator(ctx, agent.PathSwitchover, req)
	case fDrain:
		return nm.operator(ctx, agent.PathDrain, agent.DrainRequest{Region: f.Region, Reason: "jepsen nemesis"})
	case fOpPause:
		return nm.operator(ctx, agent.PathPause, agent.PauseRequest{Paused: true, Reason: "jepsen nemesis"})
	}
	return ""
}

func (nm *nemesis) heal(ctx context.Context, f *fault) string {
	c := nm.c
	switch f.Kind {
	case fPartOne, fPartRegion, fPartMajor, fPartRing, fPartBridge, fPartOneWay, fClientCut, fDelay, fDrop, fSlow:
		c.links.clear()
	case fKill, fKillAll:
		var errs []string
		for _, i := range f.Nodes {
			if err := c.start(nm.node(i)); err != nil {
				errs = append(errs, err.Error())
			}
		}
		return strings.Join(errs, "; ")
	case fPause:
		if err := c.signal(nm.node(f.Nodes[0]), syscall.SIGCONT); err != nil {
			return err.Error()
		}
	case fClockSkew, fClockBeyond:
		return nm.restartWithClock(nm.node(f.Nodes[0]), 0, 0)
	case fDiskFull:
		if err := healDisk(nm.node(f.Nodes[0])); err != nil {
			return err.Error()
		}
		// An agent the full disk stopped is restarted (as systemd would),
		// also when it is still shutting down from its failure.
		if note := c.restartFailed(nm.node(f.Nodes[0])); note != "" {
			return note + " after the disk was freed"
		}
	case fDrain:
		return nm.operator(ctx, agent.PathDrain, agent.DrainRequest{Region: f.Region, Stop: true, Reason: "jepsen nemesis"})
	case fOpPause:
		return nm.operator(ctx, agent.PathPause, agent.PauseRequest{Paused: false, Reason: "jepsen nemesis"})
	}
	return ""
}

// restartWithClock is kill -9 and a restart with clock_offset and
// clock_rate set.
func (nm *nemesis) restartWithClock(n *node, off time.Duration, rate float64) string {
	c := nm.c
	if err := c.kill(n); err != nil {
		return err.Error()
	}
	c.cfg.Offsets = ensureLen(c.cfg.Offsets, len(c.nodes))
	c.cfg.Offsets[n.i-1] = off
	for len(c.cfg.Rates) < len(c.nodes) {
		c.cfg.Rates = append(c.cfg.Rates, 0)
	}
	c.cfg.Rates[n.i-1] = rate
	if err := c.writeConfig(n); err != nil {
		return err.Error()
	}
	if err := c.start(n); err != nil {
		return err.Error()
	}
	return ""
}

func ensureLen(s []time.Duration, n int) []time.Duration {
	for len(s) < n {
		s = append(s, 0)
	}
	return s
}

// operator calls an admin action on the first running, not stopped node.
func (nm *nemesis) operator(ctx context.Context, path string, body any) string {
	for _, n := range nm.c.nodes {
		n.mu.Lock()
		ok := n.proc != nil && !n.proc.exited() && !n.stopped
		n.mu.Unlock()
		if !ok {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := nm.c.call(cctx, n, http.MethodPost, path, body, nil)
		cancel()
		if err != nil {
			return "refused: " + truncate(err.Error(), 200)
		}
		return "via " + n.name
	}
	return "skipped: no agent to ask"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// healAll puts everything back: links, stopped and dead agents, full
// disks, skewed clocks stay as they are (their fault healed them).
func (nm *nemesis) healAll() []string {
	c := nm.c
	c.links.clear()
	var notes []string
	for _, n := range c.nodes {
		_ = healDisk(n)
		n.mu.Lock()
		stopped := n.stopped
		n.mu.Unlock()
		if stopped {
			_ = c.signal(n, syscall.SIGCONT)
		}
		if !c.running(n) {
			notes = append(notes, n.name+" was not running at the heal: restarted")
			if err := c.start(n); err != nil {
				notes = append(notes, err.Error())
			}
		} else if note := c.restartFailed(n); note != "" {
			notes = append(notes, note+" at the heal")
		}
	}
	return notes
}
