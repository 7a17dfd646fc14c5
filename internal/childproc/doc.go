// Package childproc starts child processes that never outlive the process
// that started them, for everything in the project that spawns agents:
// the local demo cluster (cmd/fmnode), the jepsen-style harness and the
// real-process tests (internal/proctest).
//
// A child gets a process group of its own, so that one kill(-pgid)
// reaches whatever it starts, and SIGSTOP/SIGCONT pause all of it. Linux's
// parent-death signal (PR_SET_PDEATHSIG) SIGKILLs it when its parent dies,
// even by SIGKILL, where no deferred clean-up runs. That signal fires when
// the thread that forked the child exits, not the process, and the Go
// runtime may end an idle thread: so the child is started from a goroutine
// locked to its thread, which stays there until the child is reaped.
//
// Lifetimes (watchdogs) and logs stay with the callers, which differ: a
// test fails through testing.TB, a program returns an error.
package childproc
