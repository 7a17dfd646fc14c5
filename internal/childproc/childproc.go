package childproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// ErrExited is returned when a signal is asked of a child already reaped.
var ErrExited = errors.New("childproc: child has exited")

// Child is a started child process. Its methods are safe to call from any
// goroutine.
type Child struct {
	pid  int
	proc *os.Process
	done chan struct{} // closed once reaped; state and err are set before
	// state and err are cmd.Wait's results, valid once done is closed.
	state *os.ProcessState
	err   error
}

// Start starts cmd in a process group of its own, SIGKILLed if this
// process dies, and reaps it in the background. cmd.SysProcAttr's other
// fields are kept. The caller must not call cmd.Wait.
func Start(cmd *exec.Cmd) (*Child, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	c := &Child{done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal follows the forking thread: keep it
		// until the child is reaped.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		err := cmd.Wait()
		c.state, c.err = cmd.ProcessState, err
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("childproc: start %s: %w", cmd.Path, err)
	}
	c.pid, c.proc = cmd.Process.Pid, cmd.Process
	return c, nil
}

// Pid is the child's process id, which is also its process group's id.
func (c *Child) Pid() int { return c.pid }

// Done is closed once the child has been reaped.
func (c *Child) Done() <-chan struct{} { return c.done }

// Exited reports whether the child has been reaped.
func (c *Child) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Result is the child's exit state and cmd.Wait's error; nil, nil while it
// runs.
func (c *Child) Result() (*os.ProcessState, error) {
	if !c.Exited() {
		return nil, nil
	}
	return c.state, c.err
}

// ExitCode is the child's exit code, 128+signal when a signal ended it, -1
// while it runs or when it could not be waited for.
func (c *Child) ExitCode() int {
	state, _ := c.Result()
	if state == nil {
		return -1
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return state.ExitCode()
}

// Wait waits up to d for the child to be reaped and reports whether it was.
func (c *Child) Wait(d time.Duration) bool {
	if c.Exited() { // first: with d zero both cases below are ready
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-c.done:
		return true
	case <-timer.C:
		return false
	}
}

// Signal sends sig to the child alone (a SIGHUP for a reload, a SIGTERM
// for a clean stop), not to its group. os.Process signals through a pidfd
// where there is one, so a pid reused after the reaping is never hit.
func (c *Child) Signal(sig syscall.Signal) error {
	if c.Exited() {
		return ErrExited
	}
	if err := c.proc.Signal(sig); err != nil {
		return fmt.Errorf("childproc: signal %v to pid %d: %w", sig, c.pid, err)
	}
	return nil
}

// SignalGroup sends sig to the child's whole group (SIGSTOP and SIGCONT
// for a pause, SIGKILL for a crash), and ErrExited once the child has been
// reaped: its group id may name another group by then.
func (c *Child) SignalGroup(sig syscall.Signal) error {
	if c.Exited() {
		return ErrExited
	}
	if err := syscall.Kill(-c.pid, sig); err != nil {
		return fmt.Errorf("childproc: signal %v to group %d: %w", sig, c.pid, err)
	}
	return nil
}

// KillGroup SIGKILLs the child's group even after the child was reaped:
// the group, and its id, live on while any member does, which is how what
// the child left running is reached. Once the group is empty its id could
// be reused, so callers that cannot tolerate that use SignalGroup.
func (c *Child) KillGroup() { _ = syscall.Kill(-c.pid, syscall.SIGKILL) }
