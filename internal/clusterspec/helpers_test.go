package clusterspec

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fmnode/fmnode/partition"
	"github.com/stretchr/testify/require"
)

// validSpec is a small valid spec: three regions, seven nodes.
func validSpec() Spec {
	return Spec{
		Format:        Format,
		Cluster:       "prod",
		Regions:       []string{"eu1", "us1", "ap1"},
		Partitions:    64,
		Consistency:   ConsistencyStrong,
		MinDurability: 2,
		Profile:       Profile{Name: ProfilePaper},
		Nodes: []Node{
			{ID: 1, Name: "eu1-a", Region: "eu1", Zone: "eu1-a", NodeAddr: "127.0.1.1:7400", APIAddr: "127.0.1.1:7401"},
			{ID: 2, Name: "eu1-b", Region: "eu1", Zone: "eu1-b", NodeAddr: "127.0.1.2:7400", APIAddr: "127.0.1.2:7401", DNSAddr: "127.0.1.2:53"},
			{ID: 3, Name: "us1-a", Region: "us1", Zone: "us1-a", NodeAddr: "127.0.2.1:7400", APIAddr: "127.0.2.1:7401"},
			{ID: 4, Name: "us1-b", Region: "us1", Zone: "us1-b", NodeAddr: "127.0.2.2:7400", APIAddr: "127.0.2.2:7401"},
			{ID: 5, Name: "us1-c", Region: "us1", Zone: "us1-c", NodeAddr: "127.0.2.3:7400", APIAddr: "127.0.2.3:7401"},
			{ID: 6, Name: "ap1-a", Region: "ap1", Zone: "ap1-a", NodeAddr: "127.0.3.1:7400", APIAddr: "127.0.3.1:7401"},
			{ID: 7, Name: "ap1-b", Region: "ap1", Zone: "ap1-b", NodeAddr: "localhost:7400", APIAddr: "localhost:7401"},
		},
	}
}

// gridSpec has the given node count in each region (ids numbered from 1
// region after region) and n partitions.
func gridSpec(n int, perRegion ...int) Spec {
	s := Spec{Format: Format, Cluster: "grid", Partitions: n, Consistency: ConsistencyStrong,
		MinDurability: 1, Profile: Profile{Name: ProfileFast}}
	id := uint16(0)
	for ri, k := range perRegion {
		r := fmt.Sprintf("r%d", ri+1)
		s.Regions = append(s.Regions, r)
		for range k {
			id++
			s.Nodes = append(s.Nodes, testNode(id, r))
		}
	}
	return s
}

func testNode(id uint16, region string) Node {
	return Node{ID: id, Name: fmt.Sprintf("n%d", id), Region: region, Zone: region + "-a",
		NodeAddr: fmt.Sprintf("127.0.%d.%d:7400", id>>8, id&0xff), APIAddr: fmt.Sprintf("127.0.%d.%d:7401", id>>8, id&0xff)}
}

func ptr[T any](v T) *T { return &v }

func dur(d time.Duration) *Duration { return ptr(Duration(d)) }

// randomSpec is a valid spec of random shape, for property tests.
func randomSpec(r *rand.Rand) Spec {
	nr := 2 + r.IntN(5)
	per := make([]int, nr)
	for i := range per {
		per[i] = 1 + r.IntN(4)
	}
	s := gridSpec(1+r.IntN(500), per...)
	s.Cluster = fmt.Sprintf("c%d", r.IntN(1000))
	// Shuffle ids so that id order and region order differ.
	perm := r.Perm(len(s.Nodes))
	for i := range s.Nodes {
		s.Nodes[i].ID = uint16(1 + perm[i]*7 + r.IntN(7))
	}
	r.Shuffle(len(s.Nodes), func(i, j int) { s.Nodes[i], s.Nodes[j] = s.Nodes[j], s.Nodes[i] })
	s.MinDurability = 1 + r.IntN(nr)
	for _, reg := range s.Regions[1:] {
		if r.IntN(3) == 0 {
			s.NeverPromote = append(s.NeverPromote, reg)
		}
	}
	switch r.IntN(4) {
	case 0:
		s.Consistency = ConsistencyBounded
		s.MaxStaleness = Duration(time.Duration(1+r.IntN(100)) * 100 * time.Millisecond)
		if r.IntN(2) == 0 {
			s.MaxStalenessOps = uint64(1 + r.IntN(1000))
			s.StalenessHold = Duration(time.Duration(1+r.IntN(500)) * time.Millisecond)
		}
	case 1:
		s.Consistency = ConsistencySession
	case 2:
		s.Consistency = ConsistencyEventual
	}
	switch r.IntN(3) {
	case 0:
		s.Profile = Profile{Name: ProfilePaper}
	case 1:
		s.Profile = Profile{Name: ProfileCustom, Base: ProfileFast, LeaseDuration: dur(3 * time.Second), GrayStall: dur(5 * time.Second),
			HistoryLen: ptr(8), AutoFailback: ptr(r.IntN(2) == 0), CatchUpLagOps: ptr(uint64(r.IntN(100)))}
	}
	s.BlastRadius = r.IntN(3) * 50
	return s
}

// problemFields are the fields the errors joined in err name, in order;
// each must be a *FieldError matching ErrInvalid.
func problemFields(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	errs := []error{err}
	if _, single := err.(*FieldError); !single {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = j.Unwrap()
		}
	}
	var out []string
	for _, e := range errs {
		require.ErrorIs(t, e, ErrInvalid)
		var fe *FieldError
		require.True(t, errors.As(e, &fe), "%v is not a *FieldError", e)
		out = append(out, fe.Field)
	}
	return out
}

func partitionID(p int) partition.ID { return partition.ID(p) }
