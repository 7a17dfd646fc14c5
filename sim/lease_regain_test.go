package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
)

// leaseRegainScript is the interleaving a regained lease must survive: the
// write-heavy node is cut from every other node until its partitions
// failed over, then its links to one observer region heal while it stays
// cut from the region most of its partitions moved to. That observer
// acknowledges its heartbeats again (one acknowledgement is a lease with
// three regions), so it regains a lease without ever hearing from the new
// write region: no learn message, no replication. A client co-located with
// it then issues strong reads and writes at the old epoch. Had the old
// write region served them on the regained lease alone, porcupine (a read
// missing an acknowledged epoch-2 write) or the RPO check (an old-epoch
// write acknowledged and then set aside) would flag the run.
type leaseRegainScript struct {
	// what the script saw
	node      int32
	newWriter int // region index most affected partitions moved to
	regained  time.Duration
	// probed counts the old-epoch operations issued after an epoch-2
	// acknowledgement; served those the old write region answered OK at
	// epoch 1 (each is a violation the checkers must flag).
	probed, served int
	staleLeader    int // probes that found the replica still leader at epoch 1 with a lease
	refusals       []string
}

func (*leaseRegainScript) Name() string { return "lease-regain" }
func (*leaseRegainScript) Description() string {
	return "test script: regain a lease while cut from the new write region"
}
func (s *leaseRegainScript) Run(cfg Config) (Result, error) {
	res, _, err := runScripted(s, cfg)
	return res, err
}
func (*leaseRegainScript) profile() string { return "fast" }
func (*leaseRegainScript) shape(*foSpec)   {}
func (*leaseRegainScript) settle(*foRun)   {}
func (*leaseRegainScript) check(*foRun)    {}

func (s *leaseRegainScript) inject(r *foRun) {
	fw := r.fw
	s.node = int32(fw.busiestWriteNode(0))
	r.down[s.node] = true
	fw.m.startOutage(fw, r.down, fw.now())
	r.cutDown()
}

func (s *leaseRegainScript) run(r *foRun, until time.Duration) {
	fw := r.fw
	// The cut node's own clients stop (their starts are cancelled): its
	// partitions keep no write pending in the cut, so nothing it
	// retransmits after the heal tells it of the new epoch (an idle
	// partition, the common case).
	for _, c := range fw.clients {
		if c.node == s.node && !c.active {
			c.startGen++
			c.probe = false
		}
	}
	moved := func() bool {
		for i := range fw.parts {
			if fw.m.affected[i] && fw.reg[i].state.Epoch <= fw.m.epochT0[i] {
				return false
			}
		}
		return true
	}
	if !fw.runUntil(until, moved) {
		r.violation(ViolationLiveness, "lease-regain: not every affected partition failed over")
		return
	}
	counts := make([]int, len(fw.regions))
	for i := range fw.parts {
		if fw.m.affected[i] {
			counts[fw.regionIndex(fw.reg[i].state.WriteRegion)]++
		}
	}
	for ri := range counts {
		if counts[ri] > counts[s.newWriter] {
			s.newWriter = ri
		}
	}
	// Heal the cut to the observer that is not the new write region.
	a := s.node
	var other int32 = -1
	for x := range fw.nodes {
		if xi := int32(x); xi != a && fw.e.w.Nodes[x].Region != s.newWriter {
			other = xi
		}
	}
	n := int32(len(fw.nodes))
	heal := CutSet{a*n + other, other*n + a}
	node := fw.nodes[a]
	fw.e.w.Links.Apply(heal, -1)
	if !fw.runUntil(until, func() bool { return node.mgr.Liveness().LeaseValid(node.local()) }) {
		r.violation(ViolationLiveness, "lease-regain: the cut node never regained its lease")
		return
	}
	s.regained = fw.now()
	// Probe every partition that moved to the new write region and has an
	// acknowledged write there, as a client on the old write region's node.
	for i := range fw.parts {
		if !fw.m.affected[i] || fw.regionIndex(fw.reg[i].state.WriteRegion) != s.newWriter {
			continue
		}
		newAck := func() bool {
			for _, t := range fw.m.acks[i] {
				if failover.Epoch(t.Epoch) > fw.m.epochT0[i] {
					return true
				}
			}
			return false
		}
		if !fw.runUntil(min(until, fw.now()+10*time.Second), newAck) {
			continue
		}
		c := &foClient{idx: len(fw.clients), part: i, region: fw.e.w.Nodes[a].Region, node: a,
			key: []byte("k"), keyStr: fmt.Sprintf("p%d", fw.parts[i].id), hclient: fw.e.hist.NewClient()}
		fw.clients = append(fw.clients, c)
		old := uint64(fw.m.epochT0[i])
		s.probe(fw, c, false, old)
		s.probe(fw, c, true, old)
		s.probe(fw, c, false, old)
	}
	fw.e.run(until)
}

// probe runs one strong operation of c at its node at epoch e and records
// it for the checkers.
func (s *leaseRegainScript) probe(fw *foWorld, c *foClient, write bool, e uint64) {
	n := fw.nodes[c.node]
	if pr, err := n.host.Progress(fw.parts[c.part].id); err == nil {
		st := failover.StatusFromProgress(pr, n.region)
		if st.WriteRegion && uint64(st.Epoch) == e && n.mgr.Liveness().LeaseValid(n.local()) {
			s.staleLeader++
		}
	}
	s.probed++
	c.seq++
	c.attempt++
	// resolving: the client code's reply event finds a "stale" event and
	// leaves the outcome to the script (there is no routing operation).
	c.active, c.resolving, c.write, c.delivered, c.sentEpoch, c.arriveAt = true, true, write, false, e, c.node
	c.reply = partition.Reply{}
	kind, value := opRead, ""
	if write {
		kind, value = opCAS, fmt.Sprintf("regain.%d.%d", c.idx, c.seq)
	}
	c.value = value
	c.hi = fw.e.hist.Call(c.hclient, regInput{Kind: kind, Key: c.keyStr, Data: value}, fw.now())
	ref := partition.ClientRef(uint64(c.idx)<<24 | c.attempt&0xffffff)
	fw.clientArrive(c)
	deadline := fw.now() + 3*time.Second
	for c.reply.Ref != ref && fw.now() < deadline {
		fw.e.run(fw.now() + 10*time.Millisecond)
	}
	c.active, c.resolving = false, false
	c.attempt++ // the scheduled reply event is stale now
	rep := c.reply
	switch {
	case rep.Ref == ref && rep.Err == nil:
		s.served++
		out := regOutput{Status: statusOK, Data: value}
		if !write {
			out.Data = ""
			if rep.Found {
				out.Data = string(rep.Value)
			}
		} else {
			fw.m.ack(fw, c.part, rep.Token, fw.now())
		}
		fw.e.hist.Return(c.hi, out, fw.now())
	case write:
		if rep.Ref == ref {
			s.refusals = append(s.refusals, rep.Err.Error())
		}
		fw.e.hist.Return(c.hi, regOutput{Status: statusUnknown}, fw.now())
	default:
		if rep.Ref == ref {
			s.refusals = append(s.refusals, rep.Err.Error())
		}
		fw.e.hist.Discard(c.hi)
	}
}

func (*leaseRegainScript) heal(r *foRun) { r.healDown() }

// TestRegainedLeaseServesNothingStale: after its partitions failed over,
// a write region that regains its lease while cut from the new write
// region acknowledges no write and answers no strong read at its old
// epoch: the checkers see a clean run.
func TestRegainedLeaseServesNothingStale(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		s := &leaseRegainScript{}
		cfg := Config{Scenario: s.Name(), Seed: seed, Partitions: 20, FailoverProfile: "fast", Outage: time.Minute, Duration: time.Minute}
		require.NoError(t, cfg.normalize())
		res, _, err := runScripted(s, cfg)
		require.NoError(t, err)
		t.Logf("seed %d: node %d, new writer region %d, regained at %v, probed %d, served %d, stale leader %d, violations %v, lin %s",
			seed, s.node, s.newWriter, s.regained, s.probed, s.served, s.staleLeader, res.Violations, res.Linearizable)
		for _, r := range s.refusals {
			t.Logf("refused: %s", r)
		}
		require.Positive(t, s.regained, "the script regained the lease")
		require.Positive(t, s.probed, "the script probed the old write region")
		require.Empty(t, res.Violations)
		require.Equal(t, LinOK, res.Linearizable)
		require.Zero(t, res.FailoverReport.RPO.Max, "RPO")
		require.Zero(t, s.served, "the old write region served an operation at its old epoch")
	}
}
