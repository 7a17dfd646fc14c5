//go:build fmnode_canary_stale

package partition

// canaryStaleApply (test builds with -tags fmnode_canary_stale only): a follower
// applies appends of an epoch older than its own instead of fencing them.
// The simulator's sweeps must catch it (sim/canary_cluster_test.go).
const canaryStaleApply = true
