package failover

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSameInSync(t *testing.T) {
	st := func(fs ...FollowerStatus) ReplicaStatus { return ReplicaStatus{Followers: fs} }
	in := func(r Region) FollowerStatus { return FollowerStatus{Region: r, InSync: true} }
	out := func(r Region) FollowerStatus { return FollowerStatus{Region: r} }
	tests := []struct {
		name string
		a, b ReplicaStatus
		want bool
	}{
		{"both empty", st(), st(), true},
		{"same", st(in("a"), out("b")), st(in("a"), out("b")), true},
		{"out-of-sync ones ignored", st(out("x"), in("a")), st(in("a"), out("y")), true},
		{"one more in sync", st(in("a")), st(in("a"), in("b")), false},
		{"another region", st(in("a")), st(in("b")), false},
		{"none vs one", st(out("a")), st(in("a")), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, sameInSync(tc.a, tc.b))
			require.Equal(t, tc.want, sameInSync(tc.b, tc.a))
		})
	}
}
