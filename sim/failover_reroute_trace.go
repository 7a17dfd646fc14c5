package sim

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
	"github.com/fmnode/fmnode/txtdns/routing"
)

// The reroute trace (Config.RerouteTrace): per watched client, the last
// foTraceLen routing events from the outage on, so that the slowest
// reroutes can be explained step by step. Off (the default) it costs one
// nil check per event: no client has a trace.

// foTraceLen is the events kept per client (the last ones).
const foTraceLen = 96

type foTraceKind uint8

const (
	trStart      foTraceKind = iota + 1 // an operation began
	trSend                              // an attempt went out (region, epoch, timeout, breaker)
	trArrive                            // the attempt reached the replica's node
	trServerOut                         // the replica's reply left its node
	trReply                             // the reply reached the client (outcome)
	trTimeout                           // the attempt timed out
	trWait                              // the router asked to wait (dur)
	trDNSQuery                          // a DNS lookup went out (force)
	trDNSAnswer                         // the DNS answer came back (epoch, region or error)
	trDNSTimeout                        // the DNS lookup timed out
	trEnd                               // the operation ended
	trRefused                           // the attempt was refused: the node's process is down (a reset)
)

// foTraceEv is one event; its fields mean what its kind says.
type foTraceEv struct {
	at     time.Duration
	dur    time.Duration // trWait: the wait; trSend: the attempt's timeout
	epoch  uint64
	kind   foTraceKind
	region int8 // trSend, trReply, trDNSAnswer: a region index (-1: none)
	aux    uint8
	ok     bool
}

// foTrace is one client's ring of events.
type foTrace struct {
	ev   [foTraceLen]foTraceEv
	n    int // events recorded (the ring holds the last foTraceLen)
	done bool
}

func (t *foTrace) add(e foTraceEv) {
	if t.done {
		return
	}
	t.ev[t.n%foTraceLen] = e
	t.n++
}

// events returns the kept events in order.
func (t *foTrace) events() []foTraceEv {
	if t.n <= foTraceLen {
		return t.ev[:t.n]
	}
	k := t.n % foTraceLen
	return append(slices.Clone(t.ev[k:]), t.ev[:k]...)
}

// Outcome codes of trReply (aux).
const (
	trOK uint8 = iota + 1
	trRedirect
	trBackpressure
	trLease
	trNotReady
	trOtherErr
)

func (fw *foWorld) traceOn() bool { return fw.e.cfg.RerouteTrace > 0 }

// startTrace gives watched client c a trace (when tracing is on).
func (fw *foWorld) startTrace(c *foClient) {
	if fw.traceOn() && c.trace == nil {
		c.trace = &foTrace{}
	}
}

func (fw *foWorld) trace(c *foClient, e foTraceEv) {
	if c.trace == nil {
		return
	}
	e.at = fw.now()
	c.trace.add(e)
}

// traceSend records an attempt with the breaker state of its region in
// the client's router.
func (fw *foWorld) traceSend(c *foClient, d routing.Decision, ri int, timeout time.Duration) {
	if c.trace == nil {
		return
	}
	st := fw.router(c).Breakers().State(fw.rp(c.part), d.Region)
	fw.trace(c, foTraceEv{kind: trSend, region: int8(ri), epoch: d.Entry.Epoch, dur: timeout, aux: uint8(st), ok: d.Timeout > 0})
}

// traceReply records what came back to an attempt.
func (fw *foWorld) traceReply(c *foClient, r partition.Reply) {
	if c.trace == nil {
		return
	}
	e := foTraceEv{kind: trReply, region: int8(fw.regionIndex(c.sentRegion)), epoch: uint64(r.Token.Epoch)}
	var rd *partition.RedirectError
	switch {
	case r.Err == nil:
		e.aux = trOK
	case errors.As(r.Err, &rd):
		e.aux, e.epoch, e.region = trRedirect, uint64(rd.Epoch), int8(fw.regionIndex(rd.WriteRegion))
		e.dur = time.Duration(rd.Reason) // the reason, in the spare field
	case errors.Is(r.Err, partition.ErrBackpressure):
		e.aux = trBackpressure
	case errors.Is(r.Err, partition.ErrLeaseExpired):
		e.aux = trLease
	case errors.Is(r.Err, partition.ErrNotReady):
		e.aux = trNotReady
	default:
		e.aux = trOtherErr
	}
	fw.trace(c, e)
}

// RerouteTrace is the trace of one slow client (Config.RerouteTrace).
type RerouteTrace struct {
	Client    int     `json:"client"`
	Partition string  `json:"partition"`
	Region    string  `json:"client_region"`
	RerouteS  float64 `json:"reroute_s"`
	// CommitS is the commit of the partition's failover, in seconds from
	// the outage; the events' times are from the commit.
	CommitS float64 `json:"commit_s"`
	// NewRegion and PromoteS: the new write region and when its replica
	// was promoted (seconds from the commit; -1: not seen).
	NewRegion string   `json:"new_write_region"`
	PromoteS  float64  `json:"promote_s"`
	Events    []string `json:"events"`
}

// rerouteTraces returns the traces of the n slowest measured clients.
func (m *foMetrics) rerouteTraces(fw *foWorld, n int) []RerouteTrace {
	type slow struct {
		c *foClient
		d time.Duration
	}
	var all []slow
	for _, c := range fw.clients {
		i := c.part
		if c.trace == nil || !m.affected[i] || !c.rerouteWatch || c.partitioned || m.complete[i] == 0 || c.firstNewAck == 0 {
			continue
		}
		all = append(all, slow{c, c.firstNewAck - 1 - (m.t0 + m.complete[i] - 1)})
	}
	slices.SortFunc(all, func(a, b slow) int { return cmp.Or(cmp.Compare(b.d, a.d), cmp.Compare(a.c.idx, b.c.idx)) })
	var out []RerouteTrace
	for _, s := range all[:min(n, len(all))] {
		c, i := s.c, s.c.part
		commit := m.t0 + m.complete[i] - 1
		t := RerouteTrace{Client: c.idx, Partition: fw.parts[i].name, Region: string(fw.regions[c.region]),
			RerouteS: s.d.Seconds(), CommitS: (commit - m.t0).Seconds(), NewRegion: string(fw.reg[i].state.WriteRegion), PromoteS: -1}
		if m.promoteAt != nil && m.promoteAt[i] != 0 {
			t.PromoteS = (m.promoteAt[i] - 1 - commit).Seconds()
		}
		for _, e := range c.trace.events() {
			t.Events = append(t.Events, fw.formatTraceEv(e, commit))
		}
		out = append(out, t)
	}
	return out
}

func (fw *foWorld) regionName(ri int8) string {
	if ri < 0 || int(ri) >= len(fw.regions) {
		return "?"
	}
	return string(fw.regions[ri])
}

func (fw *foWorld) formatTraceEv(e foTraceEv, commit time.Duration) string {
	at := fmt.Sprintf("%+8.3f ", (e.at - commit).Seconds())
	switch e.kind {
	case trStart:
		return at + "start"
	case trSend:
		q := ""
		if e.ok {
			q = " quick"
		}
		return at + fmt.Sprintf("send %s epoch %d timeout %v breaker %s%s", fw.regionName(e.region), e.epoch, e.dur, routing.BreakerState(e.aux), q)
	case trArrive:
		return at + "  arrive"
	case trServerOut:
		return at + "  reply out"
	case trReply:
		switch e.aux {
		case trOK:
			return at + fmt.Sprintf("ack from %s epoch %d", fw.regionName(e.region), e.epoch)
		case trRedirect:
			return at + fmt.Sprintf("redirect %s: epoch %d region %s", partition.RedirectReason(e.dur), e.epoch, fw.regionName(e.region))
		}
		return at + fmt.Sprintf("error %s", [...]string{"", "", "", "backpressure", "lease expired", "not ready", "other"}[e.aux])
	case trTimeout:
		return at + "timeout"
	case trRefused:
		return at + "refused"
	case trWait:
		return at + fmt.Sprintf("wait %v", e.dur)
	case trDNSQuery:
		if e.ok {
			return at + "dns query (forced)"
		}
		return at + "dns query"
	case trDNSAnswer:
		if e.ok {
			return at + fmt.Sprintf("dns answer epoch %d region %s", e.epoch, fw.regionName(e.region))
		}
		return at + "dns error"
	case trDNSTimeout:
		return at + "dns timeout"
	case trEnd:
		if e.ok {
			return at + "end ok"
		}
		return at + "end failed"
	}
	return at + "?"
}

// formatRerouteTraces renders traces for a person.
func formatRerouteTraces(ts []RerouteTrace) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "client %d (%s, region %s): reroute %.3f s; commit %.3f s after the outage, new write region %s promoted at %+.3f s\n",
			t.Client, t.Partition, t.Region, t.RerouteS, t.CommitS, t.NewRegion, t.PromoteS)
		for _, e := range t.Events {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	return b.String()
}

// traceDNS records the route a DNS answer left in force (nil: none).
func (fw *foWorld) traceDNS(c *foClient, e *routing.Entry) {
	if c.trace == nil {
		return
	}
	if e == nil {
		fw.trace(c, foTraceEv{kind: trDNSAnswer, region: -1})
		return
	}
	fw.trace(c, foTraceEv{kind: trDNSAnswer, ok: true, epoch: e.Epoch, region: int8(fw.regionIndex(quorum.Region(e.WriteRegion)))})
}
