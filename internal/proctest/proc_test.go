package proctest

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	// waitFor bounds the tests' waits for a child to print or die.
	waitFor = 10 * time.Second
	tick    = 10 * time.Millisecond
)

// fakeTB stands in for a test whose cleanups, failure and deadline the
// test controls; what it does not override goes to the real test.
type fakeTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
	logs     []string
	errs     []string
	failed   bool
	deadline time.Time
}

func newFake(t *testing.T) *fakeTB { return &fakeTB{TB: t} }

func (f *fakeTB) Helper() {}

func (f *fakeTB) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

func (f *fakeTB) Logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
	f.failed = true
}

// Fatalf ends the calling goroutine as testing's does; call the code
// under test through fatalOf.
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}

func (f *fakeTB) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func (f *fakeTB) Deadline() (time.Time, bool) { return f.deadline, !f.deadline.IsZero() }

// runCleanups runs the registered cleanups last first, as testing does.
func (f *fakeTB) runCleanups() {
	f.mu.Lock()
	fns := f.cleanups
	f.cleanups = nil
	f.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

func (f *fakeTB) text() (logs, errs string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.logs, "\n"), strings.Join(f.errs, "\n")
}

// fatalOf runs fn with f in a goroutine of its own (f.Fatalf ends it) and
// returns what was reported as an error, empty if none.
func fatalOf(f *fakeTB, fn func(testing.TB)) string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	_, errs := f.text()
	return errs
}

// alive reports whether pid is a live process (a zombie is not: a
// grandchild reparented to a pid 1 that does not reap stays one).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return true
	}
	return s[i+2] != 'Z' && s[i+2] != 'X'
}

func requireGone(t *testing.T, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		require.Eventually(t, func() bool { return !alive(pid) }, waitFor, tick, "pid %d still alive", pid)
	}
}

// waitOutput waits until the child's output matches re and returns the
// first submatch.
func waitOutput(t *testing.T, p *Proc, re string) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	var m []string
	require.Eventually(t, func() bool {
		m = rx.FindStringSubmatch(p.Tail())
		return m != nil
	}, waitFor, tick, "%s never printed %q; output:\n%s", p, re, p.Tail())
	if len(m) > 1 {
		return m[1]
	}
	return m[0]
}

func grandchildPID(t *testing.T, p *Proc) int {
	t.Helper()
	pid, err := strconv.Atoi(waitOutput(t, p, `grandchild (\d+)`))
	require.NoError(t, err)
	return pid
}

func TestStartWait(t *testing.T) {
	for _, code := range []int{0, 7} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			p := Start(t, childSpec(t, "exiter", "exit", strconv.Itoa(code)))
			got, err := p.Wait(waitFor)
			require.NoError(t, err)
			assert.Equal(t, code, got)
			assert.True(t, p.Exited())
			assert.Positive(t, p.PID())
			// The output is copied after the exit; wait for both lines.
			waitOutput(t, p, `to stdout\nto stderr\n`)
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(p.LogFile())
				return err == nil && string(b) == "to stdout\nto stderr\n"
			}, waitFor, tick)
			assert.Contains(t, p.LogFile(), "exiter.log")
		})
	}
}

func TestWaitTimesOut(t *testing.T) {
	p := Start(t, childSpec(t, "sleeper", "sleep"))
	waitOutput(t, p, "ready")
	start := time.Now()
	code, err := p.Wait(100 * time.Millisecond)
	require.ErrorIs(t, err, ErrTimeout)
	assert.Equal(t, -1, code)
	assert.Contains(t, err.Error(), fmt.Sprintf("sleeper (pid %d) still running after 100ms", p.PID()))
	assert.Less(t, time.Since(start), waitFor)
	assert.False(t, p.Exited())
}

func TestKillKillsTheGroup(t *testing.T) {
	p := Start(t, childSpec(t, "parent", "grandchild"))
	gpid := grandchildPID(t, p)
	require.True(t, alive(gpid))
	p.Kill()
	assert.True(t, p.Exited())
	code, err := p.Wait(0)
	require.NoError(t, err)
	assert.Equal(t, 128+int(syscall.SIGKILL), code)
	requireGone(t, p.PID(), gpid)
}

func TestStop(t *testing.T) {
	cases := []struct {
		name    string
		mode    string
		args    []string
		ready   string // printed when the child is ready for the signal
		timeout time.Duration
		code    int
		wantErr error
		output  string
	}{
		{"handles SIGTERM", "signals", nil, "ready", waitFor, 3, nil, "got SIGTERM"},
		{"dies of SIGTERM", "sleep", nil, "ready", waitFor, 128 + int(syscall.SIGTERM), nil, ""},
		{"ignores SIGTERM", "ignore-term", nil, "ready", 300 * time.Millisecond, 128 + int(syscall.SIGKILL), ErrKilled, ""},
		{"already exited", "exit", []string{"5"}, "to stderr", waitFor, 5, nil, ""},
		{"leaves a grandchild", "grandchild", nil, "grandchild", waitFor, 128 + int(syscall.SIGTERM), nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := Start(t, childSpec(t, "stopped", tc.mode, tc.args...))
			waitOutput(t, p, tc.ready)
			if tc.mode == "exit" {
				// Its output comes just before its exit: the case is about
				// a child that is gone when Stop is called.
				require.Eventually(t, p.Exited, waitFor, tick, "%s did not exit", p)
			}
			var gpid int
			if tc.mode == "grandchild" {
				gpid = grandchildPID(t, p)
			}
			start := time.Now()
			code, err := p.Stop(tc.timeout)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.Contains(t, err.Error(), "did not exit within 300ms of SIGTERM")
				assert.GreaterOrEqual(t, time.Since(start), tc.timeout)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.code, code)
			assert.True(t, p.Exited())
			if tc.output != "" {
				waitOutput(t, p, tc.output)
			}
			if gpid != 0 {
				// The child went; what it left in its group goes too.
				requireGone(t, gpid)
			}
		})
	}
}

func TestSignal(t *testing.T) {
	p := Start(t, childSpec(t, "reloader", "signals"))
	waitOutput(t, p, "ready")
	require.NoError(t, p.Signal(syscall.SIGHUP))
	waitOutput(t, p, "got SIGHUP")
	require.NoError(t, p.Signal(syscall.SIGHUP))
	waitOutput(t, p, "(got SIGHUP\n){2}")
	assert.False(t, p.Exited())
	require.NoError(t, p.Signal(syscall.SIGTERM))
	code, err := p.Wait(waitFor)
	require.NoError(t, err)
	assert.Equal(t, 3, code)
	err = p.Signal(syscall.SIGHUP)
	require.ErrorIs(t, err, ErrExited)
	assert.Contains(t, err.Error(), "reloader")
}

// TestNothingOutlivesCleanup leaves children running at the end of a
// subtest; its cleanups must take them, grandchildren included.
func TestNothingOutlivesCleanup(t *testing.T) {
	var pids []int
	t.Run("leaves children running", func(t *testing.T) {
		a := Start(t, childSpec(t, "a", "grandchild"))
		b := Start(t, childSpec(t, "b", "ignore-term"))
		pids = append(pids, a.PID(), grandchildPID(t, a), b.PID())
		waitOutput(t, b, "ready")
		for _, pid := range pids {
			require.True(t, alive(pid), "pid %d", pid)
		}
	})
	require.Len(t, pids, 3)
	requireGone(t, pids...)
}

func TestCleanupReport(t *testing.T) {
	cases := []struct {
		name      string
		fail      bool
		wantInLog []string
	}{
		{"failed test logs the tail", true, []string{"proctest: talker (pid", "exited: signal: killed (code 137)", "talker.log", "last output:\nready\n"}},
		{"passing test logs nothing", false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			p := Start(f, childSpec(t, "talker", "sleep"))
			waitOutput(t, p, "ready")
			if tc.fail {
				f.Errorf("the test failed")
			}
			f.runCleanups()
			requireGone(t, p.PID())
			logs, _ := f.text()
			if !tc.fail {
				assert.Empty(t, logs)
				return
			}
			for _, want := range tc.wantInLog {
				assert.Contains(t, logs, want)
			}
		})
	}
}

func TestWatchdog(t *testing.T) {
	cases := []struct {
		name     string
		timeout  time.Duration
		deadline time.Duration // from now; zero: none
		// lifetime is the expected bound, give or take scheduling.
		lifetime time.Duration
	}{
		{"spec timeout", 300 * time.Millisecond, 0, 300 * time.Millisecond},
		{"test deadline", time.Hour, 2 * time.Second, time.Second},
		{"test deadline sooner than the margin", 0, 500 * time.Millisecond, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			if tc.deadline > 0 {
				f.deadline = time.Now().Add(tc.deadline)
			}
			spec := childSpec(t, "forever", "sleep")
			spec.Timeout = tc.timeout
			start := time.Now()
			p := Start(f, spec)
			select {
			case <-p.Done():
			case <-time.After(waitFor):
				t.Fatalf("the watchdog did not kill %s", p)
			}
			took := time.Since(start)
			assert.GreaterOrEqual(t, took, tc.lifetime)
			assert.Less(t, took, tc.lifetime+5*time.Second)
			code, err := p.Wait(0)
			require.NoError(t, err)
			assert.Equal(t, 128+int(syscall.SIGKILL), code)
			f.runCleanups()
			_, errs := f.text()
			assert.Contains(t, errs, "forever (pid")
			assert.Contains(t, errs, "the watchdog killed its group")
		})
	}
}

func TestTail(t *testing.T) {
	spec := childSpec(t, "spewer", "spew", strconv.Itoa(100<<10))
	spec.TailBytes = 4096
	spec.LogFile = t.TempDir() + "/kept.log"
	p := Start(t, spec)
	waitOutput(t, p, "END\n")
	tail := p.Tail()
	header, body, ok := strings.Cut(tail, "\n")
	require.True(t, ok)
	assert.Regexp(t, `^\[\.\.\. \d+ earlier bytes in .*kept\.log\]$`, header)
	assert.Len(t, body, 4096)
	assert.True(t, strings.HasSuffix(body, "END\n"))
	assert.NotContains(t, body, "line 000000 ")
	b, err := os.ReadFile(spec.LogFile)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(b), 100<<10)
	assert.True(t, strings.HasPrefix(string(b), "line 000000 "), "the log file has all of it")
}

func TestStartRefuses(t *testing.T) {
	good := childSpec(t, "c", "sleep")
	cases := []struct {
		name   string
		mutate func(*ProcSpec)
		want   string
	}{
		{"no name", func(s *ProcSpec) { s.Name = "" }, "ProcSpec.Name: must be set"},
		{"name with a slash", func(s *ProcSpec) { s.Name = "a/b" }, "ProcSpec.Name: must be of"},
		{"hidden name", func(s *ProcSpec) { s.Name = ".a" }, "ProcSpec.Name"},
		{"no path", func(s *ProcSpec) { s.Path = "" }, "ProcSpec.Path: must be set"},
		{"negative tail", func(s *ProcSpec) { s.TailBytes = -1 }, "ProcSpec.TailBytes"},
		{"huge tail", func(s *ProcSpec) { s.TailBytes = MaxTailBytes + 1 }, "ProcSpec.TailBytes"},
		{"negative timeout", func(s *ProcSpec) { s.Timeout = -time.Second }, "ProcSpec.Timeout"},
		{"no such program", func(s *ProcSpec) { s.Path = "/nonexistent/fmnode" }, "start c (/nonexistent/fmnode)"},
		{"unwritable log", func(s *ProcSpec) { s.LogFile = "/nonexistent/dir/c.log" }, "c: log file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			spec := good
			tc.mutate(&spec)
			errs := fatalOf(f, func(tb testing.TB) { Start(tb, spec) })
			assert.Contains(t, errs, tc.want)
			f.mu.Lock()
			assert.Empty(t, f.cleanups, "nothing to clean up")
			f.mu.Unlock()
		})
	}
}
