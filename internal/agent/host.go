package agent

import (
	"context"
	crand "crypto/rand"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/internal/clusterspec"
	"github.com/fmnode/fmnode/internal/dataapi"
	"github.com/fmnode/fmnode/internal/membership"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/internal/nodenet"
	"github.com/fmnode/fmnode/internal/noderun"
	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
	"github.com/fmnode/fmnode/txtdns"
)

// host is what the agent runs once it has a cluster spec: the node core
// under its runtime driver, the node transport, the data API and, when
// configured, the DNS server.
type host struct {
	a    *Agent
	spec clusterspec.Spec
	self clusterspec.Node

	drv *noderun.Driver
	tr  *nodenet.TCPTransport
	pub *txtdns.Publisher
	dns *txtdns.Server
	kv  http.Handler

	// owner[p] is the node of this agent's region that hosts partition p
	// (the placement recorded at init).
	owner []node.NodeID

	mu       sync.Mutex
	apiAddrs map[node.NodeID]string // where each node's API is, as gossip last said
	// clock is the node's clock (noderun.WallClock); the DNS publisher
	// reads it through routeClock so that its publish lag is measured on
	// the timeline routes are stamped with (node.RouteTime).
	clock  func() time.Duration
	cancel context.CancelFunc
	// exited is closed when the driver's Run returned, with runErr.
	exited chan struct{}
	runErr error
}

// startHost builds and starts the node from the spec. The partitions are
// the ones the recorded placement gives this node; the store recovers
// those it already holds, and creates the others.
func (a *Agent) startHost(ctx context.Context, c committed) (*host, error) {
	spec := c.spec
	self, ok := spec.Node(uint16(a.cfg.NodeID))
	if !ok {
		return nil, fmt.Errorf("agent: node %d (%s) is not in the cluster spec (it was initialised with nodes %s): it hosts nothing", a.cfg.NodeID, a.cfg.Name, nodeList(spec))
	}
	if self.Name != a.cfg.Name || self.Region != a.cfg.Region {
		return nil, fmt.Errorf("agent: the cluster spec records node %d as %s in region %s, but this agent is %s in %s", self.ID, self.Name, self.Region, a.cfg.Name, a.cfg.Region)
	}
	h := &host{a: a, spec: spec, self: self, apiAddrs: map[node.NodeID]string{}, exited: make(chan struct{}), clock: offsetClock(rateClock(noderun.WallClock(), a.cfg.ClockRate), a.cfg.ClockOffset)}
	for _, n := range spec.Nodes {
		h.apiAddrs[node.NodeID(n.ID)] = n.APIAddr
	}
	h.owner = make([]node.NodeID, spec.Partitions+1)
	for p := 1; p <= spec.Partitions; p++ {
		for _, r := range spec.Placement(partition.ID(p)).Replicas {
			if string(r.Region) == a.cfg.Region {
				h.owner[p] = r.Node
			}
		}
	}
	if err := h.startDNS(c.version); err != nil {
		return nil, err
	}
	if err := h.startNode(); err != nil {
		h.stopDNS()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	h.cancel = cancel
	go func() {
		h.runErr = h.drv.Run(runCtx, h.tr)
		close(h.exited)
	}()
	go h.logEvents(runCtx)
	if h.dns != nil {
		go func() {
			if err := h.dns.Serve(runCtx); err != nil {
				a.log.Error("DNS server stopped", "err", err)
			}
		}()
	}
	api, err := dataapi.New(dataapi.Config{Backend: h.drv, Region: partition.Region(a.cfg.Region),
		Partitions: uint32(spec.Partitions), Logger: a.log.With("component", "dataapi"), Registerer: a.metrics.reg})
	if err != nil {
		cancel()
		return nil, err
	}
	h.kv = h.forwarding(api)
	return h, nil
}

func (h *host) startNode() error {
	a, spec := h.a, h.spec
	fcfg, err := spec.FailoverConfig()
	if err != nil {
		return err
	}
	var parts []noderun.Partition
	for _, pl := range spec.Hosted(h.self.ID) {
		p := noderun.Partition{Placement: pl, Spec: spec.PartitionSpec(pl.ID)}
		// The node hosting the preferred region's replica writes the
		// partition's first register value (only if the register holds
		// none: a restart or a second agent never overwrites it).
		for _, r := range pl.Replicas {
			if string(r.Region) == spec.Preferred() && r.Node == node.NodeID(h.self.ID) {
				st, err := spec.InitialState(pl.ID)
				if err != nil {
					return err
				}
				p.Register = &st
			}
		}
		parts = append(parts, p)
	}
	var watch []node.NodeID
	for _, n := range spec.Nodes {
		if n.DNSAddr != "" && n.ID != h.self.ID {
			watch = append(watch, node.NodeID(n.ID))
		}
	}
	boot := a.dir.Boot()
	hcfg := partition.DefaultConfig(partition.Region(a.cfg.Region), boot)
	hcfg.LeaseGatesWrites = true
	// Fencing, promotion and truncation of false progress are what an
	// operator reads the log for.
	hcfg.Logger = a.log.With("component", "partition")
	// The register's flow control (caspaxos/flow.go, pcfg.Flow =
	// caspaxos.DefaultFlowConfig()) is off: in session 8's runs of the
	// 1000-partition demo it did not reliably prevent the collapse under
	// load and one run with it rerouted the clients 1.9x slower than one
	// without at a similar load (docs/BENCHMARKS.md, issue 16); it waits
	// for a measurement on a quiet machine. Keep sim/failover_world.go the
	// same, so the prediction models what the agents run.
	pcfg := caspaxos.DefaultProposerConfig(0, quorum.Config{})
	ncfg := node.Config{
		ID: node.NodeID(h.self.ID), Region: quorum.Region(a.cfg.Region), Boot: boot,
		Nodes: spec.FailoverNodes(), Acceptors: spec.Acceptors(), Failover: fcfg,
		Host: hcfg, Proposer: pcfg,
		Rand: rand.New(rand.NewPCG(seed(), seed())), WatchAll: watch, Observer: a.metrics.obs,
		Guards: a.metrics.guards,
	}
	drv, err := noderun.New(noderun.Config{Node: ncfg, AcceptorStore: a.accst, PartitionStore: a.partst,
		Partitions: parts, Publisher: h.pub, Clock: h.clock, Logger: a.log.With("component", "node")})
	if err != nil {
		return err
	}
	peers := map[nodenet.NodeID]string{}
	for _, n := range spec.Nodes {
		if n.ID != h.self.ID {
			peers[nodenet.NodeID(n.ID)] = n.NodeAddr
		}
	}
	if a.members != nil {
		for _, m := range a.members.Members() {
			if m.State == membership.StateAlive && m.NodeID != h.self.ID {
				if _, ok := peers[nodenet.NodeID(m.NodeID)]; ok {
					peers[nodenet.NodeID(m.NodeID)] = m.NodeAddr
					h.apiAddrs[node.NodeID(m.NodeID)] = m.APIAddr
				}
			}
		}
	}
	tcfg := nodenet.Config{ID: nodenet.NodeID(h.self.ID), Cluster: a.cfg.Cluster, Addr: a.cfg.Bind.NodeAddr,
		Peers: peers, Codec: nodewire.Codec{}, Handler: drv.Deliver, Logger: a.log.With("component", "nodenet"),
		Registerer: a.metrics.reg, LocalIP: a.sourceIP()}
	if a.certs != nil {
		tcfg.TLS = a.certs.nodenet()
		tcfg.VerifyPeer = verifyPeer(spec)
	}
	tr, err := nodenet.Start(tcfg)
	if err != nil {
		return fmt.Errorf("bind.node_addr: %w", err)
	}
	h.drv, h.tr = drv, tr
	a.log.Info("hosting", "partitions", len(parts), "of", spec.Partitions, "regions", spec.Regions,
		"profile", spec.Profile.Name, "node_addr", tr.Addr().String(), "boot", boot)
	return nil
}

// startDNS creates the publisher (the driver feeds it every route the
// node learns) and the DNS server, when bind.dns_addr is set.
func (h *host) startDNS(version uint64) error {
	cfg := h.a.cfg
	if cfg.Bind.DNSAddr == "" {
		return nil
	}
	pub, err := txtdns.NewPublisher(txtdns.PublisherConfig{Zone: cfg.DNS.Zone, TTL: cfg.DNS.TTL,
		MaxPartitions: max(h.spec.Partitions, 1), Clock: routeClock{h.clock}, Logger: h.a.log.With("component", "txtdns"),
		Registerer: h.a.metrics.reg})
	if err != nil {
		return fmt.Errorf("dns: %w", err)
	}
	if err := h.publishRegions(pub, version); err != nil {
		return err
	}
	srv, err := txtdns.NewServer(txtdns.ServerConfig{Addr: cfg.Bind.DNSAddr, Authority: pub, Logger: h.a.log.With("component", "dns"),
		Registerer: h.a.metrics.reg})
	if err != nil {
		return fmt.Errorf("dns: %w", err)
	}
	if err := srv.Listen(); err != nil {
		return fmt.Errorf("bind.dns_addr: %w", err)
	}
	h.pub, h.dns = pub, srv
	h.a.log.Info("serving DNS", "addr", srv.Addr(), "zone", cfg.DNS.Zone)
	return nil
}

// publishRegions publishes each region's data API endpoints: the API
// addresses of its nodes, at most txtdns.MaxEndpoints.
func (h *host) publishRegions(pub *txtdns.Publisher, version uint64) error {
	var infos []txtdns.RegionInfo
	for _, r := range h.spec.Regions {
		ri := txtdns.RegionInfo{Region: r, ConfigVersion: version}
		for _, n := range h.spec.RegionNodes(r) {
			if len(ri.Endpoints) < txtdns.MaxEndpoints && n.APIAddr != "" {
				ri.Endpoints = append(ri.Endpoints, n.APIAddr)
			}
		}
		infos = append(infos, ri)
	}
	if _, err := pub.SetRegions(infos...); err != nil {
		return fmt.Errorf("dns: publish the regions: %w", err)
	}
	return nil
}

func (h *host) stopDNS() {
	if h.dns != nil {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = h.dns.Serve(ctx) // closes the listeners it holds
	}
}

// specChanged applies a committed spec change: the regions' published
// config version moves with it, and the run-time policy (blast radius,
// never-promote regions) is applied. The keys that cannot change on a
// running cluster are refused by `config set` (notLive).
func (h *host) specChanged(ctx context.Context, c committed, changed []string) {
	if h.pub != nil {
		if err := h.publishRegions(h.pub, c.version); err != nil {
			h.a.log.Warn("republish the regions", "err", err)
		}
	}
	h.applyPolicy(ctx, c)
}

// memberEvent is membership's evidence: a node's new addresses are used
// from now on (placement stays as recorded).
func (h *host) memberEvent(ev membership.Event) {
	m := ev.Member
	if m.NodeID == h.self.ID || m.State != membership.StateAlive {
		return
	}
	if _, ok := h.spec.Node(m.NodeID); !ok {
		return
	}
	h.mu.Lock()
	h.apiAddrs[node.NodeID(m.NodeID)] = m.APIAddr
	h.mu.Unlock()
	if err := h.tr.SetPeer(nodenet.NodeID(m.NodeID), m.NodeAddr); err != nil {
		h.a.log.Warn("set peer address from membership", "node_id", m.NodeID, "addr", m.NodeAddr, "err", err)
	}
}

func (h *host) apiAddr(id node.NodeID) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.apiAddrs[id]
}

// stop ends the driver (the API has already drained) and closes the
// transport, waiting at most until ctx's deadline.
func (h *host) stop(ctx context.Context, log *slog.Logger) {
	h.cancel()
	select {
	case <-h.exited:
		if h.runErr != nil {
			log.Error("node driver", "err", h.runErr)
		}
	case <-ctx.Done():
		log.Error("node driver did not stop within the shutdown bound")
	}
	if err := h.tr.Close(); err != nil {
		log.Warn("close the node transport", "err", err)
	}
}

// verifyPeer binds a peer's claimed node id to its certificate: the
// CommonName must be the name the spec records for that id, and the
// certificate must be a node's (server authentication), not a client's.
// The CA alone only says the peer belongs to the cluster.
func verifyPeer(spec clusterspec.Spec) func(nodenet.NodeID, *x509.Certificate) error {
	return func(id nodenet.NodeID, cert *x509.Certificate) error {
		n, ok := spec.Node(uint16(id))
		if !ok {
			return fmt.Errorf("node %d is not in the cluster spec", id)
		}
		if cert.Subject.CommonName != n.Name {
			return fmt.Errorf("the certificate of %q was presented as node %d, which the cluster spec records as %q", cert.Subject.CommonName, id, n.Name)
		}
		if !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
			return fmt.Errorf("node %d (%s) presented a certificate without server authentication (a client's?)", id, n.Name)
		}
		return nil
	}
}

// routeClock is the node's clock on the routes' timeline (node.RouteTime):
// a route's CommittedAt is stamped from it when the node learns the
// commit.
type routeClock struct{ now func() time.Duration }

func (c routeClock) Now() time.Time { return node.RouteTime(c.now()) }

func (c routeClock) Sleep(ctx context.Context, d time.Duration) error {
	return txtdns.SystemClock{}.Sleep(ctx, d)
}

func seed() uint64 {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

func nodeList(s clusterspec.Spec) string {
	out := ""
	for i, n := range s.Nodes {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%d=%s", n.ID, n.Name)
	}
	return out
}
