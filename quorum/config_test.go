package quorum

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMajorityConfig(t *testing.T) {
	c := MajorityConfig(3, 1, 2, 2)
	assert.Equal(t, Config{Prepare: Set{Members: []ID{1, 2, 3}, Threshold: 2}, Accept: Set{Members: []ID{1, 2, 3}, Threshold: 2}}, c)
	require.NoError(t, c.Validate())
	c.Prepare.Members[0] = 9
	assert.Equal(t, ID(1), c.Accept.Members[0], "prepare and accept do not share a backing array")
	assert.ErrorIs(t, MajorityConfig().Validate(), ErrEmptySet)
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr error
		wantMsg string
	}{
		{"majority", MajorityConfig(1, 2, 3), nil, ""},
		{"flexible 2/3 of 4", Config{Prepare: Set{Members: []ID{1, 2, 3, 4}, Threshold: 2}, Accept: Set{Members: []ID{1, 2, 3, 4}, Threshold: 3}}, nil, ""},
		{"mid-grow", Config{Prepare: Majority(1, 2, 3), Accept: Majority(1, 2, 3, 4)}, nil, ""},
		{"bad prepare", Config{Prepare: Set{Members: []ID{1, 2}, Threshold: 3}, Accept: Majority(1, 2)}, ErrThresholdRange, "quorum: Config.Prepare.Threshold 3 exceeds 2 members"},
		{"bad accept", Config{Prepare: Majority(1, 2), Accept: Set{}}, ErrEmptySet, "quorum: Config.Accept.Members is empty"},
		{"unsorted accept", Config{Prepare: Majority(1, 2), Accept: Set{Members: []ID{2, 1}, Threshold: 2}}, ErrUnsortedMembers, "Config.Accept.Members"},
		{"disjoint", Config{Prepare: Set{Members: []ID{1, 2, 3, 4}, Threshold: 2}, Accept: Set{Members: []ID{1, 2, 3, 4}, Threshold: 2}},
			ErrNoIntersection, "quorum: Config.Prepare 2-of-{1,2,3,4} and Config.Accept 2-of-{1,2,3,4} have disjoint quorums {1,2} and {3,4}"},
		{"different members", Config{Prepare: Majority(1, 2, 3), Accept: Majority(4, 5, 6)}, ErrNoIntersection, "disjoint quorums {1,2} and {4,5}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			assert.Contains(t, err.Error(), tt.wantMsg)
		})
	}
	t.Run("witness is typed", func(t *testing.T) {
		err := Config{Prepare: Set{Members: []ID{1, 2, 3}, Threshold: 1}, Accept: Majority(1, 2, 3)}.Validate()
		var de *DisjointQuorumsError
		require.True(t, errors.As(err, &de))
		assert.Equal(t, "Config.Prepare", de.NameA)
		assert.Equal(t, "Config.Accept", de.NameB)
		assert.Equal(t, []ID{1}, de.QuorumA)
		assert.Equal(t, []ID{2, 3}, de.QuorumB)
	})
}

func TestConfigAcceptorsEqualString(t *testing.T) {
	c := Config{Prepare: Majority(1, 3, 5), Accept: Majority(1, 2, 3, 5)}
	acc := c.Acceptors()
	assert.Equal(t, []ID{1, 2, 3, 5}, acc)
	acc[0] = 42
	assert.Equal(t, ID(1), c.Prepare.Members[0], "Acceptors returns a fresh slice")

	assert.True(t, c.Equal(Config{Prepare: Majority(5, 3, 1), Accept: Majority(1, 2, 3, 5)}))
	assert.False(t, c.Equal(Config{Prepare: Majority(1, 3, 5), Accept: Majority(1, 3, 5)}))
	assert.False(t, c.Equal(Config{Prepare: Set{Members: []ID{1, 3, 5}, Threshold: 3}, Accept: Majority(1, 2, 3, 5)}))

	assert.Equal(t, "prepare=2-of-{1,3,5} accept=3-of-{1,2,3,5}", c.String())
}
