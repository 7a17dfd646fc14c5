// Command fmnode is the project's one binary. Its
// subcommands (`fmnode help` lists them; each takes --help):
//
//   - fmnode demo runs a real cluster (9 `fmnode agent` child processes,
//     3 regions x 3 nodes, on loopback with mutual TLS and certificates
//     made for it), SIGKILLs the region that is write region of most
//     partitions while clients write through the Go routing client,
//     restarts it, reads every acknowledged write back and prints the
//     region-outage figures beside the simulator's prediction for the
//     same layout and the paper's (exit 1 if an acknowledged write was
//     lost). --keep leaves the cluster running until Ctrl-C.
//   - fmnode sim runs the deterministic simulator (package sim) on the real
//     cores: one seed (--seed) or a sweep (--seeds A..B) of a scenario
//     (--scenario; `fmnode sim --help` lists them) at a fault level
//     (--faults none|light|heavy|swarm), printing a table row or, with
//     --json, a JSON object per run and a summary. A failing run prints
//     its violations and the command that replays it; the exit code is 1
//     then (under --canary, 1 when every seed caught the broken acceptor).
//     On a terminal a long run shows its progress on stderr.
//   - fmnode bench cas|dns|partition|agent measures and prints JSON: CAS
//     throughput and latency against `fmnode acceptor` child processes on
//     loopback; DNS TXT queries per second against the txtdns server in a
//     child process (this binary re-run as `fmnode bench dns --serve`);
//     strong writes per second across many partitions, three regions in one
//     process, on pebble with sync; strong writes per second through the Go
//     client against three `fmnode agent` child processes on loopback with
//     mutual TLS, next to the partition benchmark in the same run.
//   - fmnode acceptor serves one CASPaxos acceptor over TCP on a bbolt,
//     pebble or in-memory store, printing "listening ADDR" first; with
//     --control-stdin it answers "stats" and exits when stdin closes, and
//     --metrics-listen serves Prometheus metrics.
//   - fmnode agent runs the daemon (docs/AGENT.md): the node core of
//     internal/node under its runtime driver, with its data directory,
//     mutual TLS, membership, the cluster spec, the data API and DNS.
//   - fmnode init writes the cluster spec through a running agent;
//     fmnode config get|set|keys reads and changes it by CAS.
//   - fmnode cert create-ca|create-node|create-client|list makes the
//     cluster's certificates in the spirit of `cockroach cert` (package
//     internal/certs): ca.crt, node.crt/.key and client.NAME.crt/.key in
//     one --certs-dir, the CA key at --ca-key, and lists a directory's
//     certificates with whether they verify against its ca.crt.
//   - fmnode status, members, partition show, explain, history,
//     switchover, drain, pause and resume are the operator's commands
//     over the agents' admin API (docs/AGENT.md, "Inspecting a node").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one fmnode subcommand. Each lives in its own file and is wired
// into commands() below; run returns the process exit code.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() map[string]command {
	return map[string]command{
		"demo":       {summary: "a real 9-agent cluster loses a region: the drill's figures beside the simulator's (fmnode demo --help)", run: runDemo},
		"sim":        {summary: "run the deterministic simulator on the real cores (fmnode sim --help)", run: runSim},
		"bench":      {summary: "run a benchmark and print JSON (fmnode bench cas|...)", run: runBench},
		"acceptor":   {summary: "serve a CASPaxos acceptor over TCP", run: runAcceptor},
		"agent":      {summary: "run the fmnode daemon (fmnode agent --config node.yaml)", run: runAgent},
		"init":       {summary: "write the cluster spec through a running agent", run: runInit},
		"config":     {summary: "read or change the cluster spec (fmnode config get|set)", run: runConfig},
		"cert":       {summary: "create or list the cluster's certificates (fmnode cert create-ca|...)", run: runCert},
		"status":     {summary: "regions, nodes, partitions and switchovers in progress, across the cluster", run: runStatus},
		"members":    {summary: "the membership table as an agent's gossip sees it", run: runMembers},
		"partition":  {summary: "a partition's register: fmnode partition show P", run: runPartition},
		"explain":    {summary: "why a partition's failover does what it does now: fmnode explain P", run: runExplain},
		"history":    {summary: "the transitions of a partition's register: fmnode history [P]", run: runHistory},
		"switchover": {summary: "move a partition's write region: fmnode switchover P --to R [--wait]", run: runSwitchover},
		"drain":      {summary: "move every partition out of a region: fmnode drain --region R [--stop]", run: runDrain},
		"pause":      {summary: "pause automatic failover: fmnode pause [P] --reason TEXT", run: runPause},
		"resume":     {summary: "resume automatic failover: fmnode resume [P]", run: runResume},
		"version":    {summary: "the binary's version, Go version and commit", run: runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "fmnode: unknown command %q\n\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: fmnode <command> [flags]")
	fmt.Fprintln(w)
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
}

// parseFlags parses args with fs, printing errors to stderr. It returns the
// exit code to use when parsing did not succeed (0 for -help).
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (ok bool, code int) {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, 0
		}
		return false, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return false, 2
	}
	return true, 0
}
