package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/agentcfg"
	"github.com/fmnode/fmnode/internal/clusterspec"
	"github.com/fmnode/fmnode/internal/proctest"
	"github.com/fmnode/fmnode/txtdns/kv"
	"github.com/fmnode/fmnode/txtdns/routing"
)

var testRegions = []string{"east", "north", "west"}

// tagent is one agent run in this process.
type tagent struct {
	a      *Agent
	cfg    agentcfg.Config
	log    *syncBuffer // everything the agent logged
	cancel context.CancelFunc
	errc   chan error
}

// testConfig is node i's config (1-based), insecure, on free loopback
// ports; node 2 serves DNS (so that it outlives node 1, the preferred
// region's).
func testConfig(t *testing.T, i int, ports []int, dir string) agentcfg.Config {
	c := agentcfg.Default()
	c.Name = fmt.Sprintf("n%d", i)
	c.NodeID = agentcfg.NodeID(i)
	c.Region = testRegions[(i-1)%len(testRegions)]
	c.Zone = c.Region + "-a"
	c.Cluster = "test"
	c.DataDir = dir
	c.Insecure = true
	p := ports[(i-1)*4:]
	c.Bind.NodeAddr = fmt.Sprintf("127.0.0.1:%d", p[0])
	c.Bind.APIAddr = fmt.Sprintf("127.0.0.1:%d", p[1])
	c.Bind.GossipAddr = fmt.Sprintf("127.0.0.1:%d", p[2])
	if i == 2 {
		c.Bind.DNSAddr = fmt.Sprintf("127.0.0.1:%d", p[3])
		c.DNS.Zone = "fm.test."
	}
	if i != 1 {
		c.RetryJoin = []string{fmt.Sprintf("127.0.0.1:%d", ports[2])}
	}
	c.ShutdownTimeout = 5 * time.Second
	require.NoError(t, c.Validate())
	return c
}

func startAgent(t *testing.T, cfg agentcfg.Config) *tagent {
	t.Helper()
	buf := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t}, buf), &slog.HandlerOptions{Level: slog.LevelInfo})).With("agent", cfg.Name)
	a, err := New(cfg, Options{Version: "test", Logger: log})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ta := &tagent{a: a, cfg: cfg, log: buf, cancel: cancel, errc: make(chan error, 1)}
	go func() { ta.errc <- a.Run(ctx) }()
	return ta
}

func (ta *tagent) stop(t *testing.T) {
	if ta.cancel == nil {
		return
	}
	ta.cancel()
	ta.cancel = nil
	select {
	case err := <-ta.errc:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatalf("agent %s did not stop within 15 s", ta.cfg.Name)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	if os.Getenv("FMNODE_TEST_LOGS") != "" {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

func post(t *testing.T, url string, in, out any) int {
	t.Helper()
	return postAuth(t, url, "", in, out)
}

// postAuth is post with a bearer token (none when empty).
func postAuth(t *testing.T, url, token string, in, out any) int {
	t.Helper()
	b, err := json.Marshal(in)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		require.NoError(t, json.Unmarshal(body, out), string(body))
	}
	if resp.StatusCode >= 300 {
		t.Logf("POST %s: %d %s", url, resp.StatusCode, body)
	}
	return resp.StatusCode
}

func waitReady(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, proctest.WaitHTTP(ctx, "http://"+addr+PathReadyz, http.DefaultClient), "agent at %s never became ready", addr)
}

// TestAgentsInitWriteFailover: three agents in one process, one per
// region, insecure on loopback. init through one of them; every agent
// hosts its partitions; the Go client writes through DNS and the data
// API; a second init is refused; the write region's agent stops and the
// others fail over, losing no acknowledged write.
func TestAgentsInitWriteFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets, fsyncs and gossip")
	}
	ports := proctest.FreePorts(t, 12)
	var as []*tagent
	for i := 1; i <= 3; i++ {
		as = append(as, startAgent(t, testConfig(t, i, ports, t.TempDir())))
	}
	t.Cleanup(func() {
		for _, ta := range as {
			ta.stop(t)
		}
	})
	api := func(i int) string { return "http://" + as[i].cfg.Bind.APIAddr }

	for _, ta := range as {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(t, proctest.WaitHTTP(ctx, "http://"+ta.cfg.Bind.APIAddr+PathHealthz, http.DefaultClient))
		cancel()
	}
	// Before init: not ready, the data API says why.
	resp, err := http.Get(api(1) + "/v1/kv/k")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Contains(t, string(body), "fmnode init")

	const parts = 8
	req := InitRequest{Spec: clusterspec.Spec{Format: clusterspec.Format, Regions: testRegions, Partitions: parts,
		Consistency: clusterspec.ConsistencyStrong, MinDurability: 2, Profile: clusterspec.Profile{Name: clusterspec.ProfileFast}},
		ExpectNodes: 3, WaitSeconds: 30}
	var sr SpecResponse
	require.Equal(t, http.StatusCreated, post(t, api(0)+PathInit, req, &sr))
	require.Len(t, sr.Spec.Nodes, 3)
	require.Equal(t, http.StatusConflict, post(t, api(2)+PathInit, req, nil), "a second init must be refused")
	for i := range as {
		waitReady(t, as[i].cfg.Bind.APIAddr)
	}

	// The DNS server answers dig, as an operator would ask it.
	if dig, err := exec.LookPath("dig"); err == nil {
		host, port, _ := net.SplitHostPort(as[1].cfg.Bind.DNSAddr)
		require.Eventually(t, func() bool {
			out, err := exec.Command(dig, "@"+host, "-p", port, "+short", "+time=1", "+tries=1", "TXT", "p-1.fm.test.").CombinedOutput()
			return err == nil && strings.Contains(string(out), "e=1")
		}, 10*time.Second, 50*time.Millisecond, "dig found no route for partition 1")
	} else {
		t.Log("dig not installed: the DNS check uses the Go resolver only")
	}
	res, err := routing.NewDNSResolver(routing.DNSResolverConfig{Servers: []string{as[1].cfg.Bind.DNSAddr}})
	require.NoError(t, err)
	c, err := kv.New(kv.Config{Scheme: "http", Routing: routing.Config{Zone: "fm.test.", Resolver: res, PartitionCount: parts}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	acked := map[string]string{}
	for k := 0; k < 40; k++ {
		key, val := fmt.Sprintf("key-%d", k), fmt.Sprintf("v%d", k)
		var last error
		if !assert.Eventually(t, func() bool { last = c.Put(ctx, key, []byte(val)); return last == nil }, 20*time.Second, 50*time.Millisecond, "put %s", key) {
			for _, ta := range as {
				resp, err := http.Get("http://" + ta.cfg.Bind.APIAddr + PathPartitions)
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					t.Logf("%s: %s", ta.cfg.Name, b)
				}
			}
			t.Fatalf("put %s: %v", key, last)
		}
		acked[key] = val
	}
	for key, val := range acked {
		v, found, err := c.Get(ctx, key, routing.ConsistencyStrong)
		require.NoError(t, err)
		require.True(t, found, key)
		require.Equal(t, val, string(v))
	}

	// The preferred region (east, node 1) goes away; north and west take
	// over every partition, and the client follows through DNS and
	// redirects.
	killed := time.Now()
	as[0].stop(t)
	for key, val := range acked {
		var v []byte
		var found bool
		require.Eventually(t, func() bool {
			var err error
			v, found, err = c.Get(ctx, key, routing.ConsistencyStrong)
			return err == nil
		}, 30*time.Second, 50*time.Millisecond, "strong read of %s after the failover", key)
		require.True(t, found, "acknowledged write %s lost", key)
		require.Equal(t, val, string(v))
	}
	t.Logf("every acknowledged write read back strongly %v after the preferred region stopped", time.Since(killed).Round(time.Millisecond))
	require.Eventually(t, func() bool { return c.Put(ctx, "after", []byte("x")) == nil }, 30*time.Second, 50*time.Millisecond)
	checkFailoverMetrics(t, as[1:], parts, "east")
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
