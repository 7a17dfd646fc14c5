package proctest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	// BuildTimeout bounds one go build (a cold build of the agent under
	// -race on two cores takes a few minutes).
	BuildTimeout = 5 * time.Minute
	// maxBuildOutput bounds the go command's output kept for the failure
	// message.
	maxBuildOutput = 64 << 10
	// cachePrefix starts the cache directories' names in os.TempDir.
	cachePrefix = "fmnode-proctest-"
)

// Build builds the main package pkg (an import path, or a path relative
// to the test's directory) and returns the binary's path. Within one run
// of the test binary a package is built once; parallel tests wait for the
// one build. A failed build fails the test with the go command's output.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	if pkg == "" {
		t.Fatalf("proctest: Build: pkg must be set")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("proctest: Build %s: %v", pkg, err)
	}
	dir, err := cacheDir()
	if err != nil {
		t.Fatalf("proctest: Build %s: %v", pkg, err)
	}
	// The same relative path names another package from another
	// directory, so the key has the directory too.
	sum := sha256.Sum256([]byte(wd + "\x00" + pkg))
	out := filepath.Join(dir, sanitize(filepath.Base(pkg))+"-"+hex.EncodeToString(sum[:6]))

	unlock, err := lockFile(out + ".lock")
	if err != nil {
		t.Fatalf("proctest: Build %s: %v", pkg, err)
	}
	defer unlock()
	if st, err := os.Stat(out); err == nil && st.Mode().IsRegular() {
		return out
	}

	goBin, err := goCommand(wd)
	if err != nil {
		t.Fatalf("proctest: Build %s: %v", pkg, err)
	}
	args := append([]string{"build", "-o", out + ".tmp"}, mirroredFlags()...)
	args = append(args, pkg)
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout(t))
	defer cancel()
	start := time.Now()
	output, err := runBounded(ctx, wd, goBin, args...)
	if err != nil {
		os.Remove(out + ".tmp")
		t.Fatalf("proctest: %s %s (in %s, after %v): %v\n%s", goBin, strings.Join(args, " "), wd,
			time.Since(start).Round(time.Millisecond), err, output)
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		t.Fatalf("proctest: Build %s: %v", pkg, err)
	}
	t.Logf("proctest: built %s in %v", pkg, time.Since(start).Round(time.Millisecond))
	return out
}

// Main runs the tests of m and then removes this run's build cache
// (without it, the next run's first Build removes it). Call it from
// TestMain: os.Exit(proctest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if dir, err := cacheDirName(); err == nil {
		os.RemoveAll(dir)
	}
	return code
}

// buildTimeout is BuildTimeout, or less if the test's deadline is sooner
// (so the failure is a build timeout, not a test binary panic).
func buildTimeout(t testing.TB) time.Duration {
	d := BuildTimeout
	if dl, ok := deadline(t); ok {
		if left := time.Until(dl) - deadlineMargin(time.Until(dl)); left < d {
			d = max(left, time.Second)
		}
	}
	return d
}

// mirroredFlags are the test binary's -race and -tags, so that the child
// is built the way the test was.
func mirroredFlags() []string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	var flags []string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "-race" && s.Value == "true":
			flags = append(flags, "-race")
		case s.Key == "-tags" && s.Value != "":
			flags = append(flags, "-tags", s.Value)
		}
	}
	return flags
}

// goCommand finds the go command (GOROOT's, else PATH's) and checks that
// it is the toolchain that built the test binary.
func goCommand(wd string) (string, error) {
	var goBin string
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); isExecutable(p) {
			goBin = p
		}
	}
	if goBin == "" {
		p, err := exec.LookPath("go")
		if err != nil {
			return "", fmt.Errorf("no go command in $GOROOT/bin or PATH: %w", err)
		}
		goBin = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := runBounded(ctx, wd, goBin, "env", "GOVERSION")
	if err != nil {
		return "", fmt.Errorf("%s env GOVERSION: %v\n%s", goBin, err, out)
	}
	if v := strings.TrimSpace(string(out)); v != runtime.Version() {
		return "", fmt.Errorf("%s is %s, but the test was built by %s: the child would be built by another toolchain (set PATH or GOROOT)",
			goBin, v, runtime.Version())
	}
	return goBin, nil
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// runBounded runs a command in its own process group, killing the group
// when ctx ends (go build's compilers and linker are its children), and
// returns at most maxBuildOutput bytes of its combined output.
func runBounded(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out := &ring{max: maxBuildOutput}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return []byte(out.String()), err
}

// cacheDir is this test binary run's cache directory, created on first
// use; it also removes the directories of runs whose process is gone.
// The name has the pid (what tells a run's directory is stale) and a hash
// of the test binary's path and modification time (so that a reused pid
// cannot hand a new test binary an old build).
func cacheDir() (string, error) {
	dir, err := cacheDirName()
	if err != nil {
		return "", err
	}
	if err := os.Mkdir(dir, 0o700); err == nil {
		sweepStale(os.Getpid())
	} else if !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	return dir, nil
}

func cacheDirName() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	var mtime int64
	if st, err := os.Stat(exe); err == nil {
		mtime = st.ModTime().UnixNano()
	}
	sum := sha256.Sum256([]byte(exe + "\x00" + strconv.FormatInt(mtime, 10)))
	name := cachePrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(sum[:6])
	return filepath.Join(os.TempDir(), name), nil
}

// sweepStale removes the cache directories of test binary runs that have
// exited (ours and the user's only: os.TempDir may be shared, and a
// directory of another user's cannot be removed anyway).
func sweepStale(self int) {
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), cachePrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid == self || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
		}
	}
}

// lockFile takes an exclusive flock on path (created if missing); flock
// excludes other open files of the same process too, so parallel tests
// in one binary wait for each other's build.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// sanitize keeps a file name to letters, digits, '.', '_' and '-'.
func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
	if s == "" || s == "." || s == ".." {
		return "pkg"
	}
	return s
}
