package sysreg

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/wire"
)

func newMemAcceptor(t *testing.T, id uint64) (*Acceptor, *caspaxos.MemoryStore) {
	t.Helper()
	st := caspaxos.NewMemoryStore()
	a, err := NewAcceptor(AcceptorConfig{ID: id, Store: st})
	require.NoError(t, err)
	return a, st
}

// post serves one request on a and returns the recorder.
func post(a http.Handler, method string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, Path, bytes.NewReader(body))
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	return rec
}

func TestNewAcceptorConfig(t *testing.T) {
	st := caspaxos.NewMemoryStore()
	cases := []struct {
		name  string
		cfg   AcceptorConfig
		field string
	}{
		{"zero id", AcceptorConfig{Store: st}, "AcceptorConfig.ID"},
		{"nil store", AcceptorConfig{ID: 1}, "AcceptorConfig.Store"},
		{"negative in-flight", AcceptorConfig{ID: 1, Store: st, MaxInFlight: -1}, "AcceptorConfig.MaxInFlight"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewAcceptor(tc.cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
	t.Run("closed store", func(t *testing.T) {
		closed := caspaxos.NewMemoryStore()
		require.NoError(t, closed.Close())
		_, err := NewAcceptor(AcceptorConfig{ID: 1, Store: closed})
		require.ErrorIs(t, err, caspaxos.ErrStoreClosed)
	})
}

func TestAcceptorRefusals(t *testing.T) {
	live := regValue(1, "spec")
	b := ballot(10, 7)
	twoItems := prepareMsg(7, 1, b)
	twoItems.Items = append(twoItems.Items, caspaxos.Item{Key: Key, Ballot: b})
	otherKey := prepareMsg(7, 1, b)
	otherKey.Items[0].Key = "partition/1"
	reply := prepareMsg(7, 1, b)
	reply.Type = caspaxos.MsgPrepareReply
	erase := prepareMsg(7, 1, b)
	erase.Type = caspaxos.MsgErase
	raise := caspaxos.Message{Type: caspaxos.MsgRaiseAge, From: 7, To: 1, Age: 5}
	fromZero := prepareMsg(0, 1, ballot(10, 0))
	tomb := acceptMsg(7, 1, b, caspaxos.Value{Version: 2, Tombstone: true})
	big := acceptMsg(7, 1, b, regValue(1, strings.Repeat("x", MaxValueBytes+1)))
	raw := acceptMsg(7, 1, b, caspaxos.Value{Version: 1, Data: []byte("not encoded")})
	dataAtZero := acceptMsg(7, 1, b, caspaxos.Value{Data: []byte("x")})
	cases := []struct {
		name     string
		method   string
		body     []byte
		status   int
		contains string
	}{
		{"prepare", http.MethodPost, encode(t, prepareMsg(7, 1, b)), http.StatusOK, ""},
		{"accept", http.MethodPost, encode(t, acceptMsg(7, 1, b, live)), http.StatusOK, ""},
		{"GET", http.MethodGet, nil, http.StatusMethodNotAllowed, "use POST"},
		{"PUT", http.MethodPut, encode(t, prepareMsg(7, 1, b)), http.StatusMethodNotAllowed, "use POST"},
		{"empty body", http.MethodPost, nil, http.StatusBadRequest, "malformed"},
		{"garbage", http.MethodPost, []byte("not a message"), http.StatusBadRequest, "malformed"},
		{"truncated", http.MethodPost, encode(t, prepareMsg(7, 1, b))[:5], http.StatusBadRequest, "malformed"},
		{"oversized body", http.MethodPost, make([]byte, MaxBodyBytes+1), http.StatusRequestEntityTooLarge, "exceeds"},
		{"other key", http.MethodPost, encode(t, otherKey), http.StatusBadRequest, "not served"},
		{"two items", http.MethodPost, encode(t, twoItems), http.StatusBadRequest, "2 items"},
		{"a reply", http.MethodPost, encode(t, reply), http.StatusBadRequest, "not served"},
		{"erase", http.MethodPost, encode(t, erase), http.StatusBadRequest, "not served"},
		{"raise age", http.MethodPost, encode(t, raise), http.StatusBadRequest, "not served"},
		{"other acceptor", http.MethodPost, encode(t, prepareMsg(7, 2, b)), http.StatusMisdirectedRequest, "reached acceptor 1"},
		{"from zero", http.MethodPost, encode(t, fromZero), http.StatusBadRequest, "proposer 0"},
		{"tombstone", http.MethodPost, encode(t, tomb), http.StatusBadRequest, "tombstone"},
		{"value too large", http.MethodPost, encode(t, big), http.StatusBadRequest, "exceeds"},
		{"undecodable value", http.MethodPost, encode(t, raw), http.StatusBadRequest, "sysreg value"},
		{"data at version 0", http.MethodPost, encode(t, dataAtZero), http.StatusBadRequest, "version 0"},
		{"empty value (read of the empty register)", http.MethodPost, encode(t, acceptMsg(7, 1, b, caspaxos.Value{})), http.StatusOK, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, st := newMemAcceptor(t, 1)
			rec := post(a, tc.method, tc.body)
			require.Equal(t, tc.status, rec.Code, "body: %s", rec.Body.String())
			if tc.status != http.StatusOK {
				assert.Contains(t, rec.Body.String(), tc.contains)
				assert.Zero(t, st.Applies(), "a refused request wrote to the store")
				if tc.status == http.StatusMethodNotAllowed {
					assert.Equal(t, http.MethodPost, rec.Header().Get("Allow"))
				}
				return
			}
			m, err := wire.DecodeMessage(rec.Body.Bytes())
			require.NoError(t, err)
			assert.True(t, m.Type.IsReply())
			assert.Equal(t, caspaxos.NodeID(1), m.From)
			assert.Equal(t, caspaxos.NodeID(7), m.To)
			require.Len(t, m.Items, 1)
			assert.Equal(t, caspaxos.RejectNone, m.Items[0].Reject)
		})
	}
}

// TestAcceptorBodyBoundWithoutLength: a chunked body (no Content-Length)
// over the bound is cut off while reading.
func TestAcceptorBodyBoundWithoutLength(t *testing.T) {
	a, _ := newMemAcceptor(t, 1)
	req := httptest.NewRequest(http.MethodPost, Path, io.MultiReader(strings.NewReader(""), bytes.NewReader(make([]byte, 2*MaxBodyBytes))))
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
}

// TestAcceptorRepliesAfterApply: the reply waits for Store.Apply.
func TestAcceptorRepliesAfterApply(t *testing.T) {
	st := &gateStore{Store: caspaxos.NewMemoryStore(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	a, err := NewAcceptor(AcceptorConfig{ID: 1, Store: st})
	require.NoError(t, err)
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- post(a, http.MethodPost, encode(t, prepareMsg(7, 1, ballot(3, 7)))) }()
	select {
	case <-st.entered:
	case <-time.After(testTimeout):
		t.Fatal("the acceptor never called Store.Apply for a prepare")
	}
	select {
	case rec := <-done:
		t.Fatalf("reply (status %d) left before Store.Apply returned", rec.Code)
	case <-time.After(100 * time.Millisecond):
	}
	close(st.release)
	select {
	case rec := <-done:
		require.Equal(t, http.StatusOK, rec.Code)
		assert.Equal(t, 1, st.appliedCount())
	case <-time.After(testTimeout):
		t.Fatal("no reply after Store.Apply returned")
	}
}

func TestAcceptorInFlightBound(t *testing.T) {
	st := &gateStore{Store: caspaxos.NewMemoryStore(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	a, err := NewAcceptor(AcceptorConfig{ID: 1, Store: st, MaxInFlight: 1})
	require.NoError(t, err)
	done := make(chan int, 1)
	go func() { done <- post(a, http.MethodPost, encode(t, prepareMsg(7, 1, ballot(3, 7)))).Code }()
	select {
	case <-st.entered:
	case <-time.After(testTimeout):
		t.Fatal("first request never reached Store.Apply")
	}
	rec := post(a, http.MethodPost, encode(t, prepareMsg(8, 1, ballot(4, 8))))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	close(st.release)
	select {
	case code := <-done:
		assert.Equal(t, http.StatusOK, code)
	case <-time.After(testTimeout):
		t.Fatal("first request never answered")
	}
}

// TestAcceptorStopsOnApplyFailure: after a failed Apply the acceptor's
// memory is ahead of its disk, so it answers nothing again.
func TestAcceptorStopsOnApplyFailure(t *testing.T) {
	errDisk := errors.New("disk gone")
	st := &gateStore{Store: caspaxos.NewMemoryStore(), failErr: errDisk}
	a, err := NewAcceptor(AcceptorConfig{ID: 1, Store: st})
	require.NoError(t, err)
	rec := post(a, http.MethodPost, encode(t, prepareMsg(7, 1, ballot(3, 7))))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.ErrorIs(t, a.Err(), ErrAcceptorFailed)
	require.ErrorIs(t, a.Err(), errDisk)
	select {
	case <-a.Stopped():
	default:
		t.Fatal("Stopped not closed after a failed Apply: the agent would keep running without its acceptor")
	}

	st.mu.Lock()
	st.failErr = nil
	st.mu.Unlock()
	rec = post(a, http.MethodPost, encode(t, prepareMsg(7, 1, ballot(4, 7))))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "a failed acceptor answered again")
	assert.Zero(t, st.appliedCount())
}

func TestAcceptorLocal(t *testing.T) {
	a, st := newMemAcceptor(t, 1)
	_, ok := a.Local()
	assert.False(t, ok, "empty acceptor has a value")

	// A prepare alone records a promise, not a value.
	require.Equal(t, http.StatusOK, post(a, http.MethodPost, encode(t, prepareMsg(7, 1, ballot(3, 7)))).Code)
	_, ok = a.Local()
	assert.False(t, ok)

	v := regValue(1, "spec-v1")
	require.Equal(t, http.StatusOK, post(a, http.MethodPost, encode(t, acceptMsg(7, 1, ballot(3, 7), v))).Code)
	got, ok := a.Local()
	require.True(t, ok)
	assert.Equal(t, "spec-v1", string(got), "Local returns the spec, without the write tag")
	got[0] = 'X' // the caller's copy
	again, _ := a.Local()
	assert.Equal(t, "spec-v1", string(again))

	// The value survives a restart on the same store.
	b, err := NewAcceptor(AcceptorConfig{ID: 1, Store: st.Reopen()})
	require.NoError(t, err)
	got, ok = b.Local()
	require.True(t, ok)
	assert.Equal(t, "spec-v1", string(got))
	assert.Equal(t, uint64(1), b.ID())
}

// TestAcceptorRefusesLowerBallot: the handler is a real acceptor: after
// a promise it refuses smaller ballots with the conflicting one.
func TestAcceptorRefusesLowerBallot(t *testing.T) {
	a, _ := newMemAcceptor(t, 1)
	require.Equal(t, http.StatusOK, post(a, http.MethodPost, encode(t, prepareMsg(7, 1, ballot(5, 7)))).Code)
	rec := post(a, http.MethodPost, encode(t, acceptMsg(8, 1, ballot(4, 8), regValue(1, "x"))))
	require.Equal(t, http.StatusOK, rec.Code)
	m, err := wire.DecodeMessage(rec.Body.Bytes())
	require.NoError(t, err)
	require.Len(t, m.Items, 1)
	assert.Equal(t, caspaxos.RejectConflict, m.Items[0].Reject)
	assert.Equal(t, ballot(5, 7), m.Items[0].Conflict)
	_, ok := a.Local()
	assert.False(t, ok)
}
