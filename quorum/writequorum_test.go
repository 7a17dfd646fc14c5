package quorum

import (
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wq3 is a three-region partition written in "a", every region a member.
func wq3(minDurability int) WriteQuorum {
	return WriteQuorum{
		Replicas:      []Region{"a", "b", "c"},
		WriteRegion:   "a",
		Members:       []Region{"a", "b", "c"},
		MinDurability: minDurability,
	}
}

// in returns a predicate true exactly for the listed regions.
func in(rs ...Region) func(Region) bool {
	return func(r Region) bool { return slices.Contains(rs, r) }
}

func TestWriteQuorumValidate(t *testing.T) {
	mod := func(f func(*WriteQuorum)) WriteQuorum {
		w := wq3(2)
		f(&w)
		return w
	}
	tests := []struct {
		name    string
		w       WriteQuorum
		wantErr error
		wantMsg string
	}{
		{"valid", wq3(2), nil, ""},
		{"valid min 1 shrunk", mod(func(w *WriteQuorum) { w.MinDurability = 1; w.Members = []Region{"a"} }), nil, ""},
		{"no replicas", WriteQuorum{}, ErrNoReplicas, "WriteQuorum.Replicas is empty"},
		{"empty replica name", mod(func(w *WriteQuorum) { w.Replicas = []Region{"", "a"} }), ErrEmptyRegion, "WriteQuorum.Replicas[0]"},
		{"duplicate replica", mod(func(w *WriteQuorum) { w.Replicas = []Region{"a", "a", "b"} }), ErrDuplicateMember, `WriteQuorum.Replicas has "a" twice`},
		{"unsorted replicas", mod(func(w *WriteQuorum) { w.Replicas = []Region{"b", "a", "c"} }), ErrUnsortedMembers, `WriteQuorum.Replicas not ascending: "b" before "a"`},
		{"min zero", mod(func(w *WriteQuorum) { w.MinDurability = 0 }), ErrMinDurabilityRange, "WriteQuorum.MinDurability 0 not in [1, 3 replicas]"},
		{"min above replicas", mod(func(w *WriteQuorum) { w.MinDurability = 4 }), ErrMinDurabilityRange, "WriteQuorum.MinDurability 4"},
		{"no write region", mod(func(w *WriteQuorum) { w.WriteRegion = "" }), ErrEmptyRegion, "WriteQuorum.WriteRegion"},
		{"write region not replica", mod(func(w *WriteQuorum) { w.WriteRegion = "z" }), ErrNotReplica, `WriteQuorum.WriteRegion "z" not in Replicas [a b c]`},
		{"member not replica", mod(func(w *WriteQuorum) { w.Members = []Region{"a", "b", "z"} }), ErrNotReplica, `WriteQuorum.Members region "z" not in Replicas`},
		{"duplicate member", mod(func(w *WriteQuorum) { w.Members = []Region{"a", "b", "b"} }), ErrDuplicateMember, `WriteQuorum.Members has "b" twice`},
		{"unsorted members", mod(func(w *WriteQuorum) { w.Members = []Region{"b", "a"} }), ErrUnsortedMembers, "WriteQuorum.Members not ascending"},
		{"empty member name", mod(func(w *WriteQuorum) { w.Members = []Region{"", "a"} }), ErrEmptyRegion, "WriteQuorum.Members[0]"},
		{"write region not member", mod(func(w *WriteQuorum) { w.Members = []Region{"b", "c"} }), ErrNotMember, `WriteQuorum.WriteRegion "a" not in Members [b c]`},
		{"members below min", mod(func(w *WriteQuorum) { w.Members = []Region{"a"} }), ErrBelowMinDurability, "WriteQuorum.Members has 1 regions, below MinDurability 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.w.Validate()
			if tt.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			assert.Contains(t, err.Error(), tt.wantMsg)
		})
	}
}

func TestWriteQuorumIsMember(t *testing.T) {
	w := wq3(1)
	w.Members = []Region{"a", "c"}
	assert.True(t, w.IsMember("a"))
	assert.True(t, w.IsMember("c"))
	assert.False(t, w.IsMember("b"))
	assert.False(t, w.IsMember("z"))
	assert.True(t, w.IsReplica("b"))
	assert.False(t, w.IsReplica("z"))
}

func TestWriteQuorumCommits(t *testing.T) {
	shrunk := wq3(1)
	shrunk.Members = []Region{"a"}
	twoOfThree := wq3(2)
	twoOfThree.Members = []Region{"a", "c"}
	tests := []struct {
		name    string
		w       WriteQuorum
		durable []Region
		want    bool
	}{
		{"all members", wq3(2), []Region{"a", "b", "c"}, true},
		{"member missing", wq3(2), []Region{"a", "b"}, false},
		{"nowhere", wq3(1), nil, false},
		{"shrunk to write region", shrunk, []Region{"a"}, true},
		{"shrunk, extra durable", shrunk, []Region{"a", "b"}, true},
		{"shrunk, write region missing", shrunk, []Region{"b", "c"}, false},
		{"two members", twoOfThree, []Region{"a", "c"}, true},
		{"two members, non-member not enough", twoOfThree, []Region{"a", "b"}, false},
		{"malformed: no members never commits", WriteQuorum{Replicas: []Region{"a"}, MinDurability: 1}, []Region{"a"}, false},
		{"malformed: min below members count ignored", WriteQuorum{Replicas: []Region{"a", "b"}, Members: []Region{"a"}, MinDurability: 2}, []Region{"a"}, false},
		{"malformed: zero min never commits", WriteQuorum{Replicas: []Region{"a"}, Members: []Region{"a"}}, []Region{"a"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.w.Commits(in(tt.durable...)))
		})
	}
}

func TestWriteQuorumWritable(t *testing.T) {
	shrunk := wq3(1)
	shrunk.Members = []Region{"a", "c"}
	t.Run("all live", func(t *testing.T) {
		assert.NoError(t, wq3(2).Writable(in("a", "b", "c")))
	})
	t.Run("non-member down is fine", func(t *testing.T) {
		assert.NoError(t, shrunk.Writable(in("a", "c")))
	})
	t.Run("write region down", func(t *testing.T) {
		assert.ErrorIs(t, wq3(1).Writable(in("b", "c")), ErrWriteRegionDown)
	})
	t.Run("below min", func(t *testing.T) {
		err := wq3(3).Writable(in("a", "b"))
		var be *BelowMinDurabilityError
		require.ErrorAs(t, err, &be)
		assert.Equal(t, BelowMinDurabilityError{Live: 2, Min: 3}, *be)
		assert.ErrorIs(t, err, ErrBelowMinDurability)
		assert.Equal(t, "quorum: 2 live write-quorum members, below MinDurability 3: below minimum durability", err.Error())
	})
	t.Run("members down but enough live", func(t *testing.T) {
		err := wq3(1).Writable(in("a"))
		var md *MembersDownError
		require.ErrorAs(t, err, &md)
		assert.Equal(t, []Region{"b", "c"}, md.Down)
		assert.ErrorIs(t, err, ErrMemberDown)
		assert.Contains(t, err.Error(), "[b c] are down")
	})
	t.Run("invalid", func(t *testing.T) {
		assert.ErrorIs(t, WriteQuorum{}.Writable(in("a")), ErrNoReplicas)
	})
}

func TestWriteQuorumShrink(t *testing.T) {
	t.Run("ok", func(t *testing.T) {
		w := wq3(2)
		got, err := w.Shrink("b")
		require.NoError(t, err)
		assert.Equal(t, []Region{"a", "c"}, got.Members)
		assert.Equal(t, []Region{"a", "b", "c"}, w.Members, "receiver untouched")
		got.Replicas[0] = "x"
		assert.Equal(t, Region("a"), w.Replicas[0], "result does not alias the receiver")
	})
	tests := []struct {
		name    string
		w       WriteQuorum
		r       Region
		wantErr error
	}{
		{"not a member", func() WriteQuorum { w := wq3(1); w.Members = []Region{"a", "c"}; return w }(), "b", ErrNotMember},
		{"not a replica", wq3(1), "z", ErrNotMember},
		{"write region", wq3(1), "a", ErrWriteRegion},
		{"below min", wq3(3), "b", ErrBelowMinDurability},
		{"invalid", WriteQuorum{}, "a", ErrNoReplicas},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.w.Shrink(tt.r)
			assert.ErrorIs(t, err, tt.wantErr)
			assert.Equal(t, WriteQuorum{}, got)
		})
	}
	t.Run("below min has numbers", func(t *testing.T) {
		_, err := wq3(3).Shrink("c")
		var be *BelowMinDurabilityError
		require.ErrorAs(t, err, &be)
		assert.Equal(t, BelowMinDurabilityError{Live: 2, Min: 3, Shrink: "c"}, *be)
		assert.Contains(t, err.Error(), `removing region "c" would leave 2 write-quorum members, below MinDurability 3`)
	})
}

func TestWriteQuorumGrow(t *testing.T) {
	w := wq3(1)
	w.Members = []Region{"a"}
	t.Run("ok, sorted", func(t *testing.T) {
		got, err := w.Grow("c", true)
		require.NoError(t, err)
		got, err = got.Grow("b", true)
		require.NoError(t, err)
		assert.Equal(t, []Region{"a", "b", "c"}, got.Members)
		assert.Equal(t, []Region{"a"}, w.Members, "receiver untouched")
	})
	tests := []struct {
		name     string
		r        Region
		caughtUp bool
		wantErr  error
	}{
		{"not a replica", "z", true, ErrNotReplica},
		{"already member", "a", true, ErrAlreadyMember},
		{"not caught up", "b", false, ErrNotCaughtUp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := w.Grow(tt.r, tt.caughtUp)
			assert.ErrorIs(t, err, tt.wantErr)
			assert.Equal(t, WriteQuorum{}, got)
		})
	}
	t.Run("invalid", func(t *testing.T) {
		_, err := WriteQuorum{}.Grow("a", true)
		assert.ErrorIs(t, err, ErrNoReplicas)
	})
}

func TestWriteQuorumSteps(t *testing.T) {
	five := WriteQuorum{Replicas: []Region{"a", "b", "c", "d", "e"}, WriteRegion: "c", Members: []Region{"a", "b", "c"}, MinDurability: 2}
	tests := []struct {
		name     string
		w        WriteQuorum
		live     []Region
		caughtUp []Region
		want     []QuorumStep // Why not compared
	}{
		{"healthy", wq3(2), []Region{"a", "b", "c"}, []Region{"a", "b", "c"}, nil},
		{"one down", wq3(1), []Region{"a", "c"}, nil, []QuorumStep{{Kind: StepShrink, Region: "b"}}},
		{"two down, min allows one", wq3(2), []Region{"a"}, nil, []QuorumStep{{Kind: StepShrink, Region: "b"}}},
		{"write region down: nothing to shrink it", wq3(1), []Region{"b", "c"}, nil, nil},
		{"grow first lets a shrink through", five, []Region{"a", "c", "d"}, []Region{"d"},
			[]QuorumStep{{Kind: StepGrow, Region: "d"}, {Kind: StepShrink, Region: "b"}}},
		{"live but not caught up", five, []Region{"a", "b", "c", "d", "e"}, []Region{"e"}, []QuorumStep{{Kind: StepGrow, Region: "e"}}},
		{"caught up but down", five, []Region{"a", "b", "c"}, []Region{"d", "e"}, nil},
		{"invalid", WriteQuorum{}, nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.w.Steps(in(tt.live...), in(tt.caughtUp...))
			var kinds []QuorumStep
			for _, s := range got {
				assert.NotEmpty(t, s.Why)
				kinds = append(kinds, QuorumStep{Kind: s.Kind, Region: s.Region})
			}
			assert.Equal(t, tt.want, kinds)
		})
	}
	t.Run("why", func(t *testing.T) {
		got := five.Steps(in("a", "c", "d"), in("d"))
		require.Len(t, got, 2)
		assert.Equal(t, `region "d" is live and caught up; grow the write quorum to 4 members to restore durability`, got[0].Why)
		assert.Equal(t, `region "b" is down; shrink the write quorum to 3 members (MinDurability 2) so writes can commit`, got[1].Why)
	})
}

func TestStepKindString(t *testing.T) {
	assert.Equal(t, "shrink", StepShrink.String())
	assert.Equal(t, "grow", StepGrow.String())
	assert.Equal(t, "StepKind(0)", StepKind(0).String())
}

func TestWriteQuorumCanPromote(t *testing.T) {
	w := wq3(1)
	w.Members = []Region{"a", "c"}
	tests := []struct {
		name    string
		r       Region
		wantErr error
	}{
		{"write region", "a", nil},
		{"member", "c", nil},
		{"shrunk out", "b", ErrNotMember},
		{"not a replica", "z", ErrNotReplica},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := w.CanPromote(tt.r)
			if tt.wantErr == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, tt.wantErr)
			}
		})
	}
	t.Run("invalid", func(t *testing.T) {
		assert.ErrorIs(t, WriteQuorum{}.CanPromote("a"), ErrNoReplicas)
	})
	t.Run("promote then shrink the old write region", func(t *testing.T) {
		p, err := w.Promote("c")
		require.NoError(t, err)
		assert.Equal(t, Region("c"), p.WriteRegion)
		assert.Equal(t, Region("a"), w.WriteRegion, "receiver untouched")
		s, err := p.Shrink("a")
		require.NoError(t, err)
		assert.Equal(t, []Region{"c"}, s.Members)
		_, err = w.Promote("b")
		assert.True(t, errors.Is(err, ErrNotMember))
	})
}
