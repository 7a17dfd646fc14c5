package nodenet

import (
	"bufio"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/nodewire"
)

// formerProtocol is the protocol a node of batch format 1 (before the
// learn acks) speaks in its hello.
const formerProtocol = 1

// TestANodeOfTheFormerBatchFormatIsRefusedAtTheHello: the batch format
// went from 1 to 2 (learn acks) while the hello kept saying protocol 1, so
// a node of format 1 and one of format 2 passed the hello, and then each
// refused every batch of the other as corrupt ("unknown format version"),
// closed the connection and dialed again, for good: a rolling upgrade was
// a mesh of connections that carried nothing, with no word of versions.
// The hello now carries the batch format, and a node of the former one is
// refused there, both ways, with both versions named.
func TestANodeOfTheFormerBatchFormatIsRefusedAtTheHello(t *testing.T) {
	require.EqualValues(t, nodewire.FormatVersion, ProtocolVersion, "the hello carries the batch format")
	require.NotEqualValues(t, formerProtocol, ProtocolVersion)

	t.Run("it dials this node", func(t *testing.T) {
		checkGoroutines(t)
		n := startNode(t, 5, func(c *Config) { c.Peers = map[NodeID]string{1: ""} })
		c, br := rawDial(t, n, 0)
		require.NoError(t, writeHello(c, hello{Version: formerProtocol, Kind: helloDial, From: 1, To: n.cfg.ID, Cluster: n.cfg.Cluster}))
		h, err := readHello(br)
		require.NoError(t, err)
		assert.Equal(t, byte(helloRefuse), h.Kind)
		assert.Contains(t, h.Reason, "protocol version 1 not supported (this node speaks 2)")
		waitClosed(t, c, br)
		require.Eventually(t, func() bool { return stringsContains(n.log.String(), "inbound connection refused") }, waitFor, tick)
	})

	t.Run("this node dials it", func(t *testing.T) {
		checkGoroutines(t)
		old := startFormerAcceptor(t, 2)
		n := startNode(t, 1, func(c *Config) { c.Peers = map[NodeID]string{2: old.addr()} })
		require.Eventually(t, func() bool { return stringsContains(n.log.String(), "peer answered with protocol version 1") }, waitFor, tick)
		assert.False(t, n.Stats()[2].Connected, "no connection to a node of another batch format")
		require.NoError(t, n.Close())
		old.close()
	})
}

// formerAcceptor is node id of the former batch format: it accepts every
// dial hello with a hello of protocol 1 and then reads until closed.
type formerAcceptor struct {
	ln net.Listener
	wg sync.WaitGroup
	mu sync.Mutex
	cs []net.Conn
}

func startFormerAcceptor(t *testing.T, id NodeID) *formerAcceptor {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	a := &formerAcceptor{ln: ln}
	t.Cleanup(a.close)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			a.mu.Lock()
			a.cs = append(a.cs, c)
			a.mu.Unlock()
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				_ = c.SetDeadline(time.Now().Add(waitFor))
				br := bufio.NewReader(c)
				h, err := readHello(br)
				if err != nil {
					return
				}
				if writeHello(c, hello{Version: formerProtocol, Kind: helloAccept, From: id, To: h.From, Cluster: h.Cluster}) != nil {
					return
				}
				buf := make([]byte, 4096)
				for {
					if _, err := br.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	return a
}

func (a *formerAcceptor) addr() string { return a.ln.Addr().String() }

// close stops accepting, closes every connection and waits for its
// goroutines.
func (a *formerAcceptor) close() {
	if err := a.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		panic(err)
	}
	a.mu.Lock()
	for _, c := range a.cs {
		_ = c.Close()
	}
	a.mu.Unlock()
	a.wg.Wait()
}
