package nodenet

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/internal/nodewire"
)

func joinMem(t *testing.T, n *MemNetwork, id NodeID, codec Codec, edit func(*MemConfig)) (*MemTransport, *inbox) {
	t.Helper()
	in := newInbox()
	cfg := MemConfig{ID: id, Handler: in.handle, Codec: codec}
	if edit != nil {
		edit(&cfg)
	}
	tr, err := n.Join(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tr.Close() })
	return tr, in
}

func TestMemNetworkExchangesInOrder(t *testing.T) {
	for name, codec := range map[string]Codec{"shared": nil, "codec": gobCodec{}} {
		t.Run(name, func(t *testing.T) {
			checkGoroutines(t)
			net := NewMemNetwork()
			trs := map[NodeID]*MemTransport{}
			ins := map[NodeID]*inbox{}
			for id := NodeID(1); id <= 3; id++ {
				trs[id], ins[id] = joinMem(t, net, id, codec, nil)
			}
			const n = 200
			for seq := uint64(1); seq <= n; seq++ {
				for a := range trs {
					for b := range trs {
						if a != b {
							require.NoError(t, trs[a].Send(b, learn(a, b, seq)))
						}
					}
				}
			}
			for b := range trs {
				for a := range trs {
					if a == b {
						continue
					}
					require.Eventually(t, func() bool { return ins[b].count(a) == n }, waitFor, tick)
					for i, l := range ins[b].from(a) {
						require.Equal(t, uint64(i+1), l.Version)
					}
					assert.EqualValues(t, n, trs[b].Stats()[a].Received)
				}
			}
		})
	}
}

func TestMemNetworkSendCopiesTheBatch(t *testing.T) {
	checkGoroutines(t)
	net := NewMemNetwork()
	a, _ := joinMem(t, net, 1, nil, nil)
	_, in := joinMem(t, net, 2, nil, nil)
	b := learn(1, 2, 1)
	require.NoError(t, a.Send(2, b))
	b.Learns[0] = nodewire.Learn{Key: "changed"}
	require.Eventually(t, func() bool { return in.count(1) == 1 }, waitFor, tick)
	assert.Equal(t, "1->2", in.from(1)[0].Key)
}

func TestMemNetworkQueueFullDropsNew(t *testing.T) {
	checkGoroutines(t)
	net := NewMemNetwork()
	release := make(chan struct{})
	a, _ := joinMem(t, net, 1, gobCodec{}, func(c *MemConfig) { c.QueueMessages = 2 })
	_, in := joinMem(t, net, 2, nil, nil)
	entered := make(chan struct{}, 10)
	in.hook = func(NodeID, nodewire.Batch) { entered <- struct{}{}; <-release }
	require.NoError(t, a.Send(2, learn(1, 2, 1)))
	<-entered // the delivery goroutine is stuck in the handler with batch 1
	require.NoError(t, a.Send(2, learn(1, 2, 2)))
	require.ErrorIs(t, a.Send(2, learn(1, 2, 3)), ErrQueueFull, "batch 1 still counts while it is being delivered")
	assert.EqualValues(t, 1, a.Stats()[2].Dropped)
	close(release)
	require.Eventually(t, func() bool { return in.count(1) == 2 }, waitFor, tick)
	assert.Equal(t, []uint64{1, 2}, []uint64{in.from(1)[0].Version, in.from(1)[1].Version})
}

func TestMemNetworkCutLinksAndRestarts(t *testing.T) {
	checkGoroutines(t)
	net := NewMemNetwork()
	a, inA := joinMem(t, net, 1, nil, nil)
	b, inB := joinMem(t, net, 2, nil, nil)

	net.SetLink(1, 2, false)
	require.NoError(t, a.Send(2, learn(1, 2, 1)))
	require.NoError(t, b.Send(1, learn(2, 1, 1)))
	require.Eventually(t, func() bool { return a.Stats()[2].Dropped == 1 && inA.count(2) == 1 }, waitFor, tick)
	assert.False(t, a.Stats()[2].Connected)
	assert.Zero(t, inB.count(1))

	net.SetLink(1, 2, true)
	require.NoError(t, a.Send(2, learn(1, 2, 2)))
	require.Eventually(t, func() bool { return inB.count(1) == 1 }, waitFor, tick)

	// Node 2 leaves: batches to it are lost; a new node 2 gets the next.
	require.NoError(t, b.Close())
	require.ErrorIs(t, b.Send(1, learn(2, 1, 2)), ErrClosed)
	require.NoError(t, a.Send(2, learn(1, 2, 3)))
	require.Eventually(t, func() bool { return a.Stats()[2].Dropped == 2 }, waitFor, tick)
	_, inB2 := joinMem(t, net, 2, nil, nil)
	require.NoError(t, a.Send(2, learn(1, 2, 4)))
	require.Eventually(t, func() bool { return inB2.count(1) == 1 }, waitFor, tick)
	assert.EqualValues(t, 4, inB2.from(1)[0].Version)
}

func TestMemNetworkConfigAndErrors(t *testing.T) {
	checkGoroutines(t)
	net := NewMemNetwork()
	h := func(NodeID, nodewire.Batch) {}
	for field, cfg := range map[string]MemConfig{
		"ID":            {Handler: h},
		"Handler":       {ID: 1},
		"MaxFrameBytes": {ID: 1, Handler: h, MaxFrameBytes: 1},
		"QueueMessages": {ID: 1, Handler: h, QueueMessages: -1},
		"QueueBytes":    {ID: 1, Handler: h, QueueBytes: -1},
		"MaxPeers":      {ID: 1, Handler: h, MaxPeers: -1},
	} {
		_, err := net.Join(cfg)
		require.ErrorIs(t, err, caspaxos.ErrInvalidConfig, field)
		assert.Contains(t, err.Error(), field)
	}
	a, _ := joinMem(t, net, 1, nil, func(c *MemConfig) { c.MaxPeers = 1; c.MaxFrameBytes = MinFrameBytes })
	_, err := net.Join(MemConfig{ID: 1, Handler: h})
	require.ErrorIs(t, err, caspaxos.ErrInvalidConfig, "duplicate id")
	require.ErrorIs(t, a.Send(1, learn(1, 1, 1)), ErrUnknownPeer)
	require.NoError(t, a.Send(2, learn(1, 2, 1)))
	require.ErrorIs(t, a.Send(3, learn(1, 3, 1)), ErrUnknownPeer, "MaxPeers")
	big := &nodewire.Batch{Learns: []nodewire.Learn{{Data: make([]byte, MinFrameBytes)}}}
	require.ErrorIs(t, a.Send(2, big), ErrFrameTooLarge)
	require.NoError(t, a.Close())
	require.NoError(t, a.Close())
	require.ErrorIs(t, a.Send(2, learn(1, 2, 1)), ErrClosed)
}

func TestTransportsShareTheInterface(t *testing.T) {
	var _ Transport = (*TCPTransport)(nil)
	var _ Transport = (*MemTransport)(nil)
}

func TestMetricsAreLabelledByPeer(t *testing.T) {
	checkGoroutines(t)
	reg := prometheus.NewRegistry()
	edit := func(c *Config) { c.Registerer = reg }
	a, b := startNode(t, 1, edit), startNode(t, 2, edit)
	mesh(t, a, b)
	require.NoError(t, a.Send(2, learn(1, 2, 1)))
	require.Eventually(t, func() bool { return b.in.count(1) == 1 }, waitFor, tick)
	require.Eventually(t, func() bool {
		fams, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range fams {
			if f.GetName() != "fmnode_nodenet_batches_sent_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["node"] == "1" && labels["peer"] == "2" && m.GetCounter().GetValue() == 1 {
					return true
				}
			}
		}
		return false
	}, waitFor, 10*time.Millisecond)
}
