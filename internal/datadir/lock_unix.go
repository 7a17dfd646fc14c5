//go:build unix

package datadir

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockRetryInterval is how often a busy lock is retried until the timeout.
const lockRetryInterval = 10 * time.Millisecond

// tryLock takes an exclusive flock on f, retrying until timeout has
// passed (0: one attempt). busy is true when another open file description
// (another process, or another Open in this one) holds it.
func tryLock(f *os.File, timeout time.Duration) (busy bool, err error) {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return false, nil
		}
		if errors.Is(err, syscall.EINTR) {
			continue // a signal, not the lock: try again at once
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return false, fmt.Errorf("datadir: lock %s: %w", f.Name(), err)
		}
		if !time.Now().Before(deadline) {
			return true, nil
		}
		time.Sleep(min(lockRetryInterval, time.Until(deadline)))
	}
}
