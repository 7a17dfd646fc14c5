package dataapi

import (
	"context"
	"fmt"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/txtdns/routing"
)

// Backend serves the partitions' writes and reads: in the agent the node
// driver (noderun.Driver), in tests a MemBackend. A reply's Err is the
// partition's answer (a *partition.RedirectError, a partition sentinel);
// the returned error is the backend's own failure (the context, a stopped
// driver).
type Backend interface {
	Write(ctx context.Context, req partition.WriteRequest) (partition.Reply, error)
	Read(ctx context.Context, req partition.ReadRequest) (partition.Reply, error)
}

// Partitioner maps a key to its partition. It must agree with the
// application's routing client (txtdns/routing), or requests reach a
// partition the client did not route for.
type Partitioner interface {
	Partition(key []byte) partition.ID
}

// PartitionerFunc adapts a function to a Partitioner.
type PartitionerFunc func(key []byte) partition.ID

// Partition implements Partitioner.
func (f PartitionerFunc) Partition(key []byte) partition.ID { return f(key) }

// hashPartitioner is the routing SDK's OneBasedHashPartitioner over byte
// keys.
type hashPartitioner struct {
	h routing.OneBasedHashPartitioner
}

// NewHashPartitioner returns the routing SDK's partitioner over
// partitions 1..n (routing.OneBasedHashPartitioner: FNV-1a of the key
// modulo n, plus one: partition ids start at 1), so the server and the SDK
// (txtdns/kv's default) map every key alike.
func NewHashPartitioner(n uint32) (Partitioner, error) {
	h, err := routing.NewOneBasedHashPartitioner(n)
	if err != nil {
		return nil, fmt.Errorf("dataapi: %w", err)
	}
	return hashPartitioner{h: h}, nil
}

func (p hashPartitioner) Partition(key []byte) partition.ID {
	return partition.ID(p.h.Partition(string(key)))
}
