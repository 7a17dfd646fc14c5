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

func TestPeerDialerUsesSourceIP(t *testing.T) {
	a := &Agent{cfg: agentcfg.Config{SourceIP: "127.0.4.9"}}
	assert.Equal(t, &net.TCPAddr{IP: net.ParseIP("127.0.4.9")}, a.peerDialer().LocalAddr)
	a = &Agent{}
	assert.Nil(t, a.peerDialer().LocalAddr)
}
