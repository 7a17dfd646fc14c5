package childproc

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The tests start /bin/sh children; each is SIGKILLed at the end whatever
// happens.
func startSh(t *testing.T, script string) *Child {
	t.Helper()
	c, err := Start(exec.Command("/bin/sh", "-c", script))
	require.NoError(t, err)
	t.Cleanup(func() {
		c.KillGroup()
		require.True(t, c.Wait(5*time.Second), "child %d not reaped after SIGKILL", c.Pid())
	})
	return c
}

func TestChildHasItsOwnGroup(t *testing.T) {
	c := startSh(t, "sleep 30")
	pgid, err := syscall.Getpgid(c.Pid())
	require.NoError(t, err)
	require.Equal(t, c.Pid(), pgid, "the child leads a group of its own")
	require.NotEqual(t, syscall.Getpgrp(), pgid)
}

func TestExitCodeAndSignalled(t *testing.T) {
	c := startSh(t, "exit 7")
	require.True(t, c.Wait(5*time.Second))
	require.Equal(t, 7, c.ExitCode())
	require.ErrorIs(t, c.Signal(syscall.SIGTERM), ErrExited)
	require.ErrorIs(t, c.SignalGroup(syscall.SIGKILL), ErrExited)

	k := startSh(t, "sleep 30")
	require.Equal(t, -1, k.ExitCode(), "running")
	require.False(t, k.Wait(0))
	require.NoError(t, k.SignalGroup(syscall.SIGKILL))
	require.True(t, k.Wait(5*time.Second))
	require.Equal(t, 128+int(syscall.SIGKILL), k.ExitCode())
}

// KillGroup reaches a grandchild left behind by a child that exited.
func TestKillGroupReachesWhatTheChildLeft(t *testing.T) {
	dir := t.TempDir()
	pidFile := dir + "/grandchild"
	c := startSh(t, "sleep 30 & echo $! > "+pidFile+"; exit 0")
	require.True(t, c.Wait(5*time.Second))
	var gc int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		gc, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, syscall.Kill(gc, 0), "the grandchild lives on")
	c.KillGroup()
	require.Eventually(t, func() bool { return syscall.Kill(gc, 0) != nil }, 5*time.Second, 10*time.Millisecond,
		"the grandchild outlived KillGroup")
}

// The parent-death signal: a helper process (this test binary) starts a
// child and is SIGKILLed; the child must die with it.
func TestChildDiesWithItsParent(t *testing.T) {
	if os.Getenv("CHILDPROC_PARENT") == "1" {
		c, err := Start(exec.Command("/bin/sh", "-c", "sleep 30"))
		if err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString(strconv.Itoa(c.Pid()) + "\n")
		time.Sleep(30 * time.Second)
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestChildDiesWithItsParent$")
	cmd.Env = append(os.Environ(), "CHILDPROC_PARENT=1")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	parent, err := Start(cmd)
	require.NoError(t, err)
	t.Cleanup(func() { parent.KillGroup(); parent.Wait(5 * time.Second) })
	buf := make([]byte, 64)
	n, err := out.Read(buf)
	require.NoError(t, err)
	gc, err := strconv.Atoi(strings.TrimSpace(strings.Split(string(buf[:n]), "\n")[0]))
	require.NoError(t, err)
	// Kill the parent alone (not its group, which holds the child too).
	require.NoError(t, parent.Signal(syscall.SIGKILL))
	require.True(t, parent.Wait(5*time.Second))
	require.Eventually(t, func() bool { return syscall.Kill(gc, 0) != nil }, 5*time.Second, 10*time.Millisecond,
		"the child outlived its SIGKILLed parent")
}
