package agent

import (
	"net"
	"time"
)

// sourceIP is the configured source_ip (nil: the kernel's choice). The
// config validated it as an IP literal.
func (a *Agent) sourceIP() net.IP {
	if a.cfg.SourceIP == "" {
		return nil
	}
	return net.ParseIP(a.cfg.SourceIP)
}

// peerDialer dials other agents (their APIs) from source_ip when it is
// set, as the node transport does, so that a peer sees one address per
// node whatever the agent talks to it over.
func (a *Agent) peerDialer() *net.Dialer {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if ip := a.sourceIP(); ip != nil {
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	return d
}

// offsetClock is clock shifted by offset (clock_offset: zero in
// production; the fault-injection harness skews nodes with it).
func offsetClock(clock func() time.Duration, offset time.Duration) func() time.Duration {
	if offset == 0 {
		return clock
	}
	return func() time.Duration { return clock() + offset }
}

// rateClock is clock running at rate from the call on (clock_rate: 0 or
// 1 in production, where it is clock itself; the fault-injection harness
// drifts a node with it). It stays monotonic: rate is positive.
func rateClock(clock func() time.Duration, rate float64) func() time.Duration {
	if rate == 0 || rate == 1 {
		return clock
	}
	start := clock()
	return func() time.Duration { return start + time.Duration(float64(clock()-start)*rate) }
}
