package clusterspec

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzDecode: Decode never panics and fails only with ErrInvalid; a spec
// it accepts encodes, decodes back to itself and encodes to the same
// bytes (decode(encode(decode(x))) is stable), and its derived values
// compute without panicking.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(golden))
	r := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		b, err := Encode(randomSpec(r))
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte(strings.Replace(golden, `"id":3,`, `"ID":3,`, 1)))
	f.Add([]byte(strings.Replace(golden, `"partitions":64`, `"partitions":64,"partitions":65`, 1)))
	f.Add([]byte(strings.Replace(golden, `"cluster":"prod"`, `"cluster":"pr\u006fd"`, 1)))
	f.Add([]byte(strings.Replace(golden, `"regions":["eu1","us1","ap1"]`, `"regions":["eu1","us1","ap1"],"never_promote":["us1","eu1"]`, 1)))
	f.Add([]byte(strings.Replace(golden, `"profile":{"name":"paper"}`, `"profile":{"name":"custom","lease_duration":"1m0s","gray_stall":"2m","history_len":null}`, 1)))
	f.Add([]byte(`{"format":1}`))
	f.Add([]byte(`{"format":1.0}`))
	f.Add([]byte(`{"format":1,"nodes":null,"regions":[]}`))
	f.Add([]byte(" \n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not match ErrInvalid: %v", err)
			}
			return
		}
		enc, err := Encode(s)
		require.NoError(t, err)
		back, err := Decode(enc)
		require.NoError(t, err, "%s", enc)
		require.Equal(t, s, back, "%s", enc)
		enc2, err := Encode(back)
		require.NoError(t, err)
		require.Equal(t, string(enc), string(enc2))

		_, err = s.FailoverConfig()
		require.NoError(t, err)
		for _, p := range []int{1, s.Partitions} {
			pl := s.Placement(partitionID(p))
			require.Len(t, pl.Replicas, len(s.Regions))
			_, err := s.InitialState(partitionID(p))
			require.NoError(t, err)
			spec := s.PartitionSpec(partitionID(p))
			require.NoError(t, spec.Quorum.Validate())
			require.NoError(t, spec.Level.Validate())
		}
		require.NotEmpty(t, s.Acceptors())
	})
}
