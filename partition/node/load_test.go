package node

import (
	"context"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/pebblestore"
	"github.com/fmnode/fmnode/quorum"
)

// TestLoad is a manual load test: FMNODE_LOAD=mem or pebble (SYNC=1 for fsync).
func TestLoad(t *testing.T) {
	if os.Getenv("FMNODE_LOAD") == "" {
		t.Skip()
	}
	var stores []partition.Store
	for i := 0; i < 3; i++ {
		if os.Getenv("FMNODE_LOAD") == "pebble" {
			st, err := pebblestore.Open(pebblestore.Options{Dir: t.TempDir(), NoSync: os.Getenv("SYNC") == ""})
			require.NoError(t, err)
			stores = append(stores, st)
		} else {
			stores = append(stores, partition.NewMemStore())
		}
	}
	nodes, stop := startNodes(t, stores)
	defer stop()
	ctx := context.Background()
	rs := []partition.Region{"a", "b", "c"}
	const parts = 1000
	for _, n := range nodes {
		require.NoError(t, n.Do(ctx, func(now time.Duration, h *partition.Host) error {
			for p := partition.ID(0); p < parts; p++ {
				wq := quorum.WriteQuorum{Replicas: rs, WriteRegion: rs[p%3], Members: rs, MinDurability: 2}
				if err := h.Create(now, p, partition.Spec{Level: partition.Level{Consistency: partition.Strong}, Quorum: wq, Epoch: 1}, 0); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	var ops atomic.Uint64
	var mu sync.Mutex
	var lats []time.Duration
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for g := 0; g < 256; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			var local []time.Duration
			for lctx.Err() == nil {
				p := partition.ID(rng.IntN(parts))
				s := time.Now()
				_, err := nodes[p%3].Write(lctx, partition.WriteRequest{Partition: p, Epoch: 1, Key: []byte("k"), Value: make([]byte, 100)})
				if err == nil {
					ops.Add(1)
					local = append(local, time.Since(s))
				}
			}
			mu.Lock()
			lats = append(lats, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	t.Logf("%d ops in 3s = %.0f/s; p50 %v p90 %v p99 %v max %v", ops.Load(), float64(ops.Load())/3, lats[len(lats)/2], lats[len(lats)*9/10], lats[len(lats)*99/100], lats[len(lats)-1])
	for _, n := range nodes {
		t.Logf("%s: commits %d events %d", n.Region(), n.Stats().Commits.Load(), n.Stats().Events.Load())
	}
}
