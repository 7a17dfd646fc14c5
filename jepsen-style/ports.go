package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// The agents' listen ports. The harness picks them before an agent
// starts and the agent binds them later (its DNS server only once it has
// read the cluster spec, seconds after its first dials). An agent dials
// its peers from its own address (source_ip), so each of its outgoing
// connections takes an ephemeral port of that address: a port picked
// from the ephemeral range (what listening on :0 returns) can be taken
// by the agent's own connection before it binds it. Seed 4020 lost its
// run to that: n3's DNS bind failed, "listen tcp 127.0.1.3:42351: bind:
// address already in use". So the ports come from below the ephemeral
// range, where the kernel never allocates a connection's port.

// portFloor is the lowest port the harness listens on.
const portFloor = 10000

// portTries bounds the random probes for one port.
const portTries = 200

// ephemeralLow is the first port of the kernel's ephemeral range
// (net.ipv4.ip_local_port_range; 32768 when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo < 1 {
		return 32768
	}
	return lo
}

// pickPort returns a port in [lo, hi) that is not in taken and that free
// accepts (nothing listens there now), and adds it to taken.
func pickPort(rng *rand.Rand, lo, hi int, taken map[int]bool, free func(port int) bool) (int, error) {
	if hi-lo < 1 {
		return 0, fmt.Errorf("no ports in [%d, %d)", lo, hi)
	}
	for range portTries {
		p := lo + rng.IntN(hi-lo)
		if taken[p] || !free(p) {
			continue
		}
		taken[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free port in [%d, %d) after %d tries", lo, hi, portTries)
}

// portFree reports whether both TCP and UDP can listen on ip:port now
// (the DNS server needs both on one port; the others need TCP, gossip
// both).
func portFree(ip string, port int) bool {
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	ln, err := listenLoopback(addr)
	if err != nil {
		return false
	}
	defer ln.Close()
	pc, err := listenPacketLoopback(addr)
	if err != nil {
		return false
	}
	_ = pc.Close()
	return true
}

// agentPorts picks k distinct listen ports on ip below the ephemeral
// range.
func agentPorts(ip string, k int) ([]int, error) {
	hi := ephemeralLow()
	if hi <= portFloor {
		return nil, errors.New("the ephemeral port range starts below the harness's port floor")
	}
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	taken := map[int]bool{}
	out := make([]int, 0, k)
	for range k {
		p, err := pickPort(rng, portFloor, hi, taken, func(p int) bool { return portFree(ip, p) })
		if err != nil {
			return nil, fmt.Errorf("listen ports on %s: %w", ip, err)
		}
		out = append(out, p)
	}
	return out, nil
}
