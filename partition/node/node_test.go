package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/pebblestore"
	"github.com/fmnode/fmnode/quorum"
)

func startNodes(t *testing.T, stores []partition.Store) ([]*Node, context.CancelFunc) {
	t.Helper()
	net := NewMemNetwork()
	regions := []partition.Region{"a", "b", "c"}
	ctx, cancel := context.WithCancel(context.Background())
	var nodes []*Node
	var wg sync.WaitGroup
	for i, reg := range regions {
		cfg := partition.DefaultConfig(reg, uint64(time.Now().UnixNano()))
		n, err := New(Config{Host: cfg, Store: stores[i], Transport: net})
		require.NoError(t, err)
		net.Attach(n)
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); _ = n.Run(ctx) }()
	}
	return nodes, func() { cancel(); wg.Wait() }
}

func TestNodesReplicate(t *testing.T) {
	for _, backend := range []string{"mem", "pebble"} {
		t.Run(backend, func(t *testing.T) {
			var stores []partition.Store
			for i := 0; i < 3; i++ {
				if backend == "mem" {
					stores = append(stores, partition.NewMemStore())
					continue
				}
				st, err := pebblestore.Open(pebblestore.Options{Dir: t.TempDir()})
				require.NoError(t, err)
				t.Cleanup(func() { st.Close() })
				stores = append(stores, st)
			}
			nodes, stop := startNodes(t, stores)
			defer stop()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			rs := []partition.Region{"a", "b", "c"}
			for p := partition.ID(0); p < 6; p++ {
				wq := quorum.WriteQuorum{Replicas: rs, WriteRegion: rs[p%3], Members: rs, MinDurability: 2}
				for _, n := range nodes {
					require.NoError(t, n.Do(ctx, func(now time.Duration, h *partition.Host) error {
						if err := h.Create(now, p, partition.Spec{Level: partition.Level{Consistency: partition.Strong}, Quorum: wq, Epoch: 1}, 0); err != nil {
							return err
						}
						return h.SetLease(p, now+time.Hour)
					}))
				}
			}
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for g := 0; g < 16; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 50; i++ {
						p := partition.ID((g + i) % 6)
						_, err := nodes[p%3].Write(ctx, partition.WriteRequest{Partition: p, Epoch: 1, Key: []byte(fmt.Sprint("k", g)), Value: []byte(fmt.Sprint(i))})
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			for g := 0; g < 16; g++ {
				p := partition.ID((g + 49) % 6)
				rep, err := nodes[p%3].Read(ctx, partition.ReadRequest{Partition: p, Key: []byte(fmt.Sprint("k", g)), Consistency: partition.Strong, Epoch: 1})
				require.NoError(t, err)
				require.Equal(t, "49", string(rep.Value))
			}
		})
	}
}
