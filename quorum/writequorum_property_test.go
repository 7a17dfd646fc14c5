package quorum

import (
	"errors"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// wqModel is the reference for the write-quorum property test: regions are
// bits, the quorum is a mask, and every committed write remembers the mask of
// regions it is durable in.
type wqModel struct {
	regions   []Region
	live      uint8
	write     int   // index of the write region
	members   uint8 // write-quorum mask
	min       int
	committed []uint8 // durable mask of every committed write
}

func (m *wqModel) bit(r Region) uint8 { return 1 << slices.Index(m.regions, r) }

func (m *wqModel) pred(mask uint8) func(Region) bool {
	return func(r Region) bool { return mask&m.bit(r) != 0 }
}

// caughtUp: the region holds every committed write.
func (m *wqModel) caughtUp(i int) bool {
	for _, d := range m.committed {
		if d&(1<<i) == 0 {
			return false
		}
	}
	return true
}

func (m *wqModel) caughtUpMask() uint8 {
	var mask uint8
	for i := range m.regions {
		if m.caughtUp(i) {
			mask |= 1 << i
		}
	}
	return mask
}

// check compares the implementation's state with the model and asserts the
// invariants: valid, WriteRegion ∈ Members ⊆ Replicas, |Members| >= Min, and
// every committed write is durable in every member (so any member may be
// promoted without losing it).
func (m *wqModel) check(t *testing.T, w WriteQuorum) {
	t.Helper()
	require.NoError(t, w.Validate())
	require.Equal(t, m.regions[m.write], w.WriteRegion)
	var got uint8
	for _, r := range w.Members {
		require.True(t, w.IsReplica(r))
		got |= m.bit(r)
	}
	require.Equal(t, m.members, got)
	require.True(t, w.IsMember(w.WriteRegion))
	require.GreaterOrEqual(t, len(w.Members), w.MinDurability)
	for _, d := range m.committed {
		require.Equal(t, m.members, d&m.members, "a committed write is missing from a member")
	}
}

func TestWriteQuorumProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	all := []Region{"eu", "jp", "us-east", "us-west", "za"}
	for run := range 300 {
		n := 1 + rng.IntN(len(all))
		m := &wqModel{regions: all[:n], live: 1<<n - 1, write: rng.IntN(n), members: 1<<n - 1, min: 1 + rng.IntN(n)}
		w := WriteQuorum{Replicas: slices.Clone(m.regions), WriteRegion: m.regions[m.write], Members: slices.Clone(m.regions), MinDurability: m.min}
		m.check(t, w)
		for op := range 200 {
			i := rng.IntN(n)
			r := m.regions[i]
			switch rng.IntN(8) {
			case 0: // a region fails or recovers
				m.live ^= 1 << i
			case 1: // a live region catches up (copies every committed write)
				if m.live&(1<<i) != 0 {
					for k := range m.committed {
						m.committed[k] |= 1 << i
					}
				}
			case 2: // a write lands in a random set of live regions
				durable := uint8(rng.IntN(1<<n)) & m.live
				commits := w.Commits(m.pred(durable))
				want := durable&m.members == m.members && bits.OnesCount8(durable) >= m.min
				require.Equal(t, want, commits, "run %d op %d", run, op)
				if commits {
					require.GreaterOrEqual(t, bits.OnesCount8(durable), m.min)
					m.committed = append(m.committed, durable)
				}
			case 3: // shrink
				next, err := w.Shrink(r)
				var wantErr error
				switch {
				case m.members&(1<<i) == 0:
					wantErr = ErrNotMember
				case i == m.write:
					wantErr = ErrWriteRegion
				case bits.OnesCount8(m.members)-1 < m.min:
					wantErr = ErrBelowMinDurability
				}
				if wantErr != nil {
					require.ErrorIs(t, err, wantErr, "run %d op %d", run, op)
					break
				}
				require.NoError(t, err)
				w, m.members = next, m.members&^(1<<i)
			case 4: // grow
				caught := m.caughtUp(i)
				next, err := w.Grow(r, caught)
				var wantErr error
				switch {
				case m.members&(1<<i) != 0:
					wantErr = ErrAlreadyMember
				case !caught:
					wantErr = ErrNotCaughtUp
				}
				if wantErr != nil {
					require.ErrorIs(t, err, wantErr, "run %d op %d", run, op)
					break
				}
				require.NoError(t, err)
				w, m.members = next, m.members|1<<i
			case 5: // failover
				err := w.CanPromote(r)
				if m.members&(1<<i) == 0 {
					require.ErrorIs(t, err, ErrNotMember)
					break
				}
				require.NoError(t, err)
				require.True(t, m.caughtUp(i), "promotable region lacks a committed write")
				w, err = w.Promote(r)
				require.NoError(t, err)
				m.write = i
			case 6: // writability matches the model
				err := w.Writable(m.pred(m.live))
				liveMembers := bits.OnesCount8(m.members & m.live)
				switch {
				case m.live&(1<<m.write) == 0:
					require.ErrorIs(t, err, ErrWriteRegionDown)
				case liveMembers < m.min:
					require.ErrorIs(t, err, ErrBelowMinDurability)
				case m.members&^m.live != 0:
					require.ErrorIs(t, err, ErrMemberDown)
				default:
					require.NoError(t, err)
				}
			case 7: // apply the proposed steps; they all succeed and are then exhausted
				steps := w.Steps(m.pred(m.live), m.pred(m.caughtUpMask()))
				for _, s := range steps {
					var err error
					switch s.Kind {
					case StepGrow:
						require.True(t, m.caughtUp(slices.Index(m.regions, s.Region)))
						w, err = w.Grow(s.Region, true)
						m.members |= m.bit(s.Region)
					case StepShrink:
						require.Zero(t, m.live&m.bit(s.Region), "shrinking a live region")
						w, err = w.Shrink(s.Region)
						m.members &^= m.bit(s.Region)
					default:
						t.Fatalf("bad step kind %v", s.Kind)
					}
					require.NoError(t, err)
				}
				require.Empty(t, w.Steps(m.pred(m.live), m.pred(m.caughtUpMask())))
			}
			m.check(t, w)
		}
	}
}

func TestWriteQuorumErrorsAreTyped(t *testing.T) {
	_, err := wq3(3).Shrink("b")
	var be *BelowMinDurabilityError
	require.True(t, errors.As(err, &be))
	require.Equal(t, 3, be.Min)
}
