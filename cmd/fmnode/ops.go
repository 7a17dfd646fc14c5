package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fmnode/fmnode/internal/agent"
)

// The operator commands over the agents' admin API (internal/agent
// admin_ops.go): status, members, partition show, explain, history,
// switchover, drain, pause and resume. Each prints a table, or JSON with
// -o json; a refused action exits 1 and prints the agent's reasons and
// the partition's explanation.

// opsPollEvery is how often --wait reads the register again.
const opsPollEvery = 200 * time.Millisecond

// opsCommand parses the common flags (they may follow the positional
// arguments) plus what extra registers, and returns the client.
type opsCommand struct {
	name   string
	fs     *flag.FlagSet
	af     adminFlags
	stdout io.Writer
	stderr io.Writer
}

func newOps(name string, stdout, stderr io.Writer) *opsCommand {
	o := &opsCommand{name: "fmnode " + name, stdout: stdout, stderr: stderr}
	o.fs = flag.NewFlagSet(o.name, flag.ContinueOnError)
	o.fs.SetOutput(stderr)
	o.af.register(o.fs)
	return o
}

// parse returns the positional arguments and the client, or the exit
// code to return.
func (o *opsCommand) parse(args []string, minPos, maxPos int, usage string) ([]string, *adminClient, int) {
	o.fs.Usage = func() {
		fmt.Fprintf(o.stderr, "usage: %s %s\n", o.name, usage)
		o.fs.PrintDefaults()
	}
	pos, err := parseInterspersed(o.fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil, 0
		}
		return nil, nil, 2
	}
	if len(pos) < minPos || len(pos) > maxPos {
		fmt.Fprintf(o.stderr, "usage: %s %s\n", o.name, usage)
		return nil, nil, 2
	}
	c, err := o.af.client()
	if err != nil {
		fmt.Fprintf(o.stderr, "%s: %v\n", o.name, err)
		return nil, nil, 2
	}
	return pos, c, -1
}

// fail prints err (with a refusal's reasons and explanation) and
// returns 1.
func (o *opsCommand) fail(err error) int {
	var ae *apiError
	if errors.As(err, &ae) && ae.Code == agent.CodeRefused {
		fmt.Fprintf(o.stderr, "%s: refused:\n", o.name)
		reasons := ae.Reasons
		if len(reasons) == 0 {
			reasons = []string{ae.ErrorBody.Error}
		}
		for _, r := range reasons {
			fmt.Fprintf(o.stderr, "  %s\n", r)
		}
		if ae.Explain != "" {
			fmt.Fprintf(o.stderr, "\n%s", ae.Explain)
		}
		return 1
	}
	fmt.Fprintf(o.stderr, "%s: %v\n", o.name, err)
	return 1
}

func (o *opsCommand) json() bool { return o.af.output == "json" }

func (o *opsCommand) table() *tabwriter.Writer {
	return tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
}

func partitionArg(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("partition %q: not a partition id (1..N)", s)
	}
	return uint32(v), nil
}

// runStatus is `fmnode status`.
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := newOps("status", stdout, stderr)
	_, c, code := o.parse(args, 0, 0, "[flags]")
	if code >= 0 {
		return code
	}
	ctx, cancel := context.WithTimeout(ctx, o.af.timeout)
	defer cancel()
	var cs agent.ClusterStatus
	if err := c.call(ctx, "GET", agent.PathStatus, nil, &cs); err != nil {
		return o.fail(err)
	}
	if o.json() {
		printJSON(stdout, cs)
		return 0
	}
	fmt.Fprintf(stdout, "answered by %s (spec version %d); every other agent was asked for its own status, 3 s each\n\n", cs.Answered, cs.SpecVersion)
	tw := o.table()
	fmt.Fprintln(tw, "REGION\tPREFERRED\tNEVER-PROMOTE\tNODES\tWRITE PARTITIONS")
	for _, r := range cs.Regions {
		fmt.Fprintf(tw, "%s\t%v\t%v\t%s\t%d %s\n", r.Name, r.Preferred, r.NeverPromote, strings.Join(r.Nodes, ","), len(r.WritePartitions), idList(r.WritePartitions))
	}
	_ = tw.Flush()
	fmt.Fprintln(stdout)
	tw = o.table()
	fmt.Fprintln(tw, "NODE\tID\tREGION\tGOSSIP\tFAILOVER\tLEASE\tGLOBAL PAUSE\tREACHED")
	for _, n := range cs.Nodes {
		lease := "-"
		if n.Lease != nil {
			lease = "expired"
			if n.Lease.Valid {
				lease = "valid until " + n.Lease.Until.Format(time.RFC3339Nano)
			}
		}
		reached := "yes"
		if !n.Reached {
			reached = "no: " + n.Error
		}
		pause := "no"
		if n.GlobalPause {
			pause = "yes: " + n.GlobalPauseReason
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.ID, n.Region, n.Membership, n.Failover, lease, pause, reached)
	}
	_ = tw.Flush()
	fmt.Fprintln(stdout)
	if len(cs.InProgress) == 0 {
		fmt.Fprintln(stdout, "no switchover or failover in progress")
	} else {
		tw = o.table()
		fmt.Fprintln(tw, "IN PROGRESS\tEPOCH\tFROM\tTO\tSINCE")
		for _, p := range cs.InProgress {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\n", p.ID, p.Epoch, p.WriteRegion, p.Target, p.Since.Format(time.RFC3339Nano))
		}
		_ = tw.Flush()
	}
	for _, d := range cs.Drains {
		fmt.Fprintf(stdout, "drain of %s on %s: %d partitions still to move\n", d.Region, d.Node, d.Remaining)
	}
	return 0
}

func idList(ids []uint32) string {
	const shown = 16
	var b strings.Builder
	for i, id := range ids {
		if i == shown {
			fmt.Fprintf(&b, " ... (%d more)", len(ids)-shown)
			break
		}
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(strconv.FormatUint(uint64(id), 10))
	}
	return b.String()
}

// runMembers is `fmnode members`.
func runMembers(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := newOps("members", stdout, stderr)
	_, c, code := o.parse(args, 0, 0, "[flags]")
	if code >= 0 {
		return code
	}
	ctx, cancel := context.WithTimeout(ctx, o.af.timeout)
	defer cancel()
	var mr agent.MembersResponse
	if err := c.call(ctx, "GET", agent.PathMembers, nil, &mr); err != nil {
		return o.fail(err)
	}
	if o.json() {
		printJSON(stdout, mr)
		return 0
	}
	tw := o.table()
	fmt.Fprintln(tw, "ID\tNAME\tREGION\tZONE\tSTATE\tGOSSIP\tNODE\tAPI\tVERSION\tIN SPEC")
	for _, m := range mr.Members {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%v\n", m.NodeID, m.Name, m.Region, m.Zone, m.State, m.Gossip, m.NodeAddr, m.APIAddr, m.Version, m.InSpec)
	}
	_ = tw.Flush()
	return 0
}

// runPartition is `fmnode partition show P`.
func runPartition(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "show" {
		fmt.Fprintln(stderr, "usage: fmnode partition show P [flags]")
		return 2
	}
	o := newOps("partition show", stdout, stderr)
	var d agent.PartitionDetail
	if code, done := o.fetchPartition(ctx, args[1:], agent.PathPartition, &d); done {
		return code
	}
	fmt.Fprintf(stdout, "partition %d (answered by %s)\n", d.ID, d.Answered)
	fmt.Fprintf(stdout, "  epoch %d, write region %s, phase %s", d.Epoch, d.WriteRegion, d.Phase)
	if d.Target != "" {
		fmt.Fprintf(stdout, " to %s", d.Target)
	}
	fmt.Fprintf(stdout, ", register version %d, consistency %s\n", d.Version, d.Consistency)
	fmt.Fprintf(stdout, "  write quorum %s (minimum durability %d), priority %s", strings.Join(d.WriteQuorum, ","), d.MinDurability, strings.Join(d.Priority, ","))
	if len(d.NeverPromote) > 0 {
		fmt.Fprintf(stdout, ", never promote %s", strings.Join(d.NeverPromote, ","))
	}
	fmt.Fprintln(stdout)
	if d.Paused {
		fmt.Fprintf(stdout, "  paused: %s\n", d.PauseReason)
	}
	fmt.Fprintln(stdout)
	tw := o.table()
	fmt.Fprintln(tw, "EPOCH\tWRITE REGION\tSTART LSN\tEND LSN")
	for _, e := range d.Table {
		end := strconv.FormatUint(e.EndLSN, 10)
		if e.Open {
			end = "open"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\n", e.Epoch, e.WriteRegion, e.StartLSN, end)
	}
	_ = tw.Flush()
	fmt.Fprintln(stdout)
	switch {
	case d.ReplicasFrom != "":
		fmt.Fprintf(stdout, "replicas as the write region's node %s sees them:\n", d.ReplicasFrom)
	case d.ReplicasNote != "":
		fmt.Fprintf(stdout, "replicas (%s):\n", d.ReplicasNote)
	}
	printReplicas(o, d.Replicas)
	return 0
}

func printReplicas(o *opsCommand, rs []agent.ReplicaView) {
	tw := o.table()
	fmt.Fprintln(tw, "REPLICA\tNODE\tLIVE\tEPOCH\tLAST LSN\tLAG\tWRITE QUORUM\tNOTE")
	for _, r := range rs {
		epoch, lsn, lag := "?", "?", "unknown here"
		if r.Reported {
			epoch, lsn = strconv.FormatUint(r.Epoch, 10), strconv.FormatUint(r.LastLSN, 10)
		}
		if r.Lag != nil {
			lag = strconv.FormatUint(*r.Lag, 10)
		}
		var note []string
		if r.InSync {
			note = append(note, "in sync")
		}
		if r.Fenced {
			note = append(note, "fenced")
		}
		if r.Stalled != "" {
			note = append(note, "stalled: "+r.Stalled)
		}
		fmt.Fprintf(tw, "%s\t%d\t%v\t%s\t%s\t%s\t%v\t%s\n", r.Region, r.Node, r.Live, epoch, lsn, lag, r.InWriteQuorum, strings.Join(note, ", "))
	}
	_ = tw.Flush()
}

// runExplain is `fmnode explain P`.
func runExplain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := newOps("explain", stdout, stderr)
	var ex agent.ExplainResponse
	if code, done := o.fetchPartition(ctx, args, agent.PathExplain, &ex); done {
		return code
	}
	fmt.Fprintf(stdout, "as %s sees it:\n%s", ex.Answered, ex.Text)
	if len(ex.Candidates) > 0 {
		fmt.Fprintln(stdout)
		tw := o.table()
		fmt.Fprintln(tw, "RANK\tCANDIDATE\tELIGIBLE\tPRIORITY\tEPOCH\tLAST LSN\tLAG\tWHY")
		for i, cd := range ex.Candidates {
			fmt.Fprintf(tw, "%d\t%s\t%v\t%d\t%d\t%d\t%d\t%s\n", i+1, cd.Region, cd.Eligible, cd.Priority, cd.Epoch, cd.LastLSN, cd.LagOps, cd.Why)
		}
		_ = tw.Flush()
	}
	if ex.Suppressed != "" {
		fmt.Fprintf(stdout, "blocked by policy: %s\n", ex.Suppressed)
	}
	fmt.Fprintf(stdout, "last decision of the manager: %s", ex.LastDecision)
	if ex.LastSuppressed != "" {
		fmt.Fprintf(stdout, " (blocked: %s)", ex.LastSuppressed)
	}
	fmt.Fprintln(stdout)
	return 0
}

// runHistory is `fmnode history [P]`.
func runHistory(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := newOps("history", stdout, stderr)
	pos, c, code := o.parse(args, 0, 1, "[P] [flags]")
	if code >= 0 {
		return code
	}
	path := agent.PathHistory
	if len(pos) == 1 {
		p, err := partitionArg(pos[0])
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", o.name, err)
			return 2
		}
		path += "?id=" + strconv.Itoa(int(p))
	}
	ctx, cancel := context.WithTimeout(ctx, o.af.timeout)
	defer cancel()
	var hr agent.HistoryResponse
	if err := c.call(ctx, "GET", path, nil, &hr); err != nil {
		return o.fail(err)
	}
	if o.json() {
		printJSON(stdout, hr)
		return 0
	}
	tw := o.table()
	fmt.Fprintln(tw, "PARTITION\tEPOCH\tWHEN\tKIND\tFROM\tTO\tWHO\tWHY")
	for _, p := range hr.Partitions {
		for _, t := range p.Transitions {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, t.Epoch, t.At.Format(time.RFC3339Nano), t.Kind, t.From, t.To, t.Who, t.Why)
		}
	}
	_ = tw.Flush()
	if len(hr.Partitions) == 1 && len(hr.Partitions[0].Events) > 0 {
		fmt.Fprintf(stdout, "\nthe failover manager's recent events on %s:\n", hr.Answered)
		for _, e := range hr.Partitions[0].Events {
			fmt.Fprintf(stdout, "  %s\n", e)
		}
	}
	return 0
}

// runSwitchover is `fmnode switchover P --to R [--wait]`.
func runSwitchover(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := newOps("switchover", stdout, stderr)
	to := o.fs.String("to", "", "the region to make write region (required)")
	reason := o.fs.String("reason", "", "why (recorded in the partition's history)")
	wait := o.fs.Bool("wait", false, "wait until the register shows the new write region, or the switchover aborted")
	pos, c, code := o.parse(args, 1, 1, "P --to REGION [--wait] [--reason TEXT] [flags]")
	if code >= 0 {
		return code
	}
	p, err := partitionArg(pos[0])
	if err != nil || *to == "" {
		fmt.Fprintf(stderr, "%s: partition and --to are required: %v\n", o.name, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, o.af.timeout)
	defer cancel()
	var sr agent.SwitchoverResponse
	if err := c.call(ctx, "POST", agent.PathSwitchover, agent.SwitchoverRequest{Partition: p, To: *to, Reason: *reason}, &sr); err != nil {
		return o.fail(err)
	}
	if !*wait {
		if o.json() {
			printJSON(stdout, sr)
		} else {
			fmt.Fprintf(stdout, "switchover of partition %d from %s to %s proposed by %s (epoch %d)\n", sr.Partition, sr.From, sr.To, sr.Node, sr.Epoch)
		}
		return 0
	}
	if !o.json() {
		fmt.Fprintf(stdout, "switchover of partition %d from %s to %s proposed by %s; waiting\n", sr.Partition, sr.From, sr.To, sr.Node)
	}
	d, why, err := waitSwitchover(ctx, c, sr)
	if o.json() {
		printJSON(stdout, map[string]any{"switchover": sr, "partition": d, "done": err == nil && why == "", "why": why})
	}
	switch {
	case err != nil:
		return o.fail(fmt.Errorf("waiting for partition %d: %w", p, err))
	case why != "":
		fmt.Fprintf(stderr, "%s: partition %d's switchover to %s did not complete: %s\n", o.name, p, *to, why)
		return 1
	}
	if !o.json() {
		fmt.Fprintf(stdout, "partition %d: write region %s at epoch %d\n", p, d.WriteRegion, d.Epoch)
	}
	return 0
}

// waitSwitchover polls the partition until its register shows sr.To as
// write region (why ""), or the switchover aborted or never started (why
// says so, from the history).
func waitSwitchover(ctx context.Context, c *adminClient, sr agent.SwitchoverResponse) (agent.PartitionDetail, string, error) {
	path := agent.PathPartition + "?id=" + strconv.Itoa(int(sr.Partition))
	since := sr.RequestedAt.Add(-time.Second) // another node's clock may be a little behind
	started := false
	deadline := time.Now().Add(5 * time.Second)
	for {
		var d agent.PartitionDetail
		if err := c.call(ctx, "GET", path, nil, &d); err != nil {
			return d, "", err
		}
		if d.WriteRegion == sr.To && d.Phase == "steady" {
			return d, "", nil
		}
		if d.Phase == "switchover" {
			started = true
		} else {
			var hr agent.HistoryResponse
			if err := c.call(ctx, "GET", agent.PathHistory+"?id="+strconv.Itoa(int(sr.Partition)), nil, &hr); err != nil {
				return d, "", err
			}
			for _, ph := range hr.Partitions {
				for _, t := range ph.Transitions {
					if t.At.Before(since) {
						continue
					}
					switch t.Kind {
					case "start-switchover":
						started = true
					case "abort-switchover":
						return d, fmt.Sprintf("aborted at epoch %d (%s): %s", t.Epoch, t.At.Format(time.RFC3339Nano), t.Why), nil
					}
				}
				if !started && time.Now().After(deadline) {
					why := "the switchover never started (its proposal did not commit)"
					if n := len(ph.Events); n > 0 {
						why += "; last manager event: " + ph.Events[n-1]
					}
					return d, why, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return d, "", fmt.Errorf("still %s at %s: %w", d.Phase, d.WriteRegion, ctx.Err())
		case <-time.After(opsPollEvery):
		}
	}
}

// runDrain is `fmnode drain --region R [--stop] [--wait]`.
func runDrain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := newOps("drain", stdout, stderr)
	region := o.fs.String("region", "", "the region to move every partition out of (required)")
	stop := o.fs.Bool("stop", false, "stop the drain (switchovers already started finish)")
	status := o.fs.Bool("status", false, "only show the drain's progress")
	reason := o.fs.String("reason", "", "why (recorded in the partitions' history)")
	wait := o.fs.Bool("wait", false, "wait until no partition is left in the region, showing the progress")
	_, c, code := o.parse(args, 0, 0, "--region R [--stop|--status] [--wait] [--reason TEXT] [flags]")
	if code >= 0 {
		return code
	}
	if *region == "" {
		fmt.Fprintf(stderr, "%s: --region is required\n", o.name)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, o.af.timeout)
	defer cancel()
	get := agent.PathDrain + "?region=" + url.QueryEscape(*region)
	var dr agent.DrainResponse
	var err error
	if *status {
		err = c.call(ctx, "GET", get, nil, &dr)
	} else {
		err = c.call(ctx, "POST", agent.PathDrain, agent.DrainRequest{Region: *region, Reason: *reason, Stop: *stop}, &dr)
	}
	if err != nil {
		return o.fail(err)
	}
	printDrain(o, dr)
	exit := drainExit(o, dr)
	for *wait && !*stop && dr.Remaining > 0 {
		select {
		case <-ctx.Done():
			return o.fail(fmt.Errorf("%d partitions still in %s: %w", dr.Remaining, *region, ctx.Err()))
		case <-time.After(opsPollEvery * 5):
		}
		before := dr.Remaining
		dr = agent.DrainResponse{}
		if err := c.call(ctx, "GET", get, nil, &dr); err != nil {
			return o.fail(err)
		}
		if dr.Remaining != before || dr.Remaining == 0 {
			printDrain(o, dr)
		}
		exit = drainExit(o, dr)
	}
	return exit
}

// drainExit is 1 when a node of the region did not answer.
func drainExit(o *opsCommand, dr agent.DrainResponse) int {
	for _, n := range dr.Nodes {
		if n.Error != "" {
			fmt.Fprintf(o.stderr, "%s: %s did not apply it: %s\n", o.name, n.Node, n.Error)
			return 1
		}
	}
	return 0
}

func printDrain(o *opsCommand, dr agent.DrainResponse) {
	if o.json() {
		printJSON(o.stdout, dr)
		return
	}
	state := "stopped"
	if dr.Active {
		state = "active"
	}
	fmt.Fprintf(o.stdout, "drain of %s: %s, %d partitions still to move\n", dr.Region, state, dr.Remaining)
	for _, n := range dr.Nodes {
		if n.Error != "" {
			fmt.Fprintf(o.stdout, "  %s: %s\n", n.Node, n.Error)
		}
	}
}

// runPause is `fmnode pause [P] --reason TEXT`; runResume is `fmnode
// resume [P]`. Without P the pause is recorded in the cluster spec and
// every agent stops (or resumes) automatic failover of every partition.
func runPause(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return pauseCmd(ctx, "pause", true, args, stdout, stderr)
}

func runResume(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return pauseCmd(ctx, "resume", false, args, stdout, stderr)
}

func pauseCmd(ctx context.Context, name string, paused bool, args []string, stdout, stderr io.Writer) int {
	o := newOps(name, stdout, stderr)
	reason := o.fs.String("reason", "", "why (recorded in the partition's history; required to pause)")
	pos, c, code := o.parse(args, 0, 1, "[P] [--reason TEXT] [flags]")
	if code >= 0 {
		return code
	}
	if paused && *reason == "" {
		fmt.Fprintf(stderr, "%s: --reason is required\n", o.name)
		return 2
	}
	req := agent.PauseRequest{Paused: paused, Reason: *reason}
	if len(pos) == 1 {
		p, err := partitionArg(pos[0])
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", o.name, err)
			return 2
		}
		req.Partition = p
	}
	ctx, cancel := context.WithTimeout(ctx, o.af.timeout)
	defer cancel()
	var pr agent.PauseResponse
	if err := c.call(ctx, "POST", agent.PathPause, req, &pr); err != nil {
		return o.fail(err)
	}
	failed := 0
	for _, a := range pr.Agents {
		if !a.OK {
			failed++
		}
	}
	exit := 0
	if failed > 0 {
		if req.Partition == 0 {
			fmt.Fprintf(stderr, "%s: recorded in the cluster spec (version %d), but %d of %d agents did not confirm it; each applies it at its next read of the spec\n",
				o.name, pr.SpecVersion, failed, len(pr.Agents))
		} else {
			fmt.Fprintf(stderr, "%s: %d of %d agents did not apply it (call again once they answer)\n", o.name, failed, len(pr.Agents))
		}
		exit = 1
	}
	if o.json() {
		printJSON(stdout, pr)
		return exit
	}
	what := fmt.Sprintf("automatic failover of every partition on every agent (cluster spec version %d, kept across restarts)", pr.SpecVersion)
	if req.Partition != 0 {
		what = fmt.Sprintf("automatic failover of partition %d (committed to its register, version %d)", req.Partition, pr.Version)
		if pr.Already {
			what = fmt.Sprintf("automatic failover of partition %d (already so in its register, version %d)", req.Partition, pr.Version)
		}
	}
	fmt.Fprintf(stdout, "%s: %s\n", map[bool]string{true: "paused", false: "resumed"}[paused], what)
	tw := o.table()
	fmt.Fprintln(tw, "AGENT\tAPPLIED")
	for _, a := range pr.Agents {
		ok := "yes"
		if !a.OK {
			ok = "no: " + a.Error
		}
		fmt.Fprintf(tw, "%s\t%s\n", a.Node, ok)
	}
	_ = tw.Flush()
	return exit
}

// fetchPartition runs a "P [flags]" command's request: it parses args,
// GETs path?id=P into out and prints it when -o json asks. done reports
// that the command has finished, with its exit code; otherwise the caller
// prints out as a table.
func (o *opsCommand) fetchPartition(ctx context.Context, args []string, path string, out any) (code int, done bool) {
	pos, c, code := o.parse(args, 1, 1, "P [flags]")
	if code >= 0 {
		return code, true
	}
	p, err := partitionArg(pos[0])
	if err != nil {
		fmt.Fprintf(o.stderr, "%s: %v\n", o.name, err)
		return 2, true
	}
	ctx, cancel := context.WithTimeout(ctx, o.af.timeout)
	defer cancel()
	if err := c.call(ctx, "GET", path+"?id="+strconv.Itoa(int(p)), nil, out); err != nil {
		return o.fail(err), true
	}
	if o.json() {
		printJSON(o.stdout, out)
		return 0, true
	}
	return 0, false
}
