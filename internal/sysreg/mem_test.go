package sysreg

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/transport"
	"github.com/fmnode/fmnode/caspaxos/wire"
)

// memCluster is n acceptors on one MemPeers, at fake loopback addresses.
func memCluster(t *testing.T, n, basePort int) (*MemPeers, []Peer, []*Acceptor) {
	t.Helper()
	mp := NewMemPeers()
	var peers []Peer
	var accs []*Acceptor
	for i := range n {
		acc, err := NewAcceptor(AcceptorConfig{ID: uint64(i + 1), Store: caspaxos.NewMemoryStore()})
		require.NoError(t, err)
		addr := fmt.Sprintf("127.0.0.1:%d", basePort+i)
		mux := http.NewServeMux()
		mux.Handle(Path, acc)
		mp.Handle(addr, mux)
		peers = append(peers, Peer{ID: uint64(i + 1), Addr: addr})
		accs = append(accs, acc)
	}
	return mp, peers, accs
}

func TestMemPeers(t *testing.T) {
	mp, peers, _ := memCluster(t, 3, 9401)
	c := newTestClient(t, mp.HTTPClient(), "https", 11)
	ctx := testCtx(t)
	_, err := c.Init(ctx, peers, []byte("spec"))
	require.NoError(t, err)

	mp.SetDown(peers[0].Addr, true)
	val, ver, err := c.Read(ctx, peers)
	require.NoError(t, err)
	assert.Equal(t, "spec", string(val))
	assert.Equal(t, uint64(1), ver)

	mp.SetDown(peers[1].Addr, true)
	_, _, err = c.Read(ctx, peers)
	var ue *UnreachableError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, []Peer{peers[0], peers[1]}, ue.Peers)
	assert.Contains(t, ue.Reasons[0], "connection refused")

	mp.SetDown(peers[0].Addr, false)
	mp.SetDown(peers[1].Addr, false)
	mp.Remove(peers[2].Addr)
	_, err = c.CAS(ctx, peers, 1, []byte("spec-2"))
	require.NoError(t, err, "a majority is reachable")

	cases := []struct {
		name   string
		method string
		url    string
		body   []byte
		status int
		err    string
	}{
		{"served", http.MethodPost, "http://" + peers[0].Addr + Path, encode(t, prepareMsg(7, 1, ballot(1<<50, 7))), http.StatusOK, ""},
		{"wrong path", http.MethodPost, "http://" + peers[0].Addr + "/v1/other", nil, http.StatusNotFound, ""},
		{"method", http.MethodGet, "http://" + peers[0].Addr + Path, nil, http.StatusMethodNotAllowed, ""},
		{"oversized", http.MethodPost, "http://" + peers[0].Addr + Path, make([]byte, MaxBodyBytes+10), http.StatusRequestEntityTooLarge, ""},
		{"no such host", http.MethodPost, "http://" + peers[2].Addr + Path, nil, 0, "no such host"},
	}
	hc := mp.HTTPClient()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, tc.method, tc.url, bytes.NewReader(tc.body))
			require.NoError(t, err)
			resp, err := hc.Do(req)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tc.status, resp.StatusCode, string(body))
			if tc.status == http.StatusOK {
				m, err := wire.DecodeMessage(body)
				require.NoError(t, err)
				assert.Equal(t, caspaxos.MsgPrepareReply, m.Type)
			}
		})
	}
}

// acceptRefuser passes prepares to h and answers accepts with 503: an
// acceptor that fails between Init's two phases.
func acceptRefuser(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes))
		if m, err := wire.DecodeMessage(body); err == nil && m.Type == caspaxos.MsgAccept {
			http.Error(w, "disk full", http.StatusServiceUnavailable)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}

// TestInitFailsBetweenPhases: an acceptor that promises but never
// accepts makes Init's outcome unknown (the others accepted), and the
// error names it.
func TestInitFailsBetweenPhases(t *testing.T) {
	mp, peers, accs := memCluster(t, 3, 9501)
	mp.Handle(peers[2].Addr, acceptRefuser(accs[2]))
	c := newTestClient(t, mp.HTTPClient(), "https", 12)
	ctx := testCtx(t)
	_, err := c.Init(ctx, peers, []byte("spec"))
	var ue *UnreachableError
	require.ErrorAs(t, err, &ue, "got %v", err)
	assert.True(t, ue.Unknown)
	require.ErrorIs(t, err, ErrUnknownOutcome)
	require.ErrorIs(t, err, ErrNoQuorum)
	assert.Equal(t, []Peer{peers[2]}, ue.Peers)
	assert.Contains(t, ue.Reasons[0], "disk full")
	// A Read through the majority that accepted learns the value (and
	// commits it); a second Init then reports it.
	val, _, err := c.Read(ctx, peers)
	require.NoError(t, err)
	assert.Equal(t, "spec", string(val))
	mp.Handle(peers[2].Addr, accs[2])
	_, err = c.Init(ctx, peers, []byte("spec"))
	var ae *AlreadyInitializedError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, "spec", string(ae.Value))
}

func TestHTTPTransport(t *testing.T) {
	mp, peers, _ := memCluster(t, 2, 9601)
	t.Run("config", func(t *testing.T) {
		cases := []struct {
			name  string
			cfg   TransportConfig
			field string
		}{
			{"nil http", TransportConfig{Peers: peers}, "TransportConfig.HTTP"},
			{"scheme", TransportConfig{HTTP: mp.HTTPClient(), Peers: peers, Scheme: "gopher"}, "TransportConfig.Scheme"},
			{"in-flight", TransportConfig{HTTP: mp.HTTPClient(), Peers: peers, PeerInFlight: -1}, "TransportConfig.PeerInFlight"},
			{"replies", TransportConfig{HTTP: mp.HTTPClient(), Peers: peers, ReplyBuffer: -1}, "TransportConfig.ReplyBuffer"},
			{"timeout", TransportConfig{HTTP: mp.HTTPClient(), Peers: peers, RequestTimeout: -1}, "TransportConfig.RequestTimeout"},
			{"peers", TransportConfig{HTTP: mp.HTTPClient()}, "TransportConfig.Peers"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				_, err := NewHTTPTransport(tc.cfg)
				require.ErrorIs(t, err, ErrInvalidConfig)
				assert.Contains(t, err.Error(), tc.field)
			})
		}
	})

	t.Run("send and receive", func(t *testing.T) {
		tr, err := NewHTTPTransport(TransportConfig{HTTP: mp.HTTPClient(), Scheme: "http", Peers: peers})
		require.NoError(t, err)
		defer tr.Close()
		require.NoError(t, tr.Send(prepareMsg(7, 1, ballot(5, 7))))
		select {
		case m := <-tr.Replies():
			assert.Equal(t, caspaxos.MsgPrepareReply, m.Type)
			assert.Equal(t, caspaxos.NodeID(1), m.From)
		case <-testCtx(t).Done():
			t.Fatal("no reply within the test timeout")
		}
		require.NoError(t, tr.PeerError(1))
		require.ErrorIs(t, tr.Send(prepareMsg(7, 9, ballot(5, 7))), transport.ErrUnknownPeer)
		require.ErrorIs(t, tr.PeerError(9), transport.ErrUnknownPeer)
	})

	t.Run("drops when a peer is busy", func(t *testing.T) {
		hold := make(chan struct{})
		slow := NewMemPeers()
		slow.Handle(peers[0].Addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-hold:
			case <-r.Context().Done():
			}
		}))
		tr, err := NewHTTPTransport(TransportConfig{HTTP: slow.HTTPClient(), Peers: peers[:1], PeerInFlight: 1})
		require.NoError(t, err)
		require.NoError(t, tr.Send(prepareMsg(7, 1, ballot(5, 7))))
		require.ErrorIs(t, tr.Send(prepareMsg(7, 1, ballot(6, 7))), transport.ErrQueueFull)
		assert.Equal(t, uint64(1), tr.Dropped())
		close(hold)
		require.NoError(t, tr.Close(), "close waits for the request in flight")
		require.ErrorIs(t, tr.Send(prepareMsg(7, 1, ballot(7, 7))), transport.ErrClosed)
	})

	t.Run("refuses a bad reply", func(t *testing.T) {
		bad := NewMemPeers()
		replies := map[string][]byte{
			"garbage":      []byte("junk"),
			"wrong type":   encode(t, caspaxos.Message{Type: caspaxos.MsgAcceptReply, From: 1, To: 7, Items: []caspaxos.Item{{Key: Key}}}),
			"wrong sender": encode(t, caspaxos.Message{Type: caspaxos.MsgPrepareReply, From: 2, To: 7, Items: []caspaxos.Item{{Key: Key}}}),
		}
		for name, body := range replies {
			t.Run(name, func(t *testing.T) {
				bad.Handle(peers[0].Addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) }))
				tr, err := NewHTTPTransport(TransportConfig{HTTP: bad.HTTPClient(), Peers: peers[:1]})
				require.NoError(t, err)
				require.NoError(t, tr.Send(prepareMsg(7, 1, ballot(5, 7))))
				perr := waitPeerError(t, tr, 1)
				require.NoError(t, tr.Close())
				assert.Empty(t, tr.Replies(), "a bad reply reached the proposer")
				assert.NotErrorIs(t, perr, context.Canceled)
			})
		}
		bad.Handle(peers[0].Addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "nope", http.StatusTeapot)
		}))
		tr, err := NewHTTPTransport(TransportConfig{HTTP: bad.HTTPClient(), Peers: peers[:1]})
		require.NoError(t, err)
		require.NoError(t, tr.Send(prepareMsg(7, 1, ballot(5, 7))))
		require.ErrorContains(t, waitPeerError(t, tr, 1), "HTTP 418: nope")
		require.NoError(t, tr.Close())
	})

}

// waitPeerError waits (bounded) for a request to peer id to fail.
func waitPeerError(t *testing.T, tr *HTTPTransport, id uint64) error {
	t.Helper()
	ctx := testCtx(t)
	for {
		if err := tr.PeerError(id); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the request to peer %d never failed", id)
		case <-time.After(time.Millisecond):
		}
	}
}

// TestLargestValue: a spec of MaxValueBytes fits through the whole stack
// (proposer bound, request body bound, acceptor check, store).
func TestLargestValue(t *testing.T) {
	mp, peers, accs := memCluster(t, 3, 9701)
	// The test is about size, not time: a MaxValueBytes body under the
	// race detector on a loaded machine outlasts the 250 ms phase the
	// other tests use ("prepare after 0 acks").
	c := newTestClientPhase(t, mp.HTTPClient(), "https", 13, 5*time.Second)
	ctx := testCtx(t)
	spec := bytes.Repeat([]byte{0xA5}, MaxValueBytes)
	_, err := c.Init(ctx, peers, spec)
	require.NoError(t, err)
	got, ver, err := c.Read(ctx, peers)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), ver)
	assert.True(t, bytes.Equal(spec, got), "the spec came back changed")
	local, ok := accs[0].Local()
	require.True(t, ok)
	assert.Len(t, local, MaxValueBytes)
	_, err = c.CAS(ctx, peers, 1, append(spec, 1))
	require.ErrorIs(t, err, ErrInvalidArgument)
}
