package nodenet

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/fmnode/fmnode/caspaxos/wire"
	"github.com/fmnode/fmnode/internal/nodewire"
)

// The hello, the first frame each way on a connection, framed like the
// register's wire frames (magic, version, length, CRC-32C) with a payload
//
//	magic    4 bytes "FMNN"
//	version  uint16 little-endian (ProtocolVersion)
//	kind     byte (helloDial, helloAccept, helloRefuse)
//	from     uint64 little-endian: the sender's id
//	to       uint64 little-endian: the id the sender believes it talks to
//	cluster  byte length + bytes
//	reason   byte length + bytes (why a helloRefuse refused)
//
// A version change that is not backward compatible bumps ProtocolVersion;
// an acceptor refuses a version it does not speak, naming its own. The
// hello's own layout is the same in every version, so a peer of another
// version reads the refusal and its reason.
const (
	// ProtocolVersion is the node transport protocol this package speaks:
	// the batch format (nodewire.FormatVersion), the frames' payload. It
	// follows the format rather than being bumped by hand: version 2 (batch
	// format 2, learn acks) once kept saying 1, so a node of format 1
	// passed the hello and then every batch either way was refused as
	// corrupt, the connection closed and was dialed again, for good.
	ProtocolVersion = uint16(nodewire.FormatVersion)

	helloMagic   = "FMNN"
	maxHello     = 1 << 10
	maxReason    = 255
	helloDial    = 1
	helloAccept  = 2
	helloRefuse  = 3
	helloFixed   = len(helloMagic) + 2 + 1 + 8 + 8
	helloMinimum = helloFixed + 2
)

type hello struct {
	Version  uint16
	Kind     byte
	From, To NodeID
	Cluster  string
	Reason   string
}

func appendHello(dst []byte, h hello) []byte {
	p := make([]byte, 0, helloMinimum+len(h.Cluster)+len(h.Reason))
	p = append(p, helloMagic...)
	p = binary.LittleEndian.AppendUint16(p, h.Version)
	p = append(p, h.Kind)
	p = binary.LittleEndian.AppendUint64(p, uint64(h.From))
	p = binary.LittleEndian.AppendUint64(p, uint64(h.To))
	cluster, reason := h.Cluster, h.Reason
	if len(cluster) > MaxClusterBytes {
		cluster = cluster[:MaxClusterBytes]
	}
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	p = append(p, byte(len(cluster)))
	p = append(p, cluster...)
	p = append(p, byte(len(reason)))
	p = append(p, reason...)
	return wire.AppendFrame(dst, p)
}

func readHello(r *bufio.Reader) (hello, error) {
	p, err := wire.ReadFrame(r, maxHello, nil)
	if err != nil {
		return hello{}, fmt.Errorf("read hello: %w", err)
	}
	return parseHello(p)
}

func parseHello(p []byte) (hello, error) {
	var h hello
	if len(p) < helloMinimum || string(p[:len(helloMagic)]) != helloMagic {
		return h, fmt.Errorf("%w: not a node transport hello", ErrHandshake)
	}
	p = p[len(helloMagic):]
	h.Version = binary.LittleEndian.Uint16(p)
	h.Kind = p[2]
	h.From = NodeID(binary.LittleEndian.Uint64(p[3:]))
	h.To = NodeID(binary.LittleEndian.Uint64(p[11:]))
	p = p[19:]
	var ok bool
	if h.Cluster, p, ok = lenString(p); !ok {
		return h, fmt.Errorf("%w: hello: truncated cluster", ErrHandshake)
	}
	if h.Reason, p, ok = lenString(p); !ok {
		return h, fmt.Errorf("%w: hello: truncated reason", ErrHandshake)
	}
	if len(p) != 0 || h.Kind < helloDial || h.Kind > helloRefuse {
		return h, fmt.Errorf("%w: hello: kind %d, %d trailing bytes", ErrHandshake, h.Kind, len(p))
	}
	return h, nil
}

func lenString(p []byte) (string, []byte, bool) {
	if len(p) < 1 || len(p) < 1+int(p[0]) {
		return "", p, false
	}
	n := int(p[0])
	return string(p[1 : 1+n]), p[1+n:], true
}

func writeHello(w io.Writer, h hello) error {
	_, err := w.Write(appendHello(nil, h))
	return err
}
