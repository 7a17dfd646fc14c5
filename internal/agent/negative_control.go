//go:build fmnode_negative_control

package agent

import (
	"github.com/cockroachdb/pebble/vfs"

	"github.com/fmnode/fmnode/partition/pebblestore"
)

// negativeControl is the jepsen-style harness's negative control, compiled
// only with -tags fmnode_negative_control and never into the normal
// binary: the partition store lives in memory, so every reply that
// depends on a replica's persisted state leaves before (indeed without)
// its fsync, and a kill -9 loses what the replica acknowledged. A harness
// that runs this build and passes cannot find a lost acknowledged write.
const negativeControl = true

func partitionStoreOptions() pebblestore.Options { return pebblestore.Options{FS: vfs.NewMem()} }
