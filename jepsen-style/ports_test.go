package main

import (
	"math/rand/v2"
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAgentPortsAreBelowTheEphemeralRange: the ports an agent is told to
// listen on never come from the range its own outgoing connections take
// their ports from (seed 4020: n3's DNS bind found its port taken by one
// of n3's own dials), they are distinct, and TCP and UDP are free there.
func TestAgentPortsAreBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	ports, err := agentPorts("127.0.1.1", 8)
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, p := range ports {
		assert.GreaterOrEqual(t, p, portFloor)
		assert.Less(t, p, low, "port %d is in the ephemeral range (from %d)", p, low)
		assert.False(t, seen[p], "port %d picked twice", p)
		seen[p] = true
		assert.True(t, portFree("127.0.1.1", p), "port %d is not free", p)
	}
}

// TestPickPort: a taken port, or one something listens on, is never
// picked; an exhausted range is an error, not a port in use.
func TestPickPort(t *testing.T) {
	tests := []struct {
		name    string
		lo, hi  int
		taken   []int
		busy    []int
		want    int // 0: any of the free ones
		wantErr bool
	}{
		{name: "one port, free", lo: 100, hi: 101, want: 100},
		{name: "one port, taken", lo: 100, hi: 101, taken: []int{100}, wantErr: true},
		{name: "one port, busy", lo: 100, hi: 101, busy: []int{100}, wantErr: true},
		{name: "only the last is left", lo: 100, hi: 103, taken: []int{100}, busy: []int{101}, want: 102},
		{name: "empty range", lo: 100, hi: 100, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			taken := map[int]bool{}
			for _, p := range tt.taken {
				taken[p] = true
			}
			busy := map[int]bool{}
			for _, p := range tt.busy {
				busy[p] = true
			}
			rng := rand.New(rand.NewPCG(1, 2))
			p, err := pickPort(rng, tt.lo, tt.hi, taken, func(p int) bool { return !busy[p] })
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, p)
			assert.True(t, taken[p], "a picked port is marked taken")
		})
	}
}

// TestPortFreeSeesAListener: a port something listens on (TCP or UDP)
// is not free.
func TestPortFreeSeesAListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.1.1:0")
	require.NoError(t, err)
	defer ln.Close()
	assert.False(t, portFree("127.0.1.1", ln.Addr().(*net.TCPAddr).Port), "TCP listener")
	pc, err := net.ListenPacket("udp4", "127.0.1.1:0")
	require.NoError(t, err)
	defer pc.Close()
	_, ps, _ := net.SplitHostPort(pc.LocalAddr().String())
	up, _ := strconv.Atoi(ps)
	assert.False(t, portFree("127.0.1.1", up), "UDP socket")
}
