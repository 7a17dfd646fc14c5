//go:build unix

package boltstore

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockRetryInterval is how often a busy lock is retried until the timeout.
const lockRetryInterval = 10 * time.Millisecond

// lockFile takes the same exclusive flock bbolt takes, so checkFile reads
// the meta pages only while no other process has the store open (and so
// cannot be halfway through writing one). The lock is released when f is
// closed, before bbolt takes it again.
func lockFile(f *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return fmt.Errorf("boltstore: lock %s: %w", f.Name(), err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s (waited %v)", ErrLocked, f.Name(), timeout)
		}
		time.Sleep(lockRetryInterval)
	}
}
