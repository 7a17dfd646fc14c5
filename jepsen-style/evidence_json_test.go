package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGossipEvidenceJSON: the run JSON keeps its flat keys, the UDP
// counts beside the deaths (the campaign's figures read them).
func TestGossipEvidenceJSON(t *testing.T) {
	var g gossipEvidence
	g.add(gossipEvidence{udpEvidence: udpEvidence{UDPForwarded: 3, UDPCut: 2, UDPDropped: 1}, DeadTotal: 4, DeadAcrossCut: 1})
	g.addStats(udpStats{Forwarded: 1, Cut: 1})
	b, err := json.Marshal(g)
	require.NoError(t, err)
	require.JSONEq(t, `{"udp_forwarded":4,"udp_cut":3,"udp_dropped":1,"member_dead":4,"member_dead_across_cut":1}`, string(b))
}
