package transport

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/fmnode/fmnode/caspaxos"
)

// BenchmarkClusterCAS runs read-modify-write CAS from parallel callers on
// three acceptors, in memory and over loopback TCP with memory stores (so
// that it measures the transport, not the disk).
func BenchmarkClusterCAS(b *testing.B) {
	for _, kind := range []string{"mem", "tcp"} {
		b.Run(kind, func(b *testing.B) {
			var tr Transport
			ids := []caspaxos.NodeID{1, 2, 3}
			if kind == "mem" {
				net := NewMemNetwork()
				for _, id := range ids {
					a, err := net.StartAcceptor(AcceptorConfig{ID: id, Store: caspaxos.NewMemoryStore()})
					if err != nil {
						b.Fatal(err)
					}
					defer a.Close()
				}
				tr = net.Dial(0)
			} else {
				peers := map[caspaxos.NodeID]string{}
				for _, id := range ids {
					srv, err := ListenAcceptor(ServerConfig{AcceptorConfig: AcceptorConfig{ID: id, Store: caspaxos.NewMemoryStore()}, Addr: "127.0.0.1:0"})
					if err != nil {
						b.Fatal(err)
					}
					defer srv.Close()
					peers[id] = srv.Addr().String()
				}
				tcp, err := DialTCP(ClientConfig{Peers: peers})
				if err != nil {
					b.Fatal(err)
				}
				if err := tcp.WaitConnected(context.Background()); err != nil {
					b.Fatal(err)
				}
				tr = tcp
			}
			defer tr.Close()
			n, err := NewProposerNode(NodeConfig{Proposer: caspaxos.DefaultProposerConfig(100, testProposerConfig(100, ids...).Quorum)}, tr)
			if err != nil {
				b.Fatal(err)
			}
			defer n.Close()
			const keys = 1000
			versions := make([]atomic.Uint64, keys)
			names := make([]string, keys)
			for i := range names {
				names[i] = fmt.Sprintf("k%06d", i)
			}
			var seq atomic.Uint64
			b.SetParallelism(32) // 32 x GOMAXPROCS callers
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					k := int(seq.Add(7919) % keys)
					v, err := n.Propose(ctx, names[k], caspaxos.CAS(versions[k].Load(), []byte("value")))
					var mm *caspaxos.VersionMismatchError
					switch {
					case err == nil:
						versions[k].Store(max(versions[k].Load(), v.Version))
					case errors.As(err, &mm):
						versions[k].Store(max(versions[k].Load(), mm.Current.Version))
					default:
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			st := n.Stats()
			b.ReportMetric(float64(st.Rounds)/float64(max(1, st.Commits)), "rounds/commit")
		})
	}
}
