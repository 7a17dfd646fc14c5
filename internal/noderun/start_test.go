package noderun

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/boltstore"
	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/pebblestore"
	"github.com/fmnode/fmnode/quorum"
)

// countingSender counts the batches a driver sends and drops them.
type countingSender struct{ n atomic.Uint64 }

func (s *countingSender) Send(node.NodeID, *nodewire.Batch) error { s.n.Add(1); return nil }

// TestRunHeartbeatsWithoutOutsideEvents: a driver whose peers say nothing
// still sends its heartbeats. Before the fix the loop waited for an
// outside event before its first Tick armed the timers, so a cluster
// whose agents all started at once never exchanged a message.
func TestRunHeartbeatsWithoutOutsideEvents(t *testing.T) {
	dir := t.TempDir()
	acc, err := boltstore.Open(filepath.Join(dir, "acceptor.db"), boltstore.Options{})
	require.NoError(t, err)
	defer acc.Close()
	ps, err := pebblestore.Open(pebblestore.Options{Dir: filepath.Join(dir, "partitions")})
	require.NoError(t, err)
	defer ps.Close()
	var nodes []failover.Node
	for i, r := range loopRegions {
		nodes = append(nodes, failover.Node{ID: node.NodeID(i + 1), Region: r})
	}
	drv, err := New(Config{
		Node: node.Config{ID: 1, Region: "east", Boot: 1, Nodes: nodes, Acceptors: []node.NodeID{1, 2, 3},
			Failover: failover.FastConfig(), Host: partition.DefaultConfig("east", 1),
			Proposer: caspaxos.DefaultProposerConfig(0, quorum.Config{}), Rand: rand.New(rand.NewPCG(1, 1))},
		AcceptorStore: acc, PartitionStore: ps,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	var s countingSender
	go func() { errc <- drv.Run(ctx, &s) }()
	require.Eventually(t, func() bool { return s.n.Load() >= 4 }, 10*time.Second, 10*time.Millisecond,
		"no heartbeats left a driver nobody talked to")
	cancel()
	select {
	case err := <-errc:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its context's end")
	}
}
