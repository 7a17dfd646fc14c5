package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/boltstore"
	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/internal/nodenet"
	"github.com/fmnode/fmnode/internal/noderun"
	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
)

// The CASPaxos side of `fmnode bench compare`'s steady-state and outage
// figures: three real nodes (internal/noderun drivers, as in noderun's
// TestLoopbackFailover), one per region, in this process, over the real
// TCP node transport on loopback, each with a real bbolt acceptor store
// (fsync on). The partition stores are in memory: the comparison is of
// the coordination, and the baseline has no data plane either.

var compareRegions = []quorum.Region{"east", "north", "west"}

// countingStore counts what an acceptor store is asked to write: the
// register writes of the design (Promised/Accepted records) and their
// bytes.
type countingStore struct {
	caspaxos.Store
	records atomic.Uint64
	bytes   atomic.Uint64
	applies atomic.Uint64
}

func (c *countingStore) Apply(b caspaxos.Batch) error {
	err := c.Store.Apply(b)
	if err == nil && !b.Empty() {
		c.applies.Add(1)
		c.records.Add(uint64(len(b.Put) + len(b.Delete)))
		var n uint64
		for _, r := range b.Put {
			n += uint64(len(r.Key) + len(r.Value.Data) + 24)
		}
		c.bytes.Add(n)
	}
	return err
}

type casLoopNode struct {
	id     node.NodeID
	drv    *noderun.Driver
	tr     *nodenet.TCPTransport
	acc    *countingStore
	cancel context.CancelFunc
	errc   chan error
	// severed: cut off (transport closed, driver told to stop), not yet
	// reaped.
	severed bool
}

// casLoop is the three-node CASPaxos cluster.
type casLoop struct {
	nodes []*casLoopNode
	parts int
}

func comparePlacements(n int) []node.Placement {
	out := make([]node.Placement, 0, n)
	for p := 1; p <= n; p++ {
		pl := node.Placement{ID: partition.ID(p)}
		for i, r := range compareRegions {
			pl.Replicas = append(pl.Replicas, failover.RegionNode{Region: r, Node: node.NodeID(i + 1)})
		}
		out = append(out, pl)
	}
	return out
}

// startCASLoop starts the three nodes; node 1 (east) creates every
// partition's register with east as write region.
func startCASLoop(dir string, parts int, prof failover.Config) (c *casLoop, err error) {
	c = &casLoop{parts: parts}
	defer func() {
		if err != nil {
			_ = c.close()
		}
	}()
	places := comparePlacements(parts)
	var nodes []failover.Node
	var accs []node.NodeID
	for i, r := range compareRegions {
		nodes = append(nodes, failover.Node{ID: node.NodeID(i + 1), Region: r})
		accs = append(accs, node.NodeID(i+1))
	}
	wq := quorum.WriteQuorum{Replicas: compareRegions, WriteRegion: "east", Members: compareRegions, MinDurability: 2}
	for i, region := range compareRegions {
		id := node.NodeID(i + 1)
		ndir := filepath.Join(dir, string(region))
		if err := os.MkdirAll(ndir, 0o700); err != nil {
			return c, err
		}
		bs, err := boltstore.Open(filepath.Join(ndir, "acceptor.db"), boltstore.Options{})
		if err != nil {
			return c, fmt.Errorf("node %d: acceptor store: %w", id, err)
		}
		acc := &countingStore{Store: bs}
		var ps []noderun.Partition
		for _, pl := range places {
			p := noderun.Partition{Placement: pl, Spec: partition.Spec{Level: partition.Level{Consistency: partition.Strong}, Quorum: wq, Epoch: 1}}
			if id == 1 {
				st, err := failover.NewState(partition.RegisterKey(pl.ID), "east", compareRegions, failover.Strong, 2)
				if err != nil {
					_ = acc.Close()
					return c, err
				}
				p.Register = &st
			}
			ps = append(ps, p)
		}
		hcfg := partition.DefaultConfig(region, 1)
		hcfg.LeaseGatesWrites = true
		drv, err := noderun.New(noderun.Config{
			Node: node.Config{ID: id, Region: region, Boot: 1, Nodes: nodes, Acceptors: accs, Failover: prof,
				Host: hcfg, Proposer: caspaxos.DefaultProposerConfig(0, quorum.Config{}),
				Rand: rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))},
			AcceptorStore: acc, PartitionStore: partition.NewMemStore(), Partitions: ps,
		})
		if err != nil {
			_ = acc.Close()
			return c, fmt.Errorf("node %d: %w", id, err)
		}
		tr, err := nodenet.Start(nodenet.Config{ID: id, Cluster: "bench-compare", Addr: "127.0.0.1:0",
			Peers: map[node.NodeID]string{}, Codec: nodewire.Codec{}, Handler: drv.Deliver})
		if err != nil {
			_ = acc.Close()
			return c, fmt.Errorf("node %d: transport: %w", id, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ln := &casLoopNode{id: id, drv: drv, tr: tr, acc: acc, cancel: cancel, errc: make(chan error, 1)}
		go func() { ln.errc <- drv.Run(ctx, tr) }()
		c.nodes = append(c.nodes, ln)
	}
	for i, a := range c.nodes {
		for j, b := range c.nodes {
			if i != j {
				if err := a.tr.SetPeer(b.id, b.tr.Addr().String()); err != nil {
					return c, err
				}
			}
		}
	}
	return c, nil
}

// waitKnown waits until every live node knows every register.
func (c *casLoop) waitKnown(ctx context.Context) error {
	for {
		missing := 0
		for _, ln := range c.live() {
			err := ln.drv.Do(ctx, func(_ time.Duration, n *node.Node) error {
				for p := 1; p <= c.parts; p++ {
					if _, _, ok := n.Manager().State(partition.RegisterKey(partition.ID(p))); !ok {
						missing++
					}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("%d registers still unknown: %w", missing, err)
			}
		}
		if missing == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d registers still unknown: %w", missing, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *casLoop) live() []*casLoopNode {
	var out []*casLoopNode
	for _, ln := range c.nodes {
		if ln.cancel != nil {
			out = append(out, ln)
		}
	}
	return out
}

// acceptorRecords sums the records and bytes written by the live nodes'
// acceptor stores.
func (c *casLoop) acceptorRecords() (records, bytes uint64) {
	for _, ln := range c.nodes {
		records += ln.acc.records.Load()
		bytes += ln.acc.bytes.Load()
	}
	return records, bytes
}

// kill stops node i as a killed process would (sever, then reap).
func (c *casLoop) kill(i int) error {
	return errors.Join(c.sever(i), c.reap(i))
}

// sever cuts node i off as a killed process: its transport closes first,
// so nothing more leaves it even while its driver finishes the step it is
// in, and its driver is told to stop. It does not wait.
func (c *casLoop) sever(i int) error {
	ln := c.nodes[i]
	if ln.cancel == nil {
		return nil
	}
	ln.cancel()
	ln.cancel = nil
	ln.severed = true
	return ln.tr.Close()
}

// reap waits for a severed node's driver to end and closes its store.
func (c *casLoop) reap(i int) error {
	ln := c.nodes[i]
	if !ln.severed {
		return nil
	}
	select {
	case err := <-ln.errc:
		ln.severed = false
		if err != nil && !errors.Is(err, context.Canceled) {
			return errors.Join(err, ln.acc.Close())
		}
		return ln.acc.Close()
	case <-time.After(time.Minute):
		// Its store stays open: closing it under a running persist would
		// fail that, not the driver.
		return fmt.Errorf("node %d: driver did not stop within a minute", ln.id)
	}
}

func (c *casLoop) close() error {
	var errs []error
	for i := range c.nodes {
		errs = append(errs, c.kill(i))
	}
	return errors.Join(errs...)
}

// failedOver polls the live nodes until every partition's register holds
// a state whose write region is not lost, at an epoch above the first,
// and returns when each partition was first seen so, after since. If ctx
// ends first it returns the times of those that did and how many did not.
func (c *casLoop) failedOver(ctx context.Context, lost quorum.Region, since time.Time) ([]time.Duration, int, error) {
	took := make([]time.Duration, c.parts)
	done := make([]bool, c.parts)
	left := c.parts
	for left > 0 && ctx.Err() == nil {
		for _, ln := range c.live() {
			err := ln.drv.Do(ctx, func(_ time.Duration, n *node.Node) error {
				at := time.Since(since)
				for p := range c.parts {
					if done[p] {
						continue
					}
					s, _, ok := n.Manager().State(partition.RegisterKey(partition.ID(p + 1)))
					if ok && s.Epoch >= 2 && s.WriteRegion != lost {
						done[p], took[p] = true, at
						left--
					}
				}
				return nil
			})
			if err != nil && ctx.Err() == nil {
				return nil, left, err
			}
		}
		if left > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	out := make([]time.Duration, 0, c.parts-left)
	for p, d := range done {
		if d {
			out = append(out, took[p])
		}
	}
	return out, left, nil
}
