package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// runVersion is `fmnode version`: what an operator pastes into a bug
// report, and what an upgrade checks first. The commit and its time come
// from the build's VCS stamp (absent with -trimpath builds outside git).
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: fmnode version")
		return 2
	}
	fmt.Fprintf(stdout, "fmnode %s\n", version)
	fmt.Fprintf(stdout, "go %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision", "vcs.time", "vcs.modified", "CGO_ENABLED":
				fmt.Fprintf(stdout, "%s %s\n", s.Key, s.Value)
			}
		}
	}
	return 0
}
