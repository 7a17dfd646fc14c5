//go:build !fmnode_canary_drift

package failover

// canaryNoDriftMargin is the drift canary's switch: only a test build with
// the fmnode_canary_drift tag (canary_drift_on.go) turns it on.
const canaryNoDriftMargin = false
