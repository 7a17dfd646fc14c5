package node

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
)

// TestNodeReadsBackWhenItsReplicaKnowsMore: a node that missed the learn
// of a failover finds out from its own replica (the new write region's
// replication carries the newer epoch) and reads the register back. No
// other source tells it: the rule uses only what the node can know.
func TestNodeReadsBackWhenItsReplicaKnowsMore(t *testing.T) {
	c := newTCluster(t, 1)
	c.run(c.now + 3*time.Second)
	r, ok := c.write(0, 1, 1, 1, "k", "v1", 2*time.Second)
	require.True(t, ok)
	require.NoError(t, r.Err)
	// Every learn to node 3 is lost from here on.
	c.drop = func(b *nodewire.Batch) bool {
		if b.To == 3 && len(b.Learns) > 0 {
			b.Learns = nil
		}
		return false
	}
	c.crash(0)
	cfg := fastProfile(t)
	c.run(c.now + cfg.LeaseDuration + cfg.MaxClockDrift + 3*time.Second)
	s2, ok := c.known(1, 1)
	require.True(t, ok)
	require.Greater(t, uint64(s2.Epoch), uint64(1), "node 2 saw the failover")
	// Writes in the new region replicate to node 3 at the new epoch.
	wr := 1
	if s2.WriteRegion == "north" {
		wr = 2
	}
	r, ok = c.write(wr, 1, 2, partition.Epoch(s2.Epoch), "k", "v2", 2*time.Second)
	require.True(t, ok)
	require.NoError(t, r.Err)
	c.run(c.now + 2*time.Second)
	s3, ok := c.known(2, 1)
	require.True(t, ok)
	require.Equal(t, s2.Epoch, s3.Epoch, "node 3 caught up with the register")
	if wr != 2 {
		require.Positive(t, c.nodes[2].Stats().ReadsBack, "node 3 read the register back on its replica's evidence")
	}
}

// TestNodeRestartReadsRegistersBack: a node restarted from its stores (a
// new incarnation: a new proposer id) knows no register value until it
// reads them back, and then rejoins.
func TestNodeRestartReadsRegistersBack(t *testing.T) {
	c := newTCluster(t, 3)
	c.run(c.now + 3*time.Second)
	old := c.nodes[2].Proposer().ID()
	c.crash(2)
	c.run(c.now + time.Second)
	c.restart(2)
	require.NotEqual(t, old, c.nodes[2].Proposer().ID(), "a new incarnation proposes under a new id")
	for p := partition.ID(1); p <= 3; p++ {
		_, ok := c.known(2, p)
		require.False(t, ok, "a restarted node knows no register value yet")
	}
	c.run(c.now + 3*time.Second)
	for p := partition.ID(1); p <= 3; p++ {
		s, ok := c.known(2, p)
		require.True(t, ok)
		require.Equal(t, "east", string(s.WriteRegion))
	}
	require.NoError(t, c.nodes[2].Violation())
}

// TestNodeHeartbeatsDoNotWaitForTheDisk: a Ready that carries writes still
// hands out heartbeats and register requests in Messages, which the driver
// sends before the fsync; acceptor replies and replication wait in Synced.
func TestNodeHeartbeatsDoNotWaitForTheDisk(t *testing.T) {
	c := newTCluster(t, 2)
	n := c.nodes[0]
	rd := n.Ready()
	require.True(t, rd.MustSync(), "creating the partitions writes")
	var hb int
	for _, b := range rd.Messages {
		hb += len(b.Heartbeats)
		require.Empty(t, b.Data, "replication waits for the fsync")
	}
	for _, b := range rd.Synced {
		require.Empty(t, b.Heartbeats)
		for _, m := range b.CAS {
			require.True(t, m.Type.IsReply(), "only acceptor replies wait")
		}
	}
	require.Positive(t, hb, "the first heartbeat round leaves with the first Ready")
	require.Equal(t, 1, n.InFlight())
	// The driver carries out what leaves at once and clears it, as the
	// simulator and noderun do: the Ready still counts until Advance.
	rd.Messages, rd.Replies, rd.Routes = nil, nil, nil
	n.Advance(&rd, rd.Read(c.stores[0]))
	require.Zero(t, n.InFlight())
	n.Advance(&rd, rd.Read(c.stores[0]))
	require.Zero(t, n.InFlight(), "advancing twice counts once")
}

func TestNodeStepRefusesUnknownPeer(t *testing.T) {
	c := newTCluster(t, 1)
	err := c.nodes[0].Step(c.now, &nodewire.Batch{From: 9, To: 1})
	require.ErrorIs(t, err, ErrUnknownPeer)
	err = c.nodes[0].Step(c.now, &nodewire.Batch{From: 1, To: 1})
	require.ErrorIs(t, err, ErrUnknownPeer, "a node never hears from itself")
}

func TestNodeConfigNamesTheField(t *testing.T) {
	regions := []quorum.Region{"east", "west", "north"}
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"ID", func(c *Config) { c.ID = 0 }},
		{"ID", func(c *Config) { c.ID = MaxNodeID + 1 }},
		{"Boot", func(c *Config) { c.Boot = 0 }},
		{"Region", func(c *Config) { c.Region = "" }},
		{"Region", func(c *Config) { c.Region = "west" }},
		{"Nodes", func(c *Config) { c.Nodes = c.Nodes[1:] }},
		{"Nodes[1]", func(c *Config) { c.Nodes[1].ID = 1 }},
		{"Acceptors", func(c *Config) { c.Acceptors = nil }},
		{"Acceptors[0]", func(c *Config) { c.Acceptors = []NodeID{7} }},
		{"WatchAll[0]", func(c *Config) { c.WatchAll = []NodeID{7} }},
		{"Host.Region", func(c *Config) { c.Host.Region = "west" }},
		{"Host.Boot", func(c *Config) { c.Host.Boot = 9 }},
		{"Rand", func(c *Config) { c.Rand = nil }},
		{"HostTickGrain", func(c *Config) { c.HostTickGrain = -1 }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			cfg := nodeConfig(t, 1, regions, 1, caspaxos.State{})
			cfg.Nodes = append([]failover.Node(nil), cfg.Nodes...)
			tc.edit(&cfg)
			_, err := New(cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.Contains(t, err.Error(), "Config."+tc.field)
		})
	}
	_, err := New(nodeConfig(t, 1, regions, 1, caspaxos.State{}))
	require.NoError(t, err)
}

func TestNodeRefusesBadPlacement(t *testing.T) {
	c := newTCluster(t, 1)
	n := c.nodes[0]
	spec := partition.Spec{Level: partition.Level{Consistency: partition.Strong}, Epoch: 1,
		Quorum: quorum.WriteQuorum{Replicas: sortRegions(c.regions), WriteRegion: "east", Members: sortRegions(c.regions), MinDurability: 2}}
	for name, pl := range map[string]Placement{
		"twice":        c.places[0],
		"zero id":      {ID: 0, Replicas: c.places[0].Replicas},
		"huge id":      {ID: MaxPartitionID + 1, Replicas: c.places[0].Replicas},
		"unknown node": {ID: 9, Replicas: []failover.RegionNode{{Region: "east", Node: 1}, {Region: "west", Node: 8}}},
		"not here":     {ID: 9, Replicas: []failover.RegionNode{{Region: "west", Node: 2}}},
		"wrong region": {ID: 9, Replicas: []failover.RegionNode{{Region: "west", Node: 1}}},
	} {
		err := n.CreatePartition(c.now, pl, spec)
		require.Error(t, err, name)
		require.True(t, errors.Is(err, ErrInvalidConfig), "%s: %v", name, err)
	}
}

// A Ready that only carries messages counts in InFlight until Advance,
// though the driver cleared the messages it sent before advancing it.
func TestNodeInFlightCountsMessageOnlyReadys(t *testing.T) {
	c := newTCluster(t, 1)
	c.run(c.now + 3*time.Second)
	n := c.nodes[0]
	require.Zero(t, n.InFlight())
	// The next heartbeat round, with nothing else to do.
	d, ok := n.NextDeadline()
	require.True(t, ok)
	n.Tick(d)
	rd := n.Ready()
	require.NotEmpty(t, rd.Messages)
	require.False(t, rd.MustSync())
	require.Equal(t, 1, n.InFlight())
	rd.Messages = nil
	n.Advance(&rd, rd.Read(c.stores[0]))
	require.Zero(t, n.InFlight())
}
