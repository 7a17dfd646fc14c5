//go:build !fmnode_negative_control

package agent

import "github.com/fmnode/fmnode/partition/pebblestore"

// negativeControl is false in every normal build: see negative_control.go.
const negativeControl = false

// partitionStoreOptions are the partition store's options: pebble on the
// data directory's disk, every commit fsynced before it is acknowledged.
func partitionStoreOptions() pebblestore.Options { return pebblestore.Options{} }
