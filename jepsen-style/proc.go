package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/fmnode/fmnode/internal/childproc"
)

// proc is one agent process (internal/childproc: a process group of its
// own, so kill -9 and SIGSTOP reach all of it, and SIGKILLed when the
// harness dies), SIGKILLed by a watchdog after its lifetime, its output
// appended to a log file.
type proc struct {
	name  string
	pid   int
	log   *os.File
	child *childproc.Child
	done  <-chan struct{} // closed once reaped
	dog   *time.Timer
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
	child, err := childproc.Start(cmd)
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &proc{name: name, pid: child.Pid(), log: logf, child: child, done: child.Done()}
	p.dog = time.AfterFunc(lifetime, p.kill)
	return p, nil
}

// kill is kill -9 of the whole group (SIGCONT first is unnecessary:
// SIGKILL ends a stopped process).
func (p *proc) kill() { p.child.KillGroup() }

func (p *proc) signal(sig syscall.Signal) error {
	if err := p.child.SignalGroup(sig); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	return nil
}

func (p *proc) exited() bool { return p.child.Exited() }

// killWait kills the group and waits at most d for the reaping.
func (p *proc) killWait(d time.Duration) error {
	p.kill()
	defer p.dog.Stop()
	if !p.child.Wait(d) {
		return fmt.Errorf("%s (pid %d) not reaped %v after SIGKILL", p.name, p.pid, d)
	}
	fmt.Fprintf(p.log, "=== harness: %s killed at %s\n", p.name, time.Now().UTC().Format(time.RFC3339Nano))
	p.log.Close()
	return nil
}
