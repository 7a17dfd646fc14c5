package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCutsPair: the rule apply installs for each partition shape, pair by
// pair (the gossip evidence counts deaths by the same rule).
func TestCutsPair(t *testing.T) {
	tests := []struct {
		name string
		f    fault
		n    int
		a, b int
		cut  bool
	}{
		{"one: across", fault{Kind: fPartOne, Groups: [][]int{{3}, {1, 2, 4, 5}}}, 5, 3, 1, true},
		{"one: same side", fault{Kind: fPartOne, Groups: [][]int{{3}, {1, 2, 4, 5}}}, 5, 1, 2, false},
		{"majority: across, other way", fault{Kind: fPartMajor, Groups: [][]int{{1, 2, 3}, {4, 5}}}, 5, 5, 2, true},
		{"region: same region", fault{Kind: fPartRegion, Groups: [][]int{{1, 4}, {2, 3, 5, 6}}}, 6, 1, 4, false},
		{"oneway: first to second is cut", fault{Kind: fPartOneWay, Groups: [][]int{{1}, {2, 3}}}, 3, 1, 2, true},
		{"oneway: second to first is not", fault{Kind: fPartOneWay, Groups: [][]int{{1}, {2, 3}}}, 3, 2, 1, false},
		{"bridge: the bridge talks to both", fault{Kind: fPartBridge, Nodes: []int{3}, Groups: [][]int{{1, 2}, {4, 5}}}, 5, 3, 5, false},
		{"bridge: the sides do not", fault{Kind: fPartBridge, Nodes: []int{3}, Groups: [][]int{{1, 2}, {4, 5}}}, 5, 1, 4, true},
		// 9 nodes in ring order 1..9: 2 neighbours each side is a majority.
		{"ring: neighbour", fault{Kind: fPartRing, Nodes: allNodes(9)}, 9, 1, 3, false},
		{"ring: wraps around", fault{Kind: fPartRing, Nodes: allNodes(9)}, 9, 1, 8, false},
		{"ring: far side", fault{Kind: fPartRing, Nodes: allNodes(9)}, 9, 1, 5, true},
		{"not a partition", fault{Kind: fKill, Nodes: []int{1}}, 3, 1, 2, false},
		{"self", fault{Kind: fPartOne, Groups: [][]int{{1}, {2, 3}}}, 3, 1, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.cut, cutsPair(tt.f, tt.n, tt.a, tt.b))
		})
	}
}

// TestScanMemberDead reads memberlist's deaths from an agent's log lines.
func TestScanMemberDead(t *testing.T) {
	log := strings.Join([]string{
		`time=2026-12-02T18:41:48.956Z level=INFO msg="member dead" member=n2 node_id=2 region=north state=dead`,
		`time=2026-12-02T18:41:49.000Z level=INFO msg="member join" member=n2 node_id=2 region=north state=alive`,
		`time=2026-12-02T18:42:00.358Z level=INFO msg="member dead" member=n3 node_id=3 region=west state=dead`,
		`time=2026-12-02T18:42:01.000Z level=INFO msg="member dead" member=x9 state=dead`, // not a node of the run
		`garbage msg="member dead" member=n3`, // no time
	}, "\n")
	got := scanMemberDead(strings.NewReader(log), 1, map[string]int{"n1": 1, "n2": 2, "n3": 3})
	require.Len(t, got, 2)
	assert.Equal(t, deadEvent{At: time.Date(2026, 12, 2, 18, 41, 48, 956e6, time.UTC), Observer: 1, Member: 2}, got[0])
	assert.Equal(t, 3, got[1].Member)
}

// TestDeadAcrossCuts: a death counts as the partition's doing only while
// (or just after) a partition separates the pair and nothing stopped the
// member; otherwise the evidence would claim gossip was cut when a kill
// did it.
func TestDeadAcrossCuts(t *testing.T) {
	start := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	part := fault{At: 10 * time.Second, For: 5 * time.Second, Kind: fPartOne, Groups: [][]int{{3}, {1, 2}}}
	oneway := fault{At: 10 * time.Second, For: 5 * time.Second, Kind: fPartOneWay, Groups: [][]int{{3}, {1, 2}}}
	kill3 := fault{At: 9 * time.Second, For: 4 * time.Second, Kind: fKill, Nodes: []int{3}}
	tests := []struct {
		name   string
		e      deadEvent
		faults []fault
		want   int
	}{
		{"during the partition, across it", deadEvent{at(12), 1, 3}, []fault{part}, 1},
		{"just after the heal", deadEvent{at(17), 1, 3}, []fault{part}, 1},
		{"long after the heal", deadEvent{at(25), 1, 3}, []fault{part}, 0},
		{"before the partition", deadEvent{at(9), 1, 3}, []fault{part}, 0},
		{"same side", deadEvent{at(12), 1, 2}, []fault{part}, 0},
		{"one-way: the receiving side sees the sender die", deadEvent{at(12), 1, 3}, []fault{oneway}, 1},
		{"member killed meanwhile", deadEvent{at(12), 1, 3}, []fault{part, kill3}, 0},
		{"no partition at all", deadEvent{at(12), 1, 3}, []fault{kill3}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, deadAcrossCuts([]deadEvent{tt.e}, tt.faults, 3, start))
		})
	}
}

// TestRotatedServers: each client starts its DNS lookups at a different
// server, so a client cut of any DNS node reaches some lookups.
func TestRotatedServers(t *testing.T) {
	s := []string{"a", "b", "c"}
	tests := []struct {
		id   int
		want []string
	}{
		{0, []string{"a", "b", "c"}},
		{1, []string{"b", "c", "a"}},
		{2, []string{"c", "a", "b"}},
		{4, []string{"b", "c", "a"}},
		{-1, []string{"c", "a", "b"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, rotatedServers(s, tt.id), "id %d", tt.id)
	}
	assert.Equal(t, []string{"a", "b", "c"}, s, "the cluster's list is not changed")
	assert.Nil(t, rotatedServers(nil, 3))
}
