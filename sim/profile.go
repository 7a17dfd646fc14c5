package sim

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrFaultLevel reports an unknown --faults value.
var ErrFaultLevel = errors.New("sim: unknown fault level")

// FaultLevel is the --faults setting.
type FaultLevel uint8

// Fault levels. Swarm draws a different mix per seed (swarm testing:
// a fault kind that is always on can mask the bugs another kind would
// expose, so each seed turns kinds on and off and picks its own
// intensities).
const (
	FaultsNone FaultLevel = iota
	FaultsLight
	FaultsHeavy
	FaultsSwarm
)

func (l FaultLevel) String() string {
	switch l {
	case FaultsNone:
		return "none"
	case FaultsLight:
		return "light"
	case FaultsHeavy:
		return "heavy"
	case FaultsSwarm:
		return "swarm"
	}
	return fmt.Sprintf("FaultLevel(%d)", uint8(l))
}

// ParseFaultLevel parses none, light, heavy or swarm.
func ParseFaultLevel(s string) (FaultLevel, error) {
	switch strings.ToLower(s) {
	case "none":
		return FaultsNone, nil
	case "light":
		return FaultsLight, nil
	case "heavy":
		return FaultsHeavy, nil
	case "swarm":
		return FaultsSwarm, nil
	}
	return 0, fmt.Errorf("%w: %q (none, light, heavy, swarm)", ErrFaultLevel, s)
}

// FaultProfile is the concrete fault mix of one run.
type FaultProfile struct {
	Name string
	// Per-message probabilities during the safety phase.
	Loss, Duplicate, Reorder float64
	// EpisodeEvery is the mean gap between fault episodes (exponential);
	// zero means no episodes.
	EpisodeEvery time.Duration
	// EpisodeMin and EpisodeMax bound how long an episode lasts (for a
	// crash: the downtime).
	EpisodeMin, EpisodeMax time.Duration
	// Weights gives the relative frequency of each episode kind; message
	// kinds (loss, duplicate, reorder) are ignored here.
	Weights [numFaultKinds]float64
	// SpikeMax is the largest latency multiplier of a delay spike.
	SpikeMax float64
	// DriftBound bounds |clock drift| of any node.
	DriftBound float64
	// MaxConcurrent bounds the episodes active at once.
	MaxConcurrent int
}

// episodeKinds lists the kinds the nemesis runs as episodes, in the
// fixed order swarm draws them.
func episodeKinds() [10]FaultKind {
	return [10]FaultKind{
		FaultDelaySpike, FaultPartitionNode, FaultPartitionRegion, FaultPartitionMajority,
		FaultPartitionRing, FaultPartitionBridge, FaultPartitionOneWay, FaultCrash, FaultPause, FaultClockDrift,
	}
}

func allEpisodes(w float64) [numFaultKinds]float64 {
	var ws [numFaultKinds]float64
	for _, k := range episodeKinds() {
		ws[k] = w
	}
	return ws
}

// ProfileFor returns the fault profile of a level; swarm draws it from the
// seed's swarm stream, so the mix is part of what the seed means.
func ProfileFor(level FaultLevel, seed uint64) FaultProfile {
	switch level {
	case FaultsLight:
		return FaultProfile{
			Name: "light", Loss: 0.005, Duplicate: 0.002, Reorder: 0.01,
			EpisodeEvery: 4 * time.Second, EpisodeMin: 300 * time.Millisecond, EpisodeMax: 3 * time.Second,
			Weights: allEpisodes(1), SpikeMax: 5, DriftBound: 0.005, MaxConcurrent: 2,
		}
	case FaultsHeavy:
		return FaultProfile{
			Name: "heavy", Loss: 0.05, Duplicate: 0.02, Reorder: 0.05,
			EpisodeEvery: time.Second, EpisodeMin: 200 * time.Millisecond, EpisodeMax: 5 * time.Second,
			Weights: allEpisodes(1), SpikeMax: 20, DriftBound: 0.05, MaxConcurrent: 4,
		}
	case FaultsSwarm:
		return swarmProfile(seed)
	}
	return FaultProfile{Name: "none"}
}

func swarmProfile(seed uint64) FaultProfile {
	r := NewRand(seed, StreamSwarm)
	p := FaultProfile{Name: "swarm"}
	on := func() bool { return r.IntN(2) == 0 }
	if on() {
		p.Loss = r.Float64() * 0.08
	}
	if on() {
		p.Duplicate = r.Float64() * 0.05
	}
	if on() {
		p.Reorder = r.Float64() * 0.1
	}
	any := false
	for _, k := range episodeKinds() {
		if on() {
			p.Weights[k] = 0.2 + r.Float64()
			any = true
		}
	}
	if !any {
		// A seed with no episode at all tests little: force one kind.
		ks := episodeKinds()
		p.Weights[ks[r.IntN(len(ks))]] = 1
	}
	p.EpisodeEvery = time.Duration(300+r.IntN(7700)) * time.Millisecond
	p.EpisodeMin = time.Duration(50+r.IntN(450)) * time.Millisecond
	p.EpisodeMax = p.EpisodeMin + time.Duration(r.IntN(6000))*time.Millisecond
	p.SpikeMax = 2 + r.Float64()*28
	p.DriftBound = r.Float64() * 0.05
	p.MaxConcurrent = 1 + r.IntN(5)
	return p
}

// CanaryProfile is the mix under --canary: frequent short crashes of
// acceptors while proposers compete, which is what exposes an acceptor
// that forgets its promises on restart.
func CanaryProfile() FaultProfile {
	var ws [numFaultKinds]float64
	ws[FaultCrash] = 1
	return FaultProfile{
		Name: "canary", EpisodeEvery: 30 * time.Millisecond,
		EpisodeMin: time.Millisecond, EpisodeMax: 5 * time.Millisecond,
		Weights: ws, SpikeMax: 1, MaxConcurrent: 1,
	}
}

// String summarises the profile on one line.
func (p FaultProfile) String() string {
	var kinds []string
	for _, k := range episodeKinds() {
		if p.Weights[k] > 0 {
			kinds = append(kinds, k.String())
		}
	}
	return fmt.Sprintf("%s loss=%.3f dup=%.3f reorder=%.3f every=%v episodes=[%s] drift<=%.3f",
		p.Name, p.Loss, p.Duplicate, p.Reorder, p.EpisodeEvery, strings.Join(kinds, ","), p.DriftBound)
}
