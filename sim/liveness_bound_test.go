package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/failover"
)

// growHoldScript cuts one follower region (the write region of no
// partition) from the others once the re-sync after the (empty) fault
// window is over, just before the liveness phase, so that every write
// quorum shrinks it out with a grow hold-off longer than the configured
// liveness bound, and then heals the cut. With stuck set the cut stays:
// the region can never grow back, and the liveness check must say so.
type growHoldScript struct {
	hold  time.Duration
	stuck bool

	cut            CutSet
	clientsStop    time.Duration
	shrinks, grows int
	// When the last shrink and grow of the region were decided.
	lastShrink, lastGrowAt time.Duration
}

const growHoldRegion = 2

func (*growHoldScript) Name() string { return "grow-hold" }
func (*growHoldScript) Description() string {
	return "test script: a follower region shrunk out with a grow hold-off past the liveness bound"
}
func (s *growHoldScript) Run(cfg Config) (Result, error) {
	res, _, err := runScripted(s, cfg)
	return res, err
}
func (*growHoldScript) profile() string { return "fast" }

func (s *growHoldScript) shape(spec *foSpec) {
	spec.writeShare = []float64{1, 0, 0} // region 2 leads nothing: it is only shrunk
	spec.profile.GrowHoldOffBase, spec.profile.GrowHoldOffMax = s.hold, s.hold
}

func (s *growHoldScript) inject(r *foRun) {
	fw := r.fw
	var nodes []int32
	for x := range fw.nodes {
		if fw.e.w.Nodes[x].Region == growHoldRegion {
			nodes = append(nodes, int32(x))
		}
	}
	all := make([]int32, len(fw.nodes))
	for i := range all {
		all[i] = int32(i)
	}
	s.cut = isolateRegion(len(fw.nodes), all, func(x int32) bool { return fw.e.w.Nodes[x].Region == growHoldRegion })
	reg := fw.regions[growHoldRegion]
	fw.onLearn = func(i int, old, st failover.State, at time.Duration) {
		for _, t := range newTransitions(old.History, st.History) {
			switch {
			case t.Kind == failover.DecideShrinkQuorum && t.From == reg:
				s.shrinks++
				s.lastShrink = t.At
			case t.Kind == failover.DecideGrowQuorum && t.To == reg:
				s.grows++
				s.lastGrowAt = t.At
			}
		}
	}
}

func (s *growHoldScript) run(r *foRun, until time.Duration) { r.fw.e.run(until) }
func (*growHoldScript) heal(*foRun)                         {}

// settle cuts the region for 6 s: past the takeover delay, so that every
// write quorum has shrunk it out when the liveness phase starts.
func (s *growHoldScript) settle(r *foRun) {
	w := r.fw.e.w
	w.Links.Apply(s.cut, +1)
	r.fw.e.run(w.Now() + 6*time.Second)
	if !s.stuck {
		w.Links.Apply(s.cut, -1)
	}
	s.clientsStop = w.Now()
}

func (*growHoldScript) check(*foRun) {}

func growHoldConfig() Config {
	return Config{Seed: 1, Partitions: 4, Outage: 20 * time.Second, Duration: 20 * time.Second}.withDefaults()
}

// TestLivenessWindowOutlastsAGrowHoldOff: the liveness phase's bound was
// a fixed minute (under --faults none), shorter than a grow hold-off the
// failover configuration imposes after repeated shrinks (15 s doubled per
// shrink, up to 2 min in the fast profile), so a correct run failed
// (cluster-edge-lease seed 3: a third shrink 0.4 s into the phase, held
// off 1 min, converged 0.35 s past the window). Here a single shrink is
// held off 90 s, past the configured 1 min: the run must converge, after
// the old window would have ended.
func TestLivenessWindowOutlastsAGrowHoldOff(t *testing.T) {
	s := &growHoldScript{hold: 90 * time.Second}
	cfg := growHoldConfig()
	require.Greater(t, s.hold, cfg.LivenessBound, "the hold must outlast the configured bound, or the test shows nothing")
	res, err := s.Run(cfg)
	require.NoError(t, err)
	require.Empty(t, res.Violations)
	require.Equal(t, 4, s.shrinks, "every partition's write quorum shrank the cut region out")
	require.Equal(t, 4, s.grows, "and grew it back")
	assert.Greater(t, s.lastGrowAt, s.clientsStop+cfg.LivenessBound,
		"the last grow came after a fixed window of LivenessBound would have failed the run")
	assert.GreaterOrEqual(t, s.lastGrowAt, s.lastShrink+s.hold, "the grow waited out its hold-off")
}

// TestLivenessCheckCatchesAStuckPartition: the longer bound still fails a
// run in which a region can never grow back (cut off again for good once
// the re-sync is over).
func TestLivenessCheckCatchesAStuckPartition(t *testing.T) {
	s := &growHoldScript{hold: 90 * time.Second, stuck: true}
	res, err := s.Run(growHoldConfig())
	require.NoError(t, err)
	var found string
	for _, v := range res.Violations {
		if strings.Contains(v, "not converged within") {
			found = v
		}
	}
	require.NotEmpty(t, found, "a partition that never converges fails the liveness check: %v", res.Violations)
	assert.Contains(t, found, "GrowHoldOffMax 1m30s", "the violation says what the bound is made of")
}
