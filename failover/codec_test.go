package failover

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func richState(t testing.TB) State {
	s, err := NewState("p-77", "east", []Region{"east", "west", "north"}, Strong, 2)
	require.NoError(t, err)
	ev := Evidence{Now: time.Hour, Proposer: "west", WriteRegionFailed: true, FailureWhy: "lease lapsed"}
	for _, r := range []Region{"east", "west", "north"} {
		ev.Replicas = append(ev.Replicas, ReplicaEvidence{Region: r, Live: r != "east", Reported: r == "west", Epoch: 1, LastLSN: 1234})
	}
	d := Decide(DefaultConfig(), s, ev)
	require.NotNil(t, d.Next)
	n := *d.Next
	n.NeverPromote = []Region{"north"}
	n.Paused, n.PauseReason = true, "maintenance"
	n.HoldOffUntil = 2 * time.Hour
	n.QuorumFlaps = []QuorumFlap{{Region: "north", Shrinks: []time.Duration{time.Minute, 2 * time.Minute}, GrowAfter: 4 * time.Minute}}
	return n
}

func TestStateCodecRoundTrip(t *testing.T) {
	for _, s := range []State{newTestState(t, Eventual), richState(t)} {
		b, err := Encode(nil, s)
		require.NoError(t, err)
		got, err := Decode(b)
		require.NoError(t, err)
		assert.Equal(t, s, got)
		assert.Less(t, len(b), 512, "a register value stays small")
	}
}

func TestStateCodecRejectsBadInput(t *testing.T) {
	b, err := Encode(nil, richState(t))
	require.NoError(t, err)
	for i := 0; i < len(b); i++ {
		_, err := Decode(b[:i])
		require.ErrorIs(t, err, ErrInvalidState, "truncated at %d", i)
	}
	_, err = Decode(append(append([]byte{}, b...), 0))
	require.ErrorIs(t, err, ErrInvalidState, "trailing byte")
	bad := append([]byte{}, b...)
	bad[0] = 9
	_, err = Decode(bad)
	require.ErrorContains(t, err, "unknown format 9")
	_, err = Encode(nil, State{})
	require.ErrorIs(t, err, ErrInvalidState)
}

func FuzzDecodeState(f *testing.F) {
	b, err := Encode(nil, richState(f))
	require.NoError(f, err)
	f.Add(b)
	s, _ := NewState("p", "a", []Region{"a"}, Strong, 1)
	b2, _ := Encode(nil, s)
	f.Add(b2)
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := Decode(in)
		if err != nil {
			return
		}
		// Whatever decodes is valid and re-encodes to an equal state.
		require.NoError(t, s.Validate())
		out, err := Encode(nil, s)
		require.NoError(t, err)
		again, err := Decode(out)
		require.NoError(t, err)
		require.Equal(t, s, again)
	})
}

// A value written before the write-quorum hysteresis existed (format 1,
// without its section) still decodes, as a state with none.
func TestStateCodecReadsFormatV1(t *testing.T) {
	s := newTestState(t, Strong)
	b, err := Encode(nil, s)
	require.NoError(t, err)
	require.Equal(t, byte(0), b[len(b)-1], "no quorum flaps: an empty last section")
	v1 := append([]byte{1}, b[1:len(b)-1]...)
	got, err := Decode(v1)
	require.NoError(t, err)
	assert.Equal(t, s, got)
	_, err = Decode(append([]byte{3}, b[1:]...))
	require.ErrorIs(t, err, ErrInvalidState, "an unknown format is refused")
}
