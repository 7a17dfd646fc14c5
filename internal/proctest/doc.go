// Package proctest runs real child processes from tests: the end-to-end
// test of the agent now, the demo and a jepsen-style harness later. Its
// one promise is that nothing a test starts outlives it.
//
//	bin := proctest.Build(t, "github.com/fmnode/fmnode/cmd/fmnode")
//	ports := proctest.FreePorts(t, 3)
//	p := proctest.Start(t, proctest.ProcSpec{Name: "n1", Path: bin, Args: args})
//	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
//	defer cancel()
//	require.NoError(t, proctest.WaitTCP(ctx, addr), p.Tail())
//	code, err := p.Stop(5 * time.Second)
//
// # Build
//
// Build compiles a main package once per run of the test binary (the
// binaries are cached in a temporary directory named after the test
// binary's pid; Main removes it at the end of the run, and without Main
// the next run's first Build removes the directories of runs that are
// gone). It uses the go command of GOROOT, else of PATH, and fails
// unless that is the toolchain that built the test (runtime.Version): a
// child built by another toolchain is a difference nobody looks for. It
// mirrors the test binary's -race and -tags, so `go test -race` runs the
// children under the race detector too.
//
// # Processes
//
// Start runs a child in a process group of its own, with stdout and
// stderr (one pipe, so their order is kept) going to a log file and the
// last bytes kept in memory (Tail). Three things bound its life:
//
//   - t.Cleanup SIGKILLs the whole group (the child and whatever it
//     started that did not leave the group) and waits for the child; when
//     the test failed it logs every child's tail.
//   - A watchdog SIGKILLs the group at the spec's Timeout or shortly
//     before the test's deadline, whichever is first: `go test -timeout`
//     panics and exits without running cleanups, and the children would
//     stay. The cleanup then fails the test, saying so.
//   - The child gets SIGKILL if the test process dies (Linux's
//     PR_SET_PDEATHSIG; it is started from a goroutine that keeps its OS
//     thread until the child is reaped, because the signal follows the
//     thread, not the process). This covers the child only; its own
//     children are the group kill's.
//
// Exit codes follow the shell: a child killed by a signal reports 128
// plus the signal number (143 for SIGTERM, 137 for SIGKILL).
//
// # Addresses
//
// FreePorts hands out ports on 127.0.0.1 that were free a moment ago
// (another process may take one before the child binds it; the wait then
// fails with the child's log). WaitTCP and WaitHTTP poll until a child
// accepts, bounded by their context (or DefaultWaitTimeout if it has no
// deadline), and say what they last saw when they give up.
//
// The package is for Unix (process groups and signals) and uses Linux's
// parent-death signal, through internal/childproc, which the demo cluster
// and the jepsen-style harness start their agents with too.
package proctest
