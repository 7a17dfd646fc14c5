package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
	"github.com/fmnode/fmnode/txtdns/routing"
)

// Client event kinds (the low byte of an event's arg).
const (
	foCStart uint64 = iota + 1
	foCArrive
	foCReply
	foCTimeout
	foCWait
	foCRefused
)

const (
	// foAttemptTimeout is how long a client waits for the reply to one
	// attempt (a strong write takes a WAN round trip or two).
	foAttemptTimeout = time.Second
	// foProbeMax bounds a client's probing after an outage: it writes
	// without think time until its partition's write lands in a new
	// epoch, or this long.
	foProbeMax = 10 * time.Minute
)

// errAttemptTimeout is an attempt that got no reply in time;
// errAttemptRefused one that a down node's machine refused (a reset).
var (
	errAttemptTimeout = errors.New("sim: attempt timed out")
	errAttemptRefused = errors.New("sim: connection refused")
)

// foClient is a closed-loop client of one partition living in one region:
// it writes unique values (or reads) at strong consistency and records
// every operation for porcupine. It routes with the routing core the
// runtime client uses (routing.Router, shared by the clients of its
// region): DNS answers from its node's resolver, redirects from the
// replicas, breakers and backoff. When its region is powered off it is
// off too.
type foClient struct {
	idx     int
	part    int
	region  int
	node    int32 // the node whose liveness and links stand for the client's region
	key     []byte
	keyStr  string
	hclient int

	op       routing.Operation
	seq      uint64
	attempt  uint64 // tags events: a stale event carries an older value
	startGen uint64 // tags start events
	active   bool
	write    bool
	value    string
	hi       int // history index
	// delivered: some attempt reached a live replica, so a write may have
	// taken effect even without a reply. mayHaveApplied: the last
	// attempt of a write reached a live replica and timed out, so the
	// next attempt is a new write (see retryAsNewWrite).
	delivered      bool
	mayHaveApplied bool
	resolving      bool
	reply          partition.Reply
	arriveAt       int32 // the node the current attempt goes to
	sentEpoch      uint64
	maxEpoch       uint64 // the newest epoch the client sent with (never goes back)

	// probe: write without think time until a write lands in an epoch
	// newer than probeEpoch (after an outage), until probeUntil.
	probe      bool
	probeEpoch uint64
	probeUntil time.Duration
	failedOps  int
	// spellFrom: the start of the client's first write not yet followed
	// by a successful one (spellOpen); firstNewAck: its first write
	// acknowledged in an epoch newer than the outage's.
	spellOpen   bool
	spellFrom   time.Duration
	firstNewAck time.Duration
	// rerouteWatch: the client was live when its partition's outage began
	// and has stayed up: its reroute time is measured. partitioned: it
	// could not reach the new write region's replica at the commit or at
	// one of its attempts before its first write landed there (reported
	// apart, see foMetrics.notePartitioned).
	rerouteWatch bool
	partitioned  bool
	// sentRegion is the region the current attempt went to; grayErr an
	// error not yet reported (see failover_gray.go).
	sentRegion quorum.Region
	grayErr    foClientErr
	// pollWait is the current attempt's Decision.PollWait: a poll the
	// replica may hold until the route moves (partition/poll.go).
	pollWait time.Duration
	// pendingSends and pendingQueries count the attempts and DNS queries
	// the client made while its partition's failover was pending (the
	// load a long outage puts on the live regions).
	pendingSends, pendingQueries int
	// trace: the client's routing steps (Config.RerouteTrace; nil: off).
	trace *foTrace
	// timeoutEv is the current attempt's timeout event, due at timeoutAt
	// (a reply due earlier takes the event over: see deliverReplies).
	timeoutEv EventID
	timeoutAt time.Duration

	// level is the consistency of the client's reads (0: strong, the
	// history porcupine checks). A session client sends its token with
	// every read and checks read-your-writes and monotonic reads on each
	// answer; its writes (strong, to the write region) are in the
	// history. Reads below strong are not: porcupine's model is strong.
	level partition.Consistency
	// tok is the session token (the newest position of every answer);
	// ownWrite the client's latest acknowledged write; seen the newest
	// version it read.
	tok, ownWrite, seen partition.Token
}

// weakRead reports whether the client's current operation is a read
// below strong (not in the porcupine history).
func (c *foClient) weakRead() bool { return !c.write && c.level != 0 && c.level != partition.Strong }

// foClients is the scheduler handler of every client.
type foClients struct{ fw *foWorld }

func (fw *foWorld) makeClients() {
	nr := len(fw.regions)
	for i := range fw.parts {
		for j := 0; j < fw.spec.clientsPerPartition+fw.spec.sessionClients+fw.spec.eventualClients; j++ {
			r := (fw.regionIndex(fw.parts[i].initial) + j) % nr
			c := &foClient{idx: len(fw.clients), part: i, region: r, node: fw.parts[i].nodeOfReg[r],
				key: []byte("k"), keyStr: fmt.Sprintf("p%d", fw.parts[i].id)}
			switch k := j - fw.spec.clientsPerPartition; {
			case k < 0:
			case k < fw.spec.sessionClients:
				c.level = partition.Session
			default:
				c.level = partition.Eventual
			}
			c.hclient = fw.e.hist.NewClient()
			fw.clients = append(fw.clients, c)
		}
	}
}

// startClients starts every client after a random offset, so the load is
// spread evenly in time.
func (fw *foWorld) startClients() {
	fw.clientsOn = true
	for _, c := range fw.clients {
		fw.scheduleStart(c, time.Duration(uniform(fw.rng, 0, int64(fw.spec.thinkMax))))
	}
}

func (fw *foWorld) scheduleStart(c *foClient, after time.Duration) {
	c.startGen++
	fw.e.w.Sched.After(after, NoNode, foClients{fw}, uint64(c.idx)<<24|(c.startGen&0xffff)<<8|foCStart)
}

// startProbes makes every live client of the partitions the outage
// affects write at once and keep writing (with the routing core's
// backoff between failed operations) until a write lands in a new epoch:
// an application with steady traffic, so that write recovery and reroute
// measure the failover and the routing, not a client's think time.
func (fw *foWorld) startProbes() {
	now := fw.now()
	for _, c := range fw.clients {
		if !fw.m.affected[c.part] || !fw.e.w.Up(c.node) {
			continue
		}
		c.probe, c.probeEpoch, c.probeUntil = true, uint64(fw.m.epochT0[c.part]), now+foProbeMax
		c.rerouteWatch, c.partitioned = true, false
		fw.startTrace(c)
		if !c.active {
			fw.scheduleStart(c, 0)
		}
	}
}

func (fw *foWorld) cArg(c *foClient, kind uint64) uint64 {
	return uint64(c.idx)<<24 | (c.attempt&0xffff)<<8 | kind
}

// pendingClientOps counts clients with an operation in flight.
func (fw *foWorld) pendingClientOps() int {
	n := 0
	for _, c := range fw.clients {
		if c.active {
			n++
		}
	}
	return n
}

func (h foClients) Fire(now time.Duration, arg uint64) {
	fw := h.fw
	ci, tag, kind := int(arg>>24), (arg>>8)&0xffff, arg&0xff
	if ci >= len(fw.clients) {
		return
	}
	c := fw.clients[ci]
	if kind == foCStart {
		if tag == c.startGen&0xffff {
			fw.clientStart(c)
		}
		return
	}
	if !c.active || tag != c.attempt&0xffff {
		return
	}
	if !fw.e.w.Up(c.node) {
		fw.clientDown(c)
		return
	}
	switch kind {
	case foCArrive:
		fw.clientArrive(c)
	case foCReply:
		fw.clientReply(c)
	case foCTimeout:
		fw.trace(c, foTraceEv{kind: trTimeout})
		fw.m.attemptReach(fw, c)
		fw.noteClientError(c, c.sentRegion)
		c.mayHaveApplied = c.write && c.delivered
		fw.clientReport(c, errAttemptTimeout)
	case foCRefused:
		fw.trace(c, foTraceEv{kind: trRefused})
		fw.m.attemptReach(fw, c)
		fw.noteClientError(c, c.sentRegion)
		fw.clientReport(c, errAttemptRefused)
	case foCWait:
		fw.clientStep(c, c.op.Next(foTime(now)))
	}
}

func (fw *foWorld) router(c *foClient) *routing.Router { return fw.dns.routers[c.region] }

func (fw *foWorld) clientStart(c *foClient) {
	if !fw.clientsOn || c.active {
		return
	}
	now := fw.now()
	if !fw.e.w.Up(c.node) || fw.e.hist.Full() {
		// The client's region is down (or the history is full): try later.
		c.spellOpen = false
		if !fw.e.w.Up(c.node) {
			c.probe, c.rerouteWatch = false, false
		}
		fw.scheduleStart(c, fw.spec.thinkMax)
		return
	}
	c.seq++
	c.active, c.delivered, c.resolving, c.mayHaveApplied = true, false, false, false
	c.write = c.probe || fw.rng.Float64() >= fw.spec.readFraction
	kind := opRead
	req := routing.Request{Consistency: routing.ConsistencyStrong}
	if c.write {
		kind = opCAS // a blind write in the failover model (see foKVModel)
		c.value = fmt.Sprintf("%d.%d", c.idx, c.seq)
		req = routing.Request{Write: true}
		if !c.spellOpen {
			c.spellOpen, c.spellFrom = true, now
		}
	} else {
		c.value = ""
	}
	switch {
	case c.weakRead():
		c.hi = -1 // not in the strong history
		req.Consistency = routing.ConsistencyEventual
		if c.level == partition.Session {
			req.Consistency = routing.ConsistencySession
		}
	default:
		c.hi = fw.e.hist.Call(c.hclient, regInput{Kind: kind, Key: c.keyStr, Data: c.value}, now)
	}
	fw.e.ops.Issued++
	c.op = fw.router(c).Begin(fw.rp(c.part), req)
	fw.trace(c, foTraceEv{kind: trStart, ok: c.write})
	fw.clientStep(c, c.op.Next(foTime(now)))
}

// clientStep carries out what the routing core decided.
func (fw *foWorld) clientStep(c *foClient, d routing.Decision) {
	w := fw.e.w
	c.attempt++ // invalidates the events of the previous step
	switch d.Action {
	case routing.ActResolve:
		c.resolving = true
		fw.trace(c, foTraceEv{kind: trDNSQuery, ok: d.Force})
		if fw.m.pending(c) {
			c.pendingQueries++
		}
		fw.dns.query(c)
	case routing.ActWait:
		fw.trace(c, foTraceEv{kind: trWait, dur: d.Wait})
		w.Sched.After(d.Wait, NoNode, foClients{fw}, fw.cArg(c, foCWait))
	case routing.ActSend:
		ri := fw.regionIndex(quorum.Region(d.Region))
		if ri < 0 {
			fw.clientStep(c, c.op.Unsent(foTime(fw.now()), fmt.Errorf("sim: unknown region %q", d.Region)))
			return
		}
		fw.retryAsNewWrite(c, fw.now())
		if d.Entry.Epoch < c.maxEpoch {
			fw.e.viol.add(fw.now(), ViolationInvariant, "client %d of %s went back from epoch %d to %d",
				c.idx, fw.parts[c.part].name, c.maxEpoch, d.Entry.Epoch)
		}
		c.maxEpoch = max(c.maxEpoch, d.Entry.Epoch)
		c.sentEpoch = d.Entry.Epoch
		c.sentRegion = quorum.Region(d.Region)
		c.pollWait = d.PollWait
		if fw.m.pending(c) {
			c.pendingSends++
		}
		fw.m.attemptReach(fw, c)
		to := fw.parts[c.part].nodeOfReg[ri]
		c.arriveAt = to
		if w.Up(c.node) && !w.Links.Cut(c.node, to) {
			if fw.spec.refuseDown && !w.Up(to) {
				// The node's process is down, its machine is not: the
				// connection is refused after a round trip.
				w.Sched.After(fw.oneWay(c.node, to)+fw.oneWay(to, c.node), NoNode, foClients{fw}, fw.cArg(c, foCRefused))
			} else {
				w.Sched.After(fw.oneWay(c.node, to), NoNode, foClients{fw}, fw.cArg(c, foCArrive))
			}
		}
		timeout := foAttemptTimeout
		if d.Timeout > 0 {
			timeout = min(timeout, d.Timeout) // a quick half-open probe
		}
		timeout += d.PollWait // a held poll may take that much longer
		fw.traceSend(c, d, ri, timeout)
		c.timeoutAt = w.Now() + timeout
		c.timeoutEv = w.Sched.After(timeout, NoNode, foClients{fw}, fw.cArg(c, foCTimeout))
	case routing.ActDone:
		fw.clientEnd(c, d.Err)
	}
}

// retryAsNewWrite makes the attempt about to be sent, after an attempt of
// the same write that reached a replica and timed out, a new write with a
// new value: the client models an application that retries a write of
// unknown outcome at once, through the same routing operation. The timed
// out attempt may have committed, and resending its value would commit
// it a second time, after writes acknowledged in between: no single write
// explains that, so porcupine found it illegal (swarm seeds 146, 167 and
// 205 of the cluster sweep), a fault of the checker's history, not of the
// cores. The runtime client (txtdns/kv) never resends such a write; the
// simulated one keeps the routing operation going (its probes, breakers
// and gray-failure reports depend on it) but records each possibly
// applied attempt as its own write of unknown outcome.
func (fw *foWorld) retryAsNewWrite(c *foClient, now time.Duration) {
	if !c.mayHaveApplied || !c.write || c.hi < 0 {
		return
	}
	fw.e.hist.Return(c.hi, regOutput{Status: statusUnknown}, now)
	fw.e.ops.Unknown++
	if fw.ct != nil {
		fw.ct.part(c.part, ctEvent{at: now, kind: ctClient, a: uint64(c.idx), b: c.sentEpoch,
			s: "unknown: attempt timed out, retried as a new write", t: "write " + c.value})
	}
	c.seq++
	c.value = fmt.Sprintf("%d.%d", c.idx, c.seq)
	c.hi = fw.e.hist.Call(c.hclient, regInput{Kind: opCAS, Key: c.keyStr, Data: c.value}, now)
	fw.e.ops.Issued++
	c.delivered, c.mayHaveApplied = false, false
}

func (fw *foWorld) clientArrive(c *foClient) {
	n := fw.nodes[c.arriveAt]
	if n.node == nil || !fw.e.w.Live(c.arriveAt) {
		return
	}
	fw.reportClientError(c, n)
	fw.trace(c, foTraceEv{kind: trArrive})
	c.delivered = c.delivered || c.write
	ref := partition.ClientRef(uint64(c.idx)<<24 | c.attempt&0xffffff)
	p := fw.parts[c.part].id
	epoch := partition.Epoch(c.sentEpoch)
	if c.write {
		n.node.Write(n.local(), &partition.WriteRequest{Partition: p, Epoch: epoch, Ref: ref, Key: c.key, Value: []byte(c.value),
			PollWait: c.pollWait})
	} else {
		lvl := partition.Strong
		if c.level != 0 {
			lvl = c.level
		}
		n.node.Read(n.local(), &partition.ReadRequest{Partition: p, Ref: ref, Key: c.key, Epoch: epoch, Consistency: lvl, Token: c.tok})
	}
	n.pump()
}

// deliverReplies sends a host's client replies back to their clients.
func (fw *foWorld) deliverReplies(n *foNode, rs []partition.Reply) {
	for i := range rs {
		r := rs[i]
		if r.Ref == 0 {
			continue // a control operation's reply
		}
		ci := int(uint64(r.Ref) >> 24)
		if ci >= len(fw.clients) {
			continue
		}
		c := fw.clients[ci]
		if !c.active || uint64(r.Ref)&0xffffff != c.attempt&0xffffff {
			continue
		}
		w := fw.e.w
		if !w.Up(c.node) || w.Links.Cut(n.idx, c.node) {
			continue
		}
		c.reply = r
		fw.trace(c, foTraceEv{kind: trServerOut})
		out := w.Now()
		if fw.service != nil && r.Err == nil {
			cost := fw.service.cost
			if c.pollWait > 0 && fw.spec.heldPollService > 0 {
				cost = fw.spec.heldPollService
			}
			out = fw.service.serve(out, cost)
		}
		at := out + fw.oneWay(n.idx, c.node)
		if at < c.timeoutAt && w.Sched.Pending(c.timeoutEv) {
			// The reply comes first, and the timeout would then find the
			// attempt over: move the timeout's event to the reply instead
			// of firing a stale one per attempt. Rescheduling takes a new
			// sequence number as scheduling would, so the order is the same.
			w.Sched.Reschedule(c.timeoutEv, at, NoNode, foClients{fw}, fw.cArg(c, foCReply))
			c.timeoutEv = EventID{}
			continue
		}
		w.Sched.At(at, NoNode, foClients{fw}, fw.cArg(c, foCReply))
	}
}

// clientReply turns the data plane's answer into what the routing core
// classifies, by the rule every node client applies
// (node.ClassifyReply): the typed redirect (partition.RedirectError is a
// routing.Redirect as is), errors that certainly did not apply the request
// (retried), and the rest (a write's outcome is then unknown: not retried,
// and reported as gray-failure evidence).
func (fw *foWorld) clientReply(c *foClient) {
	r := c.reply
	fw.traceReply(c, r)
	if fw.onReply != nil && r.Err != nil {
		fw.onReply(c.write, r.Err)
	}
	var err error
	switch node.ClassifyReply(r, c.write) {
	case node.ReplyOK:
	case node.ReplyRedirect, node.ReplyRetry:
		err = r.Err
	case node.ReplyUnknown:
		fw.noteClientError(c, c.sentRegion)
		err = routing.Permanent(r.Err)
	}
	fw.clientReport(c, err)
}

func (fw *foWorld) clientReport(c *foClient, err error) {
	if c.resolving {
		return // a stale event: the client is waiting for DNS
	}
	v := c.op.Report(foTime(fw.now()), err)
	if v.Done && v.Err == nil && c.write {
		// The write's epoch teaches the route, as the routing client
		// does (routing.Call.Report): a write of an older epoch served
		// by the new write region moves the route there.
		c.op.Acked(foTime(fw.now()), uint64(c.reply.Token.Epoch))
	}
	switch {
	case v.Done:
		fw.clientEnd(c, v.Err)
	case v.Wait > 0:
		fw.trace(c, foTraceEv{kind: trWait, dur: v.Wait})
		c.attempt++
		fw.e.w.Sched.After(v.Wait, NoNode, foClients{fw}, fw.cArg(c, foCWait))
	default:
		fw.clientStep(c, c.op.Next(foTime(fw.now())))
	}
}

// clientDNSAnswer hands a resolver's answer to the client's router.
func (fw *foWorld) clientDNSAnswer(m foDNSMsg) {
	c := fw.clients[m.client]
	if !c.active || !c.resolving || m.tag != c.attempt {
		// Late: the answer still teaches the region's router.
		if fw.e.w.Up(c.node) {
			_, _ = fw.dns.offer(c.region, m.part, m.ans, m.err)
		}
		return
	}
	c.resolving = false
	e, err := fw.dns.offer(c.region, m.part, m.ans, m.err)
	fw.traceDNS(c, e)
	fw.clientStep(c, c.op.Resolved(foTime(fw.now()), e, err))
}

func (fw *foWorld) clientDNSTimeout(m foDNSMsg) {
	c := fw.clients[m.client]
	if !c.active || !c.resolving || m.tag != c.attempt {
		return
	}
	if !fw.e.w.Up(c.node) {
		fw.clientDown(c)
		return
	}
	fw.dns.stats.ClientTimeout++
	fw.trace(c, foTraceEv{kind: trDNSTimeout})
	c.resolving = false
	fw.clientStep(c, c.op.Resolved(foTime(fw.now()), nil, errors.New("sim: dns query timed out")))
}

// clientEnd records the operation's outcome and schedules the next.
func (fw *foWorld) clientEnd(c *foClient, err error) {
	now := fw.now()
	switch {
	case err == nil:
		r := c.reply
		out := regOutput{Status: statusOK}
		if c.write {
			out.Data = c.value
			fw.m.ack(fw, c.part, r.Token, now)
			fw.m.clientAck(fw, c, r.Token, now)
			c.ownWrite = c.ownWrite.Max(r.Token)
		} else if r.Found {
			out.Data = string(r.Value)
		}
		if c.weakRead() {
			fw.checkSessionRead(c, r)
		} else {
			fw.e.hist.Return(c.hi, out, now)
		}
		c.tok = c.tok.Max(r.Token)
		fw.e.ops.OK++
	case c.write && c.delivered:
		// A write that reached a replica may have taken effect (unknown).
		fw.e.hist.Return(c.hi, regOutput{Status: statusUnknown}, now)
		fw.e.ops.Unknown++
	default:
		if c.hi >= 0 {
			fw.e.hist.Discard(c.hi)
		}
		fw.e.ops.Failed++
	}
	if fw.ct != nil {
		what := "read"
		if c.write {
			what = "write " + c.value
		}
		if c.level != 0 {
			what = c.level.String() + " " + what
		}
		out := "ok"
		switch {
		case err == nil:
			out = fmt.Sprintf("ok at %v", c.reply.Token)
			if !c.write {
				out += fmt.Sprintf(" found %v version %v", c.reply.Found, c.reply.Version)
			}
		case c.write && c.delivered:
			out = "unknown: " + err.Error()
		default:
			out = "failed: " + err.Error()
		}
		fw.ct.part(c.part, ctEvent{at: now, kind: ctClient, a: uint64(c.idx), b: c.sentEpoch, s: out, t: what})
	}
	c.active = false
	c.attempt++
	if c.trace != nil {
		fw.trace(c, foTraceEv{kind: trEnd, ok: err == nil})
		c.trace.done = c.firstNewAck != 0
	}
	if c.probe && (now >= c.probeUntil || err == nil && c.write && c.reply.Token.Epoch > partition.Epoch(c.probeEpoch)) {
		c.probe = false
	}
	var d time.Duration
	switch {
	case err != nil:
		// A client whose operation failed tries again after a backoff.
		c.failedOps++
		d = c.op.RetryDelay(c.failedOps)
	case c.probe:
		c.failedOps = 0
	default:
		c.failedOps = 0
		d = time.Duration(uniform(fw.rng, int64(fw.spec.thinkMin), int64(fw.spec.thinkMax)))
	}
	fw.scheduleStart(c, d)
}

// clientDown ends the operation of a client whose region went down: what
// a write did is unknown if it reached a replica.
func (fw *foWorld) clientDown(c *foClient) {
	if c.write && c.delivered {
		fw.e.hist.Return(c.hi, regOutput{Status: statusUnknown}, fw.now())
		fw.e.ops.Unknown++
	} else {
		if c.hi >= 0 {
			fw.e.hist.Discard(c.hi)
		}
		fw.e.ops.Failed++
	}
	c.active, c.spellOpen, c.probe, c.rerouteWatch = false, false, false, false
	c.attempt++
	fw.scheduleStart(c, fw.spec.thinkMax)
}

// foKVModel is the sequential specification of one key of a partition:
// blind writes of unique values and reads (strong: a read returns the
// latest write).
func foKVModel() porcupine.Model {
	return porcupine.Model{
		Partition: partitionByKey,
		Init:      func() interface{} { return "" },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			st, in, out := state.(string), input.(regInput), output.(regOutput)
			if in.Kind == opCAS {
				return true, in.Data
			}
			if out.Status == statusUnknown {
				return true, st
			}
			return out.Data == st, st
		},
		DescribeOperation: func(input, output interface{}) string {
			in, out := input.(regInput), output.(regOutput)
			if in.Kind == opCAS {
				return fmt.Sprintf("write(%s, %q)", in.Key, in.Data)
			}
			return fmt.Sprintf("read(%s) -> %q", in.Key, out.Data)
		},
	}
}

// checkKV runs porcupine over the client operations, per key.
func checkKV(ops []porcupine.Operation, timeout time.Duration) string {
	if len(ops) == 0 {
		return LinOK
	}
	switch porcupine.CheckOperationsTimeout(foKVModel(), ops, timeout) {
	case porcupine.Ok:
		return LinOK
	case porcupine.Illegal:
		return LinIllegal
	}
	return LinUnknown
}

// oneWay is a message's delay between two nodes: half the round trip of
// their regions plus a little jitter.
func (fw *foWorld) oneWay(a, b int32) time.Duration {
	w := fw.e.w
	base := w.Topo.RTT[w.Nodes[a].Region][w.Nodes[b].Region] / 2
	return base + time.Duration(uniform(fw.rng, 0, int64(base)/10+1))
}
