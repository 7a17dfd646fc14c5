package failover

import (
	"errors"
	"fmt"
	"slices"
	"time"

	dataplane "github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/progress"
	"github.com/fmnode/fmnode/quorum"
)

// Epoch and LSN are the progress table's.
type (
	Epoch = progress.Epoch
	LSN   = progress.LSN
)

// Bounds on what the register holds, so a partition's state stays small
// (it is replicated to every acceptor and cached by every node).
const (
	// MaxHistory caps the transitions kept in the register.
	MaxHistory = 32
	// MaxReasonBytes caps one transition's reason.
	MaxReasonBytes = 160
	// MaxRegions caps the regions of a partition.
	MaxRegions = 16
	// MaxFlapRecords caps the failover times kept for hysteresis.
	MaxFlapRecords = 16
)

// Phase is where a partition is in its failover life cycle.
type Phase uint8

const (
	// PhaseSteady: one write region serves writes at Epoch.
	PhaseSteady Phase = iota + 1
	// PhaseSwitchover: a graceful move to Target is under way. The write
	// region is fenced (accepts no writes) until Target has every committed
	// LSN; then Target becomes write region at Epoch+1. It aborts (and
	// unfences) after GracefulTimeout.
	PhaseSwitchover
)

func (p Phase) String() string {
	switch p {
	case PhaseSteady:
		return "steady"
	case PhaseSwitchover:
		return "switchover"
	}
	return fmt.Sprintf("Phase(%d)", uint8(p))
}

// Consistency is the data plane's consistency level of the partition; it
// decides which regions may be promoted without losing acknowledged writes.
type Consistency = dataplane.Consistency

// The consistency levels, as the data plane defines them.
const (
	Strong           = dataplane.Strong
	BoundedStaleness = dataplane.BoundedStaleness
	Session          = dataplane.Session
	Eventual         = dataplane.Eventual
)

// RegionProgress is a region's position as last recorded in the register
// (at a transition; steady-state progress is never written).
type RegionProgress struct {
	Region Region
	Epoch  Epoch
	LSN    LSN
}

// Transition is one entry of the bounded history: what changed, when, who
// proposed it and why, with the evidence it acted on.
type Transition struct {
	Epoch    Epoch // epoch after the transition
	At       time.Duration
	Kind     DecisionKind
	From, To Region
	Proposer Region
	Reason   string
}

// QuorumFlap is one region's write-quorum hysteresis: the times it was
// shrunk out within FlapWindow and until when growing it back is held off
// (GrowHoldOffBase doubled for each shrink after the first, capped at
// GrowHoldOffMax), so a flapping link does not shrink and grow the write
// quorum on every flap.
type QuorumFlap struct {
	Region    Region
	Shrinks   []time.Duration
	GrowAfter time.Duration
}

// State is a partition's failover state: the value of its CASPaxos
// register. Everything that decides a change of write region is here, so
// any node can recompute a decision from it.
type State struct {
	Partition   string
	Epoch       Epoch
	WriteRegion Region
	Phase       Phase
	// Target and PhaseSince describe a switchover in progress.
	Target     Region
	PhaseSince time.Duration
	// FenceRecorded and SwitchoverLSN: the fenced write region's last LSN,
	// which the target must reach before it takes over.
	FenceRecorded bool
	SwitchoverLSN LSN

	Consistency Consistency
	// Priority lists regions, preferred first; it ranks candidates and
	// names the region to fail back to.
	Priority     []Region
	NeverPromote []Region
	WriteQuorum  quorum.WriteQuorum
	Progress     []RegionProgress
	Table        progress.Table

	Paused      bool
	PauseReason string

	// Failovers lists recent automatic failover times (hysteresis input).
	Failovers    []time.Duration
	HoldOffUntil time.Duration
	// QuorumFlaps is the write-quorum hysteresis: per region shrunk out
	// recently, its shrinks and until when growing it back is held off.
	// Recorded by the shrink's own register write (no extra write).
	QuorumFlaps []QuorumFlap

	History []Transition
}

// Errors callers act on.
var (
	// ErrInvalidState: a state breaks an invariant or does not decode.
	ErrInvalidState = errors.New("failover: invalid state")
)

// NewState returns the initial state of a partition whose write region is
// writeRegion at epoch 1, with every replica region in the write quorum.
func NewState(partition string, writeRegion Region, priority []Region, c Consistency, minDurability int) (State, error) {
	replicas := slices.Clone(priority)
	slices.Sort(replicas)
	tbl, err := progress.New(partition, progress.EpochRange{Epoch: 1, Open: true, WriteRegion: string(writeRegion)})
	if err != nil {
		return State{}, fmt.Errorf("%w: %w", ErrInvalidState, err)
	}
	s := State{
		Partition:   partition,
		Epoch:       1,
		WriteRegion: writeRegion,
		Phase:       PhaseSteady,
		Consistency: c,
		Priority:    slices.Clone(priority),
		WriteQuorum: quorum.WriteQuorum{
			Replicas:      replicas,
			WriteRegion:   writeRegion,
			Members:       slices.Clone(replicas),
			MinDurability: minDurability,
		},
		Table: tbl,
	}
	return s, s.Validate()
}

// Validate checks the state's invariants.
func (s State) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: partition %q: %s", ErrInvalidState, s.Partition, fmt.Sprintf(format, args...))
	}
	switch {
	case s.Partition == "":
		return bad("empty partition")
	case s.Epoch == 0:
		return bad("epoch 0")
	case s.Phase != PhaseSteady && s.Phase != PhaseSwitchover:
		return bad("phase %d", s.Phase)
	case s.Consistency < Strong || s.Consistency > Eventual:
		return bad("consistency %d", s.Consistency)
	case len(s.Priority) == 0 || len(s.Priority) > MaxRegions:
		return bad("%d regions in Priority (1..%d)", len(s.Priority), MaxRegions)
	case len(s.History) > MaxHistory:
		return bad("%d history entries (max %d)", len(s.History), MaxHistory)
	case len(s.Failovers) > MaxFlapRecords:
		return bad("%d failover records (max %d)", len(s.Failovers), MaxFlapRecords)
	case len(s.QuorumFlaps) > MaxRegions:
		return bad("%d quorum flap records (max %d)", len(s.QuorumFlaps), MaxRegions)
	case s.WriteQuorum.WriteRegion != s.WriteRegion:
		return bad("write quorum names write region %q, state %q", s.WriteQuorum.WriteRegion, s.WriteRegion)
	case !slices.Contains(s.Priority, s.WriteRegion):
		return bad("write region %q not in Priority", s.WriteRegion)
	case s.Phase == PhaseSwitchover && (s.Target == "" || s.Target == s.WriteRegion):
		return bad("switchover to %q from %q", s.Target, s.WriteRegion)
	}
	if err := s.WriteQuorum.Validate(); err != nil {
		return bad("write quorum: %v", err)
	}
	if err := s.Table.Validate(); err != nil {
		return bad("progress table: %v", err)
	}
	cur := s.Table.Current()
	if cur.Epoch != s.Epoch || cur.WriteRegion != string(s.WriteRegion) {
		return bad("progress table's current epoch %d/%s differs from state %d/%s", cur.Epoch, cur.WriteRegion, s.Epoch, s.WriteRegion)
	}
	for i, f := range s.QuorumFlaps {
		switch {
		case !slices.Contains(s.Priority, f.Region):
			return bad("quorum flap record for %q, not a replica region", f.Region)
		case i > 0 && s.QuorumFlaps[i-1].Region >= f.Region:
			return bad("quorum flap records not sorted by region at %q", f.Region)
		case len(f.Shrinks) > MaxFlapRecords:
			return bad("%d shrinks recorded for %q (max %d)", len(f.Shrinks), f.Region, MaxFlapRecords)
		}
	}
	sorted := slices.Clone(s.Priority)
	slices.Sort(sorted)
	if !slices.Equal(sorted, s.WriteQuorum.Replicas) {
		return bad("Priority %v and replicas %v differ", s.Priority, s.WriteQuorum.Replicas)
	}
	return nil
}

// Clone returns a deep copy, so decisions never alias the input state.
func (s State) Clone() State {
	c := s
	c.Priority = slices.Clone(s.Priority)
	c.NeverPromote = slices.Clone(s.NeverPromote)
	c.WriteQuorum.Replicas = slices.Clone(s.WriteQuorum.Replicas)
	c.WriteQuorum.Members = slices.Clone(s.WriteQuorum.Members)
	c.Progress = slices.Clone(s.Progress)
	c.Table.Epochs = slices.Clone(s.Table.Epochs)
	c.Failovers = slices.Clone(s.Failovers)
	c.QuorumFlaps = slices.Clone(s.QuorumFlaps)
	for i := range c.QuorumFlaps {
		c.QuorumFlaps[i].Shrinks = slices.Clone(s.QuorumFlaps[i].Shrinks)
	}
	c.History = slices.Clone(s.History)
	return c
}

// PriorityOf returns r's rank in Priority (0 = preferred), or len(Priority).
func (s State) PriorityOf(r Region) int {
	if i := slices.Index(s.Priority, r); i >= 0 {
		return i
	}
	return len(s.Priority)
}

// ProgressOf returns the recorded progress of r.
func (s State) ProgressOf(r Region) (RegionProgress, bool) {
	for _, p := range s.Progress {
		if p.Region == r {
			return p, true
		}
	}
	return RegionProgress{}, false
}

func (s *State) setProgress(p RegionProgress) {
	for i := range s.Progress {
		if s.Progress[i].Region == p.Region {
			s.Progress[i] = p
			return
		}
	}
	s.Progress = append(s.Progress, p)
	slices.SortFunc(s.Progress, func(a, b RegionProgress) int {
		switch {
		case a.Region < b.Region:
			return -1
		case a.Region > b.Region:
			return 1
		}
		return 0
	})
}

func (s *State) record(cfg Config, t Transition) {
	if len(t.Reason) > MaxReasonBytes {
		t.Reason = t.Reason[:MaxReasonBytes]
	}
	s.History = append(s.History, t)
	if over := len(s.History) - cfg.HistoryLen; over > 0 {
		s.History = slices.Delete(s.History, 0, over)
	}
}

// QuorumFlapOf returns region r's write-quorum hysteresis record.
func (s State) QuorumFlapOf(r Region) (QuorumFlap, bool) {
	for _, f := range s.QuorumFlaps {
		if f.Region == r {
			return f, true
		}
	}
	return QuorumFlap{}, false
}

// noteShrink records that r was shrunk out of the write quorum at now and
// holds off its growth: GrowHoldOffBase after the first shrink within
// FlapWindow, doubled for each further one, capped at GrowHoldOffMax.
// It returns the hold-off and the shrinks counted.
func (s *State) noteShrink(cfg Config, r Region, now time.Duration) (time.Duration, int) {
	i := slices.IndexFunc(s.QuorumFlaps, func(f QuorumFlap) bool { return f.Region == r })
	if i < 0 {
		s.QuorumFlaps = append(s.QuorumFlaps, QuorumFlap{Region: r})
		slices.SortFunc(s.QuorumFlaps, func(a, b QuorumFlap) int { return cmpRegion(a.Region, b.Region) })
		i = slices.IndexFunc(s.QuorumFlaps, func(f QuorumFlap) bool { return f.Region == r })
	}
	f := &s.QuorumFlaps[i]
	kept := f.Shrinks[:0]
	for _, t := range f.Shrinks {
		if now-t <= cfg.FlapWindow {
			kept = append(kept, t)
		}
	}
	f.Shrinks = append(kept, now)
	if over := len(f.Shrinks) - MaxFlapRecords; over > 0 {
		f.Shrinks = slices.Delete(f.Shrinks, 0, over)
	}
	n := len(f.Shrinks)
	hold := cfg.GrowHoldOffBase << min(n-1, 30)
	if hold > cfg.GrowHoldOffMax || hold < 0 {
		hold = cfg.GrowHoldOffMax
	}
	f.GrowAfter = now + hold
	return hold, n
}
