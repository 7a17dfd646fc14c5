// Package nodenet carries nodewire.Batch values between the nodes of a
// cluster: a symmetric node-to-node transport over TCP (optionally mutual
// TLS 1.3), and MemNetwork, its in-memory twin.
//
// # One connection per peer pair
//
// Of two nodes, the one with the lower NodeID dials and the higher one
// accepts; the single connection then carries batches both ways. There is
// never a race of two simultaneous dials, and an accepting node treats a
// new connection from a peer as the replacement of the old one (the lower
// node only dials when it has no working connection, so the old one is
// dead or half-open). A node therefore only needs the addresses of peers
// with higher ids; peers with lower ids may be registered with an empty
// address.
//
// # Handshake
//
// The dialer sends a hello frame (magic, protocol version, cluster name,
// its own id and the id it expects to reach); the acceptor checks it and
// answers with its own hello, or with a refusal naming the reason, which
// both sides log. A peer of another cluster, a node that is not who the
// dialer expected, an unknown id or a higher id that dials are refused.
// The whole handshake (TLS included) is bounded by HandshakeTimeout.
//
// # TLS
//
// With Config.TLS (see MutualTLS) every connection is TLS 1.3 and both
// sides present a certificate the cluster CA signed; a plaintext peer, or
// one whose certificate another CA signed, fails the TLS handshake in
// either direction. The hello's node id is not bound to the certificate:
// any holder of a cluster certificate may claim any id.
//
// # Queues
//
// Send encodes the batch at once (so the caller may reuse it) and appends
// the frame to the peer's queue, bounded by messages (Batch.Count) and by
// bytes, in-flight writes included. When the queue is full the NEW batch is
// dropped, Send returns ErrQueueFull and the peer's Dropped counter grows:
// the protocols above retransmit and heartbeats are periodic, so loss is
// safe and blocking the node loop for one slow peer is not. The queue
// lives across reconnects: batches queued while a peer is unreachable are
// written once it is back; batches being written to a connection that
// fails are lost. Delivery is at most once and in order per peer.
//
// # Deadlines
//
// Every write has WriteTimeout; the reader renews a read deadline of
// IdleTimeout before each frame, and the writer sends an empty batch as a
// keepalive after KeepaliveInterval without traffic, so a silent peer is
// detected within IdleTimeout. Dialing has DialTimeout.
//
// # Reconnecting
//
// The dialing side reconnects with capped exponential backoff between
// ReconnectMin and ReconnectMax, with jitter (each wait is uniform in
// [d/2, d)) from the injectable Config.Rand, so nodes restarted together
// do not redial in step.
package nodenet

import (
	"bufio"
	"errors"
	"fmt"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/internal/nodewire"
)

// NodeID names a node.
type NodeID = nodewire.NodeID

// Codec frames batches on the wire; the transport knows nothing of the
// layout. AppendFrame appends one whole frame (header, payload, checksum)
// carrying b to dst. ReadFrame reads one frame whose payload is at most
// maxFrame bytes, using buf as scratch space, and returns the batch and
// the buffer to pass back next time. The returned Batch must not alias buf
// (the transport reuses buf for the next frame while the batch is being
// handled). An error from ReadFrame closes the connection. An empty batch
// (no messages) must round-trip: the transport uses it as a keepalive.
type Codec interface {
	AppendFrame(dst []byte, b *nodewire.Batch) ([]byte, error)
	ReadFrame(r *bufio.Reader, maxFrame int, buf []byte) (nodewire.Batch, []byte, error)
}

// Handler receives the batches peers send. It is called from the
// transport's reader goroutines: calls for one peer are sequential and in
// the order that peer sent them, calls for different peers may run
// concurrently. While it runs, that peer's connection is not read (TCP
// backpressure), so it should hand the batch on quickly. b belongs to the
// handler. Empty batches (keepalives) are not delivered.
type Handler func(from NodeID, b nodewire.Batch)

// Transport is a node's edge towards its peers. TCP and MemTransport
// implement it.
type Transport interface {
	// Send queues b for peer to and never blocks. b is encoded (or copied)
	// before Send returns, so the caller may reuse it; From and To are set
	// by the transport. A batch that cannot be queued is dropped and the
	// error says why: ErrQueueFull, ErrUnknownPeer, ErrFrameTooLarge,
	// ErrClosed, or a codec error.
	Send(to NodeID, b *nodewire.Batch) error
	// Close stops the transport and waits for its goroutines (and for the
	// Handler calls in progress).
	Close() error
}

// Sentinel errors; failures wrap them, test with errors.Is.
var (
	// ErrClosed: the transport was closed.
	ErrClosed = errors.New("nodenet: closed")
	// ErrQueueFull: the queue towards the peer is full; the batch was dropped.
	ErrQueueFull = errors.New("nodenet: queue full")
	// ErrUnknownPeer: the peer is not configured.
	ErrUnknownPeer = errors.New("nodenet: unknown peer")
	// ErrFrameTooLarge: the encoded batch exceeds MaxFrameBytes.
	ErrFrameTooLarge = errors.New("nodenet: frame too large")
	// ErrHandshake: a peer's hello was refused or malformed.
	ErrHandshake = errors.New("nodenet: handshake refused")
)

// PeerStats are the counters of one peer. Batches are counted, not
// messages; keepalives are not counted.
type PeerStats struct {
	// Sent: batches written to a connection.
	Sent uint64
	// Received: batches read and handed to the Handler.
	Received uint64
	// Dropped: batches refused by Send (queue full) or lost by the
	// in-memory twin at a cut link.
	Dropped uint64
	// Reconnects: connections established after the first one.
	Reconnects uint64
	// DecodeErrors: connections closed because the codec refused a frame
	// or a batch was addressed wrongly.
	DecodeErrors uint64
	// Connected reports whether a connection is up now.
	Connected bool
	// QueuedMessages and QueuedBytes are waiting or being written.
	QueuedMessages, QueuedBytes int
}

func configErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: nodenet: %s: %s", caspaxos.ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}
