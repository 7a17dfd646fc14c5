package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/quorum"
)

// switchoverLeaseScript asks a healthy write region to switch one
// partition over and runs the lease-overlap check (once the gray-failure
// scenario's lease-gap check) when the move commits. The old node holds its lease throughout (nothing
// is down), so the check can tell a lease gap from a fenced replica only
// by the replica's role.
type switchoverLeaseScript struct {
	part                  int
	node                  int32
	actsBefore, leaseHeld bool
	gapAtCommit, seen     bool
}

func (*switchoverLeaseScript) Name() string { return "switchover-lease" }
func (*switchoverLeaseScript) Description() string {
	return "test script: a switchover within the old lease"
}
func (s *switchoverLeaseScript) Run(cfg Config) (Result, error) {
	res, _, err := runScripted(s, cfg)
	return res, err
}
func (*switchoverLeaseScript) profile() string { return "fast" }
func (*switchoverLeaseScript) shape(*foSpec)   {}
func (*switchoverLeaseScript) settle(*foRun)   {}
func (*switchoverLeaseScript) check(*foRun)    {}
func (*switchoverLeaseScript) heal(*foRun)     {}

func (s *switchoverLeaseScript) inject(r *foRun) {
	fw := r.fw
	st := fw.reg[s.part].state
	n := fw.partNode(s.part, st.WriteRegion)
	s.node = n.idx
	s.actsBefore = fw.servesOnLease(n, s.part)
	var target quorum.Region
	for _, reg := range fw.regions {
		if reg != st.WriteRegion {
			target = reg
			break
		}
	}
	fw.onLearn = func(i int, old, st failover.State, at time.Duration) {
		if i != s.part || st.WriteRegion == old.WriteRegion || s.seen {
			return
		}
		s.seen = true
		n := fw.nodes[s.node]
		s.leaseHeld = fw.e.w.VirtualAt(n.idx, n.lease) > at
		_, _, s.gapAtCommit = fw.leaseOverlap(i, st)
	}
	if err := n.node.Switchover(n.local(), fw.parts[s.part].id, target, "test"); err != nil {
		r.violation(ViolationInvariant, "switchover refused: %v", err)
	}
	n.pump()
}

func (s *switchoverLeaseScript) run(r *foRun, until time.Duration) { r.fw.e.run(until) }

// TestLeaseGapCheckIgnoresAFencedWriteRegion: a switchover completes
// while the old write region's node still holds its lease, by design: its
// replica was fenced first and redirects everything. The gray-failure
// scenario's lease-gap check counted that as a takeover within the lease
// (gray-failure swarm seeds 4 and 11); it must count only a replica that
// still serves on its lease, which the same replica did before the fence.
func TestLeaseGapCheckIgnoresAFencedWriteRegion(t *testing.T) {
	s := &switchoverLeaseScript{}
	res, err := s.Run(Config{Seed: 1, Partitions: 4, Outage: 20 * time.Second, Duration: 20 * time.Second}.withDefaults())
	require.NoError(t, err)
	require.Empty(t, res.Violations)
	require.True(t, s.actsBefore, "the write region's replica acts as such before the switchover")
	require.True(t, s.seen, "the switchover committed")
	require.True(t, s.leaseHeld, "the old node still held its lease at the commit (else the test shows nothing)")
	assert.False(t, s.gapAtCommit, "a fenced write region is no lease gap")
}
