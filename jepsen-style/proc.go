package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// proc is one agent process: in a process group of its own (kill -9 and
// SIGSTOP reach all of it), SIGKILLed when the harness dies (Linux's
// parent-death signal) and by a watchdog after its lifetime, its output
// appended to a log file. internal/proctest does the same for tests; the
// harness is a program, so it has its own.
type proc struct {
	name string
	pid  int
	log  *os.File
	done chan struct{} // closed once reaped
	err  error         // the exit, once done
	dog  *time.Timer
}

func startProc(name, bin string, args, env []string, logPath string, lifetime time.Duration) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", name, err)
	}
	fmt.Fprintf(logf, "=== harness: start %s %v at %s\n", bin, args, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &proc{name: name, log: logf, done: make(chan struct{})}
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
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		logf.Close()
		return nil, fmt.Errorf("%s: start: %w", name, err)
	}
	p.pid = cmd.Process.Pid
	p.dog = time.AfterFunc(lifetime, p.kill)
	return p, nil
}

// kill is kill -9 of the whole group (SIGCONT first is unnecessary:
// SIGKILL ends a stopped process).
func (p *proc) kill() { _ = syscall.Kill(-p.pid, syscall.SIGKILL) }

func (p *proc) signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return fmt.Errorf("%s: exited", p.name)
	default:
	}
	return syscall.Kill(-p.pid, sig)
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// killWait kills the group and waits at most d for the reaping.
func (p *proc) killWait(d time.Duration) error {
	p.kill()
	defer p.dog.Stop()
	select {
	case <-p.done:
		fmt.Fprintf(p.log, "=== harness: %s killed at %s\n", p.name, time.Now().UTC().Format(time.RFC3339Nano))
		p.log.Close()
		return nil
	case <-time.After(d):
		return fmt.Errorf("%s (pid %d) not reaped %v after SIGKILL", p.name, p.pid, d)
	}
}
