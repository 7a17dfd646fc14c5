package sysreg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/wire"
	"github.com/fmnode/fmnode/quorum"
)

func TestNewClientConfig(t *testing.T) {
	hc := &http.Client{}
	cases := []struct {
		name  string
		cfg   Config
		field string
	}{
		{"nil http", Config{ProposerID: 1}, "Config.HTTP"},
		{"bad scheme", Config{HTTP: hc, ProposerID: 1, Scheme: "ftp"}, "Config.Scheme"},
		{"zero proposer", Config{HTTP: hc}, "Config.ProposerID"},
		{"negative timeout", Config{HTTP: hc, ProposerID: 1, Timeout: -time.Second}, "Config.Timeout"},
		{"negative phase", Config{HTTP: hc, ProposerID: 1, PhaseTimeout: -time.Second}, "Config.PhaseTimeout"},
		{"attempts", Config{HTTP: hc, ProposerID: 1, MaxAttempts: 65}, "Config.MaxAttempts"},
		{"in-flight", Config{HTTP: hc, ProposerID: 1, PeerInFlight: -1}, "Config.PeerInFlight"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewClient(tc.cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
	c, err := NewClient(Config{HTTP: hc, ProposerID: RandomProposerID()})
	require.NoError(t, err)
	assert.Equal(t, "https", c.cfg.Scheme, "default scheme")
	assert.NotEqual(t, RandomProposerID(), RandomProposerID())
}

func TestCheckPeers(t *testing.T) {
	many := make([]Peer, MaxPeers+1)
	for i := range many {
		many[i] = Peer{ID: uint64(i + 1), Addr: fmt.Sprintf("127.0.0.1:%d", 1000+i)}
	}
	cases := []struct {
		name  string
		peers []Peer
		arg   string
	}{
		{"none", nil, "peers"},
		{"too many", many, "exceed"},
		{"zero id", []Peer{{ID: 0, Addr: "127.0.0.1:1"}}, "peers[0].ID"},
		{"duplicate id", []Peer{{ID: 1, Addr: "127.0.0.1:1"}, {ID: 1, Addr: "127.0.0.1:2"}}, "peers[1].ID"},
		{"no port", []Peer{{ID: 1, Addr: "127.0.0.1"}}, "peers[0].Addr"},
		{"empty addr", []Peer{{ID: 1}}, "peers[0].Addr"},
		{"duplicate addr", []Peer{{ID: 1, Addr: "127.0.0.1:1"}, {ID: 2, Addr: "127.0.0.1:1"}}, "peers[1].Addr"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := checkPeers(tc.peers)
			require.ErrorIs(t, err, ErrInvalidArgument)
			assert.Contains(t, err.Error(), tc.arg)
		})
	}
	ids, err := checkPeers([]Peer{{ID: 3, Addr: "127.0.0.1:3"}, {ID: 1, Addr: "localhost:1"}})
	require.NoError(t, err)
	assert.Equal(t, []caspaxos.NodeID{1, 3}, ids)
}

func TestClientArguments(t *testing.T) {
	c := newTestClient(t, &http.Client{}, "http", 1)
	ctx := testCtx(t)
	peers := []Peer{{ID: 1, Addr: "127.0.0.1:1"}}
	cases := []struct {
		name string
		call func() error
		arg  string
	}{
		{"init empty value", func() error { _, err := c.Init(ctx, peers, nil); return err }, "value"},
		{"init huge value", func() error { _, err := c.Init(ctx, peers, make([]byte, MaxValueBytes+1)); return err }, "value"},
		{"init no peers", func() error { _, err := c.Init(ctx, nil, []byte("x")); return err }, "peers"},
		{"read no peers", func() error { _, _, err := c.Read(ctx, nil); return err }, "peers"},
		{"cas version 0", func() error { _, err := c.CAS(ctx, peers, 0, []byte("x")); return err }, "expectVersion"},
		{"cas empty value", func() error { _, err := c.CAS(ctx, peers, 1, nil); return err }, "value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.ErrorIs(t, err, ErrInvalidArgument)
			assert.Contains(t, err.Error(), tc.arg)
		})
	}
}

// TestQuorumMixingIsSafe checks the package doc's claim: over one
// acceptor set, Init's all-of-n sets and Read/CAS's majorities intersect
// in every prepare/accept pairing, so the proposers may mix.
func TestQuorumMixingIsSafe(t *testing.T) {
	for n := 1; n <= 9; n++ {
		ids := make([]caspaxos.NodeID, n)
		for i := range ids {
			ids[i] = caspaxos.NodeID(i + 1)
		}
		cfgs := map[string]quorum.Config{"init": initQuorum(ids), "majority": majorityQuorum(ids)}
		for pn, p := range cfgs {
			require.NoError(t, p.Validate(), "%s n=%d", pn, n)
			for an, a := range cfgs {
				assert.True(t, quorum.Intersects(p.Prepare, a.Accept), "n=%d: %s prepare vs %s accept", n, pn, an)
			}
		}
	}
	// Two Inits over intersecting sets {1,2,3} and {3,4,5}: all-of-set
	// quorums meet; majorities would not.
	a, b := []caspaxos.NodeID{1, 2, 3}, []caspaxos.NodeID{3, 4, 5}
	assert.True(t, quorum.Intersects(initQuorum(a).Prepare, initQuorum(b).Accept))
	assert.True(t, quorum.Intersects(initQuorum(b).Prepare, initQuorum(a).Accept))
	assert.False(t, quorum.Intersects(majorityQuorum(a).Prepare, majorityQuorum(b).Accept))
}

func TestInitReadCAS(t *testing.T) {
	cases := []struct {
		name string
		n    int
		opts clusterOpts
	}{
		{"3 acceptors", 3, clusterOpts{}},
		{"5 acceptors", 5, clusterOpts{}},
		{"3 acceptors over TLS", 3, clusterOpts{tls: true}},
		{"3 acceptors on boltstore", 3, clusterOpts{bolt: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t, tc.n, tc.opts)
			c := cl.client(101)
			ctx := testCtx(t)

			_, _, err := c.Read(ctx, cl.peers)
			require.ErrorIs(t, err, ErrEmpty)

			v, err := c.Init(ctx, cl.peers, []byte("spec-1"))
			require.NoError(t, err)
			assert.Equal(t, uint64(1), v)
			for i, a := range cl.accs {
				got, ok := a.Local()
				require.True(t, ok, "acceptor %d has no value after Init (Init needs all)", i+1)
				assert.Equal(t, "spec-1", string(got))
			}

			// Another client's Init is refused with the committed value.
			_, err = cl.client(102).Init(ctx, cl.peers, []byte("other"))
			var ae *AlreadyInitializedError
			require.ErrorAs(t, err, &ae)
			require.ErrorIs(t, err, ErrAlreadyInitialized)
			assert.Equal(t, "spec-1", string(ae.Value))
			assert.Equal(t, uint64(1), ae.Version)

			val, ver, err := c.Read(ctx, cl.peers)
			require.NoError(t, err)
			assert.Equal(t, "spec-1", string(val))
			assert.Equal(t, uint64(1), ver)

			nv, err := c.CAS(ctx, cl.peers, 1, []byte("spec-2"))
			require.NoError(t, err)
			assert.Equal(t, uint64(2), nv)

			_, err = cl.client(103).CAS(ctx, cl.peers, 1, []byte("stale"))
			var ce *ConflictError
			require.ErrorAs(t, err, &ce)
			require.ErrorIs(t, err, ErrConflict)
			assert.Equal(t, uint64(1), ce.Expected)
			assert.Equal(t, uint64(2), ce.Current)
			assert.Equal(t, "spec-2", string(ce.Value))

			val, ver, err = cl.client(104).Read(ctx, cl.peers)
			require.NoError(t, err)
			assert.Equal(t, "spec-2", string(val))
			assert.Equal(t, uint64(2), ver)
		})
	}
}

func TestInitWithPeersDown(t *testing.T) {
	cases := []struct {
		name string
		n    int
		down []int
	}{
		{"3 acceptors, one down", 3, []int{1}},
		{"5 acceptors, two down", 5, []int{0, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t, tc.n, clusterOpts{})
			var want []Peer
			for _, i := range tc.down {
				want = append(want, cl.peers[i])
				cl.stop(i)
			}
			c := cl.client(201)
			ctx := testCtx(t)
			_, err := c.Init(ctx, cl.peers, []byte("spec"))
			var ue *UnreachableError
			require.ErrorAs(t, err, &ue, "got %v", err)
			require.ErrorIs(t, err, ErrNoQuorum)
			assert.Equal(t, want, ue.Peers)
			assert.False(t, ue.Unknown, "nothing was accepted, yet the outcome is unknown")
			assert.NotErrorIs(t, err, ErrUnknownOutcome)
			for _, p := range want {
				assert.Contains(t, err.Error(), p.Addr, "the error names the down peer")
			}
			for i, a := range cl.accs {
				if cl.srvs[i] != nil {
					_, ok := a.Local()
					assert.False(t, ok, "acceptor %d accepted a value of the failed Init", i+1)
				}
			}
			// Nothing visible: the remaining majority reads empty...
			if len(tc.down) <= (tc.n-1)/2 {
				_, _, err = c.Read(ctx, cl.peers)
				require.ErrorIs(t, err, ErrEmpty)
			}
			// ...and once every peer is back, Init succeeds.
			for _, i := range tc.down {
				cl.start(i)
			}
			v, err := cl.client(202).Init(ctx, cl.peers, []byte("spec-after"))
			require.NoError(t, err)
			assert.Equal(t, uint64(1), v)
			val, _, err := c.Read(ctx, cl.peers)
			require.NoError(t, err)
			assert.Equal(t, "spec-after", string(val))
		})
	}
}

// TestReadWithMajorityDown: Read and CAS need a majority, and name the
// peers that did not answer when they lack it.
func TestReadWithMajorityDown(t *testing.T) {
	cl := newCluster(t, 3, clusterOpts{})
	c := cl.client(301)
	ctx := testCtx(t)
	_, err := c.Init(ctx, cl.peers, []byte("spec"))
	require.NoError(t, err)

	cl.stop(2)
	_, ver, err := c.Read(ctx, cl.peers)
	require.NoError(t, err, "a majority is up")
	assert.Equal(t, uint64(1), ver)
	_, err = c.CAS(ctx, cl.peers, 1, []byte("spec-2"))
	require.NoError(t, err)

	cl.stop(1)
	_, _, err = c.Read(ctx, cl.peers)
	var ue *UnreachableError
	require.ErrorAs(t, err, &ue)
	assert.ElementsMatch(t, []Peer{cl.peers[1], cl.peers[2]}, ue.Peers)
	assert.False(t, ue.Unknown, "a read has no unknown outcome")
}

// TestConcurrentCAS: two clients CAS the same version at once, round
// after round; exactly one value lands per version.
func TestConcurrentCAS(t *testing.T) {
	cl := newCluster(t, 3, clusterOpts{})
	ctx := testCtx(t)
	clients := []*Client{cl.client(401), cl.client(402)}
	_, err := clients[0].Init(ctx, cl.peers, []byte("v1"))
	require.NoError(t, err)
	version := uint64(1)
	wins := 0
	for round := range 8 {
		type outcome struct {
			value string
			ver   uint64
			err   error
		}
		out := make([]outcome, len(clients))
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				val := fmt.Sprintf("r%d-c%d", round, i)
				v, err := c.CAS(ctx, cl.peers, version, []byte(val))
				out[i] = outcome{val, v, err}
			}()
		}
		wg.Wait()
		got, ver, err := clients[0].Read(ctx, cl.peers)
		require.NoError(t, err)
		winners := 0
		for i, o := range out {
			var ce *ConflictError
			switch {
			case o.err == nil:
				winners++
				assert.Equal(t, version+1, o.ver, "round %d client %d", round, i)
				assert.Equal(t, o.value, string(got), "round %d: the winner's value is not the register's", round)
			case errors.As(o.err, &ce):
				assert.Equal(t, version+1, ce.Current, "round %d client %d", round, i)
				assert.NotEqual(t, o.value, string(ce.Value), "round %d: a refused write landed", round)
				assert.NotEqual(t, o.value, string(got), "round %d: a refused write landed", round)
			default:
				require.ErrorIs(t, o.err, ErrUnknownOutcome, "round %d client %d", round, i)
			}
		}
		require.LessOrEqual(t, winners, 1, "round %d: two writes won one version: %+v", round, out)
		require.LessOrEqual(t, ver, version+1, "round %d: both writes landed", round)
		if winners == 1 {
			require.Equal(t, version+1, ver)
		}
		// One write landed: its writer won, unless it gave up on a quorum
		// (a timeout under load) and so cannot know.
		if ver == version+1 && !errors.Is(out[0].err, ErrNoQuorum) && !errors.Is(out[1].err, ErrNoQuorum) {
			require.Equal(t, 1, winners, "round %d: the register moved by one write, but %d writers won: %v / %v", round, winners, out[0].err, out[1].err)
		}
		wins += winners
		version = ver
	}
	assert.Positive(t, wins, "no round had a winner")
}

// TestRacingInits: two operators Init at once with different views of
// the membership, {1,2,3} and {3,4,5}, and different specs. At most one
// commits, and a read through all five finds only that one.
func TestRacingInits(t *testing.T) {
	for iter := range 6 {
		t.Run(fmt.Sprint(iter), func(t *testing.T) {
			mp := NewMemPeers()
			var all []Peer
			for i := range 5 {
				acc, err := NewAcceptor(AcceptorConfig{ID: uint64(i + 1), Store: caspaxos.NewMemoryStore()})
				require.NoError(t, err)
				addr := fmt.Sprintf("127.0.0.1:%d", 9001+i)
				mp.Handle(addr, acc)
				all = append(all, Peer{ID: uint64(i + 1), Addr: addr})
			}
			views := [][]Peer{all[0:3], all[2:5]}
			type outcome struct {
				ver uint64
				err error
			}
			out := make([]outcome, 2)
			var wg sync.WaitGroup
			for i, view := range views {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := newTestClient(t, mp.HTTPClient(), "https", uint64(501+i))
					v, err := c.Init(testCtx(t), view, []byte(fmt.Sprintf("spec-%d", i)))
					out[i] = outcome{v, err}
				}()
			}
			wg.Wait()
			wins := 0
			for i, o := range out {
				if o.err == nil {
					wins++
					continue
				}
				var ae *AlreadyInitializedError
				if errors.As(o.err, &ae) {
					assert.Equal(t, fmt.Sprintf("spec-%d", 1-i), string(ae.Value), "init %d refused by a value nobody wrote", i)
					continue
				}
				require.True(t, errors.Is(o.err, ErrUnknownOutcome) || errors.Is(o.err, ErrNoQuorum), "init %d: %v", i, o.err)
			}
			require.LessOrEqual(t, wins, 1, "both Inits committed: %+v", out)
			got, _, err := newTestClient(t, mp.HTTPClient(), "https", 599).Read(testCtx(t), all)
			if wins == 1 {
				require.NoError(t, err)
				for i, o := range out {
					if o.err == nil {
						assert.Equal(t, fmt.Sprintf("spec-%d", i), string(got))
					}
				}
			} else if err != nil {
				require.ErrorIs(t, err, ErrEmpty)
			}
		})
	}
}

// TestDurableAcrossRestart: every acceptor restarts from its boltstore
// file; the register reads as it was and accepts the next CAS.
func TestDurableAcrossRestart(t *testing.T) {
	cl := newCluster(t, 3, clusterOpts{bolt: true})
	ctx := testCtx(t)
	c := cl.client(601)
	_, err := c.Init(ctx, cl.peers, []byte("spec-1"))
	require.NoError(t, err)
	_, err = c.CAS(ctx, cl.peers, 1, []byte("spec-2"))
	require.NoError(t, err)

	for i := range cl.peers {
		cl.stop(i)
	}
	for i := range cl.peers {
		cl.start(i)
	}
	held := 0
	for _, a := range cl.accs {
		if v, ok := a.Local(); ok && string(v) == "spec-2" {
			held++
		}
	}
	assert.GreaterOrEqual(t, held, 2, "a majority must have spec-2 on disk")

	c2 := cl.client(602)
	val, ver, err := c2.Read(ctx, cl.peers)
	require.NoError(t, err)
	assert.Equal(t, "spec-2", string(val))
	assert.Equal(t, uint64(2), ver)
	_, err = c2.Init(ctx, cl.peers, []byte("again"))
	require.ErrorIs(t, err, ErrAlreadyInitialized)
	nv, err := c2.CAS(ctx, cl.peers, 2, []byte("spec-3"))
	require.NoError(t, err)
	assert.Equal(t, uint64(3), nv)
}

// ballotRecorder is an http.RoundTripper that records the ballot of every
// request before passing it on, synchronously with the sender (so an
// operation's transport, closed at its end, has recorded all it sent).
type ballotRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []caspaxos.Ballot
}

func (r *ballotRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	if m, err := wire.DecodeMessage(body); err == nil && len(m.Items) == 1 {
		r.mu.Lock()
		r.seen = append(r.seen, m.Items[0].Ballot)
		r.mu.Unlock()
	}
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(bytes.NewReader(body))
	return r.next.RoundTrip(req)
}

// take returns and forgets the ballots recorded so far.
func (r *ballotRecorder) take() []caspaxos.Ballot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.seen
	r.seen = nil
	return s
}

// TestClientNeverReusesABallot: every ballot of an operation is above
// every ballot of the client's earlier operations, even for operations
// within one millisecond (in memory they take less).
func TestClientNeverReusesABallot(t *testing.T) {
	mp := NewMemPeers()
	var peers []Peer
	for i := range 3 {
		acc, err := NewAcceptor(AcceptorConfig{ID: uint64(i + 1), Store: caspaxos.NewMemoryStore()})
		require.NoError(t, err)
		addr := fmt.Sprintf("127.0.0.1:%d", 9101+i)
		mp.Handle(addr, acc)
		peers = append(peers, Peer{ID: uint64(i + 1), Addr: addr})
	}
	rec := &ballotRecorder{next: mp}
	c := newTestClient(t, &http.Client{Transport: rec}, "http", 7)
	ctx := testCtx(t)
	_, err := c.Init(ctx, peers, []byte("a"))
	require.NoError(t, err)
	var top caspaxos.Ballot
	check := func(op string) []caspaxos.Ballot {
		used := rec.take()
		require.NotEmpty(t, used, "%s sent nothing", op)
		for _, b := range used {
			require.True(t, top.Less(b), "%s: ballot %v not above the earlier operations' %v", op, b, top)
		}
		for _, b := range used {
			top = top.Max(b)
		}
		return used
	}
	check("init")
	for i := range 20 {
		_, err := c.CAS(ctx, peers, uint64(i+1), []byte(fmt.Sprint(i)))
		require.NoError(t, err)
		check(fmt.Sprintf("cas %d", i))
		_, _, err = c.Read(ctx, peers)
		require.NoError(t, err)
		check(fmt.Sprintf("read %d", i))
	}
	// A ballot pushed far past the wall clock (by a conflict with a
	// proposer whose clock runs ahead) raises the next operation's floor.
	ahead := uint64(time.Now().Add(time.Hour).UnixMilli())
	c.turn <- struct{}{}
	c.lastCounter = ahead
	<-c.turn
	top = ballot(ahead, 7)
	_, err = c.CAS(ctx, peers, 21, []byte("late"))
	require.NoError(t, err)
	check("cas after a ballot from the future")
}

// TestCanceledContext: an operation whose context ends reports it; a
// write whose accept never left is not an unknown outcome.
func TestCanceledContext(t *testing.T) {
	mp := NewMemPeers()
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	blackHole := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-hold:
		}
	})
	mp.Handle("127.0.0.1:9201", blackHole)
	peers := []Peer{{ID: 1, Addr: "127.0.0.1:9201"}}
	c, err := NewClient(Config{HTTP: mp.HTTPClient(), ProposerID: 9, PhaseTimeout: 5 * time.Second})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Init(ctx, peers, []byte("spec"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, ErrUnknownOutcome)
	assert.Less(t, time.Since(start), 3*time.Second, "the call outlived its context")

	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	_, _, err = c.Read(done, peers)
	require.ErrorIs(t, err, context.Canceled)
}
