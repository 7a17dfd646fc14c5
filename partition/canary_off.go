//go:build !fmnode_canary_stale

package partition

// canaryStaleApply is the stale-epoch canary's switch: only a test build
// with the fmnode_canary_stale tag (canary_on.go) turns it on, so no binary
// carries it.
const canaryStaleApply = false
