package sim

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Process is something a simulated node runs (an acceptor, a proposer and
// its clients, later a partition replica). The world tells it when its node
// crashes and restarts; a crashed process must drop every volatile thing it
// holds, and a restarted one may use only what its simulated disk kept.
type Process interface {
	Crash(now time.Duration)
	Restart(now time.Duration)
}

// Node is one simulated machine.
type Node struct {
	Index  int32
	Region int
	Name   string

	up          bool
	paused      bool
	incarnation uint32
	clock       nodeClock
	held        []heldEvent
	procs       []Process
}

// Up reports whether the node is running (not crashed).
func (n *Node) Up() bool { return n.up }

// Paused reports whether the node is paused (SIGSTOP).
func (n *Node) Paused() bool { return n.paused }

// Incarnation counts the node's restarts; events of an older incarnation
// (a fsync completion, a timer) are void.
func (n *Node) Incarnation() uint32 { return n.incarnation }

type heldEvent struct {
	h   Handler
	arg uint64
}

// MaxHeldEvents bounds what a paused node accumulates (a real process's
// socket buffers are bounded too); beyond it events are dropped, which the
// protocols must survive anyway.
const MaxHeldEvents = 1 << 16

// World is one simulated universe: a virtual clock and event queue, a
// topology of nodes, the fault state of the network between them, and a
// trace of everything observable. It is single-threaded: Run fires events
// one at a time in (time, sequence) order and nothing else touches it.
type World struct {
	Seed  uint64
	Sched *Scheduler
	Topo  Topology
	Nodes []Node
	Trace Trace
	// Faults counts what the nemesis and the network injected.
	Faults FaultCounts
	Links  *Links

	// DriftBound bounds |drift| of every node's clock.
	DriftBound float64

	netRand *rand.Rand
	held    uint64 // events dropped because a paused node's buffer was full
	stopped bool
	// progress, if set, is called every ProgressEvery events (the env's
	// report): it only reads the world.
	progress func()
}

// WorldConfig shapes a world.
type WorldConfig struct {
	Seed       uint64
	Topology   Topology
	NodeRegion []int // region of each node
	MaxPending int
	DriftBound float64
}

// NewWorld builds a world with every node up.
func NewWorld(cfg WorldConfig) (*World, error) {
	if err := cfg.Topology.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.NodeRegion) == 0 || len(cfg.NodeRegion) > MaxNodes {
		return nil, fmt.Errorf("%w: %d nodes (1..%d)", ErrTopology, len(cfg.NodeRegion), MaxNodes)
	}
	if cfg.DriftBound < 0 || cfg.DriftBound >= 0.5 {
		return nil, fmt.Errorf("%w: drift bound %v not in [0, 0.5)", ErrTopology, cfg.DriftBound)
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 1 << 22
	}
	w := &World{
		Seed:       cfg.Seed,
		Sched:      NewScheduler(cfg.MaxPending),
		Topo:       cfg.Topology,
		Trace:      NewTrace(),
		DriftBound: cfg.DriftBound,
		netRand:    NewRand(cfg.Seed, StreamNetwork),
	}
	w.Nodes = make([]Node, len(cfg.NodeRegion))
	for i, r := range cfg.NodeRegion {
		if r < 0 || r >= len(cfg.Topology.Regions) {
			return nil, fmt.Errorf("%w: node %d in region %d of %d", ErrTopology, i, r, len(cfg.Topology.Regions))
		}
		w.Nodes[i] = Node{Index: int32(i), Region: r, Name: fmt.Sprintf("n%d-%s", i, cfg.Topology.Regions[r]), up: true, clock: newNodeClock()}
	}
	w.Links = newLinks(len(w.Nodes), len(cfg.Topology.Regions))
	return w, nil
}

// Now returns the virtual time.
func (w *World) Now() time.Duration { return w.Sched.Now() }

// Local returns node's local clock reading now.
func (w *World) Local(node int32) time.Duration {
	return w.Nodes[node].clock.local(w.Sched.Now())
}

// VirtualAt returns the virtual time at which node's clock reads local.
func (w *World) VirtualAt(node int32, local time.Duration) time.Duration {
	return w.Nodes[node].clock.virtual(local)
}

// Attach registers a process on a node for crash and restart notices.
func (w *World) Attach(node int32, p Process) { w.Nodes[node].procs = append(w.Nodes[node].procs, p) }

// Up reports whether node is running.
func (w *World) Up(node int32) bool { return w.Nodes[node].up }

// Live reports whether node is running and not paused: it can act now.
func (w *World) Live(node int32) bool { n := &w.Nodes[node]; return n.up && !n.paused }

// Crash stops a node: its processes lose everything volatile.
func (w *World) Crash(node int32) {
	n := &w.Nodes[node]
	if !n.up {
		return
	}
	n.up = false
	n.incarnation++
	w.Trace.Begin(traceCrash, w.Now())
	w.Trace.U64(uint64(node))
	for _, p := range n.procs {
		p.Crash(w.Now())
	}
	if n.paused {
		n.paused = false
		w.releaseHeld(n)
	}
}

// Restart boots a crashed node from its disk.
func (w *World) Restart(node int32) {
	n := &w.Nodes[node]
	if n.up {
		return
	}
	n.up = true
	w.Trace.Begin(traceRestart, w.Now())
	w.Trace.U64(uint64(node))
	for _, p := range n.procs {
		p.Restart(w.Now())
	}
}

// Pause freezes a running node (SIGSTOP): its events wait until Resume.
func (w *World) Pause(node int32) {
	n := &w.Nodes[node]
	if !n.up || n.paused {
		return
	}
	n.paused = true
	w.Trace.Begin(tracePause, w.Now())
	w.Trace.U64(uint64(node))
}

// Resume thaws a paused node; what it missed fires now, in order.
func (w *World) Resume(node int32) {
	n := &w.Nodes[node]
	if !n.paused {
		return
	}
	n.paused = false
	w.Trace.Begin(traceResume, w.Now())
	w.Trace.U64(uint64(node))
	w.releaseHeld(n)
	for _, p := range n.procs {
		if r, ok := p.(Resumer); ok {
			r.Resume(w.Now())
		}
	}
}

// Resumer is implemented by processes that must act when their node
// resumes (re-arm a timer whose event was dropped while paused).
type Resumer interface {
	Resume(now time.Duration)
}

func (w *World) releaseHeld(n *Node) {
	for i, e := range n.held {
		w.Sched.At(w.Now(), n.Index, e.h, e.arg)
		n.held[i] = heldEvent{}
	}
	n.held = n.held[:0]
}

// SetDrift sets node's clock drift, clamped to the world's bound.
func (w *World) SetDrift(node int32, drift float64) {
	if drift > w.DriftBound {
		drift = w.DriftBound
	}
	if drift < -w.DriftBound {
		drift = -w.DriftBound
	}
	w.Nodes[node].clock.setDrift(w.Now(), drift)
}

// Drift returns node's current drift.
func (w *World) Drift(node int32) float64 { return w.Nodes[node].clock.drift() }

// Stop makes Run return after the current event.
func (w *World) Stop() { w.stopped = true }

// Run fires events until the queue is empty, virtual time would pass
// until, or Stop is called. It returns the error that ended the run early
// (scheduler overflow), if any.
func (w *World) Run(until time.Duration) error {
	w.stopped = false
	for !w.stopped {
		at, ok := w.Sched.PeekTime()
		if !ok || at > until {
			w.Sched.AdvanceTo(until)
			break
		}
		_, node, h, arg, _ := w.Sched.Pop()
		if node >= 0 {
			n := &w.Nodes[node]
			if n.paused {
				if len(n.held) < MaxHeldEvents {
					n.held = append(n.held, heldEvent{h: h, arg: arg})
					continue
				}
				// The buffer is full: fire it now; node handlers treat a
				// node that is not Live as gone and drop what they were
				// handed (releasing its resources), as an overflowing
				// socket buffer would.
				w.held++
			}
		}
		h.Fire(at, arg)
		if w.progress != nil && w.Sched.fired&(ProgressEvery-1) == 0 {
			w.progress()
		}
	}
	return w.Sched.Err()
}

// HeldOverflow returns the events a paused node's full buffer could not hold.
func (w *World) HeldOverflow() uint64 { return w.held }

// Events returns the number of events fired.
func (w *World) Events() uint64 { return w.Sched.Fired() }
