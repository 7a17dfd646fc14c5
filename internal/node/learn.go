package node

import (
	"slices"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/internal/nodewire"
)

// The register watch's delivery. A committed value this node's proposer
// returns goes, as a Learn, to every other node hosting the partition and
// to the WatchAll nodes, and is sent again until each of them answered
// with a LearnAck for that version or a newer one. Sent once, a learn lost
// to a cut or a dropped message left its node on a stale register value
// for good whenever nothing else made it read the register back (its
// replica's epoch moves only with a failover): a node that missed a shrink
// kept withholding a gray write region's lease on the old write quorum's
// evidence, so the write region committed nothing again (cluster swarm
// seed 281), and a promoted node that missed its own promotion never took
// the write.
//
// One entry per register key this node shared (a newer value replaces it,
// and a newer value learned from another node drops it: its committer
// shares that one), so the state is bounded by the hosted partitions.
// Peers the liveness view suspects are skipped until they are heard again;
// a peer that does not answer is asked again after LearnRetry, doubling up
// to 16 times that.

// outLearn is a shared value not every peer acknowledged yet.
type outLearn struct {
	version uint64
	data    []byte
	waiting []NodeID // peers that have not acknowledged it
	next    time.Duration
	sends   int // resends so far (the backoff)
}

// maxLearnBackoffShift bounds the resend interval at LearnRetry times
// 2^maxLearnBackoffShift (16).
const maxLearnBackoffShift = 4

// share sends a committed value to the other nodes hosting the partition
// and to the nodes that watch every register, and keeps it until they
// acknowledge it.
func (n *Node) share(p *part, v caspaxos.Value) {
	l := nodewire.Learn{Key: p.name, Version: v.Version, Data: v.Data}
	var waiting []NodeID
	send := func(id NodeID) {
		if slices.Contains(waiting, id) {
			return
		}
		if b := n.queue(id, false); b != nil {
			b.Learns = append(b.Learns, l)
			n.stats.LearnsSent++
			waiting = append(waiting, id)
		}
	}
	for _, rn := range p.replicas {
		send(rn.Node)
	}
	for _, id := range n.watchAll {
		send(id)
	}
	if len(waiting) == 0 {
		delete(n.learnOut, p.name)
		return
	}
	e := &outLearn{version: v.Version, data: v.Data, waiting: waiting, next: n.now + n.cfg.LearnRetry}
	n.learnOut[p.name] = e
	if n.learnAt == 0 || e.next < n.learnAt {
		n.learnAt = e.next
	}
}

// ackLearn answers a peer's learn of key: this node knows it at version
// or newer.
func (n *Node) ackLearn(to NodeID, key string, version uint64) {
	if b := n.queue(to, false); b != nil {
		b.LearnAcks = append(b.LearnAcks, nodewire.LearnAck{Key: key, Version: version})
	}
}

// stepLearnAck takes a peer's acknowledgement of a shared value.
func (n *Node) stepLearnAck(from NodeID, a *nodewire.LearnAck) {
	e := n.learnOut[a.Key]
	if e == nil || a.Version < e.version {
		return // an older value's ack: the newer one is still owed
	}
	n.stats.LearnAcks++
	e.waiting = slices.DeleteFunc(e.waiting, func(id NodeID) bool { return id == from })
	if len(e.waiting) == 0 {
		delete(n.learnOut, a.Key)
	}
}

// supersedeLearn drops the shared value of key older than version: the
// node that committed the newer one shares it.
func (n *Node) supersedeLearn(key string, version uint64) {
	if e := n.learnOut[key]; e != nil && e.version < version {
		delete(n.learnOut, key)
	}
}

// resendLearns sends the due values again to the peers that did not
// acknowledge them and are not suspected, in key order.
func (n *Node) resendLearns(now time.Duration) {
	var due []string
	for k, e := range n.learnOut {
		if e.next <= now {
			due = append(due, k)
		}
	}
	slices.Sort(due)
	lv := n.mgr.Liveness()
	for _, k := range due {
		e := n.learnOut[k]
		sent := false
		for _, id := range e.waiting {
			if !lv.Alive(id) {
				continue // asked again once it is heard from
			}
			if b := n.queue(id, false); b != nil {
				b.Learns = append(b.Learns, nodewire.Learn{Key: k, Version: e.version, Data: e.data})
				n.stats.LearnsResent++
				sent = true
			}
		}
		wait := n.cfg.LearnRetry
		if sent {
			e.sends++
			wait <<= min(e.sends, maxLearnBackoffShift)
		}
		e.next = now + wait
	}
	n.learnAt = 0
	for _, e := range n.learnOut {
		if n.learnAt == 0 || e.next < n.learnAt {
			n.learnAt = e.next
		}
	}
}
