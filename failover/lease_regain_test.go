package failover

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Lease runs: a new LeaseGen each time a lease is granted while none
// held, never while one holds (renewals keep the run).
func TestLivenessLeaseGen(t *testing.T) {
	cfg := FastConfig()
	h := newMgrHarness(t, cfg, 1)
	east := h.mgrs[1].Liveness()
	gen := east.LeaseGen()
	require.Equal(t, uint64(1), gen, "the first lease is the first run")
	for i := 0; i < 100; i++ {
		h.step(100 * time.Millisecond)
		require.True(t, east.LeaseValid(h.now))
		require.Equal(t, gen, east.LeaseGen(), "renewals keep the run")
	}
	h.cut[1] = true
	for east.LeaseValid(h.now) {
		h.step(100 * time.Millisecond)
	}
	h.step(time.Second)
	require.Equal(t, gen, east.LeaseGen(), "a lapse alone starts no run")
	h.cut[1] = false
	for i := 0; i < 100 && !east.LeaseValid(h.now); i++ {
		h.step(100 * time.Millisecond)
	}
	require.True(t, east.LeaseValid(h.now))
	assert.Equal(t, gen+1, east.LeaseGen(), "a regained lease is a new run")
	assert.GreaterOrEqual(t, east.LeaseSince(), h.now-100*time.Millisecond)
}

// A write region whose lease lapsed (here: a gray verdict withholds it)
// and whose partitions were taken over while it heard nothing of it (the
// learn messages lost) regains its lease when the verdict clears. Its
// replicas must not count that lease at the old epoch: the manager first
// reasserts the register value it knows, the CAS conflicts, and it learns
// the new epoch and follows. Without the reassert it would keep believing
// it is the write region of epoch 1 on a valid lease (strong reads of a
// stale lineage), since nothing else makes it read the register.
func TestRegainedLeaseRevalidatesBeforeServing(t *testing.T) {
	cfg := FastConfig()
	h := newMgrHarness(t, cfg, 2)
	east, west, north := h.mgrs[1], h.mgrs[2], h.mgrs[3]
	gen := east.Liveness().LeaseGen()
	for name := range h.reg {
		v, ok := h.validated[1][name]
		require.True(t, ok)
		require.Equal(t, ActValidateLease, v.Kind)
		require.Equal(t, gen, v.LeaseGen)
		require.Equal(t, Epoch(1), v.Epoch)
	}

	h.missLearn[1] = true
	for _, name := range []string{"p-000", "p-001"} {
		west.SetGray(h.now, name, "test: stalled")
		north.SetGray(h.now, name, "test: stalled")
	}
	// The gray verdict withholds east's lease; the takeover waits for it.
	moved := func() bool {
		for _, e := range h.reg {
			if e.state.Epoch < 2 {
				return false
			}
		}
		return true
	}
	for i := 0; i < 200 && !moved(); i++ {
		h.step(100 * time.Millisecond)
		if moved() {
			break
		}
	}
	require.True(t, moved(), "taken over on the gray verdict")
	t.Logf("taken over at %v; east's lease run %d until %v", h.now, east.Liveness().LeaseGen(), east.Liveness().LeaseUntil())
	require.False(t, east.Liveness().LeaseValid(h.now), "east's lease lapsed before the takeover")
	for name := range h.reg {
		st, _, _ := east.State(name)
		require.Equal(t, Epoch(1), st.Epoch, "east missed the takeover of %s", name)
	}

	// The verdict clears: east regains its lease, a new run.
	for _, name := range []string{"p-000", "p-001"} {
		west.SetGray(h.now, name, "")
		north.SetGray(h.now, name, "")
	}
	regained := false
	for i := 0; i < 100; i++ {
		h.step(100 * time.Millisecond)
		live := east.Liveness()
		if live.LeaseValid(h.now) {
			regained = true
		}
		for name, e := range h.reg {
			// Never a valid lease validated at an epoch the register left.
			if v, ok := h.validated[1][name]; ok && live.LeaseValid(h.now) && v.LeaseGen == live.LeaseGen() {
				assert.Equal(t, e.state.Epoch, v.Epoch, "%s: east counts its lease at epoch %d, the register is at %d", name, v.Epoch, e.state.Epoch)
			}
		}
	}
	require.True(t, regained, "east regained its lease")
	require.Greater(t, east.Liveness().LeaseGen(), gen)
	for name, e := range h.reg {
		st, ver, _ := east.State(name)
		assert.Equal(t, e.state.Epoch, st.Epoch, "east learned the takeover of %s through its reassert", name)
		assert.Equal(t, e.version, ver, name)
		rs := h.replicas[1][name]
		assert.False(t, rs.WriteRegion, "east's replica of %s follows", name)
		assert.Equal(t, e.state.Epoch, rs.Epoch, name)
	}
	var reasserts int
	for _, p := range h.proposed {
		if p.Kind == DecideReassert {
			reasserts++
			assert.Equal(t, Region("east"), p.Target)
		}
	}
	assert.Equal(t, len(h.reg), reasserts, "one reassert per partition, lost to the takeover")
	for _, ev := range east.Events() {
		if ev.Kind == DecideReassert {
			t.Logf("%v %s: %s", ev.At, ev.Partition, ev.Text)
		}
	}
}
