package sysreg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
)

type linKind uint8

const (
	linInit linKind = iota
	linRead
	linCAS
)

type linStatus uint8

const (
	linOK      linStatus = iota
	linRefused           // AlreadyInitialized or Conflict: Version/Data are the register's
	linEmpty             // Read found nothing
	linUnknown           // a write that may or may not have happened
)

type linInput struct {
	Kind     linKind
	Expected uint64
	Data     string
}

type linOutput struct {
	Status  linStatus
	Version uint64
	Data    string
}

type linState struct {
	Version uint64
	Data    string
}

// registerModel is the sequential specification of the system register.
func registerModel() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return linState{} },
		Step: func(state, input, output any) (bool, any) {
			st, in, out := state.(linState), input.(linInput), output.(linOutput)
			switch in.Kind {
			case linRead:
				if out.Status == linEmpty {
					return st.Version == 0, st
				}
				return out.Status == linOK && out.Version == st.Version && out.Data == st.Data, st
			case linInit, linCAS:
				applies := st.Version == in.Expected
				next := linState{Version: st.Version + 1, Data: in.Data}
				switch out.Status {
				case linOK:
					return applies && out.Version == next.Version, next
				case linRefused:
					return !applies && out.Version == st.Version && out.Data == st.Data, st
				case linUnknown:
					if applies {
						return true, next
					}
					return true, st
				}
			}
			return false, st
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(linInput), output.(linOutput)
			return fmt.Sprintf("%v(%d, %q) -> %v v%d %q", in.Kind, in.Expected, in.Data, out.Status, out.Version, out.Data)
		},
	}
}

// history records porcupine operations from concurrent clients.
type history struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

func (h *history) now() int64 { return int64(time.Since(h.start)) }

func (h *history) add(op porcupine.Operation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
}

// never is the return time of an operation that may take effect at any
// later point (an unknown outcome).
const never = int64(1) << 62

// record runs one client operation and adds it to h; operations that
// certainly had no effect (refused arguments, a read without quorum, a
// write whose accept never left) are left out, as if never called.
func (h *history) record(ctx context.Context, client int, c *Client, peers []Peer, in linInput) (linOutput, bool) {
	call := h.now()
	var out linOutput
	var err error
	switch in.Kind {
	case linInit:
		var v uint64
		v, err = c.Init(ctx, peers, []byte(in.Data))
		out = linOutput{Status: linOK, Version: v}
	case linCAS:
		var v uint64
		v, err = c.CAS(ctx, peers, in.Expected, []byte(in.Data))
		out = linOutput{Status: linOK, Version: v}
	case linRead:
		var b []byte
		var v uint64
		b, v, err = c.Read(ctx, peers)
		out = linOutput{Status: linOK, Version: v, Data: string(b)}
	}
	ret := h.now()
	var ae *AlreadyInitializedError
	var ce *ConflictError
	switch {
	case err == nil:
	case errors.As(err, &ae):
		out = linOutput{Status: linRefused, Version: ae.Version, Data: string(ae.Value)}
	case errors.As(err, &ce):
		out = linOutput{Status: linRefused, Version: ce.Current, Data: string(ce.Value)}
	case errors.Is(err, ErrEmpty):
		out = linOutput{Status: linEmpty}
	case errors.Is(err, ErrUnknownOutcome):
		out, ret = linOutput{Status: linUnknown}, never
	default:
		return out, false
	}
	h.add(porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	return out, true
}

// runWorkload has clients Init (all of them race for it), then Read and
// CAS at random against the version they last saw.
func runWorkload(t *testing.T, hc *http.Client, scheme string, peers []Peer, clients, opsEach int) []porcupine.Operation {
	t.Helper()
	h := &history{start: time.Now()}
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for ci := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newTestClient(t, hc, scheme, uint64(1000+ci))
			rng := rand.New(rand.NewPCG(uint64(ci), 42))
			var known uint64
			out, ok := h.record(ctx, ci, c, peers, linInput{Kind: linInit, Data: fmt.Sprintf("init-%d", ci)})
			if ok && out.Status != linUnknown {
				known = out.Version
			}
			for op := range opsEach {
				in := linInput{Kind: linRead}
				if known > 0 && rng.IntN(2) == 0 {
					in = linInput{Kind: linCAS, Expected: known, Data: fmt.Sprintf("c%d-%d", ci, op)}
				}
				out, ok := h.record(ctx, ci, c, peers, in)
				if ok && out.Status != linUnknown && out.Status != linEmpty {
					known = out.Version
				}
			}
		}()
	}
	wg.Wait()
	return h.ops
}

func checkHistory(t *testing.T, ops []porcupine.Operation) {
	t.Helper()
	require.NotEmpty(t, ops)
	res := porcupine.CheckOperationsTimeout(registerModel(), ops, 30*time.Second)
	if res != porcupine.Ok {
		sorted := slices.Clone(ops)
		slices.SortFunc(sorted, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		m := registerModel()
		for _, op := range sorted {
			t.Logf("client %d [%d, %d] %s", op.ClientId, op.Call/1000, op.Return/1000, m.DescribeOperation(op.Input, op.Output))
		}
	}
	require.Equal(t, porcupine.Ok, res, "history of %d operations is not linearizable", len(ops))
}

// TestLinearizableOverHTTP: concurrent Init, CAS and Read from four
// clients over three HTTP acceptors form a linearizable history.
func TestLinearizableOverHTTP(t *testing.T) {
	cl := newCluster(t, 3, clusterOpts{})
	ops := runWorkload(t, cl.http, "http", cl.peers, 4, 15)
	checkHistory(t, ops)
}

// TestLinearizableWithFlappingAcceptor: the same over MemPeers while one
// of five acceptors keeps going down and coming back.
func TestLinearizableWithFlappingAcceptor(t *testing.T) {
	mp := NewMemPeers()
	var peers []Peer
	for i := range 5 {
		acc, err := NewAcceptor(AcceptorConfig{ID: uint64(i + 1), Store: caspaxos.NewMemoryStore()})
		require.NoError(t, err)
		addr := fmt.Sprintf("127.0.0.1:%d", 9301+i)
		mp.Handle(addr, acc)
		peers = append(peers, Peer{ID: uint64(i + 1), Addr: addr})
	}
	stop := make(chan struct{})
	flapped := make(chan struct{})
	go func() {
		defer close(flapped)
		tick := time.NewTicker(15 * time.Millisecond)
		defer tick.Stop()
		for down := true; ; down = !down {
			select {
			case <-stop:
				mp.SetDown(peers[4].Addr, false)
				return
			case <-tick.C:
				mp.SetDown(peers[4].Addr, down)
			}
		}
	}()
	ops := runWorkload(t, mp.HTTPClient(), "https", peers, 4, 25)
	close(stop)
	<-flapped
	checkHistory(t, ops)
}

// TestLinearizabilityCheckCanFail is the negative control: the model
// refuses a stale read and a double win, so the checks above mean
// something.
func TestLinearizabilityCheckCanFail(t *testing.T) {
	op := func(client int, in linInput, out linOutput, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
	}
	cases := map[string][]porcupine.Operation{
		"stale read": {
			op(0, linInput{Kind: linInit, Data: "a"}, linOutput{Status: linOK, Version: 1}, 0, 1),
			op(0, linInput{Kind: linCAS, Expected: 1, Data: "b"}, linOutput{Status: linOK, Version: 2}, 2, 3),
			op(1, linInput{Kind: linRead}, linOutput{Status: linOK, Version: 1, Data: "a"}, 4, 5),
		},
		"two winners of one version": {
			op(0, linInput{Kind: linInit, Data: "a"}, linOutput{Status: linOK, Version: 1}, 0, 1),
			op(0, linInput{Kind: linCAS, Expected: 1, Data: "b"}, linOutput{Status: linOK, Version: 2}, 2, 5),
			op(1, linInput{Kind: linCAS, Expected: 1, Data: "c"}, linOutput{Status: linOK, Version: 2}, 2, 5),
		},
		"two inits": {
			op(0, linInput{Kind: linInit, Data: "a"}, linOutput{Status: linOK, Version: 1}, 0, 2),
			op(1, linInput{Kind: linInit, Data: "b"}, linOutput{Status: linOK, Version: 1}, 0, 2),
		},
	}
	for name, ops := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(registerModel(), ops, 10*time.Second))
		})
	}
}
