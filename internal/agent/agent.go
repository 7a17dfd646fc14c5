package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fmnode/fmnode/caspaxos/boltstore"
	"github.com/fmnode/fmnode/internal/agentcfg"
	"github.com/fmnode/fmnode/internal/datadir"
	"github.com/fmnode/fmnode/internal/durable"
	"github.com/fmnode/fmnode/internal/membership"
	"github.com/fmnode/fmnode/internal/sysreg"
	"github.com/fmnode/fmnode/partition/pebblestore"
)

// SystemName is the system register's acceptor store in the data
// directory (next to datadir's acceptor.db and partitions/).
const SystemName = "system.db"

// Options are what the command gives an agent besides its config.
type Options struct {
	// Version is the binary's version; it travels in the membership meta.
	Version string
	// Logger is the agent's logger (required); Level, when set, is the
	// level SIGHUP's reload changes.
	Logger *slog.Logger
	Level  *slog.LevelVar
	// Ready, when set, is called once the agent hosts its partitions.
	Ready func()
}

// Agent is one running fmnode daemon. Run it with Run; Reload applies a
// new config's run-time fields.
type Agent struct {
	cfg  agentcfg.Config
	opts Options
	log  *slog.Logger

	dir    *datadir.Dir
	certs  *certs // nil when insecure
	sysacc *sysreg.Acceptor
	sysst  *boltstore.Store
	accst  *boltstore.Store
	partst *pebblestore.Store

	api      *http.Server
	apiLn    net.Listener
	apiState *apiState
	members  *membership.Membership

	// spec is the committed cluster spec the agent runs under (nil
	// until init).
	spec atomic.Pointer[committed]
	// specCh is closed when the first spec is known.
	specCh   chan struct{}
	specOnce sync.Once
	// specRefresh serializes refreshSpec: the spec loop and an operator's
	// request (a global pause) both read and adopt the spec, and two at
	// once raced on the cache file's temporary name.
	specRefresh sync.Mutex
	// poke asks the spec loop to read the register now.
	poke chan struct{}

	host atomic.Pointer[host]

	// draining: SIGTERM arrived; client requests get 503.
	draining atomic.Bool

	// metrics is the agent's Prometheus registry and node collectors.
	metrics *metrics
	// admin is the admin API's token and client (admin_auth.go).
	admin adminState
	// dash is the status page's last aggregated dashboard (dashboard.go).
	dash dashCache
}

// New checks cfg (already validated by agentcfg.Load) against what the
// agent needs and returns an agent that Run starts.
func New(cfg agentcfg.Config, opts Options) (*Agent, error) {
	if opts.Logger == nil {
		return nil, fmt.Errorf("agent: Options.Logger must be set")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("agent: data_dir: must be set")
	}
	a := &Agent{cfg: cfg, opts: opts, log: opts.Logger, specCh: make(chan struct{}), poke: make(chan struct{}, 1)}
	a.apiState = &apiState{a: a}
	var err error
	if a.metrics, err = newMetrics(a); err != nil {
		return nil, err
	}
	if err := a.admin.loadToken(cfg.Admin.TokenFile); err != nil {
		return nil, err
	}
	return a, nil
}

// Run opens the data directory and the stores, starts the API and the
// membership, waits for the cluster spec, hosts the node's partitions and
// serves until ctx ends; then it shuts down gracefully within
// ShutdownTimeout. A store or config problem at start is returned at once
// and nothing is reset.
func (a *Agent) Run(ctx context.Context) (err error) {
	if a.cfg.Insecure {
		a.log.Warn("running without TLS and without gossip encryption (--insecure): any process that reaches the ports can join, write and read")
	}
	if len(a.cfg.RetryJoin) == 0 {
		a.log.Warn("retry_join is empty: this node joins no one; after a restart it is back in the membership only when another node finds it (and /readyz stays 503 until then)")
	}
	if err := a.open(); err != nil {
		a.closeStores()
		return err
	}
	defer a.closeStores()
	// Membership first: the API's handlers read it (init lists the
	// members), so it must exist before the first request.
	if err := a.startMembership(); err != nil {
		return err
	}
	if err := a.startAPI(); err != nil {
		_ = a.members.Shutdown()
		return err
	}
	a.log.Info("agent started", "name", a.cfg.Name, "node_id", a.cfg.NodeID, "region", a.cfg.Region,
		"zone", a.cfg.Zone, "api", a.apiLn.Addr().String(), "gossip", a.members.Addr(), "boot", a.dir.Boot(), "version", a.opts.Version)
	if negativeControl {
		a.log.Error("NEGATIVE CONTROL BUILD (-tags fmnode_negative_control): the partition store is in memory and acknowledges writes it never persists; never run this binary for real")
	}
	if a.cfg.ClockOffset != 0 {
		a.log.Warn("clock_offset is set: this node's clock is skewed on purpose (a test setting)", "clock_offset", a.cfg.ClockOffset)
	}
	if a.cfg.ClockRate != 0 && a.cfg.ClockRate != 1 {
		a.log.Warn("clock_rate is set: this node's clock drifts on purpose (a test setting)", "clock_rate", a.cfg.ClockRate)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Each of these returns nil only when runCtx ends; an error stops
	// the agent.
	errc := make(chan error, 3)
	var wg sync.WaitGroup
	for _, fn := range []func(context.Context) error{a.specLoop, a.hostWhenSpec, a.watchAcceptor} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(runCtx); err != nil {
				errc <- err
			}
		}()
	}
	select {
	case <-ctx.Done():
	case err = <-errc:
		a.log.Error("agent failed", "err", err)
	}
	a.shutdown(cancel, &wg)
	return err
}

// watchAcceptor returns the system-register acceptor's failure (a store
// Apply that failed, e.g. on a full disk) as the agent's: the acceptor
// answers nothing again until the process restarts and recovers it from
// system.db, so an agent that ran on would be one acceptor short while
// its /readyz said ready. Stopping hands the restart to the supervisor
// (systemd's Restart=on-failure), the same fail-stop as a partition
// store's failure.
func (a *Agent) watchAcceptor(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-a.sysacc.Stopped():
		return fmt.Errorf("agent: system register acceptor stopped (restart the agent once its data directory's disk is writable): %w", a.sysacc.Err())
	}
}

// open locks the data directory and opens the three stores.
func (a *Agent) open() error {
	dir, err := datadir.Open(a.cfg.DataDir, datadir.Identity{Cluster: a.cfg.Cluster, NodeID: uint16(a.cfg.NodeID), Name: a.cfg.Name, Region: a.cfg.Region}, datadir.Options{})
	if err != nil {
		return err
	}
	a.dir = dir
	if !a.cfg.Insecure {
		if a.certs, err = loadCerts(a.cfg.TLS); err != nil {
			return err
		}
	}
	if err := a.checkStoresPresent(); err != nil {
		return err
	}
	if a.accst, a.partst, err = dir.OpenStores(boltstore.Options{}, partitionStoreOptions()); err != nil {
		return err
	}
	path := filepath.Join(dir.Path(), SystemName)
	if a.sysst, err = boltstore.Open(path, boltstore.Options{}); err != nil {
		return fmt.Errorf("agent: system register store %s (the agent refuses to start and did not modify it): %w", path, err)
	}
	if err := durable.WriteFile(dir.Path(), storesMarker, []byte("stores created\n"), 0o600); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if a.sysacc, err = sysreg.NewAcceptor(sysreg.AcceptorConfig{ID: uint64(a.cfg.NodeID), Store: a.sysst, Logger: a.log.With("component", "sysreg")}); err != nil {
		return fmt.Errorf("agent: system register: %w", err)
	}
	return nil
}

// storesMarker records that the stores were created. An acceptor that
// forgets its promises breaks the register's safety, so once the marker
// exists a missing store is an error, never an empty store made anew.
const storesMarker = "STORES"

// checkStoresPresent refuses to start when a store that existed is gone.
func (a *Agent) checkStoresPresent() error {
	d := a.dir.Path()
	if _, err := os.Stat(filepath.Join(d, storesMarker)); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	for _, p := range []string{a.dir.AcceptorPath(), a.dir.PartitionsPath(), filepath.Join(d, SystemName)} {
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("agent: %s is missing but this data directory had its stores (%s): the agent refuses to start with an empty store, "+
				"which would forget the acceptor's promises or the replicas' data; restore the directory from a backup, or remove the node from the cluster and add it anew: %w",
				p, filepath.Join(d, storesMarker), datadir.ErrCorrupt)
		}
	}
	return nil
}

// shutdown is the graceful stop: refuse new client requests, let the
// requests in flight finish (their commits complete), leave the
// membership, then stop the node and close the stores, all within
// ShutdownTimeout.
func (a *Agent) shutdown(cancel context.CancelFunc, loops *sync.WaitGroup) {
	start := time.Now()
	deadline, done := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer done()
	a.draining.Store(true)
	a.log.Info("shutting down: refusing new client requests, finishing those in flight", "bound", a.cfg.ShutdownTimeout)
	a.stopAPI(deadline)
	if a.members != nil {
		leave := min(5*time.Second, max(time.Until(deadlineOf(deadline)), 0))
		if err := a.members.Leave(leave); err != nil {
			a.log.Warn("leave the membership", "err", err)
		}
		_ = a.members.Shutdown()
	}
	cancel()
	// The spec loop and the host's starter end with the context (their
	// register reads are bound by it); the stores close only after them,
	// and no host can start after this.
	loops.Wait()
	if h := a.host.Load(); h != nil {
		h.stop(deadline, a.log)
	}
	a.log.Info("shut down", "took", time.Since(start).Round(time.Millisecond))
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

func (a *Agent) closeStores() {
	for _, c := range []struct {
		name string
		fn   func() error
	}{
		{"system register store", closer(a.sysst)},
		{"partition store", closer(a.partst)},
		{"acceptor store", closer(a.accst)},
		{"data directory", closer(a.dir)},
	} {
		if c.fn == nil {
			continue
		}
		if err := c.fn(); err != nil {
			a.log.Error("close "+c.name, "err", err)
		}
	}
	a.sysst, a.partst, a.accst, a.dir = nil, nil, nil, nil
}

func closer[T interface{ Close() error }](c T) func() error {
	var zero T
	if any(c) == any(zero) {
		return nil
	}
	return c.Close
}

// Reload applies what can change at run time from a new config (SIGHUP):
// the log level and the TLS certificate. It returns what it applied and
// what needs a restart, by field.
func (a *Agent) Reload(next agentcfg.Config) (applied, restart []string, err error) {
	if a.opts.Level != nil && next.Log.Level != a.cfg.Log.Level {
		var l slog.Level
		if err := l.UnmarshalText([]byte(next.Log.Level)); err != nil {
			return nil, nil, fmt.Errorf("log.level: %w", err)
		}
		a.opts.Level.Set(l)
		a.cfg.Log.Level = next.Log.Level
		applied = append(applied, "log.level")
	}
	if a.certs != nil && !next.Insecure {
		if a.certs.caChanged(next.TLS) {
			restart = append(restart, "tls.ca_file")
		}
		if next.TLS.CertFile != a.certs.files.CertFile || next.TLS.KeyFile != a.certs.files.KeyFile {
			restart = append(restart, "tls.cert_file/tls.key_file (paths; the files at the old paths were reloaded)")
		}
		if err := a.certs.reload(); err != nil {
			return applied, restart, err
		}
		applied = append(applied, "tls certificate")
	}
	if next.Admin.TokenFile != "" || a.cfg.Admin.TokenFile != "" {
		what, err := a.admin.reloadToken(next.Admin.TokenFile)
		if err != nil {
			return applied, restart, err
		}
		a.cfg.Admin = next.Admin
		applied = append(applied, what)
	}
	restart = append(restart, diffRestart(a.cfg, next)...)
	return applied, restart, nil
}

// diffRestart names the fields other than log level and TLS that differ:
// they take effect at the next start.
func diffRestart(cur, next agentcfg.Config) []string {
	var out []string
	add := func(name string, differ bool) {
		if differ {
			out = append(out, name)
		}
	}
	add("name", cur.Name != next.Name)
	add("node_id", cur.NodeID != next.NodeID)
	add("region", cur.Region != next.Region)
	add("zone", cur.Zone != next.Zone)
	add("data_dir", cur.DataDir != next.DataDir)
	add("cluster", cur.Cluster != next.Cluster)
	add("bind", cur.Bind != next.Bind)
	add("advertise", cur.Advertise != next.Advertise)
	add("retry_join", fmt.Sprint(cur.RetryJoin) != fmt.Sprint(next.RetryJoin))
	add("gossip_key", cur.GossipKey != next.GossipKey)
	add("insecure", cur.Insecure != next.Insecure)
	add("log.format", cur.Log.Format != next.Log.Format)
	add("dns", cur.DNS != next.DNS)
	add("shutdown_timeout", cur.ShutdownTimeout != next.ShutdownTimeout)
	return out
}
