package main

import (
	"bufio"
	"io"
	"os"
	"strings"
	"time"
)

// Evidence that the nemesis' cuts reach gossip and DNS: since gossip and
// the clients' DNS go through the proxies, a partition must make
// memberlist declare the other side dead, and a client cut must lose
// DNS packets. A run reports both (runResult.Gossip, runResult.DNS), so a
// campaign shows the faults cut what they claim to, not only the node
// transport.

// udpEvidence counts UDP packets through the relaying proxies: forwarded,
// lost to a cut, lost to a drop rate.
type udpEvidence struct {
	UDPForwarded uint64 `json:"udp_forwarded"`
	UDPCut       uint64 `json:"udp_cut"`
	UDPDropped   uint64 `json:"udp_dropped"`
}

func (u *udpEvidence) add(o udpEvidence) {
	u.UDPForwarded += o.UDPForwarded
	u.UDPCut += o.UDPCut
	u.UDPDropped += o.UDPDropped
}

func (u *udpEvidence) addStats(s udpStats) {
	u.add(udpEvidence{UDPForwarded: s.Forwarded, UDPCut: s.Cut, UDPDropped: s.Dropped})
}

// gossipEvidence is what a run's gossip saw of the faults: memberlist's
// UDP packets through the proxies, and the members declared dead.
type gossipEvidence struct {
	udpEvidence
	// DeadTotal counts "member dead" lines in the agents' logs;
	// DeadAcrossCut those an agent logged about a peer a partition
	// separated it from at the time (or within deadSlack after the heal),
	// the peer being neither killed, paused nor restarting then: the
	// partition cut gossip.
	DeadTotal     int `json:"member_dead"`
	DeadAcrossCut int `json:"member_dead_across_cut"`
}

func (g *gossipEvidence) add(o gossipEvidence) {
	g.udpEvidence.add(o.udpEvidence)
	g.DeadTotal += o.DeadTotal
	g.DeadAcrossCut += o.DeadAcrossCut
}

// dnsEvidence is the clients' DNS through its relaying proxies.
type dnsEvidence = udpEvidence

// deadSlack is how long after a partition heals a "member dead" still
// counts as its doing: memberlist declares a member dead after its
// suspicion timeout, which can end just after the heal.
const deadSlack = 3 * time.Second

const logMemberDead = `msg="member dead"`

// deadEvent is one "member dead" line: observer (the agent whose log it
// is) declared member dead at At.
type deadEvent struct {
	At       time.Time
	Observer int
	Member   int
}

// scanMemberDead returns the "member dead" lines of one agent's log.
// names maps a member name (n3) to its index.
func scanMemberDead(r io.Reader, observer int, names map[string]int) []deadEvent {
	var out []deadEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		s := sc.Text()
		if !strings.Contains(s, logMemberDead) {
			continue
		}
		at, ok := logField(s, "time")
		if !ok {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			continue
		}
		m, ok := logField(s, "member")
		if !ok || names[m] == 0 {
			continue
		}
		out = append(out, deadEvent{At: t, Observer: observer, Member: names[m]})
	}
	return out
}

// logField is an unquoted key=value of a slog text line.
func logField(line, key string) (string, bool) {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v, true
		}
	}
	return "", false
}

// isPartition reports whether kind is a fault that cuts node pairs.
func isPartition(kind string) bool {
	switch kind {
	case fPartOne, fPartRegion, fPartMajor, fPartRing, fPartBridge, fPartOneWay:
		return true
	}
	return false
}

// cutsPair reports whether partition fault f, among n nodes, cuts the
// link a->b. It is the rule apply installs.
func cutsPair(f fault, n, a, b int) bool {
	if a == b {
		return false
	}
	switch f.Kind {
	case fPartOne, fPartRegion, fPartMajor:
		return groupOf(f.Groups, a) != groupOf(f.Groups, b)
	case fPartRing:
		return !ringTalks(f.Nodes, n, a, b)
	case fPartBridge:
		bridge := f.Nodes[0]
		return !(a == bridge || b == bridge || groupOf(f.Groups, a) == groupOf(f.Groups, b))
	case fPartOneWay:
		return groupOf(f.Groups, a) == 0 && groupOf(f.Groups, b) == 1
	}
	return false
}

// ringTalks is the ring partition's rule: each node talks to its
// neighbours on the ring (order), enough of them on each side that it
// sees a majority.
func ringTalks(order []int, n, a, b int) bool {
	pos := map[int]int{}
	for k, x := range order {
		pos[x] = k
	}
	m := (n/2 + 1) / 2 // neighbours on each side: itself + 2m ≥ n/2+1
	if 2*m+1 < n/2+1 {
		m++
	}
	d := (pos[a] - pos[b] + n) % n
	return min(d, n-d) <= m
}

// disturbsNode reports whether fault f stops node x (so its death in
// gossip is no evidence of a cut).
func disturbsNode(f fault, x int) bool {
	switch f.Kind {
	case fKill, fKillAll, fPause, fClockSkew, fClockBeyond, fDiskFull:
		for _, i := range f.Nodes {
			if i == x {
				return true
			}
		}
	}
	return false
}

// deadAcrossCuts counts the events in which a partition separated the
// observer from the member (either direction: memberlist's probes need
// both) while nothing stopped the member. Fault times are from start.
func deadAcrossCuts(events []deadEvent, faults []fault, n int, start time.Time) int {
	count := 0
	for _, e := range events {
		at := e.At.Sub(start)
		within := func(f fault) bool { return at >= f.At && at <= f.At+f.For+deadSlack }
		cut, disturbed := false, false
		for _, f := range faults {
			if !within(f) {
				continue
			}
			if isPartition(f.Kind) && (cutsPair(f, n, e.Observer, e.Member) || cutsPair(f, n, e.Member, e.Observer)) {
				cut = true
			}
			if disturbsNode(f, e.Member) {
				disturbed = true
			}
		}
		if cut && !disturbed {
			count++
		}
	}
	return count
}

// collectEvidence reads the proxies' counters and the agents' logs.
func collectEvidence(c *cluster, faults []fault, start time.Time) (gossipEvidence, dnsEvidence) {
	var g gossipEvidence
	var d dnsEvidence
	names := map[string]int{}
	for _, n := range c.nodes {
		names[n.name] = n.i
	}
	var events []deadEvent
	for _, n := range c.nodes {
		if n.proxGossip != nil {
			g.addStats(n.proxGossip.udp.snapshot())
		}
		if n.proxDNS != nil {
			d.addStats(n.proxDNS.udp.snapshot())
		}
		f, err := os.Open(n.logPath)
		if err != nil {
			continue
		}
		events = append(events, scanMemberDead(io.LimitReader(f, maxLogScan), n.i, names)...)
		_ = f.Close()
	}
	g.DeadTotal = len(events)
	g.DeadAcrossCut = deadAcrossCuts(events, faults, len(c.nodes), start)
	return g, d
}
