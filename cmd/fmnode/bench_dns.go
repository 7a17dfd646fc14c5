package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/fmnode/fmnode/txtdns/dnsbench"
)

// runBenchDNS is `fmnode bench dns`: the txtdns DNS server in a child
// process (this executable re-run as `fmnode bench dns --serve`), loaded
// from this process by concurrent UDP clients. Flags: --duration, --clients,
// --partitions, --json (see dnsbench).
func runBenchDNS(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "fmnode bench dns: %v\n", err)
		return 1
	}
	return dnsbench.Main(ctx, args, stdout, stderr, []string{exe, "bench", "dns"})
}
