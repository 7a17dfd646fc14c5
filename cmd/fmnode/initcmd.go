package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fmnode/fmnode/internal/agent"
	"github.com/fmnode/fmnode/internal/clusterspec"
)

// runInit is `fmnode init`: it sends the cluster-wide settings to one
// agent, which records every alive member and writes the spec into the
// system register (through every node: see internal/sysreg).
func runInit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fmnode init", flag.ContinueOnError)
	var af adminFlags
	af.register(fs)
	var (
		partitions    = fs.Int("partitions", 64, "partition count")
		regions       = fs.String("regions", "", "regions in priority order, comma-separated (default: the members' regions, sorted)")
		neverPromote  = fs.String("never-promote", "", "regions never promoted to write region, comma-separated")
		consistency   = fs.String("consistency", clusterspec.ConsistencyStrong, "default consistency: strong, bounded, session or eventual")
		maxStaleness  = fs.Duration("max-staleness", 0, "staleness bound (bounded consistency)")
		minDurability = fs.Int("min-durability", 2, "regions that must hold a strong write")
		profile       = fs.String("profile", "paper", "timing profile: paper or fast")
		blastRadius   = fs.Int("blast-radius", 0, "failovers in flight into one region (0: the profile's)")
		expect        = fs.Int("expect-nodes", 0, "wait until this many members are alive")
		wait          = fs.Duration("wait", time.Minute, "bound on --expect-nodes' wait")
	)
	if ok, code := parseFlags(fs, args, stderr); !ok {
		return code
	}
	c, err := af.client()
	if err != nil {
		fmt.Fprintf(stderr, "fmnode init: %v\n", err)
		return 2
	}
	spec := clusterspec.Spec{
		Format: clusterspec.Format, Regions: list(*regions), NeverPromote: list(*neverPromote), Partitions: *partitions,
		Consistency: *consistency, MaxStaleness: clusterspec.Duration(*maxStaleness), MinDurability: *minDurability,
		Profile: clusterspec.Profile{Name: *profile}, BlastRadius: *blastRadius,
	}
	req := agent.InitRequest{Spec: spec, ExpectNodes: *expect, WaitSeconds: int(wait.Seconds())}
	ctx, cancel := context.WithTimeout(ctx, af.timeout)
	defer cancel()
	var resp agent.SpecResponse
	if err := c.call(ctx, "POST", agent.PathInit, req, &resp); err != nil {
		fmt.Fprintf(stderr, "fmnode init: %v\n", err)
		return 1
	}
	if af.output == "json" {
		printJSON(stdout, resp)
		return 0
	}
	fmt.Fprintf(stdout, "initialised cluster %s: spec version %d, %d partitions over %s, %d nodes, profile %s\n",
		resp.Spec.Cluster, resp.Version, resp.Spec.Partitions, strings.Join(resp.Spec.Regions, ","), len(resp.Spec.Nodes), resp.Spec.Profile.Name)
	return 0
}

// runConfig is `fmnode config get [KEY]` and `fmnode config set KEY VALUE`.
func runConfig(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "get" && args[0] != "set" && args[0] != "keys") {
		fmt.Fprintln(stderr, "usage: fmnode config get [KEY] | set KEY VALUE [--version N] | keys")
		return 2
	}
	verb := args[0]
	fs := flag.NewFlagSet("fmnode config "+verb, flag.ContinueOnError)
	var af adminFlags
	af.register(fs)
	version := fs.Uint64("version", 0, "set: change only if the spec is still at this version")
	fs.SetOutput(stderr)
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return 2
	}
	if verb == "keys" {
		for _, k := range clusterspec.Keys() {
			fmt.Fprintf(stdout, "%-32s %s\n", k.Name, k.Usage)
		}
		return 0
	}
	c, err := af.client()
	if err != nil {
		fmt.Fprintf(stderr, "fmnode config: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, af.timeout)
	defer cancel()
	var resp agent.SpecResponse
	switch {
	case verb == "get" && len(pos) <= 1:
		if err := c.call(ctx, "GET", agent.PathSpec, nil, &resp); err != nil {
			fmt.Fprintf(stderr, "fmnode config get: %v\n", err)
			return 1
		}
		if len(pos) == 1 {
			v, err := resp.Spec.Get(pos[0])
			if err != nil {
				fmt.Fprintf(stderr, "fmnode config get: %v\n", err)
				return 1
			}
			fmt.Fprintln(stdout, v)
			return 0
		}
		if af.output == "json" {
			printJSON(stdout, resp)
			return 0
		}
		fmt.Fprintf(stdout, "version\t%d\n", resp.Version)
		for _, k := range clusterspec.Keys() {
			v, _ := resp.Spec.Get(k.Name)
			fmt.Fprintf(stdout, "%s\t%s\n", k.Name, v)
		}
		return 0
	case verb == "set" && len(pos) == 2:
		if err := c.call(ctx, "PUT", agent.PathSpec, agent.SetRequest{Key: pos[0], Value: pos[1], Version: *version}, &resp); err != nil {
			fmt.Fprintf(stderr, "fmnode config set: %v\n", err)
			return 1
		}
		if af.output == "json" {
			printJSON(stdout, resp)
			return 0
		}
		fmt.Fprintf(stdout, "spec version %d; changed: %s\n", resp.Version, strings.Join(resp.Changed, ", "))
		return 0
	}
	fmt.Fprintln(stderr, "usage: fmnode config get [KEY] | set KEY VALUE [--version N] | keys")
	return 2
}

// parseInterspersed parses flags that may come after positional
// arguments (fmnode config set KEY VALUE --addr ...).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func list(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
