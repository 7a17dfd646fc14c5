package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/agent"
	"github.com/fmnode/fmnode/internal/certs"
	"github.com/fmnode/fmnode/internal/proctest"
	"github.com/fmnode/fmnode/txtdns"
	"github.com/fmnode/fmnode/txtdns/kv"
	"github.com/fmnode/fmnode/txtdns/routing"
)

// e2eCluster is a cluster of real `fmnode agent` processes on loopback,
// with mutual TLS, as an operator would run it: laid out by localCluster,
// its processes run under proctest.
type e2eCluster struct {
	t     *testing.T
	lc    *localCluster
	bin   string
	dir   string
	nodes []*e2eNode
}

type e2eNode struct {
	*localNode
	proc *proctest.Proc
}

// newE2ECluster writes certificates and one config per node (node 2, in
// north, serves DNS) and starts nothing yet.
func newE2ECluster(t *testing.T, nodes int) *e2eCluster {
	c := &e2eCluster{t: t, bin: proctest.Build(t, "github.com/fmnode/fmnode/cmd/fmnode"), dir: t.TempDir()}
	var err error
	c.lc, err = newLocalCluster(localClusterConfig{Bin: c.bin, Dir: c.dir, Nodes: nodes, Cluster: "e2e", Zone: "fm.e2e.", DNSNode: 2})
	require.NoError(t, err)
	for _, n := range c.lc.nodes {
		c.nodes = append(c.nodes, &e2eNode{localNode: n})
	}
	return c
}

func (c *e2eCluster) start(n *e2eNode) {
	n.proc = proctest.Start(c.t, proctest.ProcSpec{Name: n.name, Path: c.bin, Args: n.agentArgs(),
		Env: c.lc.env, LogFile: filepath.Join(c.dir, n.name, fmt.Sprintf("agent-%d.log", time.Now().UnixNano()))})
}

// run runs one fmnode admin command to completion and returns its stdout.
func (c *e2eCluster) run(args ...string) (string, int) {
	p := proctest.Start(c.t, proctest.ProcSpec{Name: args[0], Path: c.bin, Args: args, Env: c.lc.env})
	code, err := p.Wait(2 * time.Minute)
	require.NoError(c.t, err, p.Tail())
	return p.Tail(), code
}

func (c *e2eCluster) adminArgs(n *e2eNode) []string {
	return []string{"--addr", n.api, "--ca-file", c.lc.cl.CAFile, "--cert-file", c.lc.cl.CertFile, "--key-file", c.lc.cl.KeyFile}
}

func (c *e2eCluster) waitUp(n *e2eNode) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(c.t, c.lc.waitHTTP(ctx, n.localNode, agent.PathHealthz, n.proc.Done()), "%s never answered:\n%s", n.name, n.proc.Tail())
}

func (c *e2eCluster) waitReady(n *e2eNode, within time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	require.NoError(c.t, c.lc.waitHTTP(ctx, n.localNode, agent.PathReadyz, n.proc.Done()), "%s never became ready:\n%s", n.name, n.proc.Tail())
}

func (c *e2eCluster) status(n *e2eNode) (agent.NodeStatus, error) { return c.lc.status(n.localNode) }

// TestAgentEndToEnd runs three `fmnode agent` processes (one per region)
// from the built binary, with mutual TLS on loopback: init, writes and
// reads at each consistency level through the Go client, kill -9 of the
// write region's agent (failover within lease + drift + 1 s, nothing
// acknowledged lost), its restart (false progress in the conflict record,
// catch-up by delta), and a peer without a cluster certificate refused.
func TestAgentEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("real agent processes")
	}
	c := newE2ECluster(t, 3)
	for _, n := range c.nodes {
		c.start(n)
	}
	for _, n := range c.nodes {
		c.waitUp(n)
	}
	east, north, west := c.nodes[0], c.nodes[1], c.nodes[2]

	const parts = 6
	out, code := c.run(append([]string{"init"}, append(c.adminArgs(west), "--partitions", fmt.Sprint(parts), "--profile", "fast",
		"--regions", "east,north,west", "--expect-nodes", "3", "--wait", "60s")...)...)
	require.Equal(t, 0, code, out)
	out, code = c.run(append([]string{"init"}, append(c.adminArgs(north), "--partitions", "6")...)...)
	require.NotEqual(t, 0, code, "a second init must fail: %s", out)
	require.Contains(t, out, "already_initialized")
	for _, n := range c.nodes {
		c.waitReady(n, 60*time.Second)
	}

	res, err := routing.NewDNSResolver(routing.DNSResolverConfig{Servers: []string{north.dns}})
	require.NoError(t, err)
	cl, err := kv.New(kv.Config{HTTP: &http.Client{Transport: &http.Transport{TLSClientConfig: c.lc.tlsCfg}},
		Routing: routing.Config{Zone: "fm.e2e.", Resolver: res, PartitionCount: parts}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Writes and reads at every consistency level.
	var mu sync.Mutex
	acked := map[string]string{}
	put := func(key, val string) error {
		err := cl.Put(ctx, key, []byte(val))
		if err == nil {
			mu.Lock()
			acked[key] = val
			mu.Unlock()
		}
		return err
	}
	for k := 0; k < 30; k++ {
		key := fmt.Sprintf("key-%d", k)
		require.Eventually(t, func() bool { return put(key, "v1") == nil }, 30*time.Second, 50*time.Millisecond, "put %s", key)
	}
	sess := cl.NewSession()
	require.NoError(t, sess.Put(ctx, "session-key", []byte("mine")))
	v, found, err := sess.Get(ctx, "session-key", routing.ConsistencySession)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "mine", string(v), "read-your-writes")
	for _, lvl := range []routing.Consistency{routing.ConsistencyStrong, routing.ConsistencyBoundedStaleness, routing.ConsistencySession, routing.ConsistencyEventual} {
		require.Eventually(t, func() bool {
			v, found, err := cl.Get(ctx, "key-1", lvl)
			return err == nil && found && string(v) == "v1"
		}, 10*time.Second, 50*time.Millisecond, "read at %v", lvl)
	}

	// Every partition's write region is east (the preferred region).
	st, err := c.status(east)
	require.NoError(t, err)
	require.Len(t, st.Partitions, parts)
	for _, p := range st.Partitions {
		require.Equal(t, "east", p.WriteRegion, "partition %d", p.ID)
	}

	// The operator's commands against the real agents (through west).
	cli := func(args ...string) (string, int) {
		return c.run(append(args, c.adminArgs(west)...)...)
	}
	out, code = cli("status", "-o", "json")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `"east"`)
	checkTables(t, cli, c.nodes, parts)
	out, code = cli("explain", "2")
	require.Equal(t, 0, code, out)
	out, code = cli("switchover", "2", "--to", "mars")
	require.NotEqual(t, 0, code, "a switchover to an unknown region must be refused: %s", out)
	require.Contains(t, out, "mars")
	out, code = cli("switchover", "2", "--to", "north", "--reason", "e2e", "--wait")
	require.Equal(t, 0, code, out)
	require.Eventually(t, func() bool { return c.leaders(north)[2] == north.name }, 20*time.Second, 50*time.Millisecond,
		"partition 2 never moved to north")
	out, code = cli("history", "2")
	require.Equal(t, 0, code, out)
	checkHistory(t, out)
	out, code = cli("pause", "--reason", "e2e")
	require.Equal(t, 0, code, out)
	out, code = cli("resume")
	require.Equal(t, 0, code, out)

	// Phase A: kill -9 the write region's agent. Every partition gets a
	// new write region in a new epoch, as the surviving agents report it.
	east.proc.Kill()
	killed := time.Now()
	prof := failover.FastConfig()
	bound := prof.LeaseDuration + prof.MaxClockDrift + time.Second
	var took time.Duration
	require.Eventually(t, func() bool {
		leaders := c.leaders(north, west)
		took = time.Since(killed)
		return len(leaders) == parts
	}, 30*time.Second, 20*time.Millisecond, "the partitions did not fail over")
	t.Logf("every partition failed over %v after kill -9 of the write region's agent (bound %v)", took.Round(time.Millisecond), bound)
	require.LessOrEqual(t, took, bound, "failover slower than lease + drift + 1 s")
	// The DNS server (north) publishes the new routes: the publish lag.
	var published time.Duration
	require.Eventually(t, func() bool {
		for p := uint32(1); p <= parts; p++ {
			r, err := res.LookupTXT(ctx, txtdns.PartitionName("fm.e2e.", p))
			if err != nil || len(r.Records) == 0 {
				return false
			}
			run, err := txtdns.DecodeRun(r.Records[0])
			if err != nil || run.Epoch < 2 || run.WriteRegion == "east" {
				return false
			}
		}
		published = time.Since(killed)
		return true
	}, 10*time.Second, 10*time.Millisecond, "DNS never published the failover")
	t.Logf("DNS published every new route %v after the kill, %v after the agents reported the failover",
		published.Round(time.Millisecond), (published - took).Round(time.Millisecond))
	c.checkAcked(ctx, cl, &mu, acked)
	require.Eventually(t, func() bool { return put("after-failover", "y") == nil }, 30*time.Second, 50*time.Millisecond)

	// east comes back and catches up from the log (no snapshot).
	c.start(east)
	c.waitReady(east, 60*time.Second)
	c.waitCaughtUp(east, c.nodes)

	// Phase B, false progress: freeze the new write region's followers,
	// send it strong writes it appends but cannot commit, kill -9 it, and
	// kill -9 the frozen followers too (their unread sockets held the
	// appends). They restart from their disks and fail over without those
	// writes; when the old write region returns, they are its false
	// progress and must go to its conflict record.
	// First the returned east must be back in every write quorum:
	// without it, losing the write region would leave fewer regions than
	// the minimum durability, and the failover is (rightly) refused.
	require.Eventually(t, func() bool {
		full := 0
		for _, n := range c.nodes {
			st, err := c.status(n)
			if err != nil {
				return false
			}
			for _, p := range st.Partitions {
				if p.Role == "leader" && len(p.Quorum) == 3 && len(p.RegisterQuorum) == 3 {
					full++
				}
			}
		}
		return full == parts
	}, 60*time.Second, 50*time.Millisecond, "east never grew back into the write quorums")
	leaders := c.leaders(c.nodes...)
	wr := c.byName(mostCommon(leaders))
	var followers []*e2eNode
	for _, n := range c.nodes {
		if n != wr {
			followers = append(followers, n)
			require.NoError(t, n.proc.Signal(syscall.SIGSTOP))
		}
	}
	wst, err := c.status(wr)
	require.NoError(t, err)
	epochOf := map[uint32]uint64{}
	for _, p := range wst.Partitions {
		epochOf[p.ID] = p.Epoch
	}
	hp, err := routing.NewOneBasedHashPartitioner(parts)
	require.NoError(t, err)
	// Two keys of every partition wr leads.
	var doomed []string
	perPart := map[uint32]int{}
	for k := 0; len(doomed) < 2*len(wst.Partitions) && k < 10000; k++ {
		key := fmt.Sprintf("doomed-%d", k)
		p := hp.Partition(key)
		if leaders[p] == wr.name && perPart[p] < 2 {
			perPart[p]++
			doomed = append(doomed, key)
		}
	}
	var pending sync.WaitGroup
	var statuses sync.Map
	raw := &http.Client{Transport: &http.Transport{TLSClientConfig: c.lc.tlsCfg}, Timeout: 5 * time.Second}
	for _, key := range doomed {
		pending.Add(1)
		go func(key string) {
			defer pending.Done()
			req, err := http.NewRequest(http.MethodPut, "https://"+wr.api+"/v1/kv/"+key, strings.NewReader("x"))
			if err != nil {
				return
			}
			req.Header.Set("Fm-Epoch", fmt.Sprint(epochOf[hp.Partition(key)]))
			resp, err := raw.Do(req)
			if err != nil {
				statuses.Store(key, err.Error())
				return
			}
			resp.Body.Close()
			statuses.Store(key, resp.Status)
			if resp.StatusCode == http.StatusNoContent {
				mu.Lock()
				acked[key] = "x" // it must not be (no quorum), but if it is, it must survive
				mu.Unlock()
			}
		}(key)
	}
	// Kill once wr's log holds ops it has not committed (within its lease:
	// the frozen followers stopped renewing it).
	ahead := func() bool {
		st, err := c.status(wr)
		if err != nil {
			return false
		}
		n := 0
		for _, p := range st.Partitions {
			if p.LastLSN > p.CommitLSN {
				n++
			}
		}
		return n == len(perPart)
	}
	require.Eventually(t, ahead, 1500*time.Millisecond, 20*time.Millisecond, "%s never appended the writes it cannot commit: %v", wr.name, syncMapString(&statuses))
	// The status is the replica's memory; its appends reach the disk at the
	// next fsync. Killed before that, they were never false progress: the
	// node returns without them, which is right but proves nothing here;
	// 1.5 s is far above an fsync even on a loaded machine.
	time.Sleep(1500 * time.Millisecond)
	wr.proc.Kill()
	for _, n := range followers {
		n.proc.Kill()
	}
	pending.Wait()
	for _, n := range followers {
		c.start(n)
	}
	for _, n := range followers {
		c.waitReady(n, 60*time.Second)
	}
	if !assert.Eventually(t, func() bool {
		ls := c.leaders(followers...)
		if len(ls) != parts {
			return false
		}
		for _, l := range ls {
			if l == wr.name {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond) {
		t.Fatalf("no failover after the write region's agent died with false progress:%s", c.explain(followers...))
	}
	c.start(wr)
	c.waitReady(wr, 60*time.Second)
	conflicts := c.waitCaughtUp(wr, c.nodes)
	t.Logf("%s caught up; %d operations of its false progress are in its conflict record", wr.name, conflicts)
	// Its log says whether the appends had reached its disk before the
	// kill (then it set them aside on return); when they had not, there
	// was no false progress to record, and this run proves less.
	if strings.Contains(wr.proc.Tail(), "truncating log") {
		require.Positive(t, conflicts, "%s truncated its false progress: it must be in its conflict record", wr.name)
	} else {
		t.Logf("%s returned without false progress (the appends had not reached its disk before the kill); conflicts %d", wr.name, conflicts)
		require.Zero(t, conflicts, "conflict records without a truncation")
	}
	c.checkAcked(ctx, cl, &mu, acked)
	for _, n := range c.nodes {
		s, err := c.status(n)
		require.NoError(t, err)
		require.Zero(t, s.Snapshots, "%s sent a snapshot: the returning agents should catch up by delta", n.name)
	}

	// Without any client certificate: the probes' paths answer (a
	// kubelet presents none), nothing else does.
	pool := c.lc.tlsCfg.RootCAs
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}}, Timeout: 5 * time.Second}
	for path, want := range map[string]int{agent.PathHealthz: http.StatusOK, agent.PathReadyz: http.StatusOK,
		"/v1/kv/key-1": http.StatusUnauthorized, agent.PathSpec: http.StatusUnauthorized, agent.PathPartitions: http.StatusUnauthorized} {
		resp, err := anon.Get("https://" + north.api + path)
		require.NoError(t, err, path)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, "%s without a client certificate", path)
	}

	// A peer without a cluster certificate is refused, on the API and on
	// the node transport.
	foreign, err := certs.CreateCA(filepath.Join(c.dir, "foreign-ca"), certs.CAOptions{CommonName: "foreign"})
	require.NoError(t, err)
	fc, err := certs.CreateNode(foreign, filepath.Join(c.dir, "foreign"), certs.NodeOptions{Name: "intruder", Hosts: []string{"127.0.0.1"}})
	require.NoError(t, err)
	pair, err := tls.LoadX509KeyPair(fc.CertFile, fc.KeyFile)
	require.NoError(t, err)
	foreignTLS := &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS13}
	fcl := &http.Client{Transport: &http.Transport{TLSClientConfig: foreignTLS}, Timeout: 10 * time.Second}
	// Go's client offers a certificate only when its issuer is one the
	// server asks for, so the foreign one is not even sent: the API then
	// sees no certificate and answers 401. Either way it refuses.
	if resp, err := fcl.Get("https://" + north.api + "/v1/kv/key-1"); err == nil {
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the API answered a certificate the cluster CA did not sign")
	} else {
		require.NotContains(t, err.Error(), "Client.Timeout", "the API did not refuse the foreign certificate")
	}
	conn, err := tls.Dial("tcp", north.node, &tls.Config{Certificates: []tls.Certificate{pair}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
	if err == nil {
		// TLS 1.3 reports the server's refusal of the client certificate
		// at the first read.
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	require.Error(t, err, "the node transport accepted a certificate the cluster CA did not sign")
	require.NotContains(t, err.Error(), "i/o timeout", "the node transport did not refuse the foreign certificate")

	// SIGTERM: a graceful stop, exit 0 within the bound.
	for _, n := range c.nodes {
		code, err := n.proc.Stop(15 * time.Second)
		require.NoError(t, err, n.proc.Tail())
		require.Equal(t, 0, code, n.proc.Tail())
	}
}

// leaders maps each partition to the agent (of nodes) that leads it in
// an epoch after the first, as that agent reports it.
func (c *e2eCluster) leaders(nodes ...*e2eNode) map[uint32]string {
	out := map[uint32]string{}
	for _, n := range nodes {
		st, err := c.status(n)
		if err != nil {
			continue
		}
		for _, p := range st.Partitions {
			if p.Role == "leader" && p.Epoch >= 2 {
				out[p.ID] = n.name
			}
		}
	}
	return out
}

func (c *e2eCluster) byName(name string) *e2eNode {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	c.t.Fatalf("no node %q", name)
	return nil
}

func mostCommon(m map[uint32]string) string {
	count := map[string]int{}
	best := ""
	for _, v := range m {
		count[v]++
		if count[v] > count[best] {
			best = v
		}
	}
	return best
}

// waitCaughtUp waits until n's replicas are in their leaders' epochs
// with their logs, and have applied what the leaders committed; it
// returns n's conflict records.
func (c *e2eCluster) waitCaughtUp(n *e2eNode, all []*e2eNode) int {
	var conflicts int
	require.Eventually(c.t, func() bool {
		st, err := c.status(n)
		if err != nil {
			return false
		}
		leaders := map[uint32]agent.PartitionStatus{}
		for _, m := range all {
			s, err := c.status(m)
			if err != nil {
				continue
			}
			for _, p := range s.Partitions {
				if p.Role == "leader" {
					leaders[p.ID] = p
				}
			}
		}
		conflicts = 0
		for _, p := range st.Partitions {
			l, ok := leaders[p.ID]
			// In the leader's epoch, holding its log (the same last op)
			// and what it committed.
			if !ok || p.Epoch != l.Epoch || p.LastLSN != l.LastLSN || p.LastEpoch != l.LastEpoch || p.AppliedLSN < l.CommitLSN {
				return false
			}
			conflicts += p.Conflicts
		}
		return true
	}, 20*time.Second, 100*time.Millisecond, "%s did not catch up:%s", n.name, c.explain(all...))
	return conflicts
}

// checkAcked reads every acknowledged write back, strongly.
func (c *e2eCluster) checkAcked(ctx context.Context, cl *kv.Client, mu *sync.Mutex, acked map[string]string) {
	mu.Lock()
	want := make(map[string]string, len(acked))
	for k, v := range acked {
		want[k] = v
	}
	mu.Unlock()
	for key, val := range want {
		var v []byte
		var found bool
		require.Eventually(c.t, func() bool {
			var err error
			v, found, err = cl.Get(ctx, key, routing.ConsistencyStrong)
			return err == nil
		}, 30*time.Second, 50*time.Millisecond, "strong read of %s", key)
		require.True(c.t, found, "acknowledged write %s lost", key)
		require.Equal(c.t, val, string(v), key)
	}
}

// explain is what the agents say of partition 1, for a failure message.
func (c *e2eCluster) explain(nodes ...*e2eNode) string {
	var b strings.Builder
	for _, n := range nodes {
		st, err := c.status(n)
		if err != nil {
			fmt.Fprintf(&b, "\n%s: %v", n.name, err)
			continue
		}
		for _, p := range st.Partitions {
			if p.ID == 1 {
				fmt.Fprintf(&b, "\n%s: partition 1: %s epoch %d (register %d, %s) last %d commit %d history %v conflicts %d; events:\n  %s",
					n.name, p.Role, p.Epoch, p.RegisterEpoch, p.RegisterWriteRegion, p.LastLSN, p.CommitLSN, p.History, p.Conflicts, strings.Join(p.Events, "\n  "))
			}
		}
	}
	return b.String()
}

func syncMapString(m *sync.Map) string {
	var b strings.Builder
	m.Range(func(k, v any) bool {
		fmt.Fprintf(&b, "%v: %v; ", k, v)
		return true
	})
	return b.String()
}

// checkTables reads the CLI's tables (the default output) from the real
// agents and checks what they say, row by row: the fake agent of
// ops_test.go pins the layout, this pins that the real answers fill it.
// Every partition is in its preferred region (east) at epoch 1 here.
func checkTables(t *testing.T, cli func(...string) (string, int), nodes []*e2eNode, parts int) {
	t.Helper()
	out, code := cli("status")
	require.Equal(t, 0, code, out)
	row := func(out, first string) []string {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == first {
				return f
			}
		}
		t.Fatalf("no row starting with %q in:\n%s", first, out)
		return nil
	}
	east := row(out, "east")
	require.Equal(t, []string{"east", "true", "false"}, east[:3], "the preferred region's row")
	assert.Equal(t, strconv.Itoa(parts), east[4], "east is write region of every partition:\n%s", out)
	for _, n := range nodes {
		r := row(out, n.name)
		assert.Equal(t, []string{n.name, strconv.Itoa(n.id), n.region, "alive"}, r[:4], "status row of %s:\n%s", n.name, out)
		assert.Equal(t, "yes", r[len(r)-1], "%s reached", n.name)
		assert.Contains(t, strings.Join(r, " "), "valid until", "%s holds its lease", n.name)
	}
	assert.Contains(t, out, "no switchover or failover in progress")

	out, code = cli("members")
	require.Equal(t, 0, code, out)
	for _, n := range nodes {
		r := row(out, strconv.Itoa(n.id))
		assert.Equal(t, []string{strconv.Itoa(n.id), n.name, n.region}, r[:3], "members row:\n%s", out)
		assert.Contains(t, r, "alive")
		assert.Equal(t, "true", r[len(r)-1], "%s is in the spec", n.name)
	}

	out, code = cli("partition", "show", "3")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "partition 3 (answered by")
	assert.Contains(t, out, "epoch 1, write region east, phase steady")
	r := row(out, "1") // the progress table: epoch 1, east, from LSN 0, open
	assert.Equal(t, []string{"1", "east"}, r[:2], "progress table:\n%s", out)
	assert.Equal(t, "open", r[len(r)-1])
	for _, n := range nodes {
		r := row(out, n.region)
		assert.Equal(t, "true", r[2], "%s live:\n%s", n.region, out)
		assert.Equal(t, "1", r[3], "%s at epoch 1", n.region)
		_, err := strconv.ParseUint(r[5], 10, 64)
		assert.NoError(t, err, "the lag of %s is a number wherever it is asked:\n%s", n.region, out)
	}
}

// checkHistory checks the history table of a partition switched over from
// east to north with reason "e2e": its rows name both steps, the regions,
// who proposed each and why.
func checkHistory(t *testing.T, out string) {
	t.Helper()
	var kinds []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 5 || f[0] != "2" {
			continue
		}
		kinds = append(kinds, f[3])
		assert.Equal(t, "east", f[4], "from:\n%s", out)
		assert.Equal(t, "north", f[5], "to:\n%s", out)
		switch f[3] {
		case "start-switchover": // proposed by the write region's node, with the operator's reason
			assert.Equal(t, "east", f[6], "who:\n%s", out)
			assert.Contains(t, l, "operator: e2e", "why:\n%s", out)
		case "complete-switchover": // by the target, once it holds every LSN
			assert.Equal(t, "north", f[6], "who:\n%s", out)
			assert.Contains(t, l, "target holds every LSN", "why:\n%s", out)
		}
	}
	assert.Contains(t, kinds, "start-switchover", out)
	assert.Contains(t, kinds, "complete-switchover", out)
}
