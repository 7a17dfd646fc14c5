//go:build fmnode_canary_drift

package failover

// canaryNoDriftMargin (test builds with -tags fmnode_canary_drift only):
// the takeover waits for the lease alone, without MaxClockDrift, so a
// write region whose clock runs slow may still serve under its lease
// after the new one starts. The simulator's sweeps must catch it.
const canaryNoDriftMargin = true
