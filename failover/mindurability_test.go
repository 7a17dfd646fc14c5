package failover

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRequestMinDurability: the operator's change of minimum durability
// and its guard (never above the write quorum's members, which hold every
// acknowledged write).
func TestRequestMinDurability(t *testing.T) {
	cfg := FastConfig()
	full, err := NewState("p1", "a", []Region{"a", "b", "c"}, Strong, 2)
	require.NoError(t, err)
	shrunk := full.Clone()
	shrunk.WriteQuorum.Members = []Region{"a", "b"}
	ev := Evidence{Now: time.Minute, Proposer: "a"}
	for _, tc := range []struct {
		name    string
		s       State
		min     int
		noop    bool
		refused string
	}{
		{name: "lower", s: full, min: 1},
		{name: "raise to every member", s: full, min: 3},
		{name: "already so", s: full, min: 2, noop: true},
		{name: "zero", s: full, min: 0, refused: "must be in 1..3"},
		{name: "beyond the replicas", s: full, min: 4, refused: "must be in 1..3"},
		{name: "above the members holding every write", s: shrunk, min: 3, refused: "only 2 regions [a b] hold every acknowledged write"},
		{name: "raise within the members", s: func() State { s := shrunk.Clone(); s.WriteQuorum.MinDurability = 1; return s }(), min: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := RequestMinDurability(cfg, tc.s, ev, tc.min, "ops")
			if tc.refused != "" {
				require.ErrorIs(t, err, ErrRefused)
				require.Contains(t, err.Error(), tc.refused)
				return
			}
			require.NoError(t, err)
			if tc.noop {
				require.Nil(t, d.Next)
				return
			}
			require.NotNil(t, d.Next)
			require.Equal(t, DecidePolicy, d.Kind)
			require.Equal(t, tc.min, d.Next.WriteQuorum.MinDurability)
			require.Equal(t, tc.s.WriteQuorum.Members, d.Next.WriteQuorum.Members, "no member is dropped by the change")
			require.Equal(t, tc.s.Epoch, d.Next.Epoch)
			last := d.Next.History[len(d.Next.History)-1]
			require.Equal(t, DecidePolicy, last.Kind)
			require.Contains(t, last.Reason, "minimum durability")
		})
	}
}

// TestReconcileAdoptsMinDurability: a write region whose commit rule's
// minimum differs from the register's adopts the register's write quorum.
func TestReconcileAdoptsMinDurability(t *testing.T) {
	s, err := NewState("p1", "a", []Region{"a", "b", "c"}, Strong, 1)
	require.NoError(t, err)
	local := LocalReplica{Region: "a", Epoch: s.Epoch, WriteRegion: true, WriteQuorum: s.WriteQuorum.Members, MinDurability: 2}
	acts, err := Reconcile(s, local)
	require.NoError(t, err)
	require.Len(t, acts, 1)
	require.Equal(t, ActSetWriteQuorum, acts[0].Kind)
	require.Equal(t, 1, acts[0].WriteQuorum.MinDurability)
	local.MinDurability = 1
	acts, err = Reconcile(s, local)
	require.NoError(t, err)
	require.Empty(t, acts, "in line: nothing to do")
	local.MinDurability = 0 // not reported: members alone decide
	acts, err = Reconcile(s, local)
	require.NoError(t, err)
	require.Empty(t, acts)
}
