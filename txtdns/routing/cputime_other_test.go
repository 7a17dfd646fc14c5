//go:build !linux

package routing

import "time"

func threadCPU() (func() time.Duration, func()) {
	return func() time.Duration { return 0 }, func() {}
}
