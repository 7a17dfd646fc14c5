package sim

import "fmt"

// FaultKind names one kind of injected fault. Runs count injections by
// kind so that a sweep can show every kind actually happened (a fault
// injector that silently injects nothing passes every test).
type FaultKind uint8

// Fault kinds. Message faults are counted per affected message; the others
// per episode.
const (
	FaultLoss FaultKind = iota
	FaultDuplicate
	FaultReorder
	FaultDelaySpike
	FaultPartitionNode
	FaultPartitionRegion
	FaultPartitionMajority
	FaultPartitionRing
	FaultPartitionBridge
	FaultPartitionOneWay
	FaultCrash
	FaultPause
	FaultClockDrift
	numFaultKinds
)

func (k FaultKind) String() string {
	switch k {
	case FaultLoss:
		return "loss"
	case FaultDuplicate:
		return "duplicate"
	case FaultReorder:
		return "reorder"
	case FaultDelaySpike:
		return "delay_spike"
	case FaultPartitionNode:
		return "partition_node"
	case FaultPartitionRegion:
		return "partition_region"
	case FaultPartitionMajority:
		return "partition_majority"
	case FaultPartitionRing:
		return "partition_ring"
	case FaultPartitionBridge:
		return "partition_bridge"
	case FaultPartitionOneWay:
		return "partition_oneway"
	case FaultCrash:
		return "crash"
	case FaultPause:
		return "pause"
	case FaultClockDrift:
		return "clock_drift"
	}
	return fmt.Sprintf("FaultKind(%d)", uint8(k))
}

// FaultKinds lists every kind in a fixed order.
func FaultKinds() []FaultKind {
	out := make([]FaultKind, numFaultKinds)
	for i := range out {
		out[i] = FaultKind(i)
	}
	return out
}

// FaultCounts counts injections per kind.
type FaultCounts [numFaultKinds]uint64

// Map renders the counts with every kind present (a stable JSON schema).
func (c *FaultCounts) Map() map[string]uint64 {
	m := make(map[string]uint64, numFaultKinds)
	for k := range c {
		m[FaultKind(k).String()] = c[k]
	}
	return m
}

// Total sums every kind.
func (c *FaultCounts) Total() uint64 {
	var t uint64
	for _, n := range c {
		t += n
	}
	return t
}

// Add adds o into c.
func (c *FaultCounts) Add(o *FaultCounts) {
	for k := range c {
		c[k] += o[k]
	}
}
