//go:build !unix

package datadir

import (
	"fmt"
	"os"
	"time"
)

// tryLock fails where flock is unavailable: without the lock two agents
// could share a directory, and the agent refuses to run like that.
func tryLock(f *os.File, _ time.Duration) (bool, error) {
	return false, fmt.Errorf("%w: datadir: lock %s: no flock on this platform", ErrInvalid, f.Name())
}
