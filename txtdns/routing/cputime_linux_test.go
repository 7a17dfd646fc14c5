package routing

import (
	"runtime"
	"syscall"
	"time"
)

// threadCPU returns the CPU time the calling OS thread has used, and a
// function that unlocks the goroutine from the thread. Benchmarks report
// CPU time per operation next to wall time because this machine is shared:
// wall time includes the time other processes hold the CPU.
func threadCPU() (func() time.Duration, func()) {
	runtime.LockOSThread()
	read := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
			return 0
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return read, runtime.UnlockOSThread
}
