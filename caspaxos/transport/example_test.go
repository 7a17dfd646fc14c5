package transport_test

import (
	"context"
	"fmt"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/transport"
	"github.com/fmnode/fmnode/quorum"
)

// A three-acceptor cluster in one process, without sockets.
func ExampleMemNetwork() {
	net := transport.NewMemNetwork()
	for id := caspaxos.NodeID(1); id <= 3; id++ {
		a, err := net.StartAcceptor(transport.AcceptorConfig{ID: id, Store: caspaxos.NewMemoryStore()})
		if err != nil {
			panic(err)
		}
		defer a.Close()
	}
	tr := net.Dial(0)
	defer tr.Close()
	node, err := transport.NewProposerNode(transport.NodeConfig{
		Proposer: caspaxos.DefaultProposerConfig(100, quorum.MajorityConfig(1, 2, 3)),
	}, tr)
	if err != nil {
		panic(err)
	}
	defer node.Close()

	ctx := context.Background()
	v, err := node.Propose(ctx, "partition/42", caspaxos.CAS(0, []byte("write-region=westeurope")))
	fmt.Println(v.Version, string(v.Data), err)
	_, err = node.Propose(ctx, "partition/42", caspaxos.CAS(0, []byte("write-region=eastus")))
	fmt.Println(err)
	// Output:
	// 1 write-region=westeurope <nil>
	// caspaxos: version mismatch: expected 0, register at v1(23 bytes)
}
