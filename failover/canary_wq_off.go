//go:build !fmnode_canary_wq

package failover

// canaryIgnoreWriteQuorum is the write-quorum canary's switch: only a test
// build with the fmnode_canary_wq tag (canary_wq_on.go) turns it on, so no
// binary carries it.
const canaryIgnoreWriteQuorum = false
