package kv_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/dataapi"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/txtdns"
	"github.com/fmnode/fmnode/txtdns/kv"
	"github.com/fmnode/fmnode/txtdns/routing"
)

const (
	zone  = "fm.example."
	parts = 8
	// opWait bounds every operation of a test: a hang fails fast with
	// the context's error rather than at the test binary's timeout.
	opWait = 10 * time.Second
)

// region is one "region" of a test world: an agent's data API (a real
// dataapi.Handler over a MemBackend) on 127.0.0.1.
type region struct {
	name   string
	mem    *dataapi.MemBackend
	faults *faultBackend
	srv    *httptest.Server
	seen   *statusLog
}

// world is regions, a publisher routing every partition to the first one
// at epoch 1, and a client resolving through the publisher in process.
type world struct {
	pub     *txtdns.Publisher
	names   []string
	regions map[string]*region
	client  *kv.Client
	tr      *http.Transport
}

type worldOpts struct {
	regions   []string // default a, b, c; the first is the write region
	preferred []string
	handler   func(*dataapi.Config)
	mem       func(*dataapi.MemConfig)
	client    func(*kv.Config)
}

func newWorld(t testing.TB, o worldOpts) *world {
	t.Helper()
	if o.regions == nil {
		o.regions = []string{"a", "b", "c"}
	}
	pub, err := txtdns.NewPublisher(txtdns.PublisherConfig{Zone: zone})
	require.NoError(t, err)
	w := &world{pub: pub, names: o.regions, regions: map[string]*region{}}
	for _, name := range o.regions {
		mc := dataapi.MemConfig{Region: partition.Region(name), WriteRegion: partition.Region(o.regions[0])}
		if o.mem != nil {
			o.mem(&mc)
		}
		mem, err := dataapi.NewMemBackend(mc)
		require.NoError(t, err)
		fb := &faultBackend{inner: mem}
		hc := dataapi.Config{Backend: fb, Region: partition.Region(name), Partitions: parts}
		if o.handler != nil {
			o.handler(&hc)
		}
		h, err := dataapi.New(hc)
		require.NoError(t, err)
		seen := &statusLog{}
		srv := httptest.NewServer(seen.wrap(h))
		t.Cleanup(srv.Close)
		w.regions[name] = &region{name: name, mem: mem, faults: fb, srv: srv, seen: seen}
		_, err = pub.SetRegions(txtdns.RegionInfo{Region: name, ConfigVersion: 1, Endpoints: []string{srv.Listener.Addr().String()}})
		require.NoError(t, err)
	}
	w.publish(t, 1, o.regions[0])
	w.tr = &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(w.tr.CloseIdleConnections)
	cfg := kv.Config{
		Routing: routing.Config{Zone: zone, Resolver: routing.AuthorityResolver{Authority: pub}, PartitionCount: parts,
			PreferredRegions: o.preferred, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond,
			RedirectPoll: 5 * time.Millisecond, MinRefreshInterval: time.Millisecond, Seed: 1},
		HTTP:    &http.Client{Transport: w.tr},
		Scheme:  "http",
		Timeout: opWait,
	}
	if o.client != nil {
		o.client(&cfg)
	}
	w.client, err = kv.New(cfg)
	require.NoError(t, err)
	return w
}

// publish routes every partition to writeRegion at epoch in DNS.
func (w *world) publish(t testing.TB, epoch uint64, writeRegion string) {
	t.Helper()
	routes := make([]txtdns.Route, parts)
	for p := range routes {
		routes[p] = txtdns.Route{Partition: uint32(p + 1), Epoch: epoch, WriteRegion: writeRegion, Priority: w.names, ConfigVersion: 1}
	}
	_, err := w.pub.Apply(routes...)
	require.NoError(t, err)
}

// failover moves every partition of every agent to writeRegion at epoch
// (the commit the agents learn of; DNS is the caller's to publish).
func (w *world) failover(t testing.TB, epoch uint64, writeRegion string) {
	t.Helper()
	for _, r := range w.regions {
		require.NoError(t, r.mem.SetWriteRegion(partition.Epoch(epoch), partition.Region(writeRegion)))
	}
}

// stored reads key straight from region's backend.
func (w *world) stored(t testing.TB, name, key string) ([]byte, bool) {
	t.Helper()
	rep, err := w.regions[name].mem.Read(t.Context(), partition.ReadRequest{
		Partition: partition.ID(w.client.Routing().Partition(key)), Key: []byte(key), Consistency: partition.Eventual})
	require.NoError(t, err)
	require.NoError(t, rep.Err)
	return rep.Value, rep.Found
}

func opCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), opWait)
	t.Cleanup(cancel)
	return ctx
}

// faultBackend wraps a backend: queued errors replace the next writes' or
// reads' replies (as a partition would answer), and a gate, when set,
// holds every call until it opens or the request's context ends.
type faultBackend struct {
	inner         dataapi.Backend
	writes, reads atomic.Int64
	// heldPolls counts the writes that asked to be held as polls
	// (PollWait), lastPollWait the last one's wait.
	heldPolls    atomic.Int64
	lastPollWait atomic.Int64

	mu        sync.Mutex
	writeErrs []error
	readErrs  []error
	gate      chan struct{}
}

func (f *faultBackend) failWrites(errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writeErrs = append(f.writeErrs, errs...)
}

// hold makes calls wait until the returned func is called.
func (f *faultBackend) hold() (release func()) {
	g := make(chan struct{})
	f.mu.Lock()
	f.gate = g
	f.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(g) }) }
}

func (f *faultBackend) next(errs *[]error) (error, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var err error
	if len(*errs) > 0 {
		err, *errs = (*errs)[0], (*errs)[1:]
	}
	return err, f.gate
}

func (f *faultBackend) Write(ctx context.Context, req partition.WriteRequest) (partition.Reply, error) {
	f.writes.Add(1)
	if req.PollWait > 0 {
		f.heldPolls.Add(1)
		f.lastPollWait.Store(int64(req.PollWait))
	}
	fault, gate := f.next(&f.writeErrs)
	if err := wait(ctx, gate); err != nil {
		return partition.Reply{}, err
	}
	if fault != nil {
		return partition.Reply{Kind: partition.ReplyWrite, Partition: req.Partition, Err: fault}, nil
	}
	return f.inner.Write(ctx, req)
}

func (f *faultBackend) Read(ctx context.Context, req partition.ReadRequest) (partition.Reply, error) {
	f.reads.Add(1)
	fault, gate := f.next(&f.readErrs)
	if err := wait(ctx, gate); err != nil {
		return partition.Reply{}, err
	}
	if fault != nil {
		return partition.Reply{Kind: partition.ReplyRead, Partition: req.Partition, Err: fault}, nil
	}
	return f.inner.Read(ctx, req)
}

func wait(ctx context.Context, gate <-chan struct{}) error {
	if gate == nil {
		return nil
	}
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// statusLog records the status of every response a handler sent (when
// it is sent, so before the client can see it), and the Fm-Session of
// every request.
type statusLog struct {
	mu       sync.Mutex
	statuses []int
	sessions []string
	// conns: the client addresses seen, one per connection.
	conns map[string]bool
}

func (l *statusLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.sessions = append(l.sessions, r.Header.Get(kv.HeaderSession))
		if l.conns == nil {
			l.conns = map[string]bool{}
		}
		l.conns[r.RemoteAddr] = true
		l.mu.Unlock()
		h.ServeHTTP(&statusWriter{ResponseWriter: w, log: l}, r)
	})
}

func (l *statusLog) add(status int) {
	l.mu.Lock()
	l.statuses = append(l.statuses, status)
	l.mu.Unlock()
}

// count returns how many responses had status (0: all).
func (l *statusLog) count(status int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.statuses {
		if status == 0 || s == status {
			n++
		}
	}
	return n
}

// connections is how many connections requests came on.
func (l *statusLog) connections() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

func (l *statusLog) lastSession() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.sessions) == 0 {
		return ""
	}
	return l.sessions[len(l.sessions)-1]
}

// statusWriter logs the status the handler writes (the data API always
// calls WriteHeader).
type statusWriter struct {
	http.ResponseWriter
	log *statusLog
}

func (s *statusWriter) WriteHeader(code int) {
	s.log.add(code)
	s.ResponseWriter.WriteHeader(code)
}
