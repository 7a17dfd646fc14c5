//go:build !unix

package boltstore

import (
	"os"
	"time"
)

// lockFile is a no-op where flock is unavailable: checkFile then reads the
// meta pages unlocked, and bbolt's own lock still guards every write.
func lockFile(*os.File, time.Duration) error { return nil }
