package proctest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv, when set, makes the test binary a child of the tests instead
// of running them (re-exec: no second binary to build). Its value is the
// mode, its arguments follow "--".
const childEnv = "PROCTEST_CHILD"

// childLife bounds every child on its own, in case a test's kill fails.
const childLife = 2 * time.Minute

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode, childArgs()))
	}
	os.Exit(Main(m))
}

func childArgs() []string {
	for i, a := range os.Args {
		if a == "--" {
			return os.Args[i+1:]
		}
	}
	return nil
}

// childSpec is the spec of a re-exec'd child in mode.
func childSpec(t testing.TB, name, mode string, args ...string) ProcSpec {
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return ProcSpec{
		Name: name,
		Path: exe,
		Args: append([]string{"-test.run=^$", "--"}, args...),
		Env:  append(os.Environ(), childEnv+"="+mode),
	}
}

// child is the re-exec'd test binary; its modes:
//
//	sleep                  print "ready", sleep
//	grandchild             start a "sleep" grandchild (in the group, without
//	                       a parent-death signal), print "grandchild <pid>", sleep
//	signals                print "got SIGHUP" on each SIGHUP; on SIGTERM
//	                       print "got SIGTERM" and exit 3
//	ignore-term            ignore SIGTERM, print "ready", sleep
//	exit <code>            write to stdout and stderr, exit with code
//	spew <bytes>           write numbered lines to about bytes, then "END", sleep
//	listen <addr> <delay>  after delay, listen on addr and accept
func child(mode string, args []string) int {
	sleep := func() int {
		time.Sleep(childLife)
		return 9
	}
	switch mode {
	case "sleep":
		fmt.Println("ready")
		return sleep()
	case "grandchild":
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=sleep")
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("grandchild %d\n", cmd.Process.Pid)
		return sleep()
	case "signals":
		sigs := make(chan os.Signal, 4)
		signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM)
		fmt.Println("ready")
		timeout := time.After(childLife)
		for {
			select {
			case s := <-sigs:
				if s == syscall.SIGTERM {
					fmt.Println("got SIGTERM")
					return 3
				}
				fmt.Println("got SIGHUP")
			case <-timeout:
				return 9
			}
		}
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		return sleep()
	case "exit":
		code, _ := strconv.Atoi(args[0])
		fmt.Println("to stdout")
		fmt.Fprintln(os.Stderr, "to stderr")
		return code
	case "spew":
		n, _ := strconv.Atoi(args[0])
		for i, written := 0, 0; written < n; i++ {
			k, _ := fmt.Printf("line %06d %s\n", i, strings.Repeat("x", 50))
			written += k
		}
		fmt.Println("END")
		return sleep()
	case "listen":
		delay, _ := time.ParseDuration(args[1])
		time.Sleep(delay)
		ln, err := net.Listen("tcp", args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("listening")
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		return sleep()
	}
	fmt.Fprintln(os.Stderr, "unknown mode", mode)
	return 2
}
