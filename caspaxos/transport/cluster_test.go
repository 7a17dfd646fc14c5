package transport

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
)

func TestTCPClusterConcurrentCAS(t *testing.T) {
	for _, tc := range []struct {
		name string
		mem  bool
	}{{"bbolt", false}, {"memory", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTCPCluster(t, 3, tc.mem)
			n := newNode(t, c.dial(t), testProposerConfig(100, c.ids...))
			commits, mismatches := casWorkload(t, n, 32, 20, 25)
			t.Logf("commits=%d mismatches=%d stats=%+v", commits, mismatches, n.Stats())
			assert.Positive(t, commits)
			assert.Zero(t, n.SendErrors())
		})
	}
}

// The failure ladder on real sockets and bbolt: one acceptor down still
// commits, two down fails with ErrNoQuorum within the configured
// attempts, and restarting them (on their old ports and stores) recovers.
func TestTCPClusterFailures(t *testing.T) {
	c := newTCPCluster(t, 3, false)
	tr := c.dial(t)
	cfg := testProposerConfig(100, c.ids...)
	n := newNode(t, tr, cfg)
	ctx := context.Background()

	v, err := n.Propose(ctx, "k", caspaxos.CAS(0, []byte("one")))
	require.NoError(t, err)
	require.Equal(t, uint64(1), v.Version)

	c.kill(3)
	waitFor(t, "transport to notice acceptor 3 is gone", func() bool { return !tr.Connected(3) })
	v, err = n.Propose(ctx, "k", caspaxos.CAS(1, []byte("two")))
	require.NoError(t, err, "one acceptor down must not stop commits")
	require.Equal(t, uint64(2), v.Version)
	commits, _ := casWorkload(t, n, 8, 4, 5)
	require.Positive(t, commits)

	c.kill(2)
	start := time.Now()
	_, err = n.Propose(ctx, "k", caspaxos.CAS(2, []byte("three")))
	elapsed := time.Since(start)
	require.Error(t, err)
	assert.ErrorIs(t, err, caspaxos.ErrNoQuorum)
	// A mutating CAS whose accept may have reached a minority reports an unknown outcome.
	assert.ErrorIs(t, err, caspaxos.ErrUnknownOutcome)
	// MaxAttempts rounds of at most a phase timeout plus backoffs.
	limit := time.Duration(cfg.MaxAttempts)*(cfg.Phase1Timeout+cfg.Phase2Timeout+cfg.BackoffMax) + time.Second
	assert.Less(t, elapsed, limit)
	_, err = n.Propose(ctx, "k", caspaxos.Read())
	assert.ErrorIs(t, err, caspaxos.ErrNoQuorum)
	assert.NotErrorIs(t, err, caspaxos.ErrUnknownOutcome, "a read never has an unknown outcome")

	c.restart(2)
	c.restart(3)
	waitFor(t, "reconnect", func() bool { return tr.Connected(2) && tr.Connected(3) })
	v, err = n.Propose(ctx, "k", caspaxos.Read())
	require.NoError(t, err)
	require.GreaterOrEqual(t, v.Version, uint64(2), "committed versions survive restarts")
	v2, err := n.Propose(ctx, "k", caspaxos.CAS(v.Version, []byte("after restart")))
	require.NoError(t, err)
	require.Equal(t, v.Version+1, v2.Version)
	assert.Contains(t, c.logs.String(), "acceptor closed the connection; reconnecting")
}

// A new proposer (fresh cache, fresh ballots) sees what an earlier one
// committed: the state really is on the acceptors' disks.
func TestTCPClusterSecondProposerSeesCommits(t *testing.T) {
	c := newTCPCluster(t, 3, false)
	n1 := newNode(t, c.dial(t), testProposerConfig(1, c.ids...))
	_, err := n1.Propose(context.Background(), "shared", caspaxos.CAS(0, []byte("x")))
	require.NoError(t, err)
	c.kill(1)
	c.restart(1)
	n2 := newNode(t, c.dial(t), testProposerConfig(2, c.ids...))
	v, err := n2.Propose(context.Background(), "shared", caspaxos.Read())
	require.NoError(t, err)
	assert.Equal(t, uint64(1), v.Version)
	assert.Equal(t, "x", string(v.Data))
	_, err = n1.Propose(context.Background(), "shared", caspaxos.CAS(0, []byte("y")))
	var mm *caspaxos.VersionMismatchError
	require.ErrorAs(t, err, &mm)
	assert.Equal(t, uint64(1), mm.Current.Version)
}

func TestMemClusterConcurrentCASAndFailures(t *testing.T) {
	net := NewMemNetwork()
	stores := map[caspaxos.NodeID]*caspaxos.MemoryStore{}
	accs := map[caspaxos.NodeID]*MemAcceptor{}
	ids := []caspaxos.NodeID{1, 2, 3}
	start := func(id caspaxos.NodeID) {
		if s := stores[id]; s != nil {
			stores[id] = s.Reopen()
		} else {
			stores[id] = caspaxos.NewMemoryStore()
		}
		a, err := net.StartAcceptor(AcceptorConfig{ID: id, Store: stores[id]})
		require.NoError(t, err)
		accs[id] = a
	}
	for _, id := range ids {
		start(id)
	}
	t.Cleanup(func() {
		for _, a := range accs {
			_ = a.Close()
		}
	})
	_, err := net.StartAcceptor(AcceptorConfig{ID: 1, Store: caspaxos.NewMemoryStore()})
	require.ErrorIs(t, err, caspaxos.ErrInvalidConfig, "one acceptor per id")

	tr := net.Dial(0)
	n := newNode(t, tr, testProposerConfig(9, ids...))
	commits, _ := casWorkload(t, n, 32, 16, 20)
	require.Positive(t, commits)

	require.NoError(t, accs[3].Close())
	net.SetLink(2, false)
	_, err = n.Propose(context.Background(), "key-0", caspaxos.Read())
	require.ErrorIs(t, err, caspaxos.ErrNoQuorum)
	net.SetLink(2, true)
	_, err = n.Propose(context.Background(), "key-0", caspaxos.Read())
	require.NoError(t, err)
	start(3)
	commits, _ = casWorkload(t, n, 8, 16, 5)
	require.Positive(t, commits)
}

func TestProposeContextCancel(t *testing.T) {
	net := NewMemNetwork()
	// No acceptor is running: proposals can only time out.
	tr := net.Dial(0)
	cfg := testProposerConfig(1, 1, 2, 3)
	cfg.Phase1Timeout, cfg.Phase2Timeout = time.Second, time.Second
	n := newNode(t, tr, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := n.Propose(ctx, "k", caspaxos.CAS(0, []byte("v")))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, caspaxos.ErrUnknownOutcome, "a mutating change may still commit")

	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel2()
	_, err = n.Propose(ctx2, "k2", caspaxos.Read())
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, caspaxos.ErrUnknownOutcome)

	done, cancel3 := context.WithCancel(context.Background())
	cancel3()
	_, err = n.Propose(done, "k3", caspaxos.Read())
	assert.ErrorIs(t, err, context.Canceled)
}

func TestProposerNodeCloseFailsPendingCalls(t *testing.T) {
	net := NewMemNetwork()
	tr := net.Dial(0)
	cfg := testProposerConfig(1, 1, 2, 3)
	cfg.Phase1Timeout, cfg.Phase2Timeout = 10*time.Second, 10*time.Second
	n, err := NewProposerNode(NodeConfig{Proposer: cfg}, tr)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = n.Propose(context.Background(), "k", caspaxos.CAS(0, nil))
		}()
	}
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, n.Close())
	wg.Wait()
	for _, err := range errs {
		assert.ErrorIs(t, err, ErrClosed)
		assert.ErrorIs(t, err, caspaxos.ErrUnknownOutcome)
	}
	_, err = n.Propose(context.Background(), "k", caspaxos.Read())
	assert.ErrorIs(t, err, ErrClosed)
}

func TestProposerNodeOverloadIsReported(t *testing.T) {
	net := NewMemNetwork()
	tr := net.Dial(0)
	cfg := testProposerConfig(1, 1, 2, 3)
	cfg.Phase1Timeout, cfg.Phase2Timeout = 10*time.Second, 10*time.Second
	cfg.MaxQueuePerKey = 1
	n := newNode(t, tr, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 { // one active, one queued
		go func() { _, _ = n.Propose(ctx, "hot", caspaxos.Read()) }()
	}
	waitFor(t, "two proposals in", func() bool { return n.Stats().Proposals == 2 })
	_, err := n.Propose(ctx, "hot", caspaxos.Read())
	assert.ErrorIs(t, err, caspaxos.ErrKeyBusy)
}

func TestNodeConfigValidation(t *testing.T) {
	tr := NewMemNetwork().Dial(0)
	tests := map[string]NodeConfig{
		"bad proposer":     {},
		"negative pending": {Proposer: testProposerConfig(1, 1), MaxPending: -1},
		"negative events":  {Proposer: testProposerConfig(1, 1), MaxLoopEvents: -1},
	}
	for name, cfg := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := NewProposerNode(cfg, tr)
			assert.ErrorIs(t, err, caspaxos.ErrInvalidConfig)
		})
	}
	_, err := NewProposerNode(NodeConfig{Proposer: testProposerConfig(1, 1)}, nil)
	assert.ErrorIs(t, err, caspaxos.ErrInvalidConfig)
}

func TestConfigValidation(t *testing.T) {
	st := caspaxos.NewMemoryStore()
	tests := map[string]ServerConfig{
		"no id":          {AcceptorConfig: AcceptorConfig{Store: st}},
		"no store":       {AcceptorConfig: AcceptorConfig{ID: 1}},
		"tiny frames":    {AcceptorConfig: AcceptorConfig{ID: 1, Store: st}, MaxFrameBytes: 100},
		"inbox < frame":  {AcceptorConfig: AcceptorConfig{ID: 1, Store: st, InboxBytes: MinFrameBytes}, MaxFrameBytes: 2 * MinFrameBytes},
		"negative idle":  {AcceptorConfig: AcceptorConfig{ID: 1, Store: st}, IdleTimeout: -1},
		"negative conns": {AcceptorConfig: AcceptorConfig{ID: 1, Store: st}, MaxConns: -1},
		"negative steps": {AcceptorConfig: AcceptorConfig{ID: 1, Store: st, MaxStepMessages: -1}},
		"negative wait":  {AcceptorConfig: AcceptorConfig{ID: 1, Store: st, GroupWait: -1}},
		"huge wait":      {AcceptorConfig: AcceptorConfig{ID: 1, Store: st, GroupWait: MaxGroupWait + 1}},
		"neg fraction":   {AcceptorConfig: AcceptorConfig{ID: 1, Store: st, GroupWait: time.Millisecond, GroupWaitFraction: -0.5}},
		"fraction > 1":   {AcceptorConfig: AcceptorConfig{ID: 1, Store: st, GroupWait: time.Millisecond, GroupWaitFraction: 1.5}},
	}
	for name, cfg := range tests {
		t.Run(name, func(t *testing.T) {
			cfg.Addr = "127.0.0.1:0"
			_, err := ListenAcceptor(cfg)
			assert.ErrorIs(t, err, caspaxos.ErrInvalidConfig)
		})
	}
	clientTests := map[string]ClientConfig{
		"no peers":     {},
		"empty addr":   {Peers: map[caspaxos.NodeID]string{1: ""}},
		"zero id":      {Peers: map[caspaxos.NodeID]string{0: "x:1"}},
		"bad backoff":  {Peers: map[caspaxos.NodeID]string{1: "x:1"}, ReconnectMin: time.Second, ReconnectMax: time.Millisecond},
		"tiny frames":  {Peers: map[caspaxos.NodeID]string{1: "x:1"}, MaxFrameBytes: 10},
		"neg queue":    {Peers: map[caspaxos.NodeID]string{1: "x:1"}, PeerQueue: -1},
		"neg replybuf": {Peers: map[caspaxos.NodeID]string{1: "x:1"}, ReplyBuffer: -1},
	}
	for name, cfg := range clientTests {
		t.Run("client "+name, func(t *testing.T) {
			_, err := DialTCP(cfg)
			assert.ErrorIs(t, err, caspaxos.ErrInvalidConfig)
		})
	}
}

func TestSendErrors(t *testing.T) {
	tr, err := DialTCP(ClientConfig{Peers: map[caspaxos.NodeID]string{1: "127.0.0.1:1"}})
	require.NoError(t, err)
	m := caspaxos.Message{Type: caspaxos.MsgPrepare, From: 5, To: 2}
	assert.ErrorIs(t, tr.Send(m), ErrUnknownPeer)
	m.To = 1
	assert.ErrorIs(t, tr.Send(m), ErrPeerDown)
	require.NoError(t, tr.Close())
	assert.ErrorIs(t, tr.Send(m), ErrClosed)

	mt := NewMemNetwork().Dial(0)
	assert.ErrorIs(t, mt.Send(m), ErrPeerDown)
	require.NoError(t, mt.Close())
	assert.True(t, errors.Is(mt.Send(m), ErrClosed))
}
