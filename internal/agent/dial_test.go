package agent

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/fmnode/fmnode/internal/agentcfg"
)

func TestOffsetClockShiftsTheNodeClock(t *testing.T) {
	base := func() time.Duration { return time.Hour }
	assert.Equal(t, time.Hour+250*time.Millisecond, offsetClock(base, 250*time.Millisecond)())
	assert.Equal(t, time.Hour-3*time.Second, offsetClock(base, -3*time.Second)())
	assert.Equal(t, time.Hour, offsetClock(base, 0)())
}

func TestRateClockDriftsTheNodeClock(t *testing.T) {
	now := time.Hour
	base := func() time.Duration { return now }
	slow := rateClock(base, 0.2)
	assert.Equal(t, time.Hour, slow(), "it starts at the real time")
	now += 10 * time.Second
	assert.Equal(t, time.Hour+2*time.Second, slow(), "10 s of real time are 2 s on a clock at 0.2")
	fast := rateClock(base, 4)
	now += time.Second
	assert.Equal(t, time.Hour+14*time.Second, fast(), "created at 1h10s, 1 s later at rate 4")
	assert.Equal(t, now, rateClock(base, 0)(), "0: real time")
	assert.Equal(t, now, rateClock(base, 1)())
}

func TestPeerDialerUsesSourceIP(t *testing.T) {
	a := &Agent{cfg: agentcfg.Config{SourceIP: "127.0.4.9"}}
	assert.Equal(t, &net.TCPAddr{IP: net.ParseIP("127.0.4.9")}, a.peerDialer().LocalAddr)
	a = &Agent{}
	assert.Nil(t, a.peerDialer().LocalAddr)
}
