package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fmnode/fmnode/internal/agent"
	"github.com/fmnode/fmnode/internal/agentcfg"
	"github.com/fmnode/fmnode/internal/certs"
	"github.com/fmnode/fmnode/internal/childproc"
)

// localCluster is a cluster of real `fmnode agent` processes on loopback
// with mutual TLS, laid out as an operator would: a CA, a node
// certificate and a node.yaml per agent, a client certificate for the
// admin and data APIs, one agent per region (east, north, west, round
// robin over Regions), some of them serving DNS. `fmnode bench agent` runs one with
// start and close; the end-to-end test lays its cluster out with it and
// runs the processes under proctest (which fails the test on a stuck
// child and shows its output).
type localCluster struct {
	cfg    localClusterConfig
	ca     certs.CA
	cl     certs.Issued // the client certificate
	tlsCfg *tls.Config  // the client's TLS: cluster CA, client certificate
	client *http.Client // holds the client certificate; 30 s per request
	nodes  []*localNode
	env    []string // the children's environment: this one's, minus FMNODE_*

	mu     sync.Mutex
	procs  []*localProc
	closed bool
}

type localClusterConfig struct {
	// Bin is the fmnode executable; Dir receives the certificates, the
	// configs, the data directories and the logs (it must exist).
	Bin, Dir string
	// Nodes is the agent count (1..30).
	Nodes int
	// Cluster is the cluster label (default "local"); ClientName names
	// the client certificate (default the label).
	Cluster, ClientName string
	// Regions are the regions nodes are placed in, round robin (node i
	// in Regions[(i-1) % len]); default east, north, west.
	Regions []string
	// Zone is the DNS zone (default "fm.<cluster>."); DNSNode is the
	// 1-based node that serves it (0: none), DNSNodes more that do.
	Zone     string
	DNSNode  int
	DNSNodes []int
	// DNSTTL is the TTL of the DNS answers (default 1 s).
	DNSTTL time.Duration
	// LogLevel is the agents' log level ("": their default).
	LogLevel string
	// Pprof turns on admin.enable_pprof in every agent's config.
	Pprof bool
	// Lifetime bounds every child started by start: a watchdog kills its
	// process group then (default 10 minutes).
	Lifetime time.Duration
}

type localNode struct {
	name, region string
	id           int
	cfgPath      string
	dataDir      string
	logPath      string
	api, dns     string // API and DNS addresses (dns empty when it serves none)
	node, gossip string
}

var localRegions = []string{"east", "north", "west"}

const maxLocalNodes = 30

// newLocalCluster writes the certificates and one config per node, and
// starts nothing.
func newLocalCluster(cfg localClusterConfig) (*localCluster, error) {
	switch {
	case cfg.Bin == "":
		return nil, errors.New("local cluster: no fmnode executable")
	case cfg.Dir == "":
		return nil, errors.New("local cluster: no directory")
	case cfg.Nodes < 1 || cfg.Nodes > maxLocalNodes:
		return nil, fmt.Errorf("local cluster: %d nodes: must be in 1..%d", cfg.Nodes, maxLocalNodes)
	case cfg.DNSNode < 0 || cfg.DNSNode > cfg.Nodes:
		return nil, fmt.Errorf("local cluster: DNS on node %d of %d", cfg.DNSNode, cfg.Nodes)
	case cfg.DNSTTL < 0:
		return nil, fmt.Errorf("local cluster: DNS TTL %v: must not be negative", cfg.DNSTTL)
	}
	dnsOn := map[int]bool{}
	if cfg.DNSNode > 0 {
		dnsOn[cfg.DNSNode] = true
	}
	for _, d := range cfg.DNSNodes {
		if d < 1 || d > cfg.Nodes {
			return nil, fmt.Errorf("local cluster: DNS on node %d of %d", d, cfg.Nodes)
		}
		dnsOn[d] = true
	}
	if len(cfg.Regions) == 0 {
		cfg.Regions = localRegions
	}
	for _, r := range cfg.Regions {
		if err := agentcfg.CheckLabel("region", r); err != nil {
			return nil, fmt.Errorf("local cluster: %w", err)
		}
	}
	if cfg.DNSTTL == 0 {
		cfg.DNSTTL = time.Second
	}
	if cfg.Cluster == "" {
		cfg.Cluster = "local"
	}
	if cfg.ClientName == "" {
		cfg.ClientName = cfg.Cluster
	}
	if cfg.Zone == "" {
		cfg.Zone = "fm." + cfg.Cluster + "."
	}
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = 10 * time.Minute
	}
	c := &localCluster{cfg: cfg}
	for _, kv := range os.Environ() {
		// The agents read FMNODE_* variables as config (and refuse
		// unknown ones): theirs is the config file alone.
		if !strings.HasPrefix(kv, "FMNODE_") {
			c.env = append(c.env, kv)
		}
	}
	var err error
	c.ca, err = certs.CreateCA(filepath.Join(cfg.Dir, "ca"), certs.CAOptions{CommonName: "fmnode " + cfg.Cluster + " CA"})
	if err != nil {
		return nil, fmt.Errorf("local cluster: %w", err)
	}
	c.cl, err = certs.CreateClient(c.ca, filepath.Join(cfg.Dir, "client"), certs.ClientOptions{Name: cfg.ClientName})
	if err != nil {
		return nil, fmt.Errorf("local cluster: %w", err)
	}
	c.tlsCfg, err = certs.ClientTLS(c.cl.CertFile, c.cl.KeyFile, c.cl.CAFile, "")
	if err != nil {
		return nil, fmt.Errorf("local cluster: %w", err)
	}
	c.client = &http.Client{Transport: &http.Transport{TLSClientConfig: c.tlsCfg}, Timeout: 30 * time.Second}
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	ports, err := freeLoopbackPorts(4 * cfg.Nodes)
	if err != nil {
		return nil, fmt.Errorf("local cluster: %w", err)
	}
	for i := 1; i <= cfg.Nodes; i++ {
		p := ports[(i-1)*4:]
		n := &localNode{name: fmt.Sprintf("n%d", i), id: i, region: cfg.Regions[(i-1)%len(cfg.Regions)],
			node: fmt.Sprintf("127.0.0.1:%d", p[0]), api: fmt.Sprintf("127.0.0.1:%d", p[1]), gossip: fmt.Sprintf("127.0.0.1:%d", p[2])}
		nd := filepath.Join(cfg.Dir, n.name)
		n.dataDir = filepath.Join(nd, "data")
		n.logPath = filepath.Join(nd, "agent.log")
		is, err := certs.CreateNode(c.ca, filepath.Join(nd, "tls"), certs.NodeOptions{Name: n.name, Hosts: []string{"127.0.0.1", "localhost"}})
		if err != nil {
			return nil, fmt.Errorf("local cluster: %s: %w", n.name, err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "name: %s\nnode_id: %d\nregion: %s\nzone: %s-a\ncluster: %s\ndata_dir: data\n", n.name, i, n.region, n.region, cfg.Cluster)
		fmt.Fprintf(&b, "bind:\n  node_addr: %s\n  api_addr: %s\n  gossip_addr: %s\n", n.node, n.api, n.gossip)
		if dnsOn[i] {
			n.dns = fmt.Sprintf("127.0.0.1:%d", p[3])
			fmt.Fprintf(&b, "  dns_addr: %s\ndns:\n  zone: %s\n  ttl: %s\n", n.dns, cfg.Zone, cfg.DNSTTL)
		}
		// Every node joins through up to three others of the first
		// four (in as many regions as there are): a restarted node
		// must find the cluster again, whichever region came back
		// with it, and one without retry_join waits to be found.
		var join []string
		for j := 1; j <= min(cfg.Nodes, 4) && len(join) < 3; j++ {
			if j != i {
				join = append(join, fmt.Sprintf("\"127.0.0.1:%d\"", ports[(j-1)*4+2]))
			}
		}
		if len(join) > 0 {
			fmt.Fprintf(&b, "retry_join: [%s]\n", strings.Join(join, ", "))
		}
		if cfg.LogLevel != "" {
			fmt.Fprintf(&b, "log:\n  level: %s\n", cfg.LogLevel)
		}
		if cfg.Pprof {
			fmt.Fprintf(&b, "admin:\n  enable_pprof: true\n")
		}
		fmt.Fprintf(&b, "gossip_key: %s\ntls:\n  cert_file: %s\n  key_file: %s\n  ca_file: %s\nshutdown_timeout: 10s\n",
			base64.StdEncoding.EncodeToString(key), is.CertFile, is.KeyFile, is.CAFile)
		n.cfgPath = filepath.Join(nd, "node.yaml")
		if err := os.WriteFile(n.cfgPath, []byte(b.String()), 0o600); err != nil {
			return nil, fmt.Errorf("local cluster: %w", err)
		}
		c.nodes = append(c.nodes, n)
	}
	return c, nil
}

// freeLoopbackPorts returns n distinct TCP ports that were free on
// 127.0.0.1 a moment ago (held together, so they differ).
func freeLoopbackPorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free ports: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// agentArgs are the arguments of n's `fmnode agent`.
func (n *localNode) agentArgs() []string { return []string{"agent", "--config", n.cfgPath} }

// dnsNode is the node that serves DNS, or nil.
func (c *localCluster) dnsNode() *localNode {
	if c.cfg.DNSNode == 0 {
		return nil
	}
	return c.nodes[c.cfg.DNSNode-1]
}

// dnsServers are the DNS addresses of every node serving the zone.
func (c *localCluster) dnsServers() []string {
	var out []string
	for _, n := range c.nodes {
		if n.dns != "" {
			out = append(out, n.dns)
		}
	}
	return out
}

// start starts n's agent in a process group of its own, its output
// appended to n.logPath. close kills it.
func (c *localCluster) start(n *localNode) (*localProc, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("local cluster: closed")
	}
	p, err := startLocalProc(n.name, c.cfg.Bin, n.agentArgs(), c.env, n.logPath, c.cfg.Lifetime)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// close SIGKILLs the process group of every child start started and
// waits for them; an error names the children not reaped in time.
func (c *localCluster) close() error {
	c.mu.Lock()
	c.closed = true
	procs := c.procs
	c.procs = nil
	c.mu.Unlock()
	var errs []error
	for _, p := range procs {
		p.killGroup()
	}
	for _, p := range procs {
		if err := p.wait(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
		p.closeLog()
	}
	return errors.Join(errs...)
}

// waitHTTP polls GET path on n's API until it answers 2xx, ctx ends, or
// died (if not nil) is closed: the agent exited.
func (c *localCluster) waitHTTP(ctx context.Context, n *localNode, path string, died <-chan struct{}) error {
	url := "https://" + n.api + path
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.client.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
			err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: GET %s: %w (last: %v)", n.name, path, ctx.Err(), last)
		case <-died:
			return fmt.Errorf("%s: exited while waiting for %s (last: %v)", n.name, path, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// init writes the cluster spec through via's admin API, as `fmnode init`
// does.
func (c *localCluster) init(ctx context.Context, via *localNode, req agent.InitRequest) (agent.SpecResponse, error) {
	ac := &adminClient{addrs: []string{via.api}, scheme: "https", http: &http.Client{Transport: c.client.Transport}}
	var resp agent.SpecResponse
	err := ac.call(ctx, http.MethodPost, agent.PathInit, req, &resp)
	return resp, err
}

// status is what n reports of its partitions.
func (c *localCluster) status(n *localNode) (agent.NodeStatus, error) {
	return c.statusCtx(context.Background(), n)
}

// statusCtx is status bounded by ctx.
func (c *localCluster) statusCtx(ctx context.Context, n *localNode) (agent.NodeStatus, error) {
	var st agent.NodeStatus
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+n.api+agent.PathPartitions, nil)
	if err != nil {
		return st, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s: %d %s", n.name, resp.StatusCode, b)
	}
	return st, json.Unmarshal(b, &st)
}

// localProc is a child in a process group of its own, killed with its
// parent (internal/childproc) and after a lifetime.
type localProc struct {
	name    string
	pid     int
	logPath string
	log     *os.File
	child   *childproc.Child
	dog     *time.Timer
	logOnce sync.Once
}

func startLocalProc(name, bin string, args, env []string, logPath string, lifetime time.Duration) (*localProc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf // an *os.File goes to the child as is
	child, err := childproc.Start(cmd)
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &localProc{name: name, pid: child.Pid(), logPath: logPath, log: logf, child: child}
	p.dog = time.AfterFunc(lifetime, p.killGroup)
	return p, nil
}

// killGroup SIGKILLs the child's process group, reaching whatever it
// started. A child already reaped is left alone: its group id may belong
// to another group by now.
func (p *localProc) killGroup() { _ = p.child.SignalGroup(syscall.SIGKILL) }

// wait waits up to d for the child to be reaped.
func (p *localProc) wait(d time.Duration) error {
	if !p.child.Wait(d) {
		return fmt.Errorf("%s (pid %d) not reaped %v after SIGKILL", p.name, p.pid, d)
	}
	p.dog.Stop()
	return nil
}

func (p *localProc) closeLog() { p.logOnce.Do(func() { p.log.Close() }) }

// exited is closed once the child has exited.
func (p *localProc) exited() <-chan struct{} { return p.child.Done() }

// tail is the end of the child's log, for an error message.
func (p *localProc) tail(limit int64) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	off := max(st.Size()-limit, 0)
	b, _ := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if off > 0 {
		return fmt.Sprintf("[... %d earlier bytes in %s]\n%s", off, p.logPath, b)
	}
	return string(b)
}
