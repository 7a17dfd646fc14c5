package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/agentcfg"
	certgen "github.com/fmnode/fmnode/internal/certs"
	"github.com/fmnode/fmnode/internal/clusterspec"
	"github.com/fmnode/fmnode/internal/datadir"
	"github.com/fmnode/fmnode/internal/proctest"
)

// startCluster starts n insecure agents in this process and inits them
// (fast profile, 4 partitions).
func startCluster(t *testing.T, n int) []*tagent {
	t.Helper()
	return startClusterWith(t, n, nil, "")
}

// startClusterWith is startCluster with each config changed by mod (when
// set) and init sent with the bearer token (when set).
func startClusterWith(t *testing.T, n int, mod func(*agentcfg.Config), token string) []*tagent {
	t.Helper()
	as := startHealthyAgents(t, n, mod)
	require.Equal(t, http.StatusCreated, postAuth(t, "http://"+as[0].cfg.Bind.APIAddr+PathInit, token, testInitRequest(n), nil))
	for _, ta := range as {
		waitReady(t, ta.cfg.Bind.APIAddr)
	}
	return as
}

// startHealthyAgents starts n insecure agents in this process (each config
// changed by mod, when set), stopped at the test's end, and waits until
// every one answers /healthz; nothing is initialised.
func startHealthyAgents(t *testing.T, n int, mod func(*agentcfg.Config)) []*tagent {
	t.Helper()
	ports := proctest.FreePorts(t, 4*n)
	var as []*tagent
	for i := 1; i <= n; i++ {
		cfg := testConfig(t, i, ports, t.TempDir())
		if mod != nil {
			mod(&cfg)
		}
		as = append(as, startAgent(t, cfg))
	}
	t.Cleanup(func() {
		for _, ta := range as {
			ta.stop(t)
		}
	})
	for _, ta := range as {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(t, proctest.WaitHTTP(ctx, "http://"+ta.cfg.Bind.APIAddr+PathHealthz, http.DefaultClient))
		cancel()
	}
	return as
}

// testInitRequest is the init of the test clusters: fast profile, strong,
// 4 partitions, minimum durability 2, expecting n nodes.
func testInitRequest(n int) InitRequest {
	return InitRequest{Spec: clusterspec.Spec{Format: clusterspec.Format, Regions: testRegions, Partitions: 4,
		Consistency: clusterspec.ConsistencyStrong, MinDurability: 2, Profile: clusterspec.Profile{Name: clusterspec.ProfileFast}},
		ExpectNodes: n, WaitSeconds: 30}
}

func put(t *testing.T, url string, in, out any) int {
	t.Helper()
	b, err := json.Marshal(in)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPut, url, bytes.NewReader(b))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if out != nil {
		require.NoError(t, json.Unmarshal(body, out), string(body))
	}
	return resp.StatusCode
}

// TestConfigSetReachesEveryAgent: `fmnode config set` is a CAS on the
// system register with the spec's validation; every running agent learns
// the new version at once (pushed, not waiting for its poll).
func TestConfigSetReachesEveryAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets, fsyncs and gossip")
	}
	as := startCluster(t, 3)
	url := "http://" + as[1].cfg.Bind.APIAddr + PathSpec
	var sr SpecResponse
	require.Equal(t, http.StatusOK, put(t, url, SetRequest{Key: "blast_radius", Value: "5"}, &sr))
	require.Equal(t, uint64(2), sr.Version)
	require.Equal(t, 5, sr.Spec.BlastRadius)
	require.Equal(t, []string{"blast_radius"}, sr.Changed)
	for _, ta := range as {
		require.Eventually(t, func() bool {
			s, v, ok := ta.a.Spec()
			return ok && v == 2 && s.BlastRadius == 5
		}, 5*time.Second, 10*time.Millisecond, "%s never learnt spec version 2", ta.cfg.Name)
	}

	var eb struct{ Error, Code string }
	require.Equal(t, http.StatusConflict, put(t, url, SetRequest{Key: "blast_radius", Value: "6", Version: 1}, &eb), "a CAS on an old version must fail")
	require.Equal(t, CodeConflict, eb.Code)
	require.Equal(t, http.StatusBadRequest, put(t, url, SetRequest{Key: "partitions", Value: "9"}, &eb))
	require.Equal(t, CodeInvalidSpec, eb.Code)
	require.Contains(t, eb.Error, "partitions")
	require.Equal(t, http.StatusBadRequest, put(t, url, SetRequest{Key: "min_durability", Value: "7"}, &eb), "validation applies to set")
	require.Equal(t, http.StatusBadRequest, put(t, url, SetRequest{Key: "profile.name", Value: "paper"}, &eb))
	require.Contains(t, eb.Error, "lease safety")
	_, v, _ := as[0].a.Spec()
	require.Equal(t, uint64(2), v, "a refused set changed the spec")

	// never_promote is applied to every partition's register by the node
	// of its write region; every agent sees the new register value.
	require.Equal(t, http.StatusOK, put(t, url, SetRequest{Key: "never_promote", Value: "west"}, &sr))
	for _, ta := range as {
		require.Eventually(t, func() bool {
			st := status(t, ta)
			for _, p := range st.Partitions {
				if len(p.NeverPromote) != 1 || p.NeverPromote[0] != "west" {
					return false
				}
			}
			return len(st.Partitions) == 4
		}, 15*time.Second, 50*time.Millisecond, "%s: the registers never took never_promote=west", ta.cfg.Name)
	}

	// min_durability too (it was refused as not live before): each write
	// region's node proposes it under the core's guard.
	want := 1
	if sr.Spec.MinDurability == 1 {
		want = 2
	}
	require.Equal(t, http.StatusOK, put(t, url, SetRequest{Key: "min_durability", Value: strconv.Itoa(want)}, &sr))
	require.Eventually(t, func() bool {
		for p := 1; p <= 4; p++ {
			resp, err := http.Get("http://" + as[0].cfg.Bind.APIAddr + PathPartition + "?id=" + strconv.Itoa(p))
			if err != nil {
				return false
			}
			var d PartitionDetail
			err = json.NewDecoder(resp.Body).Decode(&d)
			resp.Body.Close()
			if err != nil || d.MinDurability != want {
				return false
			}
		}
		return true
	}, 15*time.Second, 50*time.Millisecond, "the registers never took min_durability=%d", want)
}

func status(t *testing.T, ta *tagent) NodeStatus {
	t.Helper()
	resp, err := http.Get("http://" + ta.cfg.Bind.APIAddr + PathPartitions)
	require.NoError(t, err)
	defer resp.Body.Close()
	var st NodeStatus
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// TestSecondAgentOnADataDirRefuses: the lock file guards the data
// directory; the second agent says who holds it and touches nothing.
func TestSecondAgentOnADataDirRefuses(t *testing.T) {
	ports := proctest.FreePorts(t, 8)
	dir := t.TempDir()
	first := startAgent(t, testConfig(t, 1, ports, dir))
	t.Cleanup(func() { first.stop(t) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, proctest.WaitHTTP(ctx, "http://"+first.cfg.Bind.APIAddr+PathHealthz, http.DefaultClient))
	cfg := testConfig(t, 1, ports[4:], dir)
	a, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	err = a.Run(ctx)
	require.ErrorIs(t, err, datadir.ErrLocked)
	require.Contains(t, err.Error(), dir)
}

// TestAgentRefusesCorruptStores: a damaged store is reported by path and
// the agent refuses to start; the file is left exactly as it was.
func TestAgentRefusesCorruptStores(t *testing.T) {
	for _, name := range []string{datadir.AcceptorName, SystemName, specCacheName} {
		t.Run(name, func(t *testing.T) {
			ports := proctest.FreePorts(t, 4)
			dir := t.TempDir()
			cfg := testConfig(t, 1, ports, dir)
			runBriefly(t, cfg) // creates the stores

			junk := bytes.Repeat([]byte("not a store "), 700)
			path := filepath.Join(dir, name)
			require.NoError(t, os.WriteFile(path, junk, 0o600))
			a, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			err = a.Run(context.Background())
			require.Error(t, err)
			require.Contains(t, err.Error(), path)
			require.Contains(t, err.Error(), "refuses to start")
			got, rerr := os.ReadFile(path)
			require.NoError(t, rerr)
			require.Equal(t, junk, got, "the damaged file was modified")
		})
	}
}

// TestAgentRefusesAMissingStore: once the stores existed, a deleted one is
// an error: an empty acceptor store would forget its promises.
func TestAgentRefusesAMissingStore(t *testing.T) {
	for _, name := range []string{datadir.AcceptorName, datadir.PartitionsName, SystemName} {
		t.Run(name, func(t *testing.T) {
			ports := proctest.FreePorts(t, 4)
			dir := t.TempDir()
			cfg := testConfig(t, 1, ports, dir)
			runBriefly(t, cfg)
			require.NoError(t, os.RemoveAll(filepath.Join(dir, name)))
			a, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			err = a.Run(context.Background())
			require.ErrorIs(t, err, datadir.ErrCorrupt)
			require.Contains(t, err.Error(), "is missing")
			_, serr := os.Stat(filepath.Join(dir, name))
			require.ErrorIs(t, serr, os.ErrNotExist, "the missing store was recreated")
		})
	}
}

// runBriefly runs an agent until its API answers, then stops it.
func runBriefly(t *testing.T, cfg agentcfg.Config) {
	t.Helper()
	a, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	require.NoError(t, proctest.WaitHTTP(wctx, "http://"+cfg.Bind.APIAddr+PathHealthz, http.DefaultClient))
	cancel()
	require.NoError(t, <-errc)
}

// TestReload: SIGHUP's reload changes the log level, swaps a rotated
// certificate, and names what needs a restart.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	ca, err := certgen.CreateCA(filepath.Join(dir, "ca"), certgen.CAOptions{CommonName: "test CA"})
	require.NoError(t, err)
	nd := filepath.Join(dir, "node")
	is, err := certgen.CreateNode(ca, nd, certgen.NodeOptions{Name: "n1", Hosts: []string{"127.0.0.1"}})
	require.NoError(t, err)
	cfg := agentcfg.Default()
	cfg.Name, cfg.NodeID, cfg.Region, cfg.Zone, cfg.Cluster, cfg.DataDir = "n1", 1, "east", "east-a", "test", filepath.Join(dir, "data")
	cfg.TLS = agentcfg.TLS{CertFile: is.CertFile, KeyFile: is.KeyFile, CAFile: is.CAFile}
	cfg.GossipKey = "AAAAAAAAAAAAAAAAAAAAAA=="
	require.NoError(t, cfg.Validate())
	level := new(slog.LevelVar)
	a, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), Level: level})
	require.NoError(t, err)
	a.certs, err = loadCerts(cfg.TLS)
	require.NoError(t, err)
	before := a.certs.get().Leaf.SerialNumber

	_, err = certgen.CreateNode(ca, nd, certgen.NodeOptions{Name: "n1", Hosts: []string{"127.0.0.1"}, Overwrite: true})
	require.NoError(t, err)
	next := cfg
	next.Log.Level = "debug"
	next.ShutdownTimeout = time.Minute
	applied, restart, err := a.Reload(next)
	require.NoError(t, err)
	require.Equal(t, []string{"log.level", "tls certificate"}, applied)
	require.Equal(t, []string{"shutdown_timeout"}, restart)
	require.Equal(t, slog.LevelDebug, level.Level())
	require.NotEqual(t, before, a.certs.get().Leaf.SerialNumber, "the rotated certificate was not loaded")

	// A certificate from another CA is refused and the old one stays.
	other, err := certgen.CreateCA(filepath.Join(dir, "other"), certgen.CAOptions{CommonName: "other CA"})
	require.NoError(t, err)
	serial := a.certs.get().Leaf.SerialNumber
	_, err = certgen.CreateNode(other, nd, certgen.NodeOptions{Name: "n1", Hosts: []string{"127.0.0.1"}, Overwrite: true})
	require.NoError(t, err)
	_, restart, err = a.Reload(next)
	require.Error(t, err)
	require.Contains(t, err.Error(), "not signed by the cluster CA")
	require.Contains(t, restart, "tls.ca_file", "the CA file changed: a restart is needed")
	require.Equal(t, serial, a.certs.get().Leaf.SerialNumber)
}

func TestVerifyPeer(t *testing.T) {
	dir := t.TempDir()
	ca, err := certgen.CreateCA(filepath.Join(dir, "ca"), certgen.CAOptions{CommonName: "test CA"})
	require.NoError(t, err)
	node, err := certgen.CreateNode(ca, filepath.Join(dir, "n1"), certgen.NodeOptions{Name: "n1", Hosts: []string{"127.0.0.1"}})
	require.NoError(t, err)
	client, err := certgen.CreateClient(ca, filepath.Join(dir, "c"), certgen.ClientOptions{Name: "n1"})
	require.NoError(t, err)
	spec := clusterspec.Spec{Nodes: []clusterspec.Node{{ID: 1, Name: "n1"}, {ID: 2, Name: "n2"}}}
	v := verifyPeer(spec)
	require.NoError(t, v(1, node.Cert))
	require.ErrorContains(t, v(2, node.Cert), `presented as node 2`)
	require.ErrorContains(t, v(3, node.Cert), "not in the cluster spec")
	require.ErrorContains(t, v(1, client.Cert), "without server authentication")
}

// TestDecisionsReachTheLog: the failover manager's decisions, with their
// reasons, are in the agent's log (here the never-promote policy the
// write region's node proposes).
func TestDecisionsReachTheLog(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets, fsyncs and gossip")
	}
	as := startCluster(t, 3)
	url := "http://" + as[0].cfg.Bind.APIAddr + PathSpec
	require.Equal(t, http.StatusOK, put(t, url, SetRequest{Key: "never_promote", Value: "west"}, nil))
	require.Eventually(t, func() bool {
		l := as[0].log.String()
		return strings.Contains(l, "msg=decision") && strings.Contains(l, "kind=policy")
	}, 15*time.Second, 50*time.Millisecond, "no policy decision in the write region's log")
}

// TestGlobalPauseSurvivesRestart: `fmnode pause` without a partition is
// recorded in the cluster spec, so an agent that was down when it was set,
// or restarts afterwards, comes back paused; resume reaches it the same
// way. (It lived in each agent's memory before: a restarted agent was
// unpaused and could fail partitions over in the middle of maintenance.)
func TestGlobalPauseSurvivesRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets, fsyncs and gossip")
	}
	as := startCluster(t, 3)
	api := func(i int) string { return "http://" + as[i].cfg.Bind.APIAddr }
	paused := func(i int) (bool, string) {
		var cs ClusterStatus
		if adminCall(t, "GET", api(i)+PathStatus, "", nil, &cs) != http.StatusOK {
			return false, ""
		}
		for _, n := range cs.Nodes {
			if n.Name == as[i].cfg.Name {
				return n.GlobalPause, n.GlobalPauseReason
			}
		}
		return false, ""
	}

	as[2].stop(t)
	var pr PauseResponse
	require.Equal(t, http.StatusOK, adminCall(t, "POST", api(0)+PathPause, "", PauseRequest{Paused: true, Reason: "maintenance window"}, &pr))
	require.NotZero(t, pr.SpecVersion)
	require.Len(t, pr.Agents, 3)
	for _, ag := range pr.Agents {
		assert.Equal(t, ag.Node != "n3", ag.OK, "%s: %s", ag.Node, ag.Error)
	}
	s, _, _ := as[0].a.Spec()
	require.Equal(t, "maintenance window", s.Pause)

	as[2] = startAgent(t, as[2].cfg)
	waitReady(t, as[2].cfg.Bind.APIAddr)
	require.Eventually(t, func() bool { p, why := paused(2); return p && why == "maintenance window" }, 10*time.Second, 50*time.Millisecond,
		"n3 was down when the pause was set and came back unpaused")

	// A restart of an agent that was paused keeps it paused.
	as[1].stop(t)
	as[1] = startAgent(t, as[1].cfg)
	waitReady(t, as[1].cfg.Bind.APIAddr)
	require.Eventually(t, func() bool { p, _ := paused(1); return p }, 10*time.Second, 50*time.Millisecond, "n2 restarted unpaused")

	require.Equal(t, http.StatusOK, adminCall(t, "POST", api(1)+PathPause, "", PauseRequest{Paused: false}, &pr))
	for i := range as {
		p, _ := paused(i)
		assert.False(t, p, "%s still paused after resume", as[i].cfg.Name)
	}
}
