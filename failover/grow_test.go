package failover

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	dataplane "github.com/fmnode/fmnode/partition"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// growModel is a reference model of one partition's strong write path on
// the write region: a log, each follower's match LSN, and the commit rule
// (the write region's local write quorum). An LSN is acknowledged once
// every member of the rule holds it.
type growModel struct {
	last  LSN
	match map[Region]LSN
	acked LSN
}

// commit advances the acknowledged LSN under the rule.
func (g *growModel) commit(self Region, rule []Region) {
	c := g.last
	for _, r := range rule {
		if r != self {
			c = min(c, g.match[r])
		}
	}
	g.acked = max(g.acked, c)
}

// progress renders the model as the data plane reports it, so the test
// goes through StatusFromProgress like the drivers.
func (g *growModel) progress(self Region, epoch Epoch, rule []Region, replicas []Region) dataplane.Progress {
	pr := dataplane.Progress{Epoch: dataplane.Epoch(epoch), Role: dataplane.RoleLeader, WriteRegion: self,
		LastLSN: dataplane.LSN(g.last), CommitLSN: dataplane.LSN(g.acked)}
	pr.Quorum.Members = slices.Clone(rule)
	for _, r := range replicas {
		if r != self {
			pr.Followers = append(pr.Followers, dataplane.FollowerProgress{Region: r, Match: dataplane.LSN(g.match[r])})
		}
	}
	return pr
}

// TestGrowNeverLosesAcknowledgedWrite builds the interleaving of a region
// growing back into the write quorum: west returns and catches up; the
// write region east decides to grow it; writes arrive while west's link
// stalls; the Grow commits; east dies before (or right after) it acts on
// the new quorum; west, ranked above north, is promoted. Every write east
// acknowledged must survive: the new epoch must start at or above it.
//
// Before the fix, east proposed Grow while its commit rule was still
// {east, north}: writes 11 and 12 were acknowledged without west, the
// register then listed west as a member, and west was promoted at LSN 10,
// losing them.
func TestGrowNeverLosesAcknowledgedWrite(t *testing.T) {
	for _, lateWrites := range []LSN{1, 2, 5} {
		t.Run(fmt.Sprintf("writes=%d", lateWrites), func(t *testing.T) {
			cfg := FastConfig()
			h := newMgrHarness(t, cfg, 1)
			const name = "p-000"
			// West had failed and was shrunk out; it is back and caught up.
			e := h.reg[name]
			s := e.state.Clone()
			wq, err := s.WriteQuorum.Shrink("west")
			require.NoError(t, err)
			s.WriteQuorum = wq
			v := h.reg[name].version + 1
			h.reg[name] = regEntry{version: v, state: s}
			model := &growModel{last: 10, acked: 10, match: map[Region]LSN{"west": 10, "north": 10}}
			replicas := s.WriteQuorum.Replicas
			h.refresh = func(n NodeID, part string, st *ReplicaStatus) {
				switch n {
				case 1:
					model.commit("east", st.WriteQuorum)
					rule := st.WriteQuorum
					*st = StatusFromProgress(model.progress("east", st.Epoch, rule, replicas), "east")
				case 2:
					st.LastLSN = model.match["west"]
				case 3:
					st.LastLSN = model.match["north"]
				}
			}
			h.installShrunk(name, v, s)
			// Run until east proposes the Grow.
			var grow *Proposal
			for i := 0; i < 100 && grow == nil; i++ {
				h.step(100 * time.Millisecond)
				for k := range h.proposed {
					if h.proposed[k].Kind == DecideGrowQuorum {
						grow = &h.proposed[k]
					}
				}
			}
			require.NotNil(t, grow, "east grows west back")
			// West's data link stalls; writes reach east and north and are
			// acknowledged under east's commit rule as it stands now.
			rule := h.replicas[1][name].WriteQuorum
			for k := LSN(1); k <= lateWrites; k++ {
				model.last++
				model.match["north"] = model.last
				model.commit("east", rule)
			}
			h.refresh(2, name, h.replicas[2][name])
			h.refresh(3, name, h.replicas[3][name])
			// The Grow commits; east dies right after.
			h.step(100 * time.Millisecond)
			require.True(t, h.reg[name].state.WriteQuorum.IsMember("west"), "the Grow committed")
			acked := model.acked
			h.cut[1] = true
			for i := 0; i < 100 && h.reg[name].state.WriteRegion == "east"; i++ {
				h.step(100 * time.Millisecond)
			}
			got := h.reg[name].state
			require.NotEqual(t, Region("east"), got.WriteRegion, "failed over")
			assert.GreaterOrEqual(t, got.Table.Current().StartLSN, acked,
				"new write region %s starts after LSN %d, but east acknowledged up to %d: acknowledged writes lost",
				got.WriteRegion, got.Table.Current().StartLSN, acked)
		})
	}
}

// A grow held off by hysteresis writes nothing, is reported once in the
// manager's events with its reason, and happens when the hold-off ends.
func TestManagerRecordsSuppressedGrow(t *testing.T) {
	cfg := FastConfig()
	h := newMgrHarness(t, cfg, 1)
	const name = "p-000"
	s := h.reg[name].state.Clone()
	hold, n := s.noteShrink(cfg, "west", 0)
	require.Equal(t, 1, n)
	wq, err := s.WriteQuorum.Shrink("west")
	require.NoError(t, err)
	s.WriteQuorum = wq
	v := h.reg[name].version + 1
	h.reg[name] = regEntry{version: v, state: s}
	model := &growModel{last: 10, acked: 10, match: map[Region]LSN{"west": 10, "north": 10}}
	h.refresh = func(n NodeID, part string, st *ReplicaStatus) {
		if n == 1 {
			model.commit("east", st.WriteQuorum)
			*st = StatusFromProgress(model.progress("east", st.Epoch, st.WriteQuorum, s.WriteQuorum.Replicas), "east")
		}
	}
	h.installShrunk(name, v, s)
	for h.now < hold-time.Second {
		h.step(100 * time.Millisecond)
	}
	assert.Empty(t, h.proposed, "no register write while the grow is held off")
	var reported int
	for _, e := range h.mgrs[1].Events() {
		if e.Partition == name && strings.Contains(e.Text, "suppressed: hysteresis: grow of west held off") {
			reported++
		}
	}
	assert.Equal(t, 1, reported, "the suppression is reported once, with its reason")
	ev, ok := h.mgrs[1].Evidence(h.now, name)
	require.True(t, ok)
	st, _, _ := h.mgrs[1].State(name)
	assert.Contains(t, Explain(cfg, st, ev), "hysteresis: grow of west held off")
	for h.now < hold+2*time.Second {
		h.step(100 * time.Millisecond)
	}
	require.NotEmpty(t, h.proposed)
	assert.Equal(t, DecideGrowQuorum, h.proposed[0].Kind, "grows once the hold-off ends")
	assert.True(t, h.reg[name].state.WriteQuorum.IsMember("west"))
}

// Property: at every moment, every member of the register's write quorum
// holds every write the write region acknowledged (so any member is an
// RPO-0 candidate), while a region shrunk out returns, catches up, grows
// back, and links stall at random. The reference model acknowledges an
// LSN once every member of the write region's commit rule holds it.
func TestGrowMembersHoldEveryAcknowledgedWrite(t *testing.T) {
	grows := 0
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 5))
			cfg := FastConfig()
			cfg.GrowHoldOffBase = 0
			h := newMgrHarness(t, cfg, 1)
			const name = "p-000"
			s := h.reg[name].state.Clone()
			wq, err := s.WriteQuorum.Shrink("west")
			require.NoError(t, err)
			s.WriteQuorum = wq
			v := h.reg[name].version + 1
			h.reg[name] = regEntry{version: v, state: s}
			model := &growModel{last: 10, acked: 10, match: map[Region]LSN{"west": 3, "north": 10}}
			h.refresh = func(n NodeID, part string, st *ReplicaStatus) {
				switch n {
				case 1:
					model.commit("east", st.WriteQuorum)
					*st = StatusFromProgress(model.progress("east", st.Epoch, st.WriteQuorum, s.WriteQuorum.Replicas), "east")
				case 2:
					st.LastLSN = model.match["west"]
				case 3:
					st.LastLSN = model.match["north"]
				}
			}
			h.installShrunk(name, v, s)
			stalled := map[Region]bool{}
			for i := 0; i < 400; i++ {
				// The data plane: writes arrive; replication delivers to
				// regions whose link is not stalled, a few LSNs at a time.
				if rng.IntN(3) == 0 {
					model.last++
				}
				for _, r := range []Region{"north", "west"} {
					if rng.IntN(20) == 0 {
						stalled[r] = !stalled[r]
					}
					if !stalled[r] && model.match[r] < model.last {
						model.match[r] = min(model.last, model.match[r]+LSN(1+rng.IntN(3)))
					}
				}
				st := h.replicas[1][name]
				h.refresh(1, name, st)
				h.mgrs[1].UpdateReplica(h.now, name, *st)
				h.refresh(2, name, h.replicas[2][name])
				h.refresh(3, name, h.replicas[3][name])
				h.step(50 * time.Millisecond)
				reg := h.reg[name].state
				require.Equal(t, Region("east"), reg.WriteRegion)
				for _, m := range reg.WriteQuorum.Members {
					if m != "east" {
						require.GreaterOrEqual(t, model.match[m], model.acked,
							"step %d: register member %s holds up to %d, east acknowledged %d", i, m, model.match[m], model.acked)
					}
				}
			}
			for _, p := range h.proposed {
				if p.Kind == DecideGrowQuorum {
					grows++
				}
			}
		})
	}
	assert.Greater(t, grows, 10, "regions did grow back")
}

// installShrunk gives every node the register value s (version v) with
// its write quorum shrunk, and a status from h.refresh in which node 1,
// the write region, already counts only the members in its commit rule.
func (h *mgrHarness) installShrunk(name string, v uint64, s State) {
	for _, nd := range h.nodes {
		st := h.replicas[nd.ID][name]
		if nd.ID == 1 {
			st.WriteQuorum = s.WriteQuorum.Members
		}
		h.refresh(nd.ID, name, st)
		h.mgrs[nd.ID].UpdateReplica(h.now, name, *st)
		h.mgrs[nd.ID].ObserveState(h.now, name, v, s)
	}
}
