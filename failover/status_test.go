package failover

import (
	"testing"

	"github.com/stretchr/testify/assert"

	dataplane "github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
)

func TestStatusFromProgress(t *testing.T) {
	pr := dataplane.Progress{
		Epoch: 3, Role: dataplane.RoleLeader, WriteRegion: "east", LastLSN: 10, DurableLSN: 10, CommitLSN: 9,
		Quorum: quorum.WriteQuorum{Members: []Region{"east", "west"}},
		Followers: []dataplane.FollowerProgress{
			{Region: "west", Match: 10},
			{Region: "north", Match: 7},
			{Region: "south", Match: 10, Snapshot: true},
			{Region: "up", Match: 10},
			{Region: "down", Match: 8},
		},
	}
	pr.Quorum.Members = []Region{"down", "east", "west"}
	st := StatusFromProgress(pr, "east")
	assert.True(t, st.WriteRegion)
	assert.False(t, st.Fenced)
	assert.Equal(t, []FollowerStatus{
		{Region: "west", MatchLSN: 10, InRule: true, CaughtUp: true, InSync: true},
		{Region: "north", MatchLSN: 7},
		{Region: "south", MatchLSN: 10},
		{Region: "up", MatchLSN: 10, CaughtUp: true},
		{Region: "down", MatchLSN: 8, InRule: true},
	}, st.Followers, "in sync means in the commit rule, every committed LSN and no snapshot pending; "+
		"caught up (outside the rule) is not in sync")

	pr.Role = dataplane.RolePaused
	assert.True(t, StatusFromProgress(pr, "east").Fenced)
	pr.DurableLSN = 8
	st = StatusFromProgress(pr, "east")
	assert.False(t, st.Fenced, "a fence is reported once its tail is durable: its final LSN starts the next epoch")
	assert.Equal(t, LSN(10), st.LastLSN)
	assert.Equal(t, LSN(8), st.Durable(), "the evidence counts only what survives a crash")
	pr.DurableLSN = 10
	pr.Role, pr.WriteRegion = dataplane.RoleFollower, "west"
	st = StatusFromProgress(pr, "east")
	assert.False(t, st.WriteRegion)
	assert.Empty(t, st.Followers, "only the write region reports followers")
}
