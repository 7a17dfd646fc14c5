package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/dataapi"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/txtdns"
	"github.com/fmnode/fmnode/txtdns/kv"
	"github.com/fmnode/fmnode/txtdns/routing"
)

// demoWorld is one region of the data API over an in-memory backend on
// 127.0.0.1, routed by an in-process publisher: the demo's writers
// without agents. (In-memory backends do not replicate: a failover here
// is a new epoch in the same region.)
type demoWorld struct {
	pub  *txtdns.Publisher
	mems map[string]*dataapi.MemBackend
	cl   *kv.Client
}

const demoTestParts = 4

func newDemoWorld(t *testing.T) *demoWorld {
	pub, err := txtdns.NewPublisher(txtdns.PublisherConfig{Zone: demoZone})
	require.NoError(t, err)
	w := &demoWorld{pub: pub, mems: map[string]*dataapi.MemBackend{}}
	for _, name := range []string{"east"} {
		mem, err := dataapi.NewMemBackend(dataapi.MemConfig{Region: partition.Region(name), WriteRegion: "east"})
		require.NoError(t, err)
		h, err := dataapi.New(dataapi.Config{Backend: mem, Region: partition.Region(name), Partitions: demoTestParts})
		require.NoError(t, err)
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		w.mems[name] = mem
		_, err = pub.SetRegions(txtdns.RegionInfo{Region: name, ConfigVersion: 1, Endpoints: []string{srv.Listener.Addr().String()}})
		require.NoError(t, err)
	}
	w.publish(t, 1, "east")
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	w.cl, err = kv.New(kv.Config{Scheme: "http", HTTP: &http.Client{Transport: tr}, Timeout: 5 * time.Second,
		Routing: routing.Config{Zone: demoZone, Resolver: routing.AuthorityResolver{Authority: pub}, PartitionCount: demoTestParts,
			RedirectPoll: 10 * time.Millisecond, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, MinRefreshInterval: time.Millisecond}})
	require.NoError(t, err)
	return w
}

func (w *demoWorld) publish(t *testing.T, epoch uint64, region string) {
	routes := make([]txtdns.Route, demoTestParts)
	for p := range routes {
		routes[p] = txtdns.Route{Partition: uint32(p + 1), Epoch: epoch, WriteRegion: region, Priority: []string{"east"}, ConfigVersion: 1}
	}
	_, err := w.pub.Apply(routes...)
	require.NoError(t, err)
}

// TestDemoClients: the writers write every partition; at the outage the
// affected ones write until a write lands in a newer epoch, which counts
// as recovered with its time; the read-back finds every acknowledged
// write, and reports as lost one that the store no longer has.
func TestDemoClients(t *testing.T) {
	w := newDemoWorld(t)
	dc, err := newDemoClients(w.cl, demoTestParts, 10, 20*time.Millisecond, 40*time.Millisecond)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dc.start(ctx)
	defer dc.halt()
	require.Eventually(t, func() bool { n, _ := dc.acks(); return n >= 4*demoTestParts }, 10*time.Second, 10*time.Millisecond)

	// Partitions 1 and 2 are in the killed region at epoch 1.
	dc.markAffected(map[uint32]uint64{1: 1, 2: 1})
	killAt := time.Now()
	dc.startOutage(killAt)
	time.Sleep(50 * time.Millisecond)
	done, all := dc.recovered()
	assert.Equal(t, 0, done, "nothing in a newer epoch yet")
	assert.Equal(t, 2, all)
	// The failover: epoch 2.
	require.NoError(t, w.mems["east"].SetWriteRegion(2, "east"))
	w.publish(t, 2, "east")
	failedOver := time.Now()
	require.Eventually(t, func() bool { d, a := dc.recovered(); return d == a }, 10*time.Second, 5*time.Millisecond)
	for _, wr := range dc.writers {
		wr.mu.Lock()
		if wr.affected {
			assert.Equal(t, uint64(2), wr.firstNewEpoch, "partition %d", wr.part)
			assert.False(t, wr.firstNew.Before(failedOver), "partition %d: a write in epoch 2 before the failover", wr.part)
		} else {
			assert.True(t, wr.firstNew.IsZero(), "partition %d is not affected", wr.part)
		}
		wr.mu.Unlock()
	}
	assert.Positive(t, dc.changedBytes(), "writes acknowledged after the kill")
	dc.halt()

	lost, verified, unreadable := dc.verify(ctx, 4)
	n, _ := dc.acks()
	assert.Empty(t, lost)
	assert.Equal(t, n, verified)
	assert.Zero(t, unreadable)

	// An acknowledged write the store lost is reported, in its partition.
	wr := dc.writers[2]
	wr.mu.Lock()
	victim := wr.key(wr.acked[0].n)
	wr.mu.Unlock()
	for _, m := range w.mems {
		_, err := m.Write(ctx, partition.WriteRequest{Partition: partition.ID(wr.part), Epoch: 2, Key: []byte(victim), Delete: true})
		require.NoError(t, err)
	}
	lost, verified, _ = dc.verify(ctx, 4)
	assert.Equal(t, map[uint32]int{wr.part: 1}, lost)
	assert.Equal(t, n-1, verified)
}
