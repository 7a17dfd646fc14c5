package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/fmnode/fmnode/internal/clusterspec"
	"github.com/fmnode/fmnode/internal/durable"
	"github.com/fmnode/fmnode/internal/sysreg"
)

// committed is a cluster spec the system register committed, with the
// register's version of it.
type committed struct {
	spec    clusterspec.Spec
	version uint64
}

// Spec is the cluster spec the agent runs under and its version (ok is
// false before init).
func (a *Agent) Spec() (clusterspec.Spec, uint64, bool) {
	c := a.spec.Load()
	if c == nil {
		return clusterspec.Spec{}, 0, false
	}
	return c.spec, c.version, true
}

const (
	// specCacheName is the last committed spec this agent saw, so that a
	// restart hosts its partitions without waiting for a quorum of the
	// system register (a change made meanwhile is read in the background).
	specCacheName = "spec.cache"
	// specPollWaiting is how often an agent without a spec looks for one;
	// specPoll how often a running agent reads the register for changes
	// (a change is also pushed to every agent at once).
	specPollWaiting = 250 * time.Millisecond
	specPoll        = 5 * time.Second
)

// specLoop learns the cluster spec and its changes: from the cache at
// start, then from the system register, read through a majority of the
// acceptors the spec names (before the first spec, the value this node's
// own acceptor accepted names them: init writes to every node).
func (a *Agent) specLoop(ctx context.Context) error {
	if c, ok, err := a.loadSpecCache(); err != nil {
		return err
	} else if ok {
		a.setSpec(c, "cache")
	}
	poke := a.poke
	failures := 0
	for {
		wait := specWait(a.spec.Load() != nil, failures, rand.Float64())
		select {
		case <-ctx.Done():
			return nil
		case <-poke:
		case <-time.After(wait):
		}
		if err := a.refreshSpec(ctx); err != nil && ctx.Err() == nil {
			failures++
			a.log.Debug("read the cluster spec", "err", err, "failures", failures)
		} else {
			failures = 0
		}
		// Policy the node could not apply at once (a proposal was in
		// flight, or its partitions became write regions since) is
		// applied now.
		if h, c := a.host.Load(), a.spec.Load(); h != nil && c != nil {
			h.applyPolicy(ctx, *c)
		}
	}
}

// refreshSpec reads the register once and adopts a newer spec.
func (a *Agent) refreshSpec(ctx context.Context) error {
	a.specRefresh.Lock()
	defer a.specRefresh.Unlock()
	cand := a.spec.Load()
	if cand == nil {
		v, ok := a.sysacc.Local()
		if !ok {
			return nil
		}
		s, err := clusterspec.Decode(v)
		if err != nil {
			return fmt.Errorf("the value this node's system acceptor holds: %w", err)
		}
		cand = &committed{spec: s}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, ver, err := a.sysClient().Read(ctx, a.sysPeers(cand.spec))
	if err != nil {
		return err
	}
	if cur := a.spec.Load(); cur != nil && ver <= cur.version {
		return nil
	}
	s, err := clusterspec.Decode(v)
	if err != nil {
		return fmt.Errorf("the committed cluster spec: %w", err)
	}
	c := committed{spec: s, version: ver}
	if err := a.storeSpecCache(c); err != nil {
		return err
	}
	a.setSpec(c, "register")
	return nil
}

// adoptSpec runs under a spec this agent itself committed (init), unless
// a newer one is already known.
func (a *Agent) adoptSpec(c committed, from string) error {
	a.specRefresh.Lock()
	defer a.specRefresh.Unlock()
	if cur := a.spec.Load(); cur != nil && c.version <= cur.version {
		return nil
	}
	if err := a.storeSpecCache(c); err != nil {
		return err
	}
	a.setSpec(c, from)
	return nil
}

// specWait is how long the spec loop sleeps before its next read: specPoll
// with a spec; without one, specPollWaiting doubled for each read that
// failed in a row, up to specPoll, and jittered down to half (rnd in
// [0,1)). Every agent waiting for the spec reads the register (a full
// CASPaxos round) and init pokes them all at once: on an overloaded
// machine fixed 250 ms polls kept the waiting agents' rounds colliding
// and their requests queued past the phase timeout at every acceptor, so
// that for minutes none of them read it (seed 3002 under a CPU cap).
func specWait(have bool, failures int, rnd float64) time.Duration {
	if have {
		return specPoll
	}
	w := specPollWaiting
	for i := 0; i < failures && w < specPoll; i++ {
		w *= 2
	}
	w = min(w, specPoll)
	return w/2 + time.Duration(rnd*float64(w/2))
}

func (a *Agent) setSpec(c committed, from string) {
	old := a.spec.Swap(&c)
	if old == nil {
		a.log.Info("cluster spec", "version", c.version, "from", from, "partitions", c.spec.Partitions,
			"regions", c.spec.Regions, "nodes", len(c.spec.Nodes), "profile", c.spec.Profile.Name)
		a.specOnce.Do(func() { close(a.specCh) })
		return
	}
	changed := clusterspec.Diff(old.spec, c.spec)
	a.log.Info("cluster spec changed", "version", c.version, "was", old.version, "changed", changed)
	if h := a.host.Load(); h != nil {
		h.specChanged(context.Background(), c, changed)
	}
}

// hostWhenSpec starts the node once the spec is known.
func (a *Agent) hostWhenSpec(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-a.specCh:
	}
	h, err := a.startHost(ctx, *a.spec.Load())
	if err != nil {
		return err
	}
	a.host.Store(h)
	if a.opts.Ready != nil {
		a.opts.Ready()
	}
	select {
	case <-ctx.Done():
		return nil
	case <-h.exited:
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("agent: the node stopped: %w", h.runErr)
	}
}

func (a *Agent) sysClient() *sysreg.Client {
	cfg := sysreg.Config{HTTP: a.httpClient(), ProposerID: a.dir.Boot()<<16 | uint64(a.cfg.NodeID), Logger: a.log.With("component", "sysreg")}
	if a.certs == nil {
		cfg.Scheme = "http"
	}
	c, err := sysreg.NewClient(cfg)
	if err != nil {
		panic(fmt.Sprintf("agent: sysreg client config: %v", err)) // every field is set above
	}
	return c
}

// sysPeers are the system register's acceptors: every node of the spec,
// at the API address gossip last gave (the recorded one otherwise).
func (a *Agent) sysPeers(s clusterspec.Spec) []sysreg.Peer {
	live := map[uint16]string{}
	if a.members != nil {
		for _, m := range a.members.Members() {
			live[m.NodeID] = m.APIAddr
		}
	}
	out := make([]sysreg.Peer, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		addr := n.APIAddr
		if l := live[n.ID]; l != "" {
			addr = l
		}
		out = append(out, sysreg.Peer{ID: uint64(n.ID), Addr: addr})
	}
	return out
}

// httpClient is the agent's client for other agents' APIs.
func (a *Agent) httpClient() *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: time.Minute, DialContext: a.peerDialer().DialContext}
	if a.certs != nil {
		tr.TLSClientConfig = a.certs.client()
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// servePoke: another agent committed a spec change; read it now.
func (a *Agent) servePoke(w http.ResponseWriter, r *http.Request) {
	if !requireMethod(w, r, http.MethodPost) {
		return
	}
	select {
	case a.poke <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusNoContent)
}

// pokeAll tells every node of the spec to read the register now.
func (a *Agent) pokeAll(ctx context.Context, s clusterspec.Spec) {
	cl := a.httpClient()
	scheme := "https"
	if a.certs == nil {
		scheme = "http"
	}
	for _, p := range a.sysPeers(s) {
		go func(addr string) {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+"://"+addr+pathSpecPoke, nil)
			if err != nil {
				return
			}
			if resp, err := cl.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}(p.Addr)
	}
}

func (a *Agent) loadSpecCache() (committed, bool, error) {
	path := filepath.Join(a.dir.Path(), specCacheName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return committed{}, false, nil
	}
	if err != nil {
		return committed{}, false, err
	}
	c, err := decodeCache(b)
	if err != nil {
		return committed{}, false, fmt.Errorf("agent: %s is damaged (the agent refuses to start and did not modify it; delete it to read the spec from the register again): %w", path, err)
	}
	return c, true, nil
}

func (a *Agent) storeSpecCache(c committed) error {
	b, err := encodeCache(c)
	if err != nil {
		return err
	}
	return durable.WriteFile(a.dir.Path(), specCacheName, b, 0o600)
}
