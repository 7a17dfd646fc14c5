package guard

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every name has one unique key, a core, a doc and a reach, and a reach
// other than the sweep says why.
func TestInfosAreComplete(t *testing.T) {
	infos := Infos()
	require.Len(t, infos, int(NumNames)-1)
	seen := map[string]bool{}
	for i, in := range infos {
		assert.Equal(t, Name(i+1), in.Name)
		assert.NotEmpty(t, in.Key, "guard %d has no key", i+1)
		assert.False(t, seen[in.Key], "key %s twice", in.Key)
		seen[in.Key] = true
		assert.NotEmpty(t, in.Core, in.Key)
		assert.NotEmpty(t, in.Doc, in.Key)
		assert.Contains(t, []Reach{ReachSweep, ReachEdge, ReachNever}, in.Reach, in.Key)
		if in.Reach != ReachSweep {
			assert.NotEmpty(t, in.Why, "%s is not required by the sweep: say why", in.Key)
		}
		n, ok := Lookup(in.Key)
		assert.True(t, ok)
		assert.Equal(t, in.Name, n)
		assert.Equal(t, in.Key, n.String())
	}
	assert.Less(t, uint(NumNames), uint(64), "Set is a uint64")
	_, ok := Lookup("nope")
	assert.False(t, ok)
	assert.Equal(t, "unknown", Name(0).String())
	assert.Equal(t, "unknown", NumNames.String())
}

func TestCountsAndSet(t *testing.T) {
	var c Counts
	var s Set
	s.Add(LeaseGateAck)
	s.Add(NoCandidate)
	s.Add(LeaseGateAck)
	assert.True(t, s.Has(LeaseGateAck))
	assert.False(t, s.Has(HoldPaused))
	s.FireAll(&c)
	s.FireAll(&c)
	c.Fire(0)        // no guard: ignored
	c.Fire(NumNames) // out of range: ignored
	assert.Equal(t, map[string]uint64{"lease_gate_ack": 2, "no_candidate": 2}, c.Map())
	Or(nil).Fire(LeaseGateAck) // a nil counter counts nothing, without a nil check in the cores
	assert.Equal(t, &c, Or(&c))
}

// Missing names exactly the required guards without a count.
func TestMissing(t *testing.T) {
	fired := map[string]uint64{}
	for _, n := range Required() {
		fired[n.String()] = 1
	}
	assert.Empty(t, Missing(fired))
	delete(fired, LeaseGateAck.String())
	fired[LeaseGateWrite.String()] = 0
	m := Missing(fired)
	require.Len(t, m, 2)
	assert.Equal(t, LeaseGateWrite, m[0].Name)
	assert.Equal(t, LeaseGateAck, m[1].Name)
	for _, n := range Required() {
		assert.Equal(t, ReachSweep, n.Info().Reach)
	}
}
