package failover

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRequestNeverPromote(t *testing.T) {
	cfg := FastConfig()
	s, err := NewState("p1", "a", []Region{"a", "b", "c"}, Strong, 2)
	require.NoError(t, err)
	ev := Evidence{Now: time.Minute, Proposer: "b"}
	for _, tc := range []struct {
		name    string
		regions []Region
		want    []Region // nil with noop
		noop    bool
		refused string
	}{
		{name: "none to none", regions: nil, noop: true},
		{name: "one", regions: []Region{"c"}, want: []Region{"c"}},
		{name: "sorted and deduplicated", regions: []Region{"c", "b", "c"}, want: []Region{"b", "c"}},
		{name: "not a replica region", regions: []Region{"z"}, refused: `"z" is not a replica region`},
		{name: "no region left", regions: []Region{"a", "b", "c"}, refused: "no region to fail over to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := RequestNeverPromote(cfg, s, ev, tc.regions, "maintenance")
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
			require.Equal(t, DecidePolicy, d.Kind)
			require.Equal(t, tc.want, d.Next.NeverPromote)
			require.NoError(t, d.Next.Validate())
			require.Equal(t, s.Epoch, d.Next.Epoch, "a policy change is no failover")
			last := d.Next.History[len(d.Next.History)-1]
			require.Equal(t, DecidePolicy, last.Kind)
			require.Contains(t, last.Reason, "maintenance")
			require.Nil(t, s.NeverPromote, "the input state was changed")
			// The new value survives the register codec.
			b, err := Encode(nil, *d.Next)
			require.NoError(t, err)
			got, err := Decode(b)
			require.NoError(t, err)
			require.Equal(t, tc.want, got.NeverPromote)
			require.Equal(t, DecidePolicy, got.History[len(got.History)-1].Kind)
		})
	}
	// Clearing the list is a change too.
	with, err := RequestNeverPromote(cfg, s, ev, []Region{"c"}, "x")
	require.NoError(t, err)
	d, err := RequestNeverPromote(cfg, *with.Next, ev, nil, "done")
	require.NoError(t, err)
	require.NotNil(t, d.Next)
	require.Empty(t, d.Next.NeverPromote)
}
