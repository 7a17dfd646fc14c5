package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/fmnode/fmnode/internal/certs"
	"github.com/fmnode/fmnode/internal/clusterspec"
)

var regions = []string{"east", "north", "west"}

const (
	clusterLabel = "jepsen"
	zone         = "fm.jepsen."
	// agentLifetime bounds every agent process, whatever the harness does.
	agentLifetime = 15 * time.Minute
)

// clusterConfig lays out one run's cluster.
type clusterConfig struct {
	Bin        string
	Dir        string
	Nodes      int // 3..30, round-robin over the three regions
	Partitions int
	Offsets    []time.Duration // clock_offset per node (index 0 = node 1), nil: none
	Rates      []float64       // clock_rate per node, nil: real time
	DiskNode   int             // the node whose data dir is a small tmpfs (0: none)
	Log        *slog.Logger
}

// node is one agent: it binds 127.0.1.i and dials from it; its node
// transport and API are advertised at its proxies on 127.0.2.i.
type node struct {
	i                 int
	name, region      string
	bindIP, proxyIP   string
	nodeAddr, apiAddr string // bound
	gossipAddr        string
	dnsAddr           string // bound; empty when it serves no DNS
	proxNode, proxAPI *proxy
	proxGossip        *gossipProxy // TCP and UDP, one port
	proxDNS           *gossipProxy // the clients' DNS, TCP and UDP (relayed); nil when it serves no DNS
	dir, dataDir      string
	cfgPath, logPath  string
	tmpfs             bool

	mu      sync.Mutex
	proc    *proc
	stopped bool // SIGSTOPped
	// logStart is agent.log's size when the current incarnation started.
	logStart int64
	boots    int
}

type cluster struct {
	cfg     clusterConfig
	links   *linkTable
	nodes   []*node
	ca      certs.CA
	tlsCfg  *tls.Config
	admin   *http.Client // the harness's own calls, straight to the bound API
	env     []string
	gossipK string
}

// buildBinary builds cmd/fmnode into dir (with tags, for the negative
// control) and returns its path.
func buildBinary(ctx context.Context, dir string, tags string) (string, error) {
	out := filepath.Join(dir, "fmnode")
	if tags != "" {
		out += "-" + strings.ReplaceAll(tags, ",", "-")
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	args := []string{"build", "-o", out}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	args = append(args, "./cmd/fmnode")
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, b)
	}
	return out, nil
}

func moduleRoot(ctx context.Context) (string, error) {
	b, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(b))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("run from inside the fmnode module")
	}
	return filepath.Dir(mod), nil
}

// newCluster writes the certificates and configs and starts the proxies;
// no agent runs yet.
func newCluster(cfg clusterConfig) (*cluster, error) {
	if cfg.Nodes < 3 || cfg.Nodes > 30 {
		return nil, fmt.Errorf("cluster: %d nodes: must be in 3..30", cfg.Nodes)
	}
	c := &cluster{cfg: cfg, links: newLinkTable(uint64(time.Now().UnixNano()))}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FMNODE_") {
			c.env = append(c.env, kv)
		}
	}
	var err error
	if c.ca, err = certs.CreateCA(filepath.Join(cfg.Dir, "ca"), certs.CAOptions{CommonName: "fmnode jepsen CA"}); err != nil {
		return nil, err
	}
	cl, err := certs.CreateClient(c.ca, filepath.Join(cfg.Dir, "client"), certs.ClientOptions{Name: "jepsen"})
	if err != nil {
		return nil, err
	}
	if c.tlsCfg, err = certs.ClientTLS(cl.CertFile, cl.KeyFile, cl.CAFile, ""); err != nil {
		return nil, err
	}
	c.admin = &http.Client{Transport: &http.Transport{TLSClientConfig: c.tlsCfg, DialContext: guardedDialContext}, Timeout: 10 * time.Second}
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	c.gossipK = base64.StdEncoding.EncodeToString(key)
	for i := 1; i <= cfg.Nodes; i++ {
		if err := c.addNode(i); err != nil {
			c.closeProxies()
			return nil, err
		}
	}
	for _, n := range c.nodes {
		if err := c.writeConfig(n); err != nil {
			c.closeProxies()
			return nil, err
		}
	}
	return c, nil
}

// who maps a connection's source to a node index (0: a client).
func (c *cluster) who(a net.Addr) int {
	var ip net.IP
	switch ta := a.(type) {
	case *net.TCPAddr:
		ip = ta.IP.To4()
	case *net.UDPAddr: // gossip packets
		ip = ta.IP.To4()
	default:
		return 0
	}
	if ip == nil || ip[0] != 127 || ip[1] != 0 || ip[2] != 1 || int(ip[3]) < 1 || int(ip[3]) > len(c.nodes) {
		return 0
	}
	return int(ip[3])
}

func (c *cluster) addNode(i int) error {
	n := &node{i: i, name: fmt.Sprintf("n%d", i), region: regions[(i-1)%len(regions)],
		bindIP: fmt.Sprintf("127.0.1.%d", i), proxyIP: fmt.Sprintf("127.0.2.%d", i)}
	n.dir = filepath.Join(c.cfg.Dir, n.name)
	n.dataDir = filepath.Join(n.dir, "data")
	n.cfgPath = filepath.Join(n.dir, "node.yaml")
	n.logPath = filepath.Join(n.dir, "agent.log")
	if err := os.MkdirAll(n.dataDir, 0o700); err != nil {
		return err
	}
	ports, err := agentPorts(n.bindIP, 4) // below the ephemeral range: ports.go
	if err != nil {
		return fmt.Errorf("%s: %w", n.name, err)
	}
	n.nodeAddr = fmt.Sprintf("%s:%d", n.bindIP, ports[0])
	n.apiAddr = fmt.Sprintf("%s:%d", n.bindIP, ports[1])
	n.gossipAddr = fmt.Sprintf("%s:%d", n.bindIP, ports[2])
	if i <= len(regions) { // one DNS server per region
		n.dnsAddr = fmt.Sprintf("%s:%d", n.bindIP, ports[3])
	}
	if n.proxNode, err = startProxy(n.name+"/node", i, n.proxyIP+":0", n.nodeAddr, c.links, c.who, c.cfg.Log); err != nil {
		return err
	}
	c.nodes = append(c.nodes, n) // closeProxies reaches it from here on
	if n.proxAPI, err = startProxy(n.name+"/api", i, n.proxyIP+":0", n.apiAddr, c.links, c.who, c.cfg.Log); err != nil {
		return err
	}
	if n.proxGossip, err = startGossipProxy(n.name+"/gossip", i, n.proxyIP, n.gossipAddr, c.links, c.who, c.cfg.Log); err != nil {
		return err
	}
	if n.dnsAddr != "" {
		if n.proxDNS, err = startDNSProxy(n.name+"/dns", i, n.proxyIP, n.dnsAddr, c.links, c.who, c.cfg.Log); err != nil {
			return err
		}
	}
	if _, err := certs.CreateNode(c.ca, filepath.Join(n.dir, "tls"), certs.NodeOptions{Name: n.name, Hosts: []string{n.bindIP, n.proxyIP}}); err != nil {
		return fmt.Errorf("%s: %w", n.name, err)
	}
	if i == c.cfg.DiskNode {
		n.tmpfs = mountTmpfs(n.dataDir, c.cfg.Log) == nil
	}
	return nil
}

func (c *cluster) offset(n *node) time.Duration {
	if n.i-1 < len(c.cfg.Offsets) {
		return c.cfg.Offsets[n.i-1]
	}
	return 0
}

func (c *cluster) writeConfig(n *node) error {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nnode_id: %d\nregion: %s\nzone: %s-a\ncluster: %s\ndata_dir: data\n", n.name, n.i, n.region, n.region, clusterLabel)
	fmt.Fprintf(&b, "bind:\n  node_addr: %s\n  api_addr: %s\n  gossip_addr: %s\n", n.nodeAddr, n.apiAddr, n.gossipAddr)
	if n.dnsAddr != "" {
		fmt.Fprintf(&b, "  dns_addr: %s\ndns:\n  zone: %s\n  ttl: 1s\n", n.dnsAddr, zone)
	}
	fmt.Fprintf(&b, "advertise:\n  node_addr: %s\n  api_addr: %s\n  gossip_addr: %s\n", n.proxNode.addr(), n.proxAPI.addr(), n.proxGossip.addr())
	fmt.Fprintf(&b, "source_ip: %s\n", n.bindIP)
	if off := c.offset(n); off != 0 {
		fmt.Fprintf(&b, "clock_offset: %s\n", off)
	}
	if n.i-1 < len(c.cfg.Rates) && c.cfg.Rates[n.i-1] != 0 {
		fmt.Fprintf(&b, "clock_rate: %v\n", c.cfg.Rates[n.i-1])
	}
	var join []string
	for _, m := range c.nodes {
		if m != n {
			join = append(join, fmt.Sprintf("%q", m.proxGossip.addr())) // through the pair's proxy
		}
	}
	fmt.Fprintf(&b, "retry_join: [%s]\n", strings.Join(join, ", "))
	tlsDir := filepath.Join(n.dir, "tls")
	fmt.Fprintf(&b, "gossip_key: %s\ntls:\n  cert_file: %s\n  key_file: %s\n  ca_file: %s\nshutdown_timeout: 5s\n",
		c.gossipK, filepath.Join(tlsDir, "node.crt"), filepath.Join(tlsDir, "node.key"), filepath.Join(tlsDir, "ca.crt"))
	for _, a := range []string{n.nodeAddr, n.apiAddr, n.gossipAddr, n.proxNode.addr(), n.proxAPI.addr(), n.proxGossip.addr()} {
		if err := checkLoopback(a); err != nil {
			return err
		}
	}
	return os.WriteFile(n.cfgPath, []byte(b.String()), 0o600)
}

// start starts n's agent (a restart after kill -9 appends to the same log).
func (c *cluster) start(n *node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil && !n.proc.exited() {
		return fmt.Errorf("%s: already running", n.name)
	}
	if fi, err := os.Stat(n.logPath); err == nil {
		n.logStart = fi.Size()
	}
	p, err := startProc(n.name, c.cfg.Bin, []string{"agent", "--config", n.cfgPath}, c.env, n.logPath, agentLifetime)
	if err != nil {
		return err
	}
	n.proc, n.stopped = p, false
	n.boots++
	return nil
}

// kill is kill -9 of n's agent; the connections through its proxies end
// as its sockets would.
func (c *cluster) kill(n *node) error {
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	if p == nil {
		return nil
	}
	err := p.killWait(10 * time.Second)
	n.proxNode.dropConns()
	n.proxAPI.dropConns()
	n.proxGossip.tcp.dropConns()
	if n.proxDNS != nil {
		n.proxDNS.tcp.dropConns()
	}
	return err
}

func (c *cluster) signal(n *node, sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return fmt.Errorf("%s: not running", n.name)
	}
	if err := n.proc.signal(sig); err != nil {
		return err
	}
	n.stopped = sig == syscall.SIGSTOP
	return nil
}

// running reports whether n's agent is alive (possibly stopped).
func (c *cluster) running(n *node) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc != nil && !n.proc.exited()
}

// closeAll kills every agent and closes the proxies, whatever state the
// run left them in; it returns the first errors.
func (c *cluster) closeAll() error {
	var errs []error
	for _, n := range c.nodes {
		if err := c.kill(n); err != nil {
			errs = append(errs, err)
		}
	}
	c.closeProxies()
	return errors.Join(errs...)
}

func (c *cluster) closeProxies() {
	for _, n := range c.nodes {
		for _, p := range []*proxy{n.proxNode, n.proxAPI} {
			if p != nil {
				_ = p.close(5 * time.Second)
			}
		}
		for _, g := range []*gossipProxy{n.proxGossip, n.proxDNS} {
			if g != nil {
				_ = g.close(5 * time.Second)
			}
		}
	}
}

// unmount releases the tmpfs data dirs (after closeAll and the checker).
func (c *cluster) unmount() {
	for _, n := range c.nodes {
		if n.tmpfs {
			_ = syscall.Unmount(n.dataDir, syscall.MNT_DETACH)
			n.tmpfs = false
		}
	}
}

// call is one admin call to n's bound API (the harness is the operator:
// it reaches the agents out of band, not through the proxies).
func (c *cluster) call(ctx context.Context, n *node, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "https://"+n.apiAddr+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.admin.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s at %s: %s: %s", method, path, n.name, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// waitAll waits until path answers 2xx on every node, or ctx ends.
func (c *cluster) waitAll(ctx context.Context, path string) error {
	for _, n := range c.nodes {
		for {
			err := c.call(ctx, n, http.MethodGet, path, nil, nil)
			if err == nil {
				break
			}
			if c.procExited(n) {
				return fmt.Errorf("%s exited while waiting for %s: %v", n.name, path, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s: %s: %w (last: %v)", n.name, path, ctx.Err(), err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

func (c *cluster) procExited(n *node) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc == nil || n.proc.exited()
}

// initSpec initialises the cluster: the fast profile, strong
// consistency, min durability 2 over the three regions.
func (c *cluster) initSpec(ctx context.Context) (clusterspec.Spec, error) {
	spec := clusterspec.Spec{Format: clusterspec.Format, Regions: regions, Partitions: c.cfg.Partitions,
		Consistency: clusterspec.ConsistencyStrong, MinDurability: 2, Profile: clusterspec.Profile{Name: "fast"}}
	req := agent.InitRequest{Spec: spec, ExpectNodes: len(c.nodes), WaitSeconds: 60}
	var resp agent.SpecResponse
	err := c.call(ctx, c.nodes[0], http.MethodPost, agent.PathInit, req, &resp)
	return resp.Spec, err
}

// dnsServers are the clients' DNS servers: the DNS proxies, so that the
// clients' route lookups cross the same links as their requests.
func (c *cluster) dnsServers() []string {
	var out []string
	for _, n := range c.nodes {
		if n.proxDNS != nil {
			out = append(out, n.proxDNS.addr())
		}
	}
	return out
}

// mountTmpfs mounts a small tmpfs on dir, so that the disk-full fault
// can fill it without touching the machine's disk. An error (not root,
// no mount privilege) leaves dir as it was: the fault is then skipped.
func mountTmpfs(dir string, log *slog.Logger) error {
	err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=128m,mode=0700")
	if err != nil {
		log.Warn("disk fault unavailable: cannot mount a tmpfs for the data dir", "dir", dir, "err", err)
	}
	return err
}

// ballastPath is the file the disk-full fault fills the tmpfs with.
func (n *node) ballastPath() string { return filepath.Join(n.dataDir, "ballast") }

// fillDisk writes the ballast until the tmpfs is full (bounded by its
// size); healDisk removes it.
func fillDisk(n *node) error {
	if !n.tmpfs {
		return errors.New("no tmpfs")
	}
	f, err := os.OpenFile(n.ballastPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for range 256 { // the tmpfs is 128 MiB
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return nil
			}
			return err
		}
	}
	return errors.New("tmpfs never filled")
}

func healDisk(n *node) error {
	err := os.Remove(n.ballastPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
