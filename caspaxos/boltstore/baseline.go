package boltstore

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/bbolt"
)

// FsyncBaseline measures, for about d, how many single-record bbolt update
// transactions (each ending in fsync) one writer completes per second in
// dir. It is the floor group commit is judged against: `fmnode bench cas`
// prints it as fsync_baseline_per_sec next to the store's own rate. The
// scratch file is removed afterwards.
func FsyncBaseline(dir string, d time.Duration) (perSec float64, err error) {
	if d <= 0 {
		return 0, fmt.Errorf("boltstore: fsync baseline: duration %v must be positive", d)
	}
	if err := os.MkdirAll(dir, dirMode); err != nil { // scratch: no durability needed
		return 0, fmt.Errorf("boltstore: fsync baseline: %w", err)
	}
	scratch, err := os.MkdirTemp(dir, "fsync-baseline-*")
	if err != nil {
		return 0, fmt.Errorf("boltstore: fsync baseline: %w", err)
	}
	defer func() {
		if rerr := os.RemoveAll(scratch); err == nil && rerr != nil {
			err = fmt.Errorf("boltstore: fsync baseline: cleanup: %w", rerr)
		}
	}()
	db, err := bbolt.Open(filepath.Join(scratch, "baseline.db"), fileMode, &bbolt.Options{Timeout: DefaultLockTimeout})
	if err != nil {
		return 0, fmt.Errorf("boltstore: fsync baseline: %w", err)
	}
	defer func() {
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("boltstore: fsync baseline: %w", cerr)
		}
	}()
	value := make([]byte, 64)
	var n int
	start := time.Now()
	for time.Since(start) < d {
		err := db.Update(func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("baseline"))
			if err != nil {
				return err
			}
			value[0] = byte(n)
			return b.Put([]byte("key"), value)
		})
		if err != nil {
			return 0, fmt.Errorf("boltstore: fsync baseline: %w", err)
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
