package noderun

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/boltstore"
	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/internal/nodenet"
	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/pebblestore"
	"github.com/fmnode/fmnode/quorum"
)

var loopRegions = []quorum.Region{"east", "north", "west"}

// lnode is one region's node in the loopback test: its driver, its real
// TCP transport and its real stores.
type lnode struct {
	drv    *Driver
	tr     *nodenet.TCPTransport
	acc    *boltstore.Store
	parts  *pebblestore.Store
	cancel context.CancelFunc
	errc   chan error
}

func loopPlacements(n int) []node.Placement {
	var out []node.Placement
	for p := 1; p <= n; p++ {
		pl := node.Placement{ID: partition.ID(p)}
		for i, r := range loopRegions {
			pl.Replicas = append(pl.Replicas, failover.RegionNode{Region: r, Node: node.NodeID(i + 1)})
		}
		out = append(out, pl)
	}
	return out
}

func startLoopNode(t testing.TB, id node.NodeID, dir string, places []node.Placement, prof failover.Config) *lnode {
	t.Helper()
	region := loopRegions[id-1]
	acc, err := boltstore.Open(filepath.Join(dir, "acceptor.db"), boltstore.Options{})
	require.NoError(t, err)
	ps, err := pebblestore.Open(pebblestore.Options{Dir: filepath.Join(dir, "partitions")})
	require.NoError(t, err)
	var nodes []failover.Node
	var accs []node.NodeID
	for i, r := range loopRegions {
		nodes = append(nodes, failover.Node{ID: node.NodeID(i + 1), Region: r})
		accs = append(accs, node.NodeID(i+1))
	}
	wq := quorum.WriteQuorum{Replicas: loopRegions, WriteRegion: "east", Members: loopRegions, MinDurability: 2}
	var parts []Partition
	for _, pl := range places {
		p := Partition{Placement: pl, Spec: partition.Spec{Level: partition.Level{Consistency: partition.Strong}, Quorum: wq, Epoch: 1}}
		if id == 1 {
			st, err := failover.NewState(partition.RegisterKey(pl.ID), "east", loopRegions, failover.Strong, 2)
			require.NoError(t, err)
			p.Register = &st
		}
		parts = append(parts, p)
	}
	hcfg := partition.DefaultConfig(region, 1)
	hcfg.LeaseGatesWrites = true
	drv, err := New(Config{
		Node: node.Config{ID: id, Region: region, Boot: 1, Nodes: nodes, Acceptors: accs, Failover: prof,
			Host: hcfg, Proposer: caspaxos.DefaultProposerConfig(0, quorum.Config{}),
			Rand: rand.New(rand.NewPCG(uint64(id), 1))},
		AcceptorStore: acc, PartitionStore: ps, Partitions: parts,
	})
	require.NoError(t, err)
	tr, err := nodenet.Start(nodenet.Config{ID: id, Cluster: "loopback", Addr: "127.0.0.1:0",
		Peers: map[node.NodeID]string{}, Codec: nodewire.Codec{}, Handler: drv.Deliver})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ln := &lnode{drv: drv, tr: tr, acc: acc, parts: ps, cancel: cancel, errc: make(chan error, 1)}
	go func() { ln.errc <- drv.Run(ctx, tr) }()
	return ln
}

// stop ends the driver (as a killed process would: nothing more leaves),
// then closes its transport and stores.
func (ln *lnode) stop(t testing.TB) {
	if ln.cancel == nil {
		return
	}
	ln.cancel()
	ln.cancel = nil
	select {
	case err := <-ln.errc:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("driver did not stop")
	}
	require.NoError(t, ln.tr.Close())
	require.NoError(t, ln.parts.Close())
	require.NoError(t, ln.acc.Close())
}

// state is the register state node ln knows for partition p.
func (ln *lnode) state(t *testing.T, p partition.ID) (failover.State, bool) {
	var s failover.State
	var ok bool
	err := ln.drv.Do(context.Background(), func(_ time.Duration, n *node.Node) error {
		s, _, ok = n.Manager().State(partition.RegisterKey(p))
		return nil
	})
	require.NoError(t, err)
	return s, ok
}

// TestLoopbackFailover: three regions, one node each, as three drivers in
// one process over the real TCP transport on loopback, with the real
// bbolt and pebble stores. Strong writes are acknowledged in the write
// region; its driver stops; the other two fail every partition over
// within lease + drift + 1 s (fast profile), and every acknowledged write
// is there.
func TestLoopbackFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets and fsyncs")
	}
	const parts = 8
	prof := failover.FastConfig()
	places := loopPlacements(parts)
	var ns []*lnode
	for i := range loopRegions {
		ns = append(ns, startLoopNode(t, node.NodeID(i+1), t.TempDir(), places, prof))
	}
	t.Cleanup(func() {
		for _, ln := range ns {
			ln.stop(t)
		}
	})
	for i, a := range ns {
		for j, b := range ns {
			if i != j {
				require.NoError(t, a.tr.SetPeer(node.NodeID(j+1), b.tr.Addr().String()))
			}
		}
	}
	// Every node learns every register (node 1 creates them).
	require.Eventually(t, func() bool {
		for _, ln := range ns {
			for p := partition.ID(1); p <= parts; p++ {
				if _, ok := ln.state(t, p); !ok {
					return false
				}
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond)

	// Strong writes in the write region, retried while its lease forms.
	acked := map[partition.ID][]string{}
	ctx := context.Background()
	for k := 0; k < 4; k++ {
		for p := partition.ID(1); p <= parts; p++ {
			val := fmt.Sprintf("v%d", k)
			require.Eventually(t, func() bool {
				r, err := ns[0].drv.Write(ctx, partition.WriteRequest{Partition: p, Epoch: 1, Key: []byte(fmt.Sprintf("k%d", k)), Value: []byte(val)})
				return err == nil && r.Err == nil
			}, 10*time.Second, 50*time.Millisecond, "write %d to partition %d", k, p)
			acked[p] = append(acked[p], val)
		}
	}

	killed := time.Now()
	ns[0].stop(t)
	bound := prof.LeaseDuration + prof.MaxClockDrift + time.Second
	var took time.Duration
	require.Eventually(t, func() bool {
		for p := partition.ID(1); p <= parts; p++ {
			for _, ln := range ns[1:] {
				s, ok := ln.state(t, p)
				if !ok || s.WriteRegion == "east" || s.Epoch < 2 {
					return false
				}
			}
		}
		took = time.Since(killed)
		return true
	}, 30*time.Second, 10*time.Millisecond)
	t.Logf("every partition failed over %v after the write region stopped (bound %v)", took, bound)
	require.LessOrEqual(t, took, bound, "failover slower than lease + drift + 1 s")

	// Every acknowledged write is readable, strongly, in the new write
	// region, and new writes land there.
	for p := partition.ID(1); p <= parts; p++ {
		s, _ := ns[1].state(t, p)
		w := ns[1]
		if s.WriteRegion == "west" {
			w = ns[2]
		}
		for k, val := range acked[p] {
			var r partition.Reply
			require.Eventually(t, func() bool {
				var err error
				r, err = w.drv.Read(ctx, partition.ReadRequest{Partition: p, Key: []byte(fmt.Sprintf("k%d", k)),
					Consistency: partition.Strong, Epoch: partition.Epoch(s.Epoch)})
				return err == nil && r.Err == nil
			}, 10*time.Second, 50*time.Millisecond)
			require.True(t, r.Found, "partition %d key k%d lost", p, k)
			require.Equal(t, val, string(r.Value))
		}
		require.Eventually(t, func() bool {
			r, err := w.drv.Write(ctx, partition.WriteRequest{Partition: p, Epoch: partition.Epoch(s.Epoch), Key: []byte("after"), Value: []byte("x")})
			return err == nil && r.Err == nil
		}, 10*time.Second, 50*time.Millisecond)
	}
}
