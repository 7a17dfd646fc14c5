package node

import (
	"slices"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/txtdns"
)

// Ready is what a node hands its driver. Its slices stay valid until the
// driver calls Advance with it, and Replies only until then. The driver carries it out in this
// order:
//
//  1. send Messages and deliver Replies at once: they depend on no write
//     of this Ready (heartbeats, register requests, learns; replies that
//     rest on state made durable by earlier Readys);
//  2. make Acceptor and every Host[i].Writes durable (fsync), the acceptor
//     batches in order and the host writes in order;
//  3. run its store reads (Ready.Read) and call Advance, which returns
//     the replies that waited for durability;
//  4. send Synced and deliver what Advance returned.
//
// Heartbeats thus leave while a disk stalls: a node whose data plane is
// stuck but whose process is alive is a gray failure, which the failover
// manager detects from its replicas' progress and clients' reports, not a
// dead node.
//
// Several Readys may be in flight at once (group commit), as long as the
// driver makes them durable and advances them in the order it got them.
// Routes need no durability: they are committed register values.
type Ready struct {
	Acceptor []caspaxos.Batch
	Host     []partition.Ready
	Messages []nodewire.Batch
	Synced   []nodewire.Batch
	Replies  []partition.Reply
	Routes   []txtdns.Route
	// selfReplies are this node's acceptor's replies to its own proposer,
	// stepped by Advance once durable.
	selfReplies []caspaxos.Message
	// counted: the Ready counts in InFlight until Advance (drivers clear
	// the fields they carried out, so emptiness cannot tell).
	counted bool
}

// MustSync reports whether the Ready has writes to make durable.
func (rd *Ready) MustSync() bool {
	for i := range rd.Acceptor {
		if !rd.Acceptor[i].Empty() {
			return true
		}
	}
	for i := range rd.Host {
		if len(rd.Host[i].Writes) > 0 {
			return true
		}
	}
	return false
}

// Empty reports whether the Ready carries nothing at all.
func (rd *Ready) Empty() bool {
	return len(rd.Acceptor)+len(rd.Host)+len(rd.Messages)+len(rd.Synced)+len(rd.Replies)+len(rd.Routes)+len(rd.selfReplies) == 0
}

// HasReady reports whether Ready would hand out anything. It runs the
// cores' pending work first, so it is as dear as Ready when true.
func (n *Node) HasReady() bool {
	n.pump()
	return !n.pending.Empty()
}

// Ready runs the cores until they have nothing more to hand over and
// returns what the driver must carry out (see Ready). Then call
// NextDeadline.
func (n *Node) Ready() Ready {
	n.pump()
	rd := n.pending
	n.pending = Ready{}
	rd.Messages = n.take(rd.Messages, n.outNow)
	rd.Synced = n.take(rd.Synced, n.outSync)
	if !rd.Empty() {
		rd.counted = true
		n.inflight++
		n.stats.Readys++
	}
	return rd
}

// take moves the non-empty per-peer batches of out into dst.
func (n *Node) take(dst []nodewire.Batch, out []nodewire.Batch) []nodewire.Batch {
	k := 0
	for i := range out {
		if !out[i].Empty() {
			k++
		}
	}
	if k == 0 {
		return dst
	}
	dst = slices.Grow(dst, k)
	for i := range out {
		if !out[i].Empty() {
			b := out[i]
			b.From, b.To = n.cfg.ID, n.peers[i]
			dst = append(dst, b)
			out[i] = nodewire.Batch{}
		}
	}
	return dst
}

// InFlight is the number of Readys handed out and not yet advanced.
func (n *Node) InFlight() int { return n.inflight }

// Reads are the results of a Ready's store reads and fetches (see
// Ready.Read).
type Reads struct {
	replies [][]partition.Reply
	fetched [][]partition.FetchResult
}

// Read runs rd's store reads and fetches against st. Call it once rd's
// writes are durable and before a later Ready's writes are applied: a
// read must see exactly the state up to its own Ready. It touches no node
// state, so a committer goroutine may run it while the node goes on.
func (rd *Ready) Read(st partition.Store) Reads {
	var r Reads
	for i := range rd.Host {
		if len(rd.Host[i].Reads)+len(rd.Host[i].Fetches) == 0 {
			continue
		}
		if r.replies == nil {
			r.replies = make([][]partition.Reply, len(rd.Host))
			r.fetched = make([][]partition.FetchResult, len(rd.Host))
		}
		r.replies[i], r.fetched[i] = partition.ExecReads(st, &rd.Host[i])
	}
	return r
}

// Advance acknowledges that rd's writes are durable and hands the node
// rd's read results (rd.Read). It steps the acceptor's replies to this
// node's own proposer and returns the client replies to deliver now.
// Readys must be advanced in the order Ready handed them out.
func (n *Node) Advance(rd *Ready, r Reads) []partition.Reply {
	var out []partition.Reply
	if rd.counted {
		rd.counted = false
		n.inflight--
	}
	for i := range rd.Host {
		h := &rd.Host[i]
		var replies []partition.Reply
		var fetched []partition.FetchResult
		if r.replies != nil {
			replies, fetched = r.replies[i], r.fetched[i]
		}
		out = append(out, n.host.Finish(n.now, h, replies, fetched)...)
		for j := range fetched {
			n.markDirtyID(fetched[j].Fetch.Partition)
		}
		for i := range h.Writes {
			n.markDirtyID(h.Writes[i].Partition)
		}
		// The messages were copied into per-peer batches by Ready and the
		// store holds the writes: the host may reuse the Ready's arrays.
		n.host.Recycle(h)
	}
	for _, m := range rd.selfReplies {
		n.prop.Step(n.now, m)
	}
	if c := cap(rd.Host); c > 0 && c <= maxSpare && len(n.freeHost) < maxSpare {
		clear(rd.Host[:c])
		n.freeHost = append(n.freeHost, rd.Host[:0])
	}
	rd.Host, rd.selfReplies = nil, nil
	return out
}

// Urgent returns what may leave at once without a Ready: the batches that
// depend on no write (heartbeats, register requests, learns). A driver
// whose disk is busy with earlier Readys calls it so that heartbeats keep
// flowing; everything else waits for the next Ready.
func (n *Node) Urgent() []nodewire.Batch {
	n.pump()
	return n.take(nil, n.outNow)
}

// pump runs the cores until none has anything new: host Readys, replica
// status to the manager, the manager's heartbeats, proposals, reads and
// actions, the proposer's and acceptor's messages and results. It is
// bounded by PumpRounds.
func (n *Node) pump() {
	for range n.cfg.PumpRounds {
		busy := n.pumpHost()
		if len(n.dirty) > 0 {
			busy = true
			n.flushStatus()
		}
		if n.fed {
			n.fed = false
			n.mgr.Evaluate(n.now)
		}
		if n.pumpManager() {
			busy = true
		}
		if n.pumpRegister() {
			busy = true
		}
		if !busy {
			break
		}
	}
	n.syncLease()
	n.armTimers()
}

// pumpHost takes the host's Readys: replies go out at once, messages are
// sorted into per-peer batches, the rest waits for durability.
func (n *Node) pumpHost() bool {
	busy := false
	for n.host.HasReady() {
		busy = true
		rd := n.host.Ready(n.now)
		if len(n.pending.Replies) == 0 {
			// The host's array is handed on as it is: the driver delivers
			// Replies before it calls Advance, which recycles the array.
			n.pending.Replies = rd.Replies
		} else {
			n.pending.Replies = append(n.pending.Replies, rd.Replies...)
		}
		n.routeData(rd.Messages)
		rd.Messages = rd.Messages[:0]
		if n.pending.Host == nil && len(n.freeHost) > 0 {
			n.pending.Host = n.freeHost[len(n.freeHost)-1]
			n.freeHost = n.freeHost[:len(n.freeHost)-1]
		}
		n.pending.Host = append(n.pending.Host, rd)
	}
	return busy
}

// Bounds of the arrays a node keeps for reuse.
const (
	maxSpare      = 64
	maxSpareElems = 4096
)

// Recycle hands back a batch the driver is done with: one it stepped, or
// one its transport encoded or copied. The node reuses its arrays for
// later batches; the driver must not touch b's slices afterwards.
func (n *Node) Recycle(b *nodewire.Batch) {
	if c := cap(b.Data); c > 0 && c <= maxSpareElems && len(n.freeData) < maxSpare {
		clear(b.Data[:c]) // drop what the messages reference
		n.freeData = append(n.freeData, b.Data[:0])
	}
	*b = nodewire.Batch{}
}

func (n *Node) spareData() []partition.Message {
	if k := len(n.freeData); k > 0 {
		d := n.freeData[k-1]
		n.freeData = n.freeData[:k-1]
		return d
	}
	return nil
}

// routeData queues replication messages for the nodes hosting their
// destination regions' replicas. Each peer's slice is sized once per call
// (a count pass first): growing them message by message was a tenth of a
// drill's allocations.
func (n *Node) routeData(ms []partition.Message) {
	if len(ms) == 0 {
		return
	}
	if cap(n.peerCount) < len(n.peers) {
		n.peerCount = make([]int, len(n.peers))
	}
	count := n.peerCount[:len(n.peers)]
	clear(count)
	for i := range ms {
		if to, ok := n.dataPeer(&ms[i]); ok {
			count[to]++
		}
	}
	for i, c := range count {
		if c > 0 {
			if n.outSync[i].Data == nil {
				n.outSync[i].Data = n.spareData()
			}
			n.outSync[i].Data = slices.Grow(n.outSync[i].Data, c)
		}
	}
	for i := range ms {
		if to, ok := n.dataPeer(&ms[i]); ok {
			n.outSync[to].Data = append(n.outSync[to].Data, ms[i])
		}
	}
}

// dataPeer is the index of the peer hosting message m's destination.
func (n *Node) dataPeer(m *partition.Message) (int, bool) {
	ri := n.regionIndex(m.To)
	k := int(m.Partition)*len(n.regions) + ri
	if ri < 0 || k >= len(n.nodeOfReg) {
		return 0, false
	}
	to := n.nodeOfReg[k]
	if to == 0 || to == n.cfg.ID {
		return 0, false
	}
	return n.peer(to)
}

// syncLease hands the liveness view's lease to every replica when it
// changes (one per node, never a per-partition, per-tick cost), and the
// lease run the manager validated. The run goes first: a lease regained
// after a lapse is a new run, and handing the host its end while the host
// still knew the old run number let every replica count it under the old
// run's validation, committing at once what waited for the lease (the
// register may meanwhile hold a takeover that starts below those ops).
func (n *Node) syncLease() {
	lv := n.mgr.Liveness()
	n.host.SetLeaseGen(lv.LeaseGen())
	if l := lv.LeaseUntil(); l != n.lease {
		n.lease = l
		n.host.SetLeaseAll(l)
	}
}

// queue returns the outgoing batch for peer to: the one that leaves at
// once, or after the Ready's writes are durable (synced).
func (n *Node) queue(to NodeID, synced bool) *nodewire.Batch {
	i, ok := n.peer(to)
	if !ok || to == n.cfg.ID {
		return nil
	}
	if synced {
		return &n.outSync[i]
	}
	return &n.outNow[i]
}
