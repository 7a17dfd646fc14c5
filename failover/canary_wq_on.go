//go:build fmnode_canary_wq

package failover

// canaryIgnoreWriteQuorum (test builds with -tags fmnode_canary_wq only):
// a region outside the write quorum is a candidate for a takeover, so it
// may be promoted without writes that were acknowledged. The simulator's
// sweeps must catch it (sim/canary_cluster_test.go).
const canaryIgnoreWriteQuorum = true
