// Command hello is what the proctest Build test builds and runs.
package main

import (
	"fmt"
	"os"
	"runtime"
)

func main() {
	fmt.Fprintf(os.Stdout, "hello from %s\n", runtime.Version())
	fmt.Fprintln(os.Stderr, "args:", os.Args[1:])
	if len(os.Args) > 1 && os.Args[1] == "fail" {
		os.Exit(4)
	}
}
