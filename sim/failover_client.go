package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
)

// Client event kinds (the low byte of an event's arg).
const (
	foCStart uint64 = iota + 1
	foCArrive
	foCReply
	foCTimeout
)

// foOpTimeout bounds one client operation over all its attempts.
const foOpTimeout = 10 * time.Second

// foClient is a closed-loop client of one partition living in one region:
// it writes unique values (or reads) at strong consistency, routes by the
// redirects the replicas answer with, and records every operation for
// porcupine. When its region is powered off it is off too.
type foClient struct {
	idx     int
	part    int
	region  int
	node    int32 // the node whose liveness and links stand for the client's region
	key     []byte
	keyStr  string
	hclient int

	epoch  partition.Epoch
	target quorum.Region

	seq      uint64
	attempt  uint64
	active   bool
	write    bool
	value    string
	hi       int // history index
	start    time.Duration
	deadline time.Duration
	// delivered: some attempt reached a live replica, so a write may have
	// taken effect even without a reply.
	delivered bool
	reply     partition.Reply
	arriveAt  int32 // the node the current attempt goes to
	// grayErr is an error not yet reported (see failover_gray.go).
	grayErr foClientErr
}

// foClients is the scheduler handler of every client.
type foClients struct{ fw *foWorld }

func (fw *foWorld) makeClients() {
	nr := len(fw.regions)
	for i := range fw.parts {
		for j := 0; j < fw.spec.clientsPerPartition; j++ {
			r := (fw.regionIndex(fw.parts[i].initial) + j) % nr
			c := &foClient{idx: len(fw.clients), part: i, region: r, node: fw.parts[i].nodeOfReg[r],
				key: []byte("k"), keyStr: fmt.Sprintf("p%d", fw.parts[i].id), epoch: 1, target: fw.parts[i].initial}
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
		fw.e.w.Sched.After(time.Duration(uniform(fw.rng, 0, int64(fw.spec.thinkMax))), NoNode, foClients{fw}, fw.cArg(c, foCStart))
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
	ci, att, kind := int(arg>>24), (arg>>8)&0xffff, arg&0xff
	if ci >= len(fw.clients) {
		return
	}
	c := fw.clients[ci]
	switch kind {
	case foCStart:
		fw.clientStart(c)
	case foCArrive:
		if c.active && att == c.attempt&0xffff {
			fw.clientArrive(c)
		}
	case foCReply:
		if c.active && att == c.attempt&0xffff {
			fw.clientReply(c)
		}
	case foCTimeout:
		if c.active && att == c.attempt&0xffff {
			fw.clientTimeout(c)
		}
	}
}

func (fw *foWorld) clientStart(c *foClient) {
	if !fw.clientsOn || c.active {
		return
	}
	now := fw.now()
	if !fw.e.w.Up(c.node) || fw.e.hist.Full() {
		// The client's region is down (or the history is full): try later.
		fw.e.w.Sched.After(fw.spec.thinkMax, NoNode, foClients{fw}, fw.cArg(c, foCStart))
		return
	}
	c.seq++
	c.active, c.delivered = true, false
	c.start, c.deadline = now, now+foOpTimeout
	c.write = fw.rng.Float64() >= fw.spec.readFraction
	kind := opRead
	if c.write {
		kind = opCAS // a blind write in the failover model (see foKVModel)
		c.value = fmt.Sprintf("%d.%d", c.idx, c.seq)
	} else {
		c.value = ""
	}
	c.hi = fw.e.hist.Call(c.hclient, regInput{Kind: kind, Key: c.keyStr, Data: c.value}, now)
	fw.e.ops.Issued++
	fw.clientSend(c)
}

// clientSend starts an attempt towards the client's current target.
func (fw *foWorld) clientSend(c *foClient) {
	c.attempt++
	to, ok := fw.nodeFor(c.part, c.target)
	if !ok {
		to = fw.parts[c.part].nodeOfReg[0]
	}
	c.arriveAt = to
	w := fw.e.w
	if w.Up(c.node) && !w.Links.Cut(c.node, to) {
		w.Sched.After(fw.oneWay(c.node, to), NoNode, foClients{fw}, fw.cArg(c, foCArrive))
	}
	w.Sched.After(foRequestTimeout, NoNode, foClients{fw}, fw.cArg(c, foCTimeout))
}

// oneWay is a message's delay between two nodes: half the round trip of
// their regions plus a little jitter.
func (fw *foWorld) oneWay(a, b int32) time.Duration {
	w := fw.e.w
	base := w.Topo.RTT[w.Nodes[a].Region][w.Nodes[b].Region] / 2
	return base + time.Duration(uniform(fw.rng, 0, int64(base)/10+1))
}

func (fw *foWorld) clientArrive(c *foClient) {
	n := fw.nodes[c.arriveAt]
	if n.host == nil || !fw.e.w.Live(c.arriveAt) {
		return
	}
	fw.reportClientError(c, n)
	c.delivered = c.delivered || c.write
	ref := partition.ClientRef(uint64(c.idx)<<24 | c.attempt&0xffffff)
	p := fw.parts[c.part].id
	if c.write {
		n.host.Write(n.local(), &partition.WriteRequest{Partition: p, Epoch: c.epoch, Ref: ref, Key: c.key, Value: []byte(c.value)})
	} else {
		n.host.Read(n.local(), &partition.ReadRequest{Partition: p, Ref: ref, Key: c.key, Epoch: c.epoch, Consistency: partition.Strong})
	}
	n.markDirty(c.part)
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
		w.Sched.After(fw.oneWay(n.idx, c.node), NoNode, foClients{fw}, fw.cArg(c, foCReply))
	}
}

func (fw *foWorld) clientReply(c *foClient) {
	now := fw.now()
	r := c.reply
	var re *partition.RedirectError
	switch {
	case r.Err == nil:
		out := regOutput{Status: statusOK}
		if c.write {
			out.Data = c.value
			fw.m.ack(fw, c.part, r.Token, now)
		} else if r.Found {
			out.Data = string(r.Value)
		}
		fw.e.hist.Return(c.hi, out, now)
		fw.e.ops.OK++
		fw.clientDone(c, false)
	case errors.As(r.Err, &re):
		if re.Epoch > c.epoch || (re.Epoch == c.epoch && re.WriteRegion != "") {
			c.epoch = re.Epoch
		}
		if re.WriteRegion != "" && re.WriteRegion != c.target {
			c.target = re.WriteRegion
		} else {
			c.target = fw.nextRegion(c.target)
		}
		fw.clientRetry(c)
	case errors.Is(r.Err, partition.ErrBackpressure) || errors.Is(r.Err, partition.ErrLeaseExpired) || errors.Is(r.Err, partition.ErrNotReady) || !c.write:
		fw.clientRetry(c) // certainly not applied
	default:
		fw.noteClientError(c, c.target)
		fw.e.hist.Return(c.hi, regOutput{Status: statusUnknown}, now)
		fw.e.ops.Unknown++
		fw.clientDone(c, true)
	}
}

func (fw *foWorld) nextRegion(r quorum.Region) quorum.Region {
	return fw.regions[(fw.regionIndex(r)+1)%len(fw.regions)]
}

// clientRetry tries again after a pause, or gives up at the deadline.
func (fw *foWorld) clientRetry(c *foClient) {
	if fw.now()+foRetryDelay >= c.deadline || c.attempt >= foMaxAttempts*uint64(c.seq) {
		fw.clientGiveUp(c)
		return
	}
	c.attempt++ // invalidates the pending timeout of the last attempt
	fw.e.w.Sched.After(foRetryDelay, NoNode, foRetryHandler{fw}, uint64(c.idx)<<24|(c.attempt&0xffff)<<8)
}

// foRetryHandler re-sends a client's request after its retry pause.
type foRetryHandler struct{ fw *foWorld }

func (h foRetryHandler) Fire(now time.Duration, arg uint64) {
	c := h.fw.clients[int(arg>>24)]
	if c.active && (arg>>8)&0xffff == c.attempt&0xffff {
		h.fw.clientSend(c)
	}
}

func (fw *foWorld) clientTimeout(c *foClient) {
	// No reply: the replica may be down or cut off; ask another region
	// next (it redirects to the write region it knows).
	fw.noteClientError(c, c.target)
	c.target = fw.nextRegion(c.target)
	fw.clientRetry(c)
}

// clientGiveUp ends an operation without an answer: a write that reached
// a replica may have taken effect (unknown); anything else certainly did not.
func (fw *foWorld) clientGiveUp(c *foClient) {
	if c.write && c.delivered {
		fw.e.hist.Return(c.hi, regOutput{Status: statusUnknown}, fw.now())
		fw.e.ops.Unknown++
	} else {
		fw.e.hist.Discard(c.hi)
		fw.e.ops.Failed++
	}
	fw.clientDone(c, true)
}

// clientDone ends the operation and schedules the next: after the think
// time, or at once (after the retry pause) when it failed, as a client
// whose write failed retries it.
func (fw *foWorld) clientDone(c *foClient, failed bool) {
	c.active = false
	c.attempt++
	d := time.Duration(uniform(fw.rng, int64(fw.spec.thinkMin), int64(fw.spec.thinkMax)))
	if failed {
		d = foRetryDelay
	}
	fw.e.w.Sched.After(d, NoNode, foClients{fw}, fw.cArg(c, foCStart))
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
