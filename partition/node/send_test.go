package node

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
)

// countingTransport records every Send, so tests can assert what a node
// hands its transport.
type countingTransport struct {
	mu    sync.Mutex
	sends map[partition.Region][]int // message count of each Send, per region
	next  Transport                  // optional: deliver as well
}

func (c *countingTransport) Send(to partition.Region, msgs []partition.Message) {
	c.mu.Lock()
	if c.sends == nil {
		c.sends = map[partition.Region][]int{}
	}
	c.sends[to] = append(c.sends[to], len(msgs))
	c.mu.Unlock()
	if c.next != nil {
		c.next.Send(to, msgs)
	}
}

func (c *countingTransport) empty() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, counts := range c.sends {
		for _, k := range counts {
			if k == 0 {
				n++
			}
		}
	}
	return n
}

// TestSendSkipsRegionsWithoutMessages: a region the node sent to once must
// not get an empty Send on every later call. Each empty Send costs the
// receiver an inbox slot, and once the inbox is full real messages drop.
func TestSendSkipsRegionsWithoutMessages(t *testing.T) {
	tr := &countingTransport{}
	n, err := New(Config{Host: partition.DefaultConfig("a", 1), Store: partition.NewMemStore(), Transport: tr})
	require.NoError(t, err)

	n.send([]partition.Message{{From: "a", To: "b"}, {From: "a", To: "b"}})
	n.send([]partition.Message{{From: "a", To: "c"}})
	n.send([]partition.Message{{From: "a", To: "c"}, {From: "a", To: "b"}})
	n.send(nil)

	assert.Equal(t, map[partition.Region][]int{"b": {2, 1}, "c": {1, 1}}, tr.sends)
	assert.Zero(t, tr.empty())
}

// TestNodesSendNoEmptyBatches runs three nodes replicating through a
// counting transport: no Send between them carries no message.
func TestNodesSendNoEmptyBatches(t *testing.T) {
	net := NewMemNetwork()
	tr := &countingTransport{next: net}
	regions := []partition.Region{"a", "b", "c"}
	var nodes []*Node
	for i, reg := range regions {
		n, err := New(Config{Host: partition.DefaultConfig(reg, uint64(i+1)), Store: partition.NewMemStore(), Transport: tr})
		require.NoError(t, err)
		net.Attach(n)
		nodes = append(nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); _ = n.Run(runCtx) }()
	}
	defer func() { stop(); wg.Wait() }()

	// One partition written from each region: every node is a leader that
	// sends to both others and a follower that answers one, so a node that
	// sent empty batches to regions it has nothing for would do it here.
	for p := range partition.ID(3) {
		wq := quorum.WriteQuorum{Replicas: regions, WriteRegion: regions[p], Members: regions, MinDurability: 2}
		for _, n := range nodes {
			require.NoError(t, n.Do(ctx, func(now time.Duration, h *partition.Host) error {
				if err := h.Create(now, p, partition.Spec{Level: partition.Level{Consistency: partition.Strong}, Quorum: wq, Epoch: 1}, 0); err != nil {
					return err
				}
				return h.SetLease(p, now+time.Hour)
			}))
		}
	}
	for i := range 30 {
		p := partition.ID(i % 3)
		_, err := nodes[p].Write(ctx, partition.WriteRequest{Partition: p, Epoch: 1, Key: []byte("k"), Value: []byte{byte(i)}})
		require.NoError(t, err)
	}
	tr.mu.Lock()
	sent := len(tr.sends)
	tr.mu.Unlock()
	require.NotZero(t, sent, "the nodes replicated through the transport")
	assert.Zero(t, tr.empty(), "empty Sends")
}
