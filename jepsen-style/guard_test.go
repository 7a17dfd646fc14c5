package main

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGuardRefusesAddressesOffLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:7400", true},
		{"127.0.1.9:0", true},
		{"127.255.255.254:1", true},
		{"10.0.0.1:7400", false},
		{"192.0.2.1:80", false},
		{"0.0.0.0:7400", false},
		{"[::1]:7400", false},
		{"[::ffff:10.0.0.1]:80", false},
		{"localhost:7400", false},
		{"example.com:443", false},
		{"128.0.0.1:80", false},
		{"127.0.0.1", false}, // no port
	} {
		t.Run(tc.addr, func(t *testing.T) {
			err := checkLoopback(tc.addr)
			if tc.ok {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			if _, _, splitErr := net.SplitHostPort(tc.addr); splitErr == nil {
				assert.ErrorIs(t, err, ErrNotLoopback)
			}
		})
	}
}

// The refusal holds on every path the harness opens sockets by: listen,
// dial (and its source address), the clients' transport and a proxy's
// listen and target. Nothing is sent: the guard refuses before the socket.
func TestGuardRefusesToListenDialOrProxyOffLoopback(t *testing.T) {
	// A context ended before the calls: should the guard ever let an
	// off-loopback address through, the dial still sends nothing (and
	// the error is then not ErrNotLoopback, so the test fails).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := listenLoopback("0.0.0.0:0")
	assert.ErrorIs(t, err, ErrNotLoopback)
	_, err = dialLoopback(ctx, "192.0.2.1:80", "", time.Second)
	assert.ErrorIs(t, err, ErrNotLoopback)
	_, err = dialLoopback(ctx, "127.0.0.1:1", "192.0.2.1", time.Second)
	assert.ErrorIs(t, err, ErrNotLoopback)
	_, err = guardedDialContext(ctx, "tcp", "192.0.2.1:443")
	assert.ErrorIs(t, err, ErrNotLoopback)
	_, err = guardedDialContext(ctx, "tcp6", "[::1]:443")
	assert.ErrorIs(t, err, ErrNotLoopback)
	lt := newLinkTable(1)
	who := func(net.Addr) int { return 0 }
	_, err = startProxy("p", 1, "127.0.0.1:0", "192.0.2.1:7400", lt, who, slog.New(slog.DiscardHandler))
	assert.ErrorIs(t, err, ErrNotLoopback)
	_, err = startProxy("p", 1, "0.0.0.0:0", "127.0.0.1:7400", lt, who, slog.New(slog.DiscardHandler))
	assert.ErrorIs(t, err, ErrNotLoopback)

	ln, err := listenLoopback("127.0.0.1:0")
	require.NoError(t, err)
	ln.Close()
}
