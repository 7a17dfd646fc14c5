// Package transport runs the pure CASPaxos state machines of package
// caspaxos over real sockets and real storage, and over an in-memory twin.
//
// The acceptor side is an AcceptorServer (TCP, optionally TLS) or a
// MemAcceptor (in process). Both drive one caspaxos.Acceptor from a single
// loop goroutine: requests from every connection are stepped together, one
// Ready is taken for all of them, its batch is made durable, and only then
// are the replies routed back to the connections they came from. With a
// caspaxos.PipelineStore the loop submits each group as soon as it is
// stepped (up to PipelineDepth in flight) and the store merges what queued
// into its next commit; otherwise persistence applies one group at a time
// with Store.Apply while the loop steps the next. Either way a second
// goroutine routes each group's replies in group order once it (and every
// earlier group) is durable, so a later group's replies never leave before
// an earlier group is durable.
//
// The proposer side is a ProposerNode: one caspaxos.Proposer in a loop
// goroutine, fed by concurrent Propose callers, by acceptor replies from a
// Transport and by a timer set to the proposer's next deadline. It drains
// everything pending before each Ready, so the messages it sends carry many
// items. TCPTransport keeps one connection per acceptor, with any number of
// messages in flight on it, and reconnects with backoff; MemTransport is
// its in-memory twin.
//
// Everything is bounded: frame sizes, per-connection write queues, the
// acceptor's inbox (by messages and by bytes), the messages stepped per
// group, the proposer's pending calls and its reply queue. Message loss is
// always safe in CASPaxos (the proposer's phase timeouts retry), so when a
// queue towards a peer is full the message is dropped and counted rather
// than blocking a loop that serves everybody.
package transport

import (
	"errors"
	"fmt"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/wire"
)

// Sentinel errors. Failures wrap them; test with errors.Is.
var (
	// ErrClosed: the node, server or transport was closed.
	ErrClosed = errors.New("transport: closed")
	// ErrPeerDown: no connection to the acceptor right now (it is being
	// re-established); the message was dropped.
	ErrPeerDown = errors.New("transport: peer not connected")
	// ErrUnknownPeer: the message names an acceptor the transport does not know.
	ErrUnknownPeer = errors.New("transport: unknown peer")
	// ErrQueueFull: the queue towards the peer is full; the message was dropped.
	ErrQueueFull = errors.New("transport: queue full")
)

// Transport is the proposer's edge: it carries requests to acceptors and
// hands their replies back. TCPTransport and MemTransport implement it.
type Transport interface {
	// Send queues m for the acceptor m.To and never blocks. A message that
	// cannot be queued is dropped and the error (ErrUnknownPeer,
	// ErrPeerDown, ErrQueueFull, ErrClosed) says why; the proposer's phase
	// timeouts make loss safe, so callers count such errors rather than
	// retry. m must not be modified after Send.
	Send(m caspaxos.Message) error
	// Replies delivers acceptor replies, in the order each acceptor sent
	// them. The channel is never closed; stop reading when done.
	Replies() <-chan caspaxos.Message
	// Close stops the transport and waits for its goroutines.
	Close() error
}

// route is where an acceptor sends the reply to one request: the
// connection it came from. deliver must not block (it is called from the
// acceptor's persistence goroutine, which serves every connection).
type route interface {
	deliver(m caspaxos.Message)
}

// Defaults for AcceptorConfig and ServerConfig fields left zero.
const (
	DefaultInboxMessages   = 4096
	DefaultInboxBytes      = 64 << 20
	DefaultMaxStepMessages = 1024
	DefaultMaxFrameBytes   = wire.DefaultMaxFrameBytes
	DefaultIdleTimeout     = 5 * time.Minute
	DefaultWriteTimeout    = 10 * time.Second
	DefaultMaxConns        = 1024
	DefaultConnQueue       = 4096
	// DefaultGroupWaitFraction bounds the acceptor's group wait (off by
	// default, AcceptorConfig.GroupWait); MaxGroupWait bounds GroupWait.
	DefaultGroupWaitFraction = 0.5
	MaxGroupWait             = 100 * time.Millisecond
	// DefaultPipelineDepth is the AcceptorConfig.PipelineDepth that
	// `fmnode acceptor` uses for the stores it pipelines by default
	// (pebble, memory); MaxPipelineDepth bounds it.
	DefaultPipelineDepth = 64
	MaxPipelineDepth     = 1024
	// MinFrameBytes is the smallest frame bound allowed: one item of the
	// largest key and value must fit in a frame.
	MinFrameBytes = caspaxos.MaxKeyBytes + caspaxos.MaxValueBytes + 4096
	// keepBufferBytes: a connection drops a read or write buffer that a
	// large frame grew beyond this, instead of keeping it forever.
	keepBufferBytes = 1 << 20
	// internKeys bounds each connection's key intern table.
	internKeys = 1 << 16
)

func configErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: transport: %s: %s", caspaxos.ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

func checkFrameBytes(n int) error {
	if n < MinFrameBytes || n > wire.MaxFrameBytesLimit {
		return configErr("MaxFrameBytes", "%d out of range [%d, %d]", n, MinFrameBytes, wire.MaxFrameBytesLimit)
	}
	return nil
}

// appendFrames encodes m into frames appended to dst. A message whose
// encoding exceeds maxFrame is split into several messages carrying parts
// of its items: items are independent, so the receiver treats the parts
// exactly as the whole. It fails only for a message the codec refuses.
func appendFrames(dst []byte, m caspaxos.Message, maxFrame int) ([]byte, error) {
	start := len(dst)
	dst, err := wire.AppendMessageFrame(dst, m)
	if err != nil {
		return dst, err
	}
	if len(dst)-start-wire.FrameOverheadBytes <= maxFrame {
		return dst, nil
	}
	dst = dst[:start]
	if len(m.Items) < 2 {
		return dst, fmt.Errorf("transport: one item of %v exceeds the frame bound %d", m.Type, maxFrame)
	}
	half := len(m.Items) / 2
	a, b := m, m
	a.Items, b.Items = m.Items[:half], m.Items[half:]
	if dst, err = appendFrames(dst, a, maxFrame); err != nil {
		return dst[:start], err
	}
	if dst, err = appendFrames(dst, b, maxFrame); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// messageCost estimates the memory a decoded message holds, for the inbox
// byte budget when no frame length is at hand (the in-memory transport).
func messageCost(m caspaxos.Message) int {
	n := 64
	for i := range m.Items {
		n += 96 + len(m.Items[i].Key) + len(m.Items[i].Value.Data)
	}
	return n
}
