package proctest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fmnode/fmnode/internal/childproc"
)

const (
	// DefaultTailBytes is how much of a child's output Tail keeps.
	DefaultTailBytes = 16 << 10
	// MaxTailBytes bounds ProcSpec.TailBytes.
	MaxTailBytes = 4 << 20
	// DefaultTimeout is a child's longest life when the spec sets none
	// (and the test's deadline is later or there is none).
	DefaultTimeout = 10 * time.Minute
	// KillWait bounds the wait for a SIGKILLed child to be reaped; a child
	// that takes longer is stuck in the kernel, and the test says so.
	KillWait = 10 * time.Second
	// drainWait bounds the wait for the output pipe to close once the
	// group is dead: a process that left the group may hold it open.
	drainWait = 2 * time.Second
)

// Errors of the Proc methods.
var (
	// ErrTimeout: the child did not exit within the time given.
	ErrTimeout = errors.New("proctest: timed out")
	// ErrKilled: Stop had to SIGKILL the child.
	ErrKilled = errors.New("proctest: killed after the stop timeout")
	// ErrExited: the child has already exited.
	ErrExited = errors.New("proctest: already exited")
)

// ProcSpec describes a child process.
type ProcSpec struct {
	// Name names the child in messages and its default log file;
	// required, of [A-Za-z0-9._-].
	Name string
	// Path is the executable; required.
	Path string
	// Args are the arguments after the program name.
	Args []string
	// Env is the child's whole environment, as exec.Cmd.Env: nil means
	// the test's.
	Env []string
	// Dir is the working directory; empty means the test's.
	Dir string
	// LogFile receives stdout and stderr; empty means Name+".log" in a
	// t.TempDir (gone after the test: set LogFile to keep it).
	LogFile string
	// TailBytes is how much output Tail keeps; zero means
	// DefaultTailBytes, at most MaxTailBytes.
	TailBytes int
	// ExtraFiles are given to the child as descriptors 3, 4, ... (as
	// exec.Cmd.ExtraFiles); the caller closes its copies after Start.
	ExtraFiles []*os.File
	// Timeout is the child's longest life, after which the watchdog
	// SIGKILLs its group and the test fails; zero means DefaultTimeout.
	// It is cut to end shortly before the test's deadline.
	Timeout time.Duration
}

// Proc is a running (or exited) child started by Start.
type Proc struct {
	t       testing.TB
	name    string
	pid     int
	child   *childproc.Child
	logPath string
	out     *ring
	log     *os.File
	pr      *os.File // read end of the output pipe

	drained  chan struct{} // closed when the output copy has ended
	stopDog  chan struct{}
	dogFired atomic.Bool
	lifetime time.Duration
	cleanup  sync.Once
}

// Start starts the child spec describes, in a process group of its own,
// and registers the cleanup that kills the group (see the package doc).
// It fails the test if the spec is invalid or the child cannot start.
func Start(t testing.TB, spec ProcSpec) *Proc {
	t.Helper()
	if err := spec.validate(); err != nil {
		t.Fatalf("%v", err)
	}
	logPath := spec.LogFile
	if logPath == "" {
		// Before the cleanup below is registered, so that the directory
		// is removed after it (cleanups run last-in first-out).
		logPath = filepath.Join(t.TempDir(), spec.Name+".log")
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("proctest: %s: log file: %v", spec.Name, err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		logFile.Close()
		t.Fatalf("proctest: %s: %v", spec.Name, err)
	}
	tailBytes := spec.TailBytes
	if tailBytes == 0 {
		tailBytes = DefaultTailBytes
	}
	p := &Proc{
		t: t, name: spec.Name, logPath: logPath, log: logFile, pr: pr,
		out:     &ring{max: tailBytes},
		drained: make(chan struct{}),
		stopDog: make(chan struct{}),
	}
	p.lifetime = lifetime(t, spec.Timeout)

	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env, cmd.Dir, cmd.ExtraFiles = spec.Env, spec.Dir, spec.ExtraFiles
	// One pipe for both, so the log keeps their interleaving; an *os.File
	// is handed to the child as is, with no copying goroutine of exec's.
	cmd.Stdout, cmd.Stderr = pw, pw
	child, err := childproc.Start(cmd)
	pw.Close() // the child has its copy; EOF comes when every holder exits
	if err != nil {
		pr.Close()
		logFile.Close()
		t.Fatalf("proctest: start %s (%s): %v", spec.Name, spec.Path, err)
	}
	p.pid, p.child = child.Pid(), child
	go p.copyOutput()
	go p.watchdog()
	t.Cleanup(p.finish)
	return p
}

func (s ProcSpec) validate() error {
	if s.Name == "" {
		return errors.New("proctest: ProcSpec.Name: must be set")
	}
	if sanitize(s.Name) != s.Name || strings.HasPrefix(s.Name, ".") {
		return fmt.Errorf("proctest: ProcSpec.Name: must be of [A-Za-z0-9._-] and not start with '.', got %q", s.Name)
	}
	if s.Path == "" {
		return fmt.Errorf("proctest: ProcSpec.Path: must be set (child %s)", s.Name)
	}
	if s.TailBytes < 0 || s.TailBytes > MaxTailBytes {
		return fmt.Errorf("proctest: ProcSpec.TailBytes: must be in 0..%d, got %d (child %s)", MaxTailBytes, s.TailBytes, s.Name)
	}
	if s.Timeout < 0 {
		return fmt.Errorf("proctest: ProcSpec.Timeout: must not be negative, got %v (child %s)", s.Timeout, s.Name)
	}
	return nil
}

// deadline is the test's deadline, for a testing.TB that has one.
func deadline(t testing.TB) (time.Time, bool) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}

// deadlineMargin is how long before the test's deadline the watchdog
// fires: enough for the cleanups and the failure report, and a share of
// a short timeout rather than all of it.
func deadlineMargin(left time.Duration) time.Duration {
	return min(max(left/20, time.Second), 10*time.Second)
}

func lifetime(t testing.TB, timeout time.Duration) time.Duration {
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if dl, ok := deadline(t); ok {
		left := time.Until(dl)
		if cut := left - deadlineMargin(left); cut < timeout {
			timeout = max(cut, 0)
		}
	}
	return timeout
}

func (p *Proc) copyOutput() {
	defer close(p.drained)
	// A log write error (disk full) must not stop the draining, or the
	// child blocks on a full pipe; the tail still gets everything.
	w := io.MultiWriter(p.out, errorlessWriter{p.log})
	io.Copy(w, p.pr)
}

type errorlessWriter struct{ w io.Writer }

func (e errorlessWriter) Write(b []byte) (int, error) {
	e.w.Write(b)
	return len(b), nil
}

func (p *Proc) watchdog() {
	timer := time.NewTimer(p.lifetime)
	defer timer.Stop()
	select {
	case <-timer.C:
		p.dogFired.Store(true)
		p.killGroup()
	case <-p.stopDog:
	}
}

// killGroup SIGKILLs the child's process group. The group outlives its
// leader while a member is alive, and its id is not reused while it
// exists, so this also reaches what the child left running after it
// exited.
func (p *Proc) killGroup() { p.child.KillGroup() }

// finish is the cleanup: kill the group, reap, drain, report.
func (p *Proc) finish() {
	p.cleanup.Do(func() {
		close(p.stopDog)
		p.killGroup()
		if !p.waitDone(KillWait) {
			p.t.Errorf("proctest: %s not reaped %v after SIGKILL", p, KillWait)
		}
		select {
		case <-p.drained:
		case <-time.After(drainWait):
			// Someone outside the group holds the pipe: stop reading.
			p.pr.Close()
			<-p.drained
		}
		p.pr.Close()
		p.log.Close()
		if p.dogFired.Load() {
			p.t.Errorf("proctest: %s was still running after %v: the watchdog killed its group", p, p.lifetime)
		}
		if p.t.Failed() {
			p.t.Logf("proctest: %s, %s; log %s; last output:\n%s", p, p.status(), p.logPath, p.Tail())
		}
	})
}

func (p *Proc) waitDone(d time.Duration) bool {
	// Done first: with d zero both cases below are ready, and select
	// would pick either.
	if !p.Exited() {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-p.child.Done():
		case <-timer.C:
			return false
		}
	}
	// The child is reaped; its last output may still be in the pipe. A
	// caller reading Tail next must see it (bounded: a grandchild may
	// hold the pipe open).
	select {
	case <-p.drained:
	case <-time.After(drainWait):
	}
	return true
}

// String is the child's name and pid.
func (p *Proc) String() string { return fmt.Sprintf("%s (pid %d)", p.name, p.pid) }

// PID is the child's process id, which is also its process group id.
func (p *Proc) PID() int { return p.pid }

// LogFile is the path of the child's log.
func (p *Proc) LogFile() string { return p.logPath }

// Done is closed when the child has exited, for a wait that should end
// early if the child dies.
func (p *Proc) Done() <-chan struct{} { return p.child.Done() }

// Exited reports whether the child has exited (and been reaped).
func (p *Proc) Exited() bool { return p.child.Exited() }

// Tail is the end of the child's output (stdout and stderr), at most
// TailBytes, with a note of what was left out.
func (p *Proc) Tail() string {
	s, dropped := p.out.tail()
	if dropped > 0 {
		return fmt.Sprintf("[... %d earlier bytes in %s]\n%s", dropped, p.logPath, s)
	}
	return s
}

// exitCode is the child's exit code, 128+signal if a signal killed it.
// Only after done.
func (p *Proc) exitCode() int { return p.child.ExitCode() }

func (p *Proc) status() string {
	if !p.Exited() {
		return "still running"
	}
	state, err := p.child.Result()
	if state == nil {
		return fmt.Sprintf("wait failed: %v", err)
	}
	return fmt.Sprintf("exited: %v (code %d)", state, p.exitCode())
}

// Wait waits up to timeout for the child to exit and returns its exit
// code (128+signal if a signal killed it), or ErrTimeout.
func (p *Proc) Wait(timeout time.Duration) (int, error) {
	if !p.waitDone(timeout) {
		return -1, fmt.Errorf("%w: %s still running after %v", ErrTimeout, p, timeout)
	}
	return p.exitCode(), nil
}

// Signal sends sig to the child only (not its group): a SIGHUP for a
// reload reaches the agent, not what it runs. ErrExited once it exited.
func (p *Proc) Signal(sig os.Signal) error {
	if p.Exited() {
		return fmt.Errorf("%w: %s, %s", ErrExited, p, p.status())
	}
	s, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("proctest: %s: signal %v is not a syscall.Signal", p, sig)
	}
	if err := p.child.Signal(s); err != nil {
		return fmt.Errorf("proctest: signal %v to %s: %w", sig, p, err)
	}
	return nil
}

// Kill SIGKILLs the child's group and waits for the child; the test
// fails if it is not reaped within KillWait.
func (p *Proc) Kill() {
	p.killGroup()
	if !p.waitDone(KillWait) {
		p.t.Errorf("proctest: %s not reaped %v after SIGKILL", p, KillWait)
	}
}

// Stop asks the child to exit with SIGTERM and waits up to timeout, then
// SIGKILLs the group (error ErrKilled); either way, what the child left
// in its group is killed once it has exited. It returns the exit code
// (143 if SIGTERM killed a child that does not handle it).
func (p *Proc) Stop(timeout time.Duration) (int, error) {
	if !p.Exited() {
		// Signalling a child that exited just now fails harmlessly; the
		// wait below sees its exit.
		_ = p.child.Signal(syscall.SIGTERM)
	}
	if p.waitDone(timeout) {
		p.killGroup()
		return p.exitCode(), nil
	}
	p.killGroup()
	if !p.waitDone(KillWait) {
		return -1, fmt.Errorf("%w: %s not reaped %v after SIGKILL", ErrTimeout, p, KillWait)
	}
	return p.exitCode(), fmt.Errorf("%w: %s did not exit within %v of SIGTERM", ErrKilled, p, timeout)
}
