package nodenet

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fmnode/fmnode/caspaxos/wire"
)

// Defaults for Config fields left zero.
const (
	DefaultMaxFrameBytes     = wire.DefaultMaxFrameBytes
	DefaultQueueMessages     = 4096
	DefaultQueueBytes        = 64 << 20
	DefaultDialTimeout       = 2 * time.Second
	DefaultHandshakeTimeout  = 5 * time.Second
	DefaultWriteTimeout      = 10 * time.Second
	DefaultKeepaliveInterval = time.Second
	DefaultIdleTimeout       = 5 * time.Second
	DefaultReconnectMin      = 20 * time.Millisecond
	DefaultReconnectMax      = 2 * time.Second
	DefaultMaxPeers          = 1024
	DefaultMaxHandshakes     = 64

	// MinFrameBytes is the smallest frame bound allowed.
	MinFrameBytes = 1 << 10
	// MaxClusterBytes bounds the cluster name (it travels in the hello).
	MaxClusterBytes = 255

	// keepBufferBytes: a connection drops a read buffer a large frame grew
	// beyond this instead of keeping it for its whole life.
	keepBufferBytes = 1 << 20
	readBufferBytes = 64 << 10
	tcpKeepAlive    = 15 * time.Second
)

// Config configures a TCPTransport (Start).
type Config struct {
	// ID is this node's id (not zero).
	ID NodeID
	// Cluster names the cluster; peers of another cluster are refused.
	Cluster string
	// Addr is the TCP address to listen on ("127.0.0.1:0" picks a port; see
	// TCPTransport.Addr). Empty means do not listen: allowed for a node that
	// only dials, i.e. whose peers all have higher ids.
	Addr string
	// Peers maps peer ids to addresses. Only peers with a higher id than
	// ID are dialed; a lower-id peer's address may be empty. SetPeer
	// changes the map at run time.
	Peers map[NodeID]string
	// Codec frames batches (required).
	Codec Codec
	// Handler receives batches from peers (required); see Handler for its
	// concurrency.
	Handler Handler
	// TLS, when set, makes every connection mutual TLS (see MutualTLS).
	TLS *TLSConfig
	// VerifyPeer, when set with TLS, binds the node id a peer claims in its
	// hello to the certificate it presented (say its CommonName must be
	// the name the cluster records for that id): the CA alone says only
	// that the peer belongs to the cluster, not which node it is. A
	// non-nil error refuses the connection, with the error as the reason.
	VerifyPeer func(id NodeID, cert *x509.Certificate) error

	// MaxFrameBytes bounds an encoded frame on Send (ErrFrameTooLarge) and
	// a frame's payload on receive; use the same value on every node.
	MaxFrameBytes int
	// QueueMessages and QueueBytes bound each peer's send queue (messages
	// as Batch.Count, bytes as encoded frames; batches being written
	// count). A batch that alone exceeds a bound is taken into an empty
	// queue, so the bound is the value plus one batch.
	QueueMessages, QueueBytes int

	// LocalIP, when set, is the address connections to peers are dialed
	// from (a multi-homed host's pinned source; the fault-injection
	// harness tells nodes apart by it). Nil: the kernel's choice.
	LocalIP net.IP

	// DialTimeout bounds connecting; HandshakeTimeout bounds the TLS and
	// hello exchange; WriteTimeout bounds each write.
	DialTimeout, HandshakeTimeout, WriteTimeout time.Duration
	// KeepaliveInterval is how long a connection may be silent before an
	// empty keepalive frame is written; IdleTimeout closes a connection
	// that received nothing for that long (at least twice the interval).
	KeepaliveInterval, IdleTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the dialer's backoff.
	ReconnectMin, ReconnectMax time.Duration
	// Rand returns uniform values in [0, 1) for the backoff jitter; nil
	// uses math/rand/v2. Calls are serialised by the transport.
	Rand func() float64

	// MaxPeers bounds the peers (and so the metric label values).
	MaxPeers int
	// MaxHandshakes bounds inbound connections in their handshake; more
	// are closed at once.
	MaxHandshakes int

	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
	// Registerer, when set, receives the transport's metrics (labelled
	// with this node's id and the peer id).
	Registerer prometheus.Registerer
}

func (c Config) withDefaults() (Config, error) {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defInt(&c.MaxFrameBytes, DefaultMaxFrameBytes)
	defInt(&c.QueueMessages, DefaultQueueMessages)
	defInt(&c.QueueBytes, DefaultQueueBytes)
	defInt(&c.MaxPeers, DefaultMaxPeers)
	defInt(&c.MaxHandshakes, DefaultMaxHandshakes)
	def(&c.DialTimeout, DefaultDialTimeout)
	def(&c.HandshakeTimeout, DefaultHandshakeTimeout)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.KeepaliveInterval, DefaultKeepaliveInterval)
	def(&c.IdleTimeout, max(DefaultIdleTimeout, 2*c.KeepaliveInterval))
	def(&c.ReconnectMin, DefaultReconnectMin)
	def(&c.ReconnectMax, max(DefaultReconnectMax, c.ReconnectMin))
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.ID == 0:
		return c, configErr("ID", "must not be zero")
	case c.Cluster == "" || len(c.Cluster) > MaxClusterBytes:
		return c, configErr("Cluster", "need 1 to %d bytes, got %d", MaxClusterBytes, len(c.Cluster))
	case c.Codec == nil:
		return c, configErr("Codec", "required")
	case c.Handler == nil:
		return c, configErr("Handler", "required")
	case c.TLS != nil && (c.TLS.Server == nil || c.TLS.Client == nil):
		return c, configErr("TLS", "need both Server and Client configs")
	case c.MaxFrameBytes < MinFrameBytes || c.MaxFrameBytes > wire.MaxFrameBytesLimit:
		return c, configErr("MaxFrameBytes", "%d out of range [%d, %d]", c.MaxFrameBytes, MinFrameBytes, wire.MaxFrameBytesLimit)
	case c.QueueMessages < 1:
		return c, configErr("QueueMessages", "must be at least 1, got %d", c.QueueMessages)
	case c.QueueBytes < 1:
		return c, configErr("QueueBytes", "must be at least 1, got %d", c.QueueBytes)
	case c.DialTimeout < 0:
		return c, configErr("DialTimeout", "must not be negative, got %v", c.DialTimeout)
	case c.HandshakeTimeout < 0:
		return c, configErr("HandshakeTimeout", "must not be negative, got %v", c.HandshakeTimeout)
	case c.WriteTimeout < 0:
		return c, configErr("WriteTimeout", "must not be negative, got %v", c.WriteTimeout)
	case c.KeepaliveInterval < 0:
		return c, configErr("KeepaliveInterval", "must not be negative, got %v", c.KeepaliveInterval)
	case c.IdleTimeout < 2*c.KeepaliveInterval:
		return c, configErr("IdleTimeout", "%v is below twice KeepaliveInterval %v", c.IdleTimeout, c.KeepaliveInterval)
	case c.ReconnectMin <= 0 || c.ReconnectMax < c.ReconnectMin:
		return c, configErr("ReconnectMin", "need 0 < ReconnectMin <= ReconnectMax, got %v and %v", c.ReconnectMin, c.ReconnectMax)
	case c.MaxPeers < 1:
		return c, configErr("MaxPeers", "must be at least 1, got %d", c.MaxPeers)
	case c.MaxHandshakes < 1:
		return c, configErr("MaxHandshakes", "must be at least 1, got %d", c.MaxHandshakes)
	case len(c.Peers) > c.MaxPeers:
		return c, configErr("Peers", "%d peers exceed MaxPeers %d", len(c.Peers), c.MaxPeers)
	}
	for id := range c.Peers {
		if err := checkPeerID(c.ID, id); err != nil {
			return c, configErr("Peers", "%v", err)
		}
	}
	return c, nil
}

func checkPeerID(self, id NodeID) error {
	switch id {
	case 0:
		return fmt.Errorf("%w: peer id 0", ErrUnknownPeer)
	case self:
		return fmt.Errorf("%w: peer id %d is this node", ErrUnknownPeer, id)
	}
	return nil
}
